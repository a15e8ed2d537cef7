"""Emulation test: an experiment with INA jobs, end to end through ``run_experiment``.

Two INA jobs (the second arriving while the first runs, so it is installed beside it) and a
ring job on a two-rack leaf-spine, under the fifo scheduler and the consolidate policy, on each
engine (bmv2 skipped, naming why, where no P4 toolchain runs here). The results must say which
engine ran, every INA job must finish (the agents check every lane of every aggregate against
the world size, so a wrong sum fails the run), each job's packets must have been summed in its
ToR (several worker packets per packet reaching the PS), and its fidelity verdict must say its
time is not modelled rather than judge it against a bound it does not have.
"""

from __future__ import annotations

import csv
import json
import os

import pytest
from conftest import SCALE, leftovers

pytestmark = pytest.mark.emulation


@pytest.mark.parametrize("engine", ["bmv2", "software"])
def test_an_experiment_runs_ina_jobs_and_reports_them(emulation_ok, tmp_path, engine):
    from experiment import config
    from ina.p4.build import engine_available
    from testbed.runner import Progress, run_experiment

    available, why = engine_available()
    if engine == "bmv2" and available != "bmv2":
        pytest.skip(f"bmv2: {why}")
    cfg = config.from_dict({
        "name": "ina", "scale": SCALE, "dilation": 2,
        "topology": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 5, "gpus_per_machine": 1},
        "jobs": [{"name": "a", "model": "resnet50", "workers": 4, "collective": "ina"},
                 {"name": "b", "model": "resnet50", "workers": 3, "collective": "ina", "arrival_s": 0.5},
                 {"name": "c", "model": "resnet50", "workers": 2, "collective": "ring"}],
        "scheduler": "fifo", "policies": ["consolidate"], "iterations": 3, "warmup_iterations": 1,
        "ecn": {"marking": "optional"}, "ina": {"engine": engine, "slots": 256}, "results_dir": str(tmp_path)})
    with open(os.devnull, "w") as quiet:
        run_dir = run_experiment(cfg, Progress(quiet))
    with open(os.path.join(run_dir, "capabilities.json")) as f:
        caps = json.load(f)
    assert caps["ina_engine"] == engine
    with open(os.path.join(run_dir, "consolidate", "measurements.json")) as f:
        m = json.load(f)
    ina = m["ina"]
    assert ina["used"] and ina["engine"] == engine and ina["slots"] == 256 and ina["switches"] == ["l1", "l2"]
    starts = {s["job"]: s["start_s"] for s in m["starts"]}
    assert starts["b"] > starts["a"]  # b was installed while a ran
    assert set(ina["jobs"]) == {"a", "b"}
    # a on h1-h4 under l1 with its PS on h1: l1 sums h2-h4 (h1 reaches its PS over loopback), so
    # 2 packets reach the PS per 4 sent; b (3 machines) sends 3 for 2 whatever the racks it gets.
    # Resends and fall-backs add a few.
    for name, machines, ideal in (("a", 4, 2.0), ("b", 3, 1.5)):
        job = ina["jobs"][name]
        assert job["ps"]["aggregated"] > 0 and job["packets_per_ps_packet"] > 0.8 * ideal, (name, job)
        # one machine per worker here: each client completes every seq the PS completes
        assert job["client"]["results"] > 0 and job["ps"]["completed_seqs"] * machines == job["client"]["results"]
    assert ina["jobs"]["a"]["root"] == "l1"
    total = {k: sum(c[k] for c in ina["aggregators"].values()) for k in ("contributions", "aggregates")}
    assert total["aggregates"] > 0 and total["contributions"] >= 2 * total["aggregates"]
    verdicts = {v["job"]: v["status"] for v in m["fidelity"]["jobs"]}
    assert verdicts["a"] == verdicts["b"] == "not-modelled"
    assert set(m["estimates"]) == {"c"}  # the simulator does not model INA jobs
    rows = list(csv.DictReader(open(os.path.join(run_dir, "ina.csv"))))
    assert [(r["policy"], r["job"], r["engine"]) for r in rows] == [("consolidate", "a", engine),
                                                                    ("consolidate", "b", engine)]
    assert not leftovers(), f"run left behind: {leftovers()}"


