"""NetPack's periodic batches (``scheduling.batch``): every waiting job to the placer at each period's
start and nothing between, through the loop, and NetPack's batch knapsack choosing within a batch."""

from __future__ import annotations

import random

import pytest

from common.errors import ConfigError, JobError
from experiment.run.durations import duration_job, run_durations
from placement import Cluster, MachineInfo
from placement.netpack.policy import NetPackPolicy
from scheduling import JobStatus, make_scheduler
from scheduling.batch import BatchScheduler


def test_a_period_start_hands_every_waiting_job_in_arrival_order_even_beyond_the_gpus():
    s = BatchScheduler(period_s=60.0)
    jobs = [JobStatus("b", 4, 5.0), JobStatus("a", 4, 0.0), JobStatus("c", 8, 5.0)]
    d = s.schedule(jobs, 8, 0.0)
    assert d.start == ("a", "b", "c") and d.preempt == () and d.wake_s == 60.0


def test_between_period_starts_nothing_starts_and_the_next_start_is_the_wake_up():
    s = BatchScheduler(period_s=60.0)
    assert s.schedule([JobStatus("a", 2, 0.0)], 8, 0.0).start == ("a",)
    jobs = [JobStatus("a", 2, 0.0, running=True), JobStatus("b", 2, 30.0)]
    d = s.schedule(jobs, 8, 30.0)
    assert d.start == () and d.run == ("a",) and d.wake_s == 60.0
    d = s.schedule(jobs, 8, 60.0)
    assert d.start == ("b",) and d.run == ("a", "b") and d.wake_s == 120.0


def test_a_period_start_hands_out_its_batch_once_and_running_jobs_are_never_preempted():
    s = BatchScheduler(period_s=10.0)
    jobs = [JobStatus("a", 8, 0.0, running=True), JobStatus("b", 8, 0.0)]
    assert s.schedule(jobs, 8, 20.0).start == ("b",)
    again = s.schedule(jobs, 8, 20.0)  # the placer could not place b: it waits for the next period
    assert again.start == () and again.preempt == () and again.wake_s == 30.0


def test_on_a_clock_that_runs_on_a_start_is_the_first_call_after_the_wake_it_asked_for():
    """The emulator's clock is past 0 at the loop's first call and past each wake when it comes back: that
    first call hands out period 0's batch and the wake's call the next one's; a call in the middle of a
    period (a job's arrival or end) hands out nothing, and neither does the first call in a period
    nobody asked to be woken at (no job was waiting at its start)."""
    s = BatchScheduler(period_s=1.0)
    assert s.schedule([JobStatus("a", 2, 0.0)], 8, 0.0004).start == ("a",)
    jobs = [JobStatus("a", 2, 0.0, running=True), JobStatus("b", 2, 0.3)]
    assert s.schedule(jobs, 8, 0.3002).start == () and s.schedule(jobs, 8, 0.71).start == ()
    assert s.schedule(jobs, 8, 1.0031).start == ("b",)
    idle = BatchScheduler(period_s=1.0)
    assert idle.schedule([], 8, 0.0002).wake_s is None
    late = idle.schedule([JobStatus("c", 2, 1.4)], 8, 1.4001)  # period 1 began with nothing waiting
    assert late.start == () and late.wake_s == 2.0
    assert idle.schedule([JobStatus("c", 2, 1.4)], 8, 2.0007).start == ("c",)


def test_no_waiting_job_means_no_wake_up():
    d = BatchScheduler(period_s=10.0).schedule([JobStatus("a", 1, 0.0, running=True)], 8, 20.0)
    assert d.start == () and d.wake_s is None


@pytest.mark.parametrize("period", [0, -1, float("inf"), float("nan")])
def test_a_period_must_be_positive_and_finite(period):
    with pytest.raises(JobError, match="period_s must be finite and > 0"):
        BatchScheduler(period_s=period)


def test_the_spec_string_sets_the_period_and_rejects_unknown_keys():
    assert make_scheduler("batch,period_s=30").period_s == 30.0
    with pytest.raises(ConfigError, match="period"):
        make_scheduler("batch,interval=30")


def test_through_the_loop_jobs_start_only_at_period_starts_and_all_finish():
    """30 seeded jobs on 8 GPUs with 25 s periods: every start is a multiple of 25 s, no job starts
    before its arrival, and each waits less than a period beyond what the GPUs' release forces."""
    rng = random.Random(3)
    jobs = [duration_job(f"j{i}", rng.choice([1, 2, 4, 8]), rng.uniform(10, 200), rng.uniform(0, 500))
            for i in range(30)]
    jobs.append(duration_job("first", 1, 50.0, 0.0))
    result = run_durations(jobs, make_scheduler("batch,period_s=25"), total_gpus=8)
    assert sorted(result.jct_s) == sorted(j.name for j in jobs) and result.preemptions == 0
    arrival = {j.name: j.arrival_s for j in jobs}
    for s in result.starts:
        assert s.time_s / 25 == pytest.approx(round(s.time_s / 25)) and s.time_s >= arrival[s.job] - 1e-9


def _netpack_run(scheduler: str) -> tuple[int, int]:
    """Sixteen jobs at once, then a stream of 2-8 GPU jobs, on 8 servers of 4 GPUs under NetPack:
    how many of its calls had more pending GPUs than free ones, and how many left a job out."""
    rng = random.Random(7)
    jobs = [duration_job(f"j{i}", rng.choice([2, 4, 8]), rng.uniform(50, 300), 0.0 if i < 16 else rng.uniform(0, 900))
            for i in range(40)]
    cluster = Cluster([MachineInfo(f"h{i}", 4, rack=f"r{i // 4}", pod="p") for i in range(8)])
    policy = NetPackPolicy()
    over = left_out = 0
    place = policy.place

    def counting(pending, view):
        nonlocal over, left_out
        over += sum(j.workers for j in pending) > view.total_free
        placed = place(pending, view)
        left_out += any(policy.job_values.get(j.name, 1.0) > 1.0 for j in pending)
        return placed

    policy.place = counting
    result = run_durations(jobs, make_scheduler(scheduler), cluster=cluster, policy=policy)
    assert sorted(result.jct_s) == sorted(j.name for j in jobs)
    return over, left_out


def test_under_batches_netpacks_knapsack_chooses_within_a_batch_and_under_fifo_it_never_does():
    """FIFO hands the placer only jobs that fit by count, so the knapsack always takes them all; a
    batch holds more than the free GPUs, so the knapsack leaves some out (their value raised, §3.2)."""
    assert _netpack_run("fifo") == (0, 0)
    over, left_out = _netpack_run("batch,period_s=60")
    assert over > 0 and left_out > 0
