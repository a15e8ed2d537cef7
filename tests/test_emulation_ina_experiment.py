"""Emulation test: an experiment with INA jobs, end to end through ``run_experiment``.

Two INA jobs (the second arriving while the first runs, so it is installed beside it) and a
ring job on a two-rack leaf-spine, under the fifo scheduler and the consolidate policy, on each
engine (bmv2 skipped, naming why, where no P4 toolchain runs here), results unicast by the PS on
bmv2 and multicast by the switches on the software engine (each engine copies results on the
wire in ``test_ina_p4.py``). The results must say which
engine ran, every INA job must finish (the agents check every lane of every aggregate against
the world size, so a wrong sum fails the run), each job's packets must have been summed in its
ToRs (several worker packets per packet reaching the PS), the per-job uplink bytes the
aggregators counted must be what the port measured, and its fidelity verdict must judge its time
against its links' bound.
"""

from __future__ import annotations

import csv
import json
import os

import pytest
from conftest import SCALE, leftovers

pytestmark = pytest.mark.emulation


@pytest.mark.parametrize(("engine", "results"), [("bmv2", "unicast"), ("software", "multicast")])
def test_an_experiment_runs_ina_jobs_and_reports_them(emulation_ok, tmp_path, engine, results):
    from emulator.runner import Progress, run_experiment
    from experiment.config import schema as config
    from ina.p4.build import engine_available

    available, why = engine_available()
    if engine == "bmv2" and available != "bmv2":
        pytest.skip(f"bmv2: {why}")
    cfg = config.from_dict({
        "name": "ina", "scale": SCALE, "dilation": 2,
        "topology": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 5, "gpus_per_machine": 1},
        "jobs": [{"name": "a", "model": "resnet50", "workers": 7, "collective": "ina"},
                 {"name": "b", "model": "resnet50", "workers": 3, "collective": "ina", "arrival_s": 0.5},
                 {"name": "c", "model": "resnet50", "workers": 2, "collective": "ring", "arrival_s": 1.0}],
        "scheduler": "fifo", "policies": ["consolidate"], "iterations": 3, "warmup_iterations": 1,
        "ecn": {"marking": "optional"}, "ina": {"engine": engine, "slots": 256, "results": results},
        "results_dir": str(tmp_path), "plots": False})
    with open(os.devnull, "w") as quiet:
        run_dir = run_experiment(cfg, Progress(quiet))
    with open(os.path.join(run_dir, "capabilities.json")) as f:
        caps = json.load(f)
    assert caps["ina_engine"] == engine
    with open(os.path.join(run_dir, "consolidate", "measurements.json")) as f:
        m = json.load(f)
    ina = m["ina"]
    assert ina["used"] and ina["engine"] == engine and ina["slots"] == 256 and ina["switches"] == ["l1", "l2"]
    cap = ina["capacity"]  # the engine's packet rate here against what each ToR's links can bring it
    assert cap["engine_pps"] > 0 and set(cap["demand_pps"]) == {"l1", "l2"} and cap["dilation"] == 2
    assert cap["keeps_up"] == (cap["carrying_dilation"] is None) and (cap["keeps_up"] or cap["carrying_dilation"] > 2)
    starts = {s["job"]: s["start_s"] for s in m["starts"]}
    assert starts["b"] > starts["a"]  # b was installed while a ran
    assert set(ina["jobs"]) == {"a", "b"}
    # a on h1-h5 under l1 and h6-h7 under l2, its PS on h1: l2 sums h6-h7 into one packet up its
    # uplink, l1 sums that and h2-h5, h1 reaches its PS over loopback: 2 packets reach the PS per 7
    # sent; b on h8-h10 under l2 with its PS on h8 sends 3 for 2. Resends and fall-backs add a few.
    assert [x[0] for s in m["starts"] if s["job"] == "a" for x in s["slots"]] == [f"h{i}" for i in range(1, 8)]
    # Results multicast: a's root l1 copies each result to h2-h5 and h6, and l2 to h6-h7, so the PS
    # sends one into the network (to h2) and one over loopback (to h1); b's root l2 copies to h9-h10.
    for name, machines, ideal in (("a", 7, 3.5), ("b", 3, 1.5)):
        job = ina["jobs"][name]
        assert job["ps"]["aggregated"] > 0 and job["packets_per_ps_packet"] > 0.8 * ideal, (name, job)
        # one machine per worker here: each client completes every seq the PS completes, exactly once
        assert job["client"]["results"] > 0 and job["ps"]["completed_seqs"] * machines == job["client"]["results"]
        per_result = 2 if results == "multicast" else machines  # datagrams the PS sends per result
        ps = job["ps"]
        assert ps["completed_seqs"] * per_result <= ps["results"] <= (ps["completed_seqs"] + ps["resend"]) * per_result
    assert ina["jobs"]["a"]["root"] == "l1" and ina["jobs"]["a"]["leaves"] == ["l2"]
    # Uplinks: only a's h6-h7 send towards a PS in another rack, through l2 which sums them: half
    # their packets go up (a few more with resends and fall-backs), and the l2 -> s1 port carried
    # them (b and c stay in their racks; within 3% for ARP and the like).
    a, b = ina["jobs"]["a"], ina["jobs"]["b"]
    assert set(a["uplink_packets"]) == set(a["uplink_packets_unaggregated"]) == {"l2"} and not b["uplink_packets"]
    assert 0.5 <= a["uplink_fraction"] < 0.6, a
    port = {(x, y): n for x, y, n in m["link_bytes"]}[("l2", "s1")]
    assert 0.97 * port <= a["uplink_bytes"] <= port, (a, port)
    total = {k: sum(c[k] for c in ina["aggregators"].values()) for k in ("contributions", "aggregates")}
    assert total["aggregates"] > 0 and total["contributions"] >= 2 * total["aggregates"]
    # Judged against their links' bound (measure.fidelity.ina_bound_s) as ring jobs are: a measured
    # time, a positive bound, and the status its ratio gives where nothing shares its links.
    verdicts = {v["job"]: v for v in m["fidelity"]["jobs"]}
    for name in ("a", "b"):
        v = verdicts[name]
        assert v["bound_s"] > 0 and v["ratio"] == pytest.approx(v["measured_s"] / v["bound_s"]), v
        assert v["contended_with"] == [] and v["status"] in ("ok", "slow"), v
        assert (v["status"] == "slow") == (v["ratio"] > 1.10), v
    assert set(m["estimates"]) == {"c"}  # the simulator does not model INA jobs
    rows = list(csv.DictReader(open(os.path.join(run_dir, "ina.csv"))))
    assert [(r["policy"], r["job"], r["engine"]) for r in rows] == [("consolidate", "a", engine),
                                                                    ("consolidate", "b", engine)]
    assert not leftovers(), f"run left behind: {leftovers()}"


