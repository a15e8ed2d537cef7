"""The scheduling stage: registry and spec strings, FIFO / YARN-CS, shared invariants, the experiment
loop on the durations back end."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from conftest import REPO

from common.errors import ConfigError, JobError
from experiment.run.durations import duration_job, run_durations
from placement import Cluster, MachineInfo, make_policy
from scheduling import SCHEDULERS, FifoScheduler, JobStatus, TiresiasScheduler, make_scheduler


def random_statuses(seed: int) -> list[JobStatus]:
    """A mix of running and waiting jobs with random service, plus one larger than the cluster."""
    rng = random.Random(seed)
    jobs, used = [], 0
    for i in range(rng.randint(2, 8)):
        w = rng.choice([1, 2, 4, 8])
        running = used + w <= 8 and rng.random() < 0.5
        used += w if running else 0
        service = rng.uniform(0, 5000) if running or rng.random() < 0.5 else 0.0
        remaining = rng.uniform(1, 9e3)
        jobs.append(JobStatus(f"j{i}", w, rng.uniform(0, 100), running, service, remaining_gpu_s=remaining))
    jobs.append(JobStatus("huge", 9, 0.0, remaining_gpu_s=1.0))
    return jobs


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_registry_key_matches_name(name):
    """Each registry key equals its class's ``name`` and builds via make_scheduler."""
    assert SCHEDULERS[name].name == name
    assert isinstance(make_scheduler(name, seed=1), SCHEDULERS[name])


@pytest.mark.parametrize("name", list(SCHEDULERS))
@pytest.mark.parametrize("seed", range(8))
def test_decision_invariants(name, seed):
    """Order covers every job once; run fits the GPUs; preempt/start are consistent; too-big jobs wait."""
    jobs = random_statuses(seed)
    d = make_scheduler(name).schedule(jobs, total_gpus=8, now_s=100.0)
    by_name = {j.name: j for j in jobs}
    assert sorted(d.order) == sorted(by_name)
    assert sum(by_name[n].workers for n in d.run) <= 8
    assert "huge" not in d.run
    assert set(d.preempt) == {j.name for j in jobs if j.running} - set(d.run)
    assert set(d.start) == set(d.run) - {j.name for j in jobs if j.running}
    assert list(d.run) == [n for n in d.order if n in d.run], "run is in priority order"


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_every_scheduler_finishes_a_workload(name):
    """Each registered scheduler runs a seeded workload to completion in the experiment loop, never over-committing."""
    rng = random.Random(3)
    jobs = [duration_job(f"j{i}", rng.choice([1, 2, 4]), rng.uniform(5, 300), rng.uniform(0, 600))
            for i in range(25)]
    result = run_durations(jobs, make_scheduler(name), total_gpus=6)
    assert sorted(result.jct_s) == sorted(j.name for j in jobs)


def test_fifo_backfills_and_yarn_cs_blocks():
    """FIFO skips a head job that does not fit and starts a later small one; YARN-CS waits behind it."""
    jobs = [JobStatus("run", 2, 0.0, running=True), JobStatus("big", 4, 1.0), JobStatus("small", 1, 2.0)]
    assert make_scheduler("fifo").schedule(jobs, 4, 5.0).start == ("small",)
    assert make_scheduler("yarn_cs").schedule(jobs, 4, 5.0).start == ()


def test_fifo_never_preempts():
    """A FIFO decision never preempts, even when a waiting job arrived earlier than a running one."""
    jobs = [JobStatus("late", 4, 9.0, running=True), JobStatus("early", 4, 1.0)]
    d = FifoScheduler().schedule(jobs, 4, 10.0)
    assert d.order == ("early", "late") and d.preempt == () and d.run == ("late",)


def test_fifo_vs_yarn_cs_average_jct():
    """On a workload with a blocked large job, backfilling FIFO gives a lower average JCT than YARN-CS."""
    jobs = [duration_job("a", 2, 10), duration_job("big", 4, 10, 1), duration_job("s1", 1, 2, 2),
            duration_job("s2", 1, 2, 3)]
    fifo = run_durations(jobs, make_scheduler("fifo"), 4)
    yarn = run_durations(jobs, make_scheduler("yarn_cs"), 4)
    assert fifo.jct_s["s1"] == 2 and yarn.jct_s["s1"] == 20
    assert fifo.avg_jct_s < yarn.avg_jct_s