def test_ina_optional_where_its_engine_cannot_run_runs_the_ring_and_says_so(emulation_ok, tmp_path, monkeypatch):
    """``ina: {engine: bmv2, use: optional}`` on a machine without bmv2 (no P4_PREFIX, no /opt/p4,
    no tools on the PATH, really looked for): the INA job runs the ring allreduce, completes, and
    capabilities.json, measurements.json and the terminal say INA was not used and why."""
    import io

    from experiment import config
    from testbed.runner import Progress, run_experiment

    monkeypatch.setenv("P4_PREFIX", str(tmp_path / "none"))
    monkeypatch.setattr("ina.p4.build.DEFAULT_PREFIX", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    cfg = config.from_dict({
        "name": "ina-optional", "scale": SCALE, "dilation": 2,
        "topology": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 2, "gpus_per_machine": 1},
        "jobs": [{"name": "a", "model": "resnet50", "workers": 3, "collective": "ina"}],
        "policies": ["consolidate"], "iterations": 2, "warmup_iterations": 1, "ecn": {"marking": "optional"},
        "ina": {"engine": "bmv2", "use": "optional"}, "results_dir": str(tmp_path)})
    out = io.StringIO()
    run_dir = run_experiment(cfg, Progress(out))
    with open(os.path.join(run_dir, "capabilities.json")) as f:
        caps = json.load(f)
    assert caps["ina_engine"] == "none" and "cannot run here" in caps["ina_why"]
    with open(os.path.join(run_dir, "consolidate", "measurements.json")) as f:
        ina = json.load(f)["ina"]
    assert ina["used"] is False and ina["engine"] == "none" and ina["jobs"] == {}
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["jobs"][0]["collective"] == "ina"  # what was asked
    with open(os.path.join(run_dir, "jobs.csv")) as f:
        assert ",ring," in f.read()  # what ran
    assert "INA under consolidate: not used (" in out.getvalue()
    assert not leftovers(), f"run left behind: {leftovers()}"


def test_a_parameter_server_that_dies_mid_run_stops_the_run_naming_it(emulation_ok, tmp_path):
    """The PS of a running INA job is killed (by the PID the run recorded for it): the run stops
    with an error naming the parameter server and its log, not a worker's timeout, and leaves
    nothing behind."""
    import signal
    import threading
    import time

    from common.errors import EmulationError
    from experiment import config
    from testbed.procs import process_start_time
    from testbed.record import RECORDS_DIR, RunRecord
    from testbed.runner import Progress, run_experiment

    cfg = config.from_dict({
        "name": "ina-ps-dies", "scale": SCALE, "dilation": 2,
        "topology": {"kind": "leaf_spine", "n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 3, "gpus_per_machine": 1},
        "jobs": [{"name": "a", "model": "resnet50", "workers": 3, "collective": "ina"}],
        "policies": ["consolidate"], "iterations": 200, "warmup_iterations": 1, "ecn": {"marking": "optional"},
        "ina": {"engine": "software"}, "results_dir": str(tmp_path)})
    record = os.path.join(RECORDS_DIR, f"{os.getpid()}-{process_start_time(os.getpid())}.json")
    killed: list[int] = []
    done = threading.Event()

    def kill_the_ps():
        while not done.wait(0.2):
            try:
                changes = RunRecord.load(record).changes
            except Exception:  # not written yet
                continue
            pids = [int(c.name) for c in changes if c.kind == "process" and "ina.ps" in (c.what or "")]
            if pids:
                time.sleep(2.0)  # the job is running
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
                return

    killer = threading.Thread(target=kill_the_ps, daemon=True)
    killer.start()
    try:
        named = r"the parameter server on h1 \(pid \d+\) exited .*see .*ps-h1\.log"
        with open(os.devnull, "w") as quiet, pytest.raises(EmulationError, match=named):
            run_experiment(cfg, Progress(quiet))
    finally:
        done.set()
        killer.join(10)
    assert killed
    assert not leftovers(), f"run left behind: {leftovers()}"
