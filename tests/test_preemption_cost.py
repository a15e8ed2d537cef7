"""What a preemption costs (experiment.run.preemption, experiment.run.loop): a preempted job holds its
GPUs while its checkpoint is written, a resumed one while it is read back, neither attaining service;
worked examples on the durations clock, the same on the simulator from a config."""

from __future__ import annotations

import pytest

from backend.protocol import ExperimentJob
from experiment.config.schema import PreemptionConfig, from_dict, validate
from experiment.run.durations import duration_job, run_durations
from experiment.run.preemption import CheckpointCost, preemption_cost
from jobs.models import get_model
from scheduling import make_scheduler


def two_jobs():
    """a: 4 GPUs for 100 s from 0; b: 4 GPUs for 10 s from 20, which SRTF runs first."""
    return [duration_job("a", 4, 100.0), duration_job("b", 4, 10.0, arrival_s=20.0)]


def test_without_a_cost_the_preempted_job_resumes_at_once():
    r = run_durations(two_jobs(), make_scheduler("srtf"), total_gpus=4)
    assert r.jct_s == pytest.approx({"a": 110.0, "b": 10.0}) and r.preemptions == 1 and r.overhead_s == {}


def test_a_checkpoint_holds_the_gpus_and_a_restore_delays_the_resumed_job():
    """b arrives at 20 and preempts a, whose checkpoint (5 s) holds the 4 GPUs until 25: b runs 25-35.
    a restores 7 s from 35 and trains its 80 s left from 42: it ends at 122, with 12 s of overhead."""
    r = run_durations(two_jobs(), make_scheduler("srtf"), total_gpus=4, preemption=CheckpointCost(5.0, 7.0))
    assert r.jct_s == pytest.approx({"a": 122.0, "b": 15.0})
    assert r.preemptions == 1 and r.overhead_s == pytest.approx({"a": 12.0})
    assert r.preemption_overhead_s == pytest.approx(12.0)
    assert [(s.job, s.time_s) for s in r.starts] == [("a", 0.0), ("b", 25.0), ("a", 42.0)]
    assert [(e.job, e.start_s, e.end_s, e.finished) for e in r.runs] == [
        ("a", 0.0, 20.0, False), ("b", 25.0, 35.0, True), ("a", 42.0, 122.0, True)]
    assert r.running_at(22.0) == () and r.running_at(38.0) == ()  # held, not running on the clock


def test_a_job_preempted_while_restoring_frees_its_gpus_at_once():
    """a is preempted by b (pause 5 s), restores from 35 (resume 30 s); c, 4 GPUs for 1 s, arrives at
    40 and preempts it mid-restore: its GPUs go to c at once (its checkpoint is the one it was reading),
    and it restores again, 30 s, after c: 5 + 5 + 30 s of overhead, ending at 41 + 30 + 80."""
    jobs = [*two_jobs(), duration_job("c", 4, 1.0, arrival_s=40.0)]
    r = run_durations(jobs, make_scheduler("srtf"), total_gpus=4, preemption=CheckpointCost(5.0, 30.0))
    assert r.preemptions == 2 and r.jct_s["c"] == pytest.approx(1.0)
    assert r.overhead_s["a"] == pytest.approx(5.0 + 5.0 + 30.0)
    assert r.jct_s["a"] == pytest.approx(41.0 + 30.0 + 80.0)


def test_the_model_bytes_cost_their_time_at_the_storage_rate():
    """ResNet-50's fp32 parameters at 1.2 GB/s each way (Tiresias's GPFS), on top of the fixed times."""
    job = ExperimentJob("j", 4, model="resnet50", duration_s=10.0)
    cost = preemption_cost(PreemptionConfig(checkpoint_s=1.0, restore_s=2.0, storage_gbytes_s=1.2))
    moved = get_model("resnet50").param_bytes / 1.2e9
    assert cost.pause_s(job) == pytest.approx(1.0 + moved) and cost.resume_s(job) == pytest.approx(2.0 + moved)
    assert preemption_cost(PreemptionConfig()) is None


def test_the_simulator_run_of_a_config_pays_the_cost():
    """Two replay jobs of a config on the simulator under Tiresias (one GPU-second in its first queue):
    b arrives at 1 s and preempts a, then, demoted behind a, is preempted by it, and resumes when a
    ends, as without a cost. With a checkpoint of c = 3 s and a restore of r = 4 s, each pays c + r;
    b starts c later (a's checkpoint), a resumes c + r later (b's checkpoint, its restore), so a ends
    2c + r later and b, resuming after a, 2c + 2r later."""
    from experiment.run.policy import run_policy_loop
    from experiment.run.simrun import sim_backend

    def cfg(**preemption):
        return from_dict({
            "topology": {"kind": "leaf_spine", "n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 2,
                         "gpus_per_machine": 2},
            "jobs": [{"name": "a", "model": "resnet50", "workers": 4},
                     {"name": "b", "model": "resnet50", "workers": 4, "arrival_s": 1.0}],
            "scheduler": "tiresias,thresholds_gpu_s=1", "policies": ["consolidate"], "iterations": 10,
            "preemption": preemption})

    loops = {}
    for label, c in (("free", cfg()), ("cost", cfg(checkpoint_s=3.0, restore_s=4.0))):
        g = validate(c, "sim")
        loops[label] = run_policy_loop(c, g, "consolidate", sim_backend(c, g)).loop
    free, cost = loops["free"], loops["cost"]
    assert free.preemptions == cost.preemptions == 2 and free.overhead_s == {}
    assert cost.overhead_s == pytest.approx({"a": 7.0, "b": 7.0})
    assert cost.jct_s["a"] == pytest.approx(free.jct_s["a"] + 2 * 3.0 + 4.0, rel=1e-9)
    assert cost.jct_s["b"] == pytest.approx(free.jct_s["b"] + 2 * 3.0 + 2 * 4.0, rel=1e-9)
