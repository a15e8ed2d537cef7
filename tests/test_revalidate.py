"""A recorded run re-simulated with other simulator options (``experiment.validate.revalidate``, ``run_testbed.py
validate --simulator`` and ``calibrate``): on a run directory whose "measurements" are the step-level
simulator's own estimates with a known per-message latency, the re-simulation with that latency agrees
exactly and the calibration finds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from common.errors import ConfigError
from experiment.config.schema import from_dict, to_dict
from experiment.validate.estimates import EstimatesError
from experiment.validate.revalidate import (
    calibrate_latency,
    calibrate_mark_share,
    calibrate_tcp_efficiency,
    parse_simulator_options,
    read_recorded_run,
)
from jobs.records import IterationRecord, write_records
from placement.base import GpuSlot, Placement
from topo import fat_tree
from topo.io import write_topology_json

TRUE_LATENCY_US = 80.0
CFG = {"name": "rv", "topology": {"kind": "fat_tree", "k": 4, "gpus_per_machine": 4, "bw_mbps": 10000},
       "scale": 500, "iterations": 3, "warmup_iterations": 1, "scheduler": "waves", "policies": ["p"],
       "jobs": [{"name": "ring", "model": "resnet50", "workers": 2, "collective": "ring"},
                {"name": "hd", "model": "vgg16", "workers": 4, "collective": "hd"},
                {"name": "local", "model": "resnet50", "workers": 2, "collective": "ring"}]}
PLACED = {"ring": (("h1", 0), ("h5", 0)), "hd": (("h9", 0), ("h10", 0), ("h13", 0), ("h14", 0)),
          "local": (("h2", 0), ("h2", 1))}  # alone on their links, local on one machine


def write_run(run_dir: Path, measured: dict[str, float] | None = None, classes=None, marks=None,
              placed=PLACED) -> None:
    """A one-policy waves run: config, topology, placements, rank 0's first record of each job (its buckets),
    and a summary whose jobs measured ``measured`` (comm seconds) and ``marks`` (ECN marks; none given: ECN
    not measured) with fidelity ``classes``."""
    cfg = from_dict(CFG)
    (run_dir / "p" / "jobs").mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(to_dict(cfg)))
    write_topology_json(fat_tree(4, gpus_per_machine=4, bw_mbps=10000), run_dir / "topology.json")
    placements = [{**Placement(j, tuple(GpuSlot(m, g) for m, g in slots)).to_dict(), "start_s": 0.0, "wave": 0}
                  for j, slots in placed.items()]
    (run_dir / "p" / "placements.json").write_text(json.dumps(placements))
    for spec in cfg.jobs:
        from jobs.models import get_model
        buckets = tuple(max(4, b // cfg.scale // 4 * 4) for b in get_model(spec.model).bucket_bytes)
        d = run_dir / "p" / "jobs" / spec.name
        d.mkdir(parents=True, exist_ok=True)
        write_records(d / f"{spec.name}-rank0.jsonl", [IterationRecord(
            job=spec.name, rank=0, world=spec.workers, iteration=0, start_time_s=0.0, compute_s=0.1, comm_s=0.1,
            bytes=sum(buckets), iteration_s=0.2, mode="replay", collective=spec.collective, bucket_bytes=buckets,
            bucket_comm_s=(0.0,) * len(buckets))])
    measured = measured or {}
    classes = classes or {}
    jobs = {j: {"machines": sorted({m for m, _ in slots}), "comm_mean_s": measured.get(j), "compute_mean_s": 0.1,
                "fidelity": classes.get(j, "ok" if j in measured else "local"),
                **({"ecn_marks": marks.get(j, 0)} if marks is not None else {})} for j, slots in placed.items()}
    (run_dir / "summary.json").write_text(json.dumps({"name": "rv", "policies": [{"policy": "p", "jobs": jobs}]}))


@pytest.fixture
def run_dir(tmp_path):
    """The run, measured as the simulator estimates it with a per-message latency of 80 µs."""
    write_run(tmp_path)
    _, truth = read_recorded_run(str(tmp_path)).estimates({"latency_us": TRUE_LATENCY_US})
    measured = {row.job: float(dict(row.values)["comm"]) for row in truth.rows}
    assert measured.pop("local") == 0.0 and min(measured.values()) > 0  # the local job has nothing to estimate
    write_run(tmp_path, measured)
    return tmp_path


def test_the_run_re_simulated_with_its_measured_options_agrees_and_the_calibration_finds_the_latency(run_dir):
    run = read_recorded_run(str(run_dir))
    exact = run.compare({"latency_us": TRUE_LATENCY_US}).metric("comm")
    assert exact.overall.n == 2 and exact.overall.median_abs_rel_error == pytest.approx(0.0, abs=1e-12)
    none = run.compare({}).metric("comm")  # the config's latency, 0: every estimate too short
    assert all(c.rel_error < 0 and c.job_class == "uncontended" for c in none.comparisons)
    c = calibrate_latency(run)
    assert c.latency_us == pytest.approx(TRUE_LATENCY_US, abs=1.0) and c.jobs == 2
    assert c.before.median_abs_rel_error > 0.001 > c.after.median_abs_rel_error
    assert c.wall_us == pytest.approx(c.latency_us * from_dict(CFG).dilation, abs=0.1)


def test_the_commands_re_simulate_calibrate_and_write_what_they_found(run_dir):
    def cli(*args):
        return subprocess.run([sys.executable, str(REPO / "run_testbed.py"), *args], capture_output=True, text=True,
                              cwd=REPO, timeout=300)

    out = cli("validate", str(run_dir), "--simulator", f"latency_us={TRUE_LATENCY_US:g}")
    assert out.returncode == 0, out.stderr
    assert "comm_s       all            r 1.000, median |error| 0.0%, p90 0.0% over 2 jobs" in out.stdout
    assert "uncontended" in out.stdout
    assert (run_dir / "estimates-sim-latency_us=80.csv").is_file()
    assert json.loads((run_dir / "validation-sim-latency_us=80.json").read_text())["metrics"]["comm"]["by_class"]
    out = cli("calibrate", str(run_dir))
    assert out.returncode == 0, out.stderr
    written = json.loads((run_dir / "calibration.json").read_text())
    assert written["simulator"]["latency_us"] == pytest.approx(TRUE_LATENCY_US, abs=1.0)
    assert written["ecn"] is None and "ecn_mark_share: not fitted" in out.stdout  # the run measured no marks
    assert "latency_us: 80" in out.stdout or "latency_us: 79" in out.stdout
    for bad, message in ((["validate", str(run_dir)], "give one of --estimates"),
                         (["validate", str(run_dir), "--simulator", "latency_us=-1"], "latency_us"),
                         (["validate", str(run_dir), "--simulator", "speed=3"], "speed"),
                         (["calibrate", str(run_dir / "nowhere")], "does not exist")):
        out = cli(*bad)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, (bad, out.stderr)


def test_what_cannot_be_re_driven_is_refused_with_its_reason(tmp_path):
    write_run(tmp_path, {"ring": 0.1, "hd": 0.2})
    summary = json.loads((tmp_path / "summary.json").read_text())
    summary["policies"][0]["preemptions"] = 2
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(EstimatesError, match="preempted jobs 2 time"):
        read_recorded_run(str(tmp_path))
    summary["policies"][0]["preemptions"] = 0
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "p" / "decisions.json").write_text("[]")
    with pytest.raises(EstimatesError, match="time-shifted"):
        read_recorded_run(str(tmp_path))
    os.remove(tmp_path / "p" / "decisions.json")
    write_run(tmp_path, {"ring": 0.1}, {"ring": "contended"})
    with pytest.raises(EstimatesError, match="no uncontended job"):
        calibrate_latency(read_recorded_run(str(tmp_path)))
    out = subprocess.run([sys.executable, str(REPO / "run_testbed.py"), "calibrate", str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 2 and "nothing to fit" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "calibration.json").exists()


def test_the_calibration_fits_the_share_of_exposed_packets_the_marker_marked(tmp_path):
    """The ring on h9 and h13, where hd runs too: both jobs cross h9's and h13's links at once, so the ECN
    estimate exposes their packets; measured marks of a tenth of them (both classed contended) calibrate to
    a share of 0.1, and the marks' validation follows it. Without measured marks nothing is fitted."""
    placed = {**PLACED, "ring": (("h9", 1), ("h13", 1))}
    contended = {"ring": "contended", "hd": "contended"}
    write_run(tmp_path, {"ring": 0.1, "hd": 0.2}, contended, placed=placed)
    run = read_recorded_run(str(tmp_path))
    assert calibrate_mark_share(run) is None and run.mark_comparisons(run.simulate({"ecn": True})) == []
    write_run(tmp_path, {"ring": 0.1, "hd": 0.2}, contended, marks={}, placed=placed)
    run = read_recorded_run(str(tmp_path))
    exposed = {c.job: c.estimated for c in run.mark_comparisons(run.simulate({"ecn": True, "ecn_mark_share": 1.0}))}
    assert set(exposed) == {"ring", "hd"} and min(exposed.values()) > 100
    write_run(tmp_path, {"ring": 0.1, "hd": 0.2}, contended, marks={j: round(e / 10) for j, e in exposed.items()},
              placed=placed)
    c = calibrate_mark_share(read_recorded_run(str(tmp_path)))
    assert c.share == pytest.approx(0.1, rel=1e-2) and c.jobs == 2
    assert c.after.median_abs_rel_error < 0.01 < c.before.median_abs_rel_error  # configured: 0.05
    assert (c.after.marked, c.after.detected, c.after.false_marked) == (2, 2, 0)