def test_a_train_mode_job_trains_over_ina_as_it_does_over_the_ring(emulation_ok, tmp_path):
    """Train mode (torch workers, the small CNN really trained with DDP): an INA job and a ring job
    of 3 ranks each, same seed, so the same model and batches, two steps: the first from the same
    weights, the second after one allreduce. consolidate puts the INA job on h1-h3 under l1, its PS
    on h1: l1 sums h2 and h3 (the software engine, which sums as bmv2 does byte for byte,
    tests/test_ina_p4.py, at several times bmv2's packet rate). Every step's loss of every rank over
    INA equals the ring's within the quantisation tolerance, and the job's packets were summed in the
    switch. (Several ranks of a machine summed in memory first: tests/test_ina_worker.py.)"""
    from emulator.runner import Progress, run_experiment
    from experiment.config import schema as config
    from jobs.records import read_records

    cfg = config.from_dict({
        "name": "ina-train", "scale": SCALE, "dilation": 2, "mode": "train",
        "topology": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 3, "gpus_per_machine": 1},
        "jobs": [{"name": "t-ina", "model": "small_cnn", "workers": 3, "collective": "ina"},
                 {"name": "t-ring", "model": "small_cnn", "workers": 3, "collective": "ring"}],
        "scheduler": "fifo", "policies": ["consolidate"], "iterations": 2, "warmup_iterations": 0,
        "ecn": {"marking": "optional"}, "ina": {"engine": "software", "slots": 256}, "results_dir": str(tmp_path),
        "plots": False})
    with open(os.devnull, "w") as quiet:
        run_dir = run_experiment(cfg, Progress(quiet))
    policy_dir = os.path.join(run_dir, "consolidate")
    with open(os.path.join(policy_dir, "measurements.json")) as f:
        m = json.load(f)
    job = m["ina"]["jobs"]["t-ina"]
    assert job["root"] == "l1" and job["ps"]["aggregated"] > 0, job
    # h1 reaches its PS on loopback, l1 sums h2 and h3: 2 packets at the PS per 3 sent
    assert job["packets_per_ps_packet"] > 1.3 and job["client"]["results"] > 0, job
    losses = {}
    for name in ("t-ina", "t-ring"):
        losses[name] = [[r.loss for r in read_records(os.path.join(policy_dir, "jobs", name,
                                                                   f"{name}-rank{rank}.jsonl"))]
                        for rank in range(3)]
    for rank in range(3):
        assert len(losses["t-ina"][rank]) == 2
        assert losses["t-ina"][rank] == pytest.approx(losses["t-ring"][rank], abs=1e-4), rank
    v = {v["job"]: v for v in m["fidelity"]["jobs"]}["t-ina"]  # judged as the ring job is
    assert v["bound_s"] > 0 and v["status"] == ("slow" if v["ratio"] > 1.10 else "ok"), v
    assert not leftovers(), f"run left behind: {leftovers()}"


