"""The default experiment runs end to end (emulated, cut to two racks and two of its jobs, with three of its
policies) and leaves nothing behind, and every one of its policies runs on the simulator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, leftovers

EMULATED_POLICIES = ("consolidate", "spread", "netpack")
"""What the emulated run places with: a packing and a spreading policy (the comparison the test checks)
and NetPack, whose placements carry a parameter server and INA switches. Every policy of the default
experiment runs on the simulator (below): placement is the same code on both back ends."""

SMALL = ("--set", "topology={kind: leaf_spine, n_leaf: 2, n_spine: 1, hosts_per_leaf: 2, gpus_per_machine: 2, "
                  "host_bw_mbps: 10000}",
         "--set", "background={}",
         "--set", "jobs=[{name: resnet-b, model: resnet50, workers: 3, collective: gloo}, "
                  "{name: cnn-a, model: small_cnn, workers: 3, collective: hd}]",
         "--set", "warmup_iterations=1",
         "--iterations", "1")
"""The default experiment cut to what the emulated test checks (`make run` runs it whole): two racks of
two 2-GPU machines at the default's link rate, and two of its jobs on 3 workers each, so that every
policy places both on more than one machine (cross-machine traffic everywhere) and spreading uses more
machines than packing; resnet-b (bandwidth-bound, estimated ~0.11 s per iteration) and cnn-a (a few ms)
give the validation two kinds of job to correlate. 1 measured iteration after 1 to warm up, instead of 10
after 2. Everything else (ECN required, the simulator's estimates and ECN marks, waves, replay, scale,
dilation) is the default's."""


def kernel_datapath_in_use() -> bool:
    """Whether the kernel has Open vSwitch's datapath module loaded: after a run of the default's
    datapath (``auto``: the kernel's where it can run), exactly when that run used it."""
    return os.path.exists("/sys/module/openvswitch")


def bmv2_installed() -> bool:
    """Whether bmv2's switch is where the run looks for it: ``$P4_PREFIX/bin``, ``/opt/p4/bin`` or the PATH."""
    prefixes = [p for p in (os.environ.get("P4_PREFIX"), "/opt/p4") if p]
    return (any(os.access(os.path.join(p, "bin", "simple_switch"), os.X_OK) for p in prefixes)
            or shutil.which("simple_switch") is not None)