def test_the_calibration_finds_tcps_share_of_the_links_the_contended_jobs_saturate(tmp_path):
    """The ring and the halving-doubling job crossing h9's and h13's links at once, "measured" as the
    simulator estimates them with TCP's share at 0.7: the calibration finds 0.7 and the contended jobs'
    errors vanish; max-min (share 1) estimates the ring, which shares its links while it runs, shorter.
    A run without contended jobs fits none."""
    placed = {**PLACED, "ring": (("h9", 1), ("h13", 1))}
    contended = {"ring": "contended", "hd": "contended"}
    write_run(tmp_path, {"ring": 0.1, "hd": 0.2}, contended, placed=placed)
    run = read_recorded_run(str(tmp_path))
    truth = {row.job: float(dict(row.values)["comm"])
             for row in run.estimates({"sharing": "tcp", "tcp_efficiency": 0.7})[1].rows if row.job != "local"}
    maxmin = {row.job: float(dict(row.values)["comm"]) for row in run.estimates({"sharing": "maxmin"})[1].rows}
    assert maxmin["ring"] < 0.8 * truth["ring"] and maxmin["hd"] == pytest.approx(truth["hd"], rel=1e-4)
    write_run(tmp_path, truth, contended, placed=placed)
    c = calibrate_tcp_efficiency(read_recorded_run(str(tmp_path)))
    assert c.efficiency == pytest.approx(0.7, abs=0.01) and c.jobs == 2
    assert c.after.median_abs_rel_error < 0.01 < c.before.median_abs_rel_error  # configured: 0.9
    write_run(tmp_path, {"ring": 0.1, "hd": 0.2})
    assert calibrate_tcp_efficiency(read_recorded_run(str(tmp_path))) is None


def test_simulator_options_parse_as_yaml_scalars_and_bad_ones_are_named():
    assert parse_simulator_options("latency_us=60, token_buckets=true,mode=steps") == {
        "latency_us": 60, "token_buckets": True, "mode": "steps"}
    for bad in ("latency_us", "=3", "a=1,a=2", ""):
        with pytest.raises(ConfigError):
            parse_simulator_options(bad)
