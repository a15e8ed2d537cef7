"""Emulation test: Cassini's time shift on the emulator (``experiments/cassini.yaml``, shortened).

Two VGG19-like jobs whose rings share a 2:1 bottleneck, placed by ``spread`` and shifted by
Cassini: the replay agents follow each job's shift file, so the two jobs' Up phases interleave.
Each job's communication then stays near its contention-free bound (together they would take
about twice it), the bottleneck's queue stays under the ECN threshold, the report keeps each
job's shift and phase, rank 0 announces each start for the back end that paces the decision's
line, and the decision log and timeline are written.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os

import pytest
from conftest import leftovers

pytestmark = pytest.mark.emulation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def overlap_s(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total time two sets of intervals overlap."""
    return sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def test_cassinis_shift_interleaves_two_jobs_on_a_shared_bottleneck(emulation_ok, tmp_path):
    from emulator.runner import Progress, run_experiment
    from experiment import config

    cfg = config.load(os.path.join(ROOT, "experiments", "cassini.yaml"))
    cfg = dataclasses.replace(cfg, iterations=6, warmup_iterations=1, policies=("cassini,inner=spread",),
                              results_dir=str(tmp_path))
    with open(os.devnull, "w") as quiet:
        run_dir = run_experiment(cfg, Progress(quiet))
    pdir = os.path.join(run_dir, "cassini_inner=spread")
    with open(os.path.join(pdir, "summary.json")) as f:
        jobs = json.load(f)["jobs"]
    shifts = {name: j["time_shift_s"] for name, j in jobs.items()}
    assert shifts["vgg19-a"] == 0.0 and 0.2 < shifts["vgg19-b"] < 0.35, shifts
    for name, j in jobs.items():
        assert j["complete"] and j["bound_s"] is not None, (name, j)
        assert j["comm_mean_s"] < 1.3 * j["bound_s"], (name, j["comm_mean_s"], j["bound_s"])
        assert j["phase_error_max_s"] is not None and j["realignments"] is not None, j
        assert j["pace_stretch"] is not None and j["phase_errors_beyond"] is not None, j
        # the decision's paced line: rank 0 announced each start under the shift, and the shift file
        # every rank follows carries the line the back end moves
        shift = json.load(open(os.path.join(pdir, "jobs", name, "shift.json")))
        starts = [json.loads(line) for line in open(os.path.join(pdir, "jobs", name, "shift.json.starts"))]
        assert shift["follow"] and shift["line"], shift
        assert len(starts) >= 6 and {e["phase"]["origin_s"] for e in starts} == {shift["origin_s"]}, starts
    (decision,) = json.load(open(os.path.join(pdir, "decisions.json")))
    assert decision["shifts_applied"] and decision["log"]["chosen"] == 0
    with open(os.path.join(pdir, "timeline.csv")) as f:
        rows = list(csv.DictReader(f))
    up = {name: [(float(r["up_start_s"]), float(r["end_s"])) for r in rows if r["job"] == name] for name in jobs}
    busy = sum(e - s for s, e in up["vgg19-a"])
    assert overlap_s(up["vgg19-a"], up["vgg19-b"]) < 0.25 * busy, up
    assert not leftovers(), leftovers()