def test_a_preempted_ina_job_resumes_with_a_fresh_id_and_both_finish(emulation_ok, tmp_path):
    """Tiresias preempts INA jobs as any other (on the software engine, which runs on every machine,
    whatever P4 toolchain it has): two 4-worker INA jobs on the only 4 machines of a rack
    (a 2 GPU-second first queue): ``a`` starts, ``b`` arrives at 1 s and preempts it once ``a`` is
    demoted, and ``a`` resumes. Each run of ``a`` has its own INA id (a resumed run starts its
    seqs afresh: the PS must keep nothing of the old one), its killed agents' counters are
    missing (said, not guessed), every run's seqs completed, every job's iterations recorded
    once, and nothing is left behind (the PS and the aggregators stopped)."""
    from emulator.runner import Progress, run_experiment
    from experiment.config import schema as config

    cfg = config.from_dict({
        "name": "ina-preempt", "scale": SCALE, "dilation": 2,
        "topology": {"kind": "leaf_spine", "n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 4, "gpus_per_machine": 1},
        "jobs": [{"name": "a", "model": "resnet50", "workers": 4, "collective": "ina"},
                 {"name": "b", "model": "resnet50", "workers": 4, "collective": "ina", "arrival_s": 1.0}],
        "scheduler": "tiresias,thresholds_gpu_s=2", "policies": ["consolidate"], "iterations": 4,
        "warmup_iterations": 1, "ecn": {"marking": "optional"}, "ina": {"engine": "software", "slots": 256},
        "results_dir": str(tmp_path), "plots": False})
    with open(os.devnull, "w") as quiet:
        run_dir = run_experiment(cfg, Progress(quiet))
    pdir = os.path.join(run_dir, "consolidate")
    with open(os.path.join(pdir, "measurements.json")) as f:
        m = json.load(f)
    starts = [s["job"] for s in m["starts"]]
    assert m["preemptions"] >= 1 and starts.count("a") >= 2, starts
    jobs = m["ina"]["jobs"]
    a, b = jobs["a"], jobs["b"]
    assert len(a["job_ids"]) == starts.count("a") and len(set(a["job_ids"] + b["job_ids"])) == len(starts), jobs
    assert a["uplink_complete"] is False  # the preempted run's agents were killed before writing counters
    for job in (a, b):
        # l1 sums h2-h4 (h1 reaches its PS on loopback): every run's every seq aggregated
        assert job["ps"]["completed_seqs"] > 0 and job["ps"]["aggregated"] > 0, job
    with open(os.path.join(pdir, "summary.json")) as f:
        summary = json.load(f)["jobs"]
    for name in ("a", "b"):
        assert summary[name]["iterations_recorded"] == 4 and summary[name]["complete"], summary[name]
    assert not leftovers(), f"run left behind: {leftovers()}"


def test_ina_optional_where_its_engine_cannot_run_runs_the_ring_and_says_so(emulation_ok, tmp_path, monkeypatch):
    """``ina: {engine: bmv2, use: optional}`` on a machine without bmv2 (no P4_PREFIX, no /opt/p4,
    no tools where the finder searches, really looked for): the INA job runs the ring allreduce, completes, and
    capabilities.json, measurements.json and the terminal say INA was not used and why."""
    import io

    from emulator.runner import Progress, run_experiment
    from experiment.config import schema as config

    monkeypatch.setenv("P4_PREFIX", str(tmp_path / "none"))
    monkeypatch.setattr("ina.p4.build.DEFAULT_PREFIX", str(tmp_path / "none"))
    empty = tmp_path / "empty-bin"  # the finder's search path: nothing there, wherever the machine installs tools
    empty.mkdir()
    monkeypatch.setattr("ina.p4.build.SEARCH_PATH", str(empty))
    cfg = config.from_dict({
        "name": "ina-optional", "scale": SCALE, "dilation": 2,
        "topology": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 2, "gpus_per_machine": 1},
        "jobs": [{"name": "a", "model": "resnet50", "workers": 3, "collective": "ina"}],
        "policies": ["consolidate"], "iterations": 2, "warmup_iterations": 1, "ecn": {"marking": "optional"},
        "ina": {"engine": "bmv2", "use": "optional"}, "results_dir": str(tmp_path), "plots": False})
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


