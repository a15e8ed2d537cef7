"""Themis-like scheduling (``scheduling.themis``): leases held to their end, auctions by finish-time
fairness at expiry, wake-ups at the earliest lease end, and the loop through a workload with them."""

from __future__ import annotations

import pytest

from common.errors import JobError
from experiment.run.durations import duration_job, run_durations
from scheduling import JobStatus, make_scheduler
from scheduling.themis import ThemisScheduler


def test_a_lease_is_held_to_its_end_then_auctioned_to_the_least_fairly_treated():
    """a (4 GPUs) wins the cluster at 0 with a 100 s lease; b arrives at 10 and waits though it is
    treated worse; at the lease end b's ρ exceeds a's, so a is preempted and b starts."""
    s = ThemisScheduler(lease_s=100.0)
    d0 = s.schedule([JobStatus("a", 4, 0.0, remaining_gpu_s=4000.0)], 4, 0.0)
    assert d0.start == ("a",) and d0.wake_s == 100.0
    jobs = [JobStatus("a", 4, 0.0, running=True, service_gpu_s=40.0, remaining_gpu_s=3960.0),
            JobStatus("b", 4, 10.0, remaining_gpu_s=400.0)]
    d1 = s.schedule(jobs, 4, 10.0)
    assert d1.start == () and d1.preempt == () and d1.run == ("a",) and d1.wake_s == 100.0
    jobs = [JobStatus("a", 4, 0.0, running=True, service_gpu_s=400.0, remaining_gpu_s=3600.0),
            JobStatus("b", 4, 10.0, remaining_gpu_s=400.0)]
    rho_a, rho_b = (s.fairness(j, 2, 4, 100.0) for j in jobs)
    assert rho_b > rho_a
    d2 = s.schedule(jobs, 4, 100.0)
    assert d2.preempt == ("a",) and d2.start == ("b",) and d2.wake_s == 200.0


def test_finish_time_fairness_is_shared_over_ideal_time():
    """ρ = (waited + remaining / workers) / (work / min(workers, G / N)): a 2-GPU job of 200 GPU-s
    that waited 50 s among 2 jobs on 4 GPUs: (50 + 100) / (200 / 2) = 1.5; unknown remaining work:
    waited over run time, a lease added to both."""
    s = ThemisScheduler(lease_s=10.0)
    assert s.fairness(JobStatus("x", 2, 0.0, remaining_gpu_s=200.0), 2, 4, 50.0) == pytest.approx(1.5)
    assert s.fairness(JobStatus("y", 2, 0.0, service_gpu_s=40.0), 2, 4, 50.0) == pytest.approx(60 / 30)


def test_winners_with_an_expired_lease_renew_it_and_keep_running():
    s = ThemisScheduler(lease_s=60.0)
    s.schedule([JobStatus("a", 2, 0.0, remaining_gpu_s=10_000.0)], 4, 0.0)
    d = s.schedule([JobStatus("a", 2, 0.0, running=True, service_gpu_s=120.0, remaining_gpu_s=9_880.0)], 4, 60.0)
    assert d.run == ("a",) and d.start == () and d.preempt == () and d.wake_s == 120.0


def test_a_workload_finishes_through_the_loop_and_leases_preempt():
    """25 seeded jobs on 6 GPUs with 50 s leases: all finish, and expiring leases preempt some."""
    import random

    rng = random.Random(5)
    jobs = [duration_job(f"j{i}", rng.choice([1, 2, 4]), rng.uniform(20, 300), rng.uniform(0, 400))
            for i in range(25)]
    result = run_durations(jobs, make_scheduler("themis,lease_s=50"), total_gpus=6)
    assert sorted(result.jct_s) == sorted(j.name for j in jobs) and result.preemptions > 0


def test_a_lease_must_be_positive():
    with pytest.raises(JobError, match="lease_s must be finite and > 0"):
        ThemisScheduler(lease_s=0)