@pytest.mark.emulation
def test_default_experiment_runs_end_to_end_and_cleans_up(emulation_ok, tmp_path):
    """`run_testbed.py` on the default experiment cut to two racks and two jobs (:data:`SMALL`), with three
    of its policies: every job completes, the results directory holds the promised files with the
    machine's capabilities, the validation's correlation is that of its compared jobs, `report RUN_DIR`
    renders the tables again byte for byte, packing uses fewer machines and cross-machine bytes than
    spreading, no controller logged an exception and nothing is left running."""
    from experiment.config.schema import ExperimentConfig
    from experiment.reporting.rerender import load_run, render
    from experiment.reporting.validation import job_class
    from measure.fidelity import JOB_STATUSES as FIDELITY_STATUSES

    cp = subprocess.run([sys.executable, os.path.join(ROOT, "run_testbed.py"), *SMALL, "--results", str(tmp_path),
                         *(a for p in EMULATED_POLICIES for a in ("-p", p))],
                        cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "Per policy" in cp.stdout and "Traceback" not in cp.stdout + cp.stderr
    (run_dir,) = [os.path.join(tmp_path, d) for d in os.listdir(tmp_path)]
    for name in ("config.json", "capabilities.json", "topology.json", "summary.json", "summary.csv", "jobs.csv",
                 "link_bytes.csv", "link_checks.csv", "report.txt", "policies.png", "queues.csv",
                 "validation.png", "buckets.csv", "buckets.png", "status.json", "run.log", "links.png"):
        assert os.path.getsize(os.path.join(run_dir, name)) > 0, name
    # the busiest ports' backlog is drawn when some port queued (a short run on an idle machine may see none)
    with open(os.path.join(run_dir, "queues.csv")) as f:
        queued = len(f.readlines()) > 1
    assert os.path.exists(os.path.join(run_dir, "queues.png")) == queued
    assert ("no switch port held a backlog" in cp.stdout) != queued, cp.stdout[-2000:]
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    assert summary["capabilities"]["ovs_datapath"] == ("kernel" if kernel_datapath_in_use() else "user")
    assert summary["capabilities"]["ina_engine_available"] == ("bmv2" if bmv2_installed() else "software")
    assert summary["capabilities"]["ina_engine_why"]
    policies = {s["policy"]: s for s in summary["policies"]}
    assert set(policies) == set(EMULATED_POLICIES)
    for s in policies.values():
        assert s["jobs"] and all(j["complete"] for j in s["jobs"].values()), s
        assert s["cross_machine_bytes"] > 0 and s["comm_mean_s"] > 0
        # ECN was measured (the default requires it), and the fidelity monitor gave a verdict
        assert s["ecn_method"] == summary["capabilities"]["ecn_method"] != "none"
        assert isinstance(s["ecn_marks"], int) and all(isinstance(j["ecn_marks"], int) for j in s["jobs"].values())
        assert isinstance(s["trustworthy"], bool) and (s["trustworthy"] or s["fidelity_reasons"])
        # every job has a fidelity verdict; a checked one carries its bound and ratio
        assert s["dilation"] == summary["dilation"] == ExperimentConfig().dilation
        for j in s["jobs"].values():
            assert j["fidelity"] in FIDELITY_STATUSES, j
            if j["fidelity"] in ("ok", "slow", "fast"):
                assert j["bound_s"] > 0 and j["bound_ratio"] == pytest.approx(j["comm_mean_s"] / j["bound_s"])
            # the flow-level simulator estimated every job on the same placement; one alone on its links
            # (checked by the monitor) takes at least its bound (more where its own transfers of
            # successive steps overlap on a link, which the chained bound does not charge)
            assert j["estimate_s"] is not None and (j["estimate_s"] > 0) == (j["fidelity"] != "local"), j
            if j["fidelity"] in ("ok", "slow", "fast"):
                assert j["estimate_s"] >= 0.99 * j["bound_s"], j
                assert j["estimate_error"] == pytest.approx(j["estimate_s"] / j["comm_mean_s"] - 1)
        # each compared job's buckets, measured and estimated, add up to its two times
        for job, j in s["jobs"].items():
            mine = [b for b in s["buckets"] if b["job"] == job]
            if j["estimate_error"] is not None:
                assert sum(b["measured_s"] for b in mine) == pytest.approx(j["comm_mean_s"], rel=1e-9), job
                assert sum(b["estimated_s"] for b in mine) == pytest.approx(j["estimate_s"], rel=1e-9), job
            else:
                assert not mine, job
        assert s["validation"]["n"] == sum(j["estimate_error"] is not None for j in s["jobs"].values())
        assert s["jobs_checked"] == sum(j["fidelity"] in ("ok", "slow", "fast") for j in s["jobs"].values())
    with open(os.path.join(run_dir, "controller.log")) as f:  # one network, one controller, for every policy
        log = f.read()
    assert "Traceback" not in log and " ERROR " not in log
    assert summary["validation"]["n"] == sum(s["validation"]["n"] for s in policies.values()) > 0
    # the correlation of the compared jobs' measured and estimated times, which order the bandwidth-bound
    # resnet-b (~0.11 s) above the latency-bound cnn-a (a few ms) alike: clearly positive
    pairs = [(j["comm_mean_s"], j["estimate_s"]) for s in policies.values() for j in s["jobs"].values()
             if j["estimate_error"] is not None]
    assert len(pairs) == summary["validation"]["n"]
    r = float(np.corrcoef(np.array(pairs).T)[0, 1])
    assert summary["validation"]["pearson_r"] == pytest.approx(r, rel=1e-9) and r > 0.5, pairs
    # the simulator estimates every job's ECN marks (simulator.ecn in the default experiment), validated
    # against the marker's counts per class: every job with a class of job is compared, counts summed
    ecn = summary["validation_ecn"]
    classed = [(s["policy"], name, j) for s in policies.values() for name, j in s["jobs"].items()
               if job_class(j["fidelity"]) is not None]
    assert {(c["policy"], c["job"]) for c in ecn["jobs"]} == {(p, name) for p, name, _ in classed}
    assert ecn["all"]["measured_total"] == sum(j["ecn_marks"] for _, _, j in classed)
    assert ecn["all"]["estimated_total"] == pytest.approx(sum(j["estimate_ecn_marks"] for _, _, j in classed))
    assert sum(st["n"] for st in ecn["by_class"].values()) == ecn["all"]["n"] == len(classed)
    assert "ECN marks per job, measured against the simulator's estimate" in cp.stdout
    with open(os.path.join(run_dir, "status.json")) as f:
        assert json.load(f)["status"] == "complete"
    # `report RUN_DIR` renders the emulated run's tables again from its files, byte for byte
    with open(os.path.join(run_dir, "report.txt")) as f:
        assert render(load_run(run_dir)) + "\n" == f.read()
    # consolidation packs jobs onto fewer machines than spreading them across racks
    assert policies["consolidate"]["machines_used"] < policies["spread"]["machines_used"]
    assert policies["consolidate"]["cross_machine_bytes"] < policies["spread"]["cross_machine_bytes"]
    assert leftovers() == []


def test_default_experiment_runs_every_policy_on_the_simulator(tmp_path):
    """Every policy of the default experiment places the whole job mix, and every job completes, on the
    simulator (the same placement code the emulator runs); 2 measured iterations of each job instead of 10
    (placement does not depend on them)."""
    from experiment.config.schema import load, policy_specs

    cp = subprocess.run([sys.executable, os.path.join(ROOT, "run_testbed.py"), "--backend", "sim", "-q",
                         "--iterations", "2", "--results", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                        timeout=300)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [os.path.join(tmp_path, d) for d in os.listdir(tmp_path)]
    with open(os.path.join(run_dir, "summary.json")) as f:
        policies = {s["policy"]: s for s in json.load(f)["policies"]}
    assert set(policies) == set(policy_specs(load(os.path.join(ROOT, "experiments", "default.yaml"))))
    for s in policies.values():
        assert s["jobs"] and all(j["complete"] for j in s["jobs"].values()), s