def test_a_declared_pat_the_engine_cannot_carry_refuses_the_run_in_one_line(emulation_ok, tmp_path):
    """``ina.pat_gbps`` declares far more than the software engine takes here at this scale and dilation
    (and the links could bring more still): the run stops with one line naming the engine's rate, the
    claims the PAT declares and the dilation that would carry them, exit 2, and leaves nothing behind."""
    import subprocess
    import sys

    import yaml

    path = tmp_path / "pat.yaml"
    path.write_text(yaml.safe_dump({
        "name": "ina-pat", "scale": 1, "dilation": 1,
        "topology": {"kind": "leaf_spine", "n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 3, "gpus_per_machine": 1,
                     "host_bw_mbps": 300},
        "jobs": [{"name": "a", "model": "resnet50", "workers": 3, "collective": "ina"}],
        "policies": ["consolidate"], "iterations": 2, "warmup_iterations": 1, "ecn": {"marking": "optional"},
        "ina": {"engine": "software", "pat_gbps": 1}, "results_dir": str(tmp_path / "results")}))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cp = subprocess.run([sys.executable, os.path.join(root, "run_testbed.py"), "run", "-c", str(path)],
                        capture_output=True, text=True, timeout=300, cwd=root)
    errors = [line for line in cp.stderr.splitlines() if line.startswith("error:")]
    assert cp.returncode == 2 and len(errors) == 1, (cp.returncode, cp.stderr[-2000:])
    assert "cannot aggregate at the declared PAT; dilation" in errors[0], errors
    assert "ina.pat_gbps declares" in errors[0], errors
    assert "Traceback" not in cp.stderr
    assert not leftovers(), f"run left behind: {leftovers()}"


def test_a_parameter_server_that_dies_mid_run_stops_the_run_naming_it(emulation_ok, tmp_path):
    """The PS of a running INA job is killed (by the PID the run recorded for it): the run stops
    with an error naming the parameter server and its log, not a worker's timeout, and leaves
    nothing behind."""
    import signal
    import threading

    from common.errors import EmulationError
    from emulator.journal import RECORDS_DIR, RunJournal
    from emulator.procs import process_start_time
    from emulator.runner import Progress, run_experiment
    from experiment.config import schema as config

    cfg = config.from_dict({
        "name": "ina-ps-dies", "scale": SCALE, "dilation": 2,
        "topology": {"kind": "leaf_spine", "n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 3, "gpus_per_machine": 1},
        "jobs": [{"name": "a", "model": "resnet50", "workers": 3, "collective": "ina"}],
        "policies": ["consolidate"], "iterations": 200, "warmup_iterations": 1, "ecn": {"marking": "optional"},
        "ina": {"engine": "software"}, "results_dir": str(tmp_path), "plots": False})
    record = os.path.join(RECORDS_DIR, f"{os.getpid()}-{process_start_time(os.getpid())}.json")
    said: list[str] = []
    killed: list[int] = []
    done = threading.Event()

    def ps_of_a_running_job():
        if not any("ranks joined" in line for line in said):  # the job's iterations have started
            return None
        try:
            changes = RunJournal.load(record).changes
        except FileNotFoundError:
            return None
        return [int(c.name) for c in changes if c.kind == "process" and "ina.ps" in (c.what or "")]

    def kill_the_ps():
        while not done.wait(0.1):
            pids = ps_of_a_running_job()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
                return

    killer = threading.Thread(target=kill_the_ps, daemon=True)
    killer.start()
    try:
        named = r"the parameter server on h1 \(pid \d+\) exited .*see .*ps-h1\.log"
        with open(os.devnull, "w") as quiet, pytest.raises(EmulationError, match=named):
            run_experiment(cfg, Progress(quiet, say=said.append))
    finally:
        done.set()
        killer.join(10)
    assert killed
    assert not leftovers(), f"run left behind: {leftovers()}"
