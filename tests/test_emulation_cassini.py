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
from conftest import ROOT, leftovers

pytestmark = pytest.mark.emulation



def overlap_s(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total time two sets of intervals overlap."""
    return sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def ring_of_two_bound_s(bucket_bytes: list[int], rate_mbps: float, mtu: int) -> float:
    """A 2-rank ring's contention-free communication time per iteration when both directions of its
    path run at ``rate_mbps``: per bucket two steps, each one chunk (the larger half of the float32
    elements) each way, on the wire at ``mtu``."""
    from common.units import wire_bytes

    return sum(2 * wire_bytes(4 * -(-b // 8), mtu) * 8 / (rate_mbps * 1e6) for b in bucket_bytes)


def test_cassinis_shift_interleaves_two_jobs_on_a_shared_bottleneck(emulation_ok, tmp_path):
    """Two shifted rings on a 2:1 bottleneck: each job's shift, its bound (from the topology's rates),
    its communication near that bound, every rank-0 phase figure the report keeps equal to what
    rank 0 announced as it started, and their Up phases interleaved."""
    from emulator.runner import Progress, run_experiment
    from experiment.config import schema as config
    from jobs.records import read_records

    cfg = config.load(os.path.join(ROOT, "experiments", "cassini.yaml"))
    cfg = dataclasses.replace(cfg, iterations=6, warmup_iterations=1, policies=("cassini,inner=spread",),
                              results_dir=str(tmp_path), plots=False)
    with open(os.devnull, "w") as quiet:
        run_dir = run_experiment(cfg, Progress(quiet))
    pdir = os.path.join(run_dir, "cassini_inner=spread")
    with open(os.path.join(pdir, "summary.json")) as f:
        jobs = json.load(f)["jobs"]
    shifts = {name: j["time_shift_s"] for name, j in jobs.items()}
    assert shifts["vgg19-a"] == 0.0 and 0.2 < shifts["vgg19-b"] < 0.35, shifts
    # Each ring's two ranks are on two machines; between racks (as spread puts them) the path also
    # crosses the racks' uplinks, which carry their 2 machines' rate over 2:1: every link of the
    # path runs at one machine's rate, scaled.
    topo = cfg.topology.params
    assert topo["hosts_per_leaf"] / topo["oversubscription"] == 1 and topo["n_spine"] == 1, topo
    rate_mbps = topo["host_bw_mbps"] / cfg.scale
    for name, j in jobs.items():
        jdir = os.path.join(pdir, "jobs", name)
        rank0 = read_records(os.path.join(jdir, f"{name}-rank0.jsonl"))
        assert j["complete"] and len(rank0) == cfg.iterations, (name, j)
        assert len(j["machines"]) == 2, (name, j)
        bound_s = ring_of_two_bound_s(rank0[0].bucket_bytes, rate_mbps, cfg.mtu)
        assert j["bound_s"] == pytest.approx(bound_s, rel=1e-9), (name, j["bound_s"], bound_s)
        assert j["comm_mean_s"] < 1.3 * j["bound_s"], (name, j["comm_mean_s"], j["bound_s"])
        # the decision's paced line: rank 0 announced each start under the shift, and the shift file
        # every rank follows carries the line the back end moves
        shift = json.load(open(os.path.join(jdir, "shift.json")))
        starts = [json.loads(line) for line in open(os.path.join(jdir, "shift.json.starts"))]
        assert shift["follow"] and shift["line"], shift
        assert len(starts) >= 6 and {e["phase"]["origin_s"] for e in starts} == {shift["origin_s"]}, starts
        # The report keeps the phase of rank 0's recorded iterations (the warm-up's left out) as
        # announced when each started; a phase error lies within half a period.
        recorded = {r.start_time_s for r in rank0}
        kept = [e["phase"] for e in starts if e["start_time_s"] in recorded]
        settled = [ph for ph in kept if not ph["first"]]
        assert len(kept) == len([r for r in rank0 if r.phase is not None]) and settled, (name, kept, rank0)
        d = cfg.dilation
        assert j["phase_error_max_s"] == pytest.approx(max(abs(ph["error_s"]) for ph in settled) / d), (name, j)
        assert j["phase_error_max_s"] <= shift["period_s"] / 2 / d, (name, j, shift)
        assert j["phase_errors_beyond"] == sum(abs(ph["error_s"]) > ph["threshold_s"] for ph in settled), (name, j)
        assert j["drift_threshold_s"] == pytest.approx(kept[-1]["threshold_s"] / d), (name, j)
        assert j["realignments"] == kept[-1]["realignments"] <= len(settled), (name, j, kept[-1])
        assert j["pace_stretch"] == pytest.approx(kept[-1]["stretch"]) and j["pace_stretch"] > 0, (name, j)
    (decision,) = json.load(open(os.path.join(pdir, "decisions.json")))
    assert decision["shifts_applied"] and decision["log"]["chosen"] == 0
    with open(os.path.join(pdir, "timeline.csv")) as f:
        rows = list(csv.DictReader(f))
    up = {name: [(float(r["up_start_s"]), float(r["end_s"])) for r in rows if r["job"] == name] for name in jobs}
    busy = sum(e - s for s, e in up["vgg19-a"])
    assert overlap_s(up["vgg19-a"], up["vgg19-b"]) < 0.25 * busy, up
    assert not leftovers(), leftovers()
