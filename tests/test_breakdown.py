"""Per-bucket times of measured and simulated records (``jobs.records.bucket_times_s``), the
simulator's per-bucket estimate, and where a class of jobs' error lies (``experiment.reporting.breakdown``)."""

from __future__ import annotations

import pytest

from experiment.reporting.breakdown import BucketComparison, bucket_kind, compare_buckets, error_split
from jobs.records import IterationRecord, bucket_times_s
from jobs.steps import job_bound_s
from sim.flowsim import SimJob, simulate
from topo import fat_tree

G = fat_tree(4)
RATES = {(u, v): 100.0 for u, v in G.edges()}


def rec(job, rank, it, times, sizes=None):
    sizes = sizes or (1000,) * len(times)
    return IterationRecord(job=job, rank=rank, world=2, iteration=it, start_time_s=0.0, compute_s=0.0,
                           comm_s=sum(times), bytes=sum(sizes), iteration_s=sum(times), mode="replay",
                           collective="ring", bucket_bytes=tuple(sizes), bucket_comm_s=tuple(times))


def test_a_buckets_time_is_the_slowest_ranks_then_the_mean_and_they_sum_to_the_communication_time():
    """The slowest rank is rank 0 in iteration 0 (5 s against 5 s: the first on a tie) and in iteration 1
    (6 s): buckets (1 + 5) / 2 and (4 + 1) / 2, not each bucket's slowest rank (a rank done early with one
    bucket waits longer in the next); dilation 2 halves; a job with records of different bucket counts has
    no buckets to pair."""
    records = [rec("a", 1, 0, (3.0, 2.0)), rec("a", 0, 0, (1.0, 4.0)), rec("a", 0, 1, (5.0, 1.0)),
               rec("a", 1, 1, (2.0, 2.0)), rec("b", 0, 0, (1.0,)), rec("b", 1, 0, (1.0, 1.0))]
    assert bucket_times_s(records) == {"a": (3.0, 2.5)}
    assert sum(bucket_times_s(records)["a"]) == (5.0 + 6.0) / 2
    assert bucket_times_s(records, dilation=2.0) == {"a": (1.5, 1.25)}


def test_the_simulators_buckets_add_up_to_its_communication_time_alone():
    """A ring of two machines alone: each bucket's estimate is its bound, and they sum to the job's."""
    ranks, buckets = ("h1", "h3"), (200_000, 1_000_000)
    result = simulate(G, RATES, [SimJob("a", ranks, "ring", buckets, compute_s=0.01, iterations=3)])
    est = result.job("a")
    assert est.bucket_comm_s == pytest.approx([job_bound_s(G, RATES, ranks, "ring", (b,)) for b in buckets])
    assert sum(est.bucket_comm_s) == pytest.approx(est.comm_mean_s)


def test_a_bucket_is_small_under_ten_packets_per_transfer():
    """A 2-rank ring sends half a bucket per step: 28,952 B is 14,476 B per step, under 10 x 1,448; 28,960 is not."""
    assert bucket_kind(("h1", "h3"), "ring", 28_952, 1500) == "small"
    assert bucket_kind(("h1", "h3"), "ring", 28_960, 1500) == "large"
    assert bucket_kind(("h1", "h1"), "ring", 10**9, 1500) == "small"  # nothing leaves the machine


def test_buckets_pair_only_when_both_sides_have_them_and_the_error_splits_by_kind():
    """Two contended jobs: one short on its large bucket by 0.3 s, long on its small one by 0.1 s; the
    other short on its large one by 0.1 s. 80% of the contended error is in large buckets."""
    a = compare_buckets("p", "a", "contended", ("h1", "h3"), "ring", (100, 100_000), (0.1, 1.0), (0.2, 0.7), 1500)
    b = compare_buckets("p", "b", "contended", ("h1", "h3"), "ring", (100_000,), (1.0,), (0.9,), 1500, scale=10)
    assert [(c.kind, c.bytes, c.error_s) for c in a + b] == [
        ("small", 100, pytest.approx(0.1)), ("large", 100_000, pytest.approx(-0.3)),
        ("large", 1_000_000, pytest.approx(-0.1))]
    assert compare_buckets("p", "c", None, ("h1", "h3"), "ring", (100,), (0.1,), None, 1500) == []
    assert compare_buckets("p", "c", None, ("h1", "h3"), "ring", (100,), (0.1,), (0.1, 0.2), 1500) == []
    (split,) = error_split(a + b).values()
    assert split.jobs == 2 and split.share("large") == pytest.approx(0.8) and split.share("small") == pytest.approx(0.2)
    assert split.error_s == {"small": pytest.approx(0.1), "large": pytest.approx(-0.4)}
    assert "large buckets 80% of the error (-0.4 s on 2 s measured)" in split.line() and "over 2 jobs" in split.line()
    exact = BucketComparison("p", "d", "uncontended", 0, 10, "large", 1.0, 1.0)
    assert error_split([exact])["uncontended"].share("large") is None