def test_spec_strings():
    """Spec keywords reach the constructor with the right types (inf, ints as floats, strings)."""
    s = make_scheduler("tiresias, priority=las, thresholds_gpu_s=3600:7200, promote_knob=8", seed=4)
    assert isinstance(s, TiresiasScheduler) and s.seed == 4
    assert s.limits_gpu_s[:2] == (3600.0, 7200.0) and s.promote_knob == 8.0 and s.n_queues == 3
    assert make_scheduler("tiresias,promote_knob=inf").promote_knob == float("inf")
    assert make_scheduler("tiresias,thresholds_gpu_s=3200").limits_gpu_s[0] == 3200.0
    assert make_scheduler("fifo,blocking=true").blocking is True


@pytest.mark.parametrize("spec,match", [
    ("tiresia", "unknown scheduler 'tiresia'.*did you mean 'tiresias'"),
    ("tiresias,knob=2", "unknown tiresias scheduler keyword 'knob'"),
    ("tiresias,promote_knob=fast", "promote_knob='fast' should be a float"),
    ("fifo,blocking", "expected key=value"),
    ("fifo,seed=3", "seed is not a spec keyword"),
    ("las,x=1", "las takes no keywords"),
    ("fifo,blocking=true,blocking=false", "given twice"),
])
def test_bad_specs(spec, match):
    """Malformed specs fail with a ConfigError naming the problem and the valid choices."""
    with pytest.raises(ConfigError, match=match):
        make_scheduler(spec)


def test_bad_jobs():
    """Zero workers, duplicate names and a job larger than the cluster are clear JobErrors."""
    with pytest.raises(JobError, match="workers must be >= 1"):
        JobStatus("a", 0)
    with pytest.raises(JobError, match="duplicate job name 'a'"):
        make_scheduler("las").schedule([JobStatus("a", 1), JobStatus("a", 2)], 4, 0.0)
    with pytest.raises(JobError, match="needs 5 GPUs; the cluster has 4"):
        run_durations([duration_job("a", 5, 1.0)], make_scheduler("fifo"), 4)
    with pytest.raises(JobError, match="duration_s must be finite and > 0"):
        duration_job("a", 1, 0.0)


def test_pure_import():
    """Importing the scheduling package loads no torch, Mininet or os-ken."""
    code = ("import sys, scheduling, experiment, experiment.run.loop, experiment.run.durations; "
            "bad = [m for m in ('torch', 'mininet', 'os_ken') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def small_cluster(machines: int = 2, gpus: int = 4) -> Cluster:
    """Idle machines m0.. of ``gpus`` GPUs in one rack."""
    return Cluster([MachineInfo(f"m{i}", gpus, rack="r0", pod="p0") for i in range(machines)])


def test_scheduler_with_a_placer_waits_for_placeable_gpus():
    """Admitted by count, a job the placer cannot place waits until GPUs free up on one machine."""
    jobs = [duration_job("a", 3, 10), duration_job("b", 3, 20), duration_job("c", 2, 1)]
    counted = run_durations(jobs, make_scheduler("fifo"), total_gpus=8)
    placed = run_durations(jobs, make_scheduler("fifo"), cluster=small_cluster(),
                      policy=make_policy("elasticflow"))
    assert counted.jct_s["c"] == 1
    assert placed.jct_s["c"] == 11, "EF will not split c over the two 1-GPU fragments; it waits for a"
    assert [p.job for p in placed.placements] == ["a", "b", "c"]


@pytest.mark.parametrize("placer", ["hived", "elasticflow", "tiresias", "consolidate"])
def test_tiresias_scheduler_combines_with_any_placer(placer):
    """Tiresias-L drives each placer over a seeded workload; GPUs are never double-booked, all are freed."""
    rng = random.Random(8)
    jobs = [duration_job(f"j{i}", rng.choice([1, 2, 4]), rng.uniform(5, 300), rng.uniform(0, 600),
                   model=rng.choice(["resnet50", "vgg16"])) for i in range(20)]
    cluster = small_cluster(3)
    before = cluster.snapshot()
    result = run_durations(jobs, TiresiasScheduler(thresholds_gpu_s="200"), cluster=cluster,
                      policy=make_policy(placer))
    assert sorted(result.jct_s) == sorted(j.name for j in jobs)
    assert cluster.snapshot() == before
    assert result.preemptions > 0 and len(result.placements) == len(jobs) + result.preemptions


def test_unplaceable_job_is_reported():
    """A job the placer can never place (EF rounds 12 workers up to 16 GPUs) is a clear error, not a hang."""
    with pytest.raises(JobError, match="wait for ever"):
        run_durations([duration_job("a", 12, 5)], make_scheduler("fifo"), period_s=1.0,
                 cluster=small_cluster(3), policy=make_policy("elasticflow"))
    with pytest.raises(JobError, match="both cluster and policy"):
        run_durations([duration_job("a", 1, 5)], make_scheduler("fifo"), cluster=small_cluster())
