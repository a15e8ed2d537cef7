"""Validation statistics (``experiment.reporting.validation``): hand-computed Pearson r, error percentiles and the
jobs that cannot be compared."""

from __future__ import annotations

import math

import pytest

from experiment.reporting.validation import (
    VALIDATION_CLASSES,
    Comparison,
    MarksComparison,
    comparable,
    job_class,
    marks_by_class,
    marks_stats,
    marks_to_dict,
    pearson_r,
    stats_by_class,
    validation_stats,
)
from measure.fidelity import JOB_STATUSES


def test_pearson_r_of_hand_computed_points():
    """x = 1, 2, 3, y = 2, 4, 5: means 2 and 11/3; sxy = 3, sxx = 2, syy = 14/3; r = 3 / sqrt(28/3)."""
    assert pearson_r([1, 2, 3], [2, 4, 5]) == pytest.approx(3 / math.sqrt(28 / 3))
    assert pearson_r([1, 2, 3], [6, 4, 2]) == pytest.approx(-1.0)
    assert pearson_r([1, 2], [5, 5]) is None  # a constant side has no correlation
    assert pearson_r([1], [1]) is None
    with pytest.raises(ValueError, match="3 x values but 2 y values"):
        pearson_r([1, 2, 3], [1, 2])


def test_errors_median_p90_and_worst():
    """Relative errors +10%, -20%, +5%, 0%: |e| sorted 0, .05, .10, .20; median .075; p90 at position 2.7:
    .10 + .7 * (.20 - .10) = .17; the worst is the -20% job."""
    cs = [Comparison("p", "a", 1.0, 1.1), Comparison("p", "b", 2.0, 1.6), Comparison("q", "c", 4.0, 4.2),
          Comparison("q", "d", 0.5, 0.5)]
    s = validation_stats(cs)
    assert s.n == 4
    assert s.median_abs_rel_error == pytest.approx(0.075)
    assert s.p90_abs_rel_error == pytest.approx(0.17)
    assert s.worst.job == "b" and s.worst.rel_error == pytest.approx(-0.2)
    assert s.pearson_r == pytest.approx(pearson_r([1.0, 2.0, 4.0, 0.5], [1.1, 1.6, 4.2, 0.5]))
    assert s.line().startswith(f"r {s.pearson_r:.3f}, median |error| 7.5%, p90 17.0% over 4 jobs")
    assert s.to_dict()["worst"]["rel_error"] == pytest.approx(-0.2)


def test_jobs_without_a_network_estimate_or_a_measurement_are_not_compared():
    """An estimate of 0 (no traffic leaves the machine), a missing or non-finite value is not comparable."""
    assert comparable(1.0, 0.9)
    for measured, estimated in ((0.002, 0.0), (None, 1.0), (1.0, None), (0.0, 1.0), (math.nan, 1.0),
                                (1.0, math.inf)):
        assert not comparable(measured, estimated), (measured, estimated)


def test_every_verdict_has_its_class():
    """Jobs checked against their bound are uncontended, jobs that shared links contended (an ECMP collision
    of its own transfers too), latency-bound apart; local, incomplete and no verdict have none."""
    want = {"ok": "uncontended", "slow": "uncontended", "fast": "uncontended", "contended": "contended",
            "collides": "contended", "latency-bound": "latency-bound", "local": None, "incomplete": None}
    assert set(want) == set(JOB_STATUSES)
    assert {st: job_class(st) for st in JOB_STATUSES} == want and job_class(None) is None
    assert set(want.values()) - {None} == set(VALIDATION_CLASSES)


def test_stats_by_class_summarise_each_class_alone():
    """Two uncontended jobs off by +10% and -10%, two contended off by -40% and -50%, one latency-bound off
    by +500% and one without a class: each class its own median, the one without a class in none."""
    cs = [Comparison("p", "a", 1.0, 1.1, "uncontended"), Comparison("p", "b", 2.0, 1.8, "uncontended"),
          Comparison("p", "c", 1.0, 0.6, "contended"), Comparison("q", "d", 2.0, 1.0, "contended"),
          Comparison("q", "e", 0.001, 0.006, "latency-bound"), Comparison("q", "f", 1.0, 3.0)]
    by = stats_by_class(cs)
    assert list(by) == ["uncontended", "contended", "latency-bound"]
    assert [by[k].n for k in by] == [2, 2, 1]
    assert by["uncontended"].median_abs_rel_error == pytest.approx(0.10)
    assert by["contended"].median_abs_rel_error == pytest.approx(0.45)
    assert by["latency-bound"].worst.job == "e" and by["latency-bound"].median_abs_rel_error == pytest.approx(5.0)
    assert stats_by_class([Comparison("p", "f", 1.0, 3.0)]) == {}
    assert cs[0].to_dict()["job_class"] == "uncontended"


def test_no_comparisons():
    s = validation_stats([])
    assert (s.n, s.pearson_r, s.median_abs_rel_error, s.worst) == (0, None, None, None)
    assert s.line() == "no job to compare"


def test_run_estimates_follow_the_simulator_options():
    """A run's estimate of a job (its recorded wave re-simulated, experiment.run.resimulate) is the simulator's on
    the job's placement with its recorded buckets: alone on its links it equals the contention-free bound;
    per-message latency adds to it; the shapers' token buckets (on request) let small transfers pass faster."""
    import dataclasses

    from experiment.config.schema import ExperimentConfig, JobConfig, SimulatorConfig, validate
    from experiment.run.loop import LoopResult, Started
    from experiment.run.resimulate import simulate_schedule
    from jobs.steps import job_bound_s
    from measure.shaping import link_rates_mbps
    from placement.base import GpuSlot, Placement

    cfg = ExperimentConfig(jobs=(JobConfig("a", "resnet50", 2),), iterations=3, warmup_iterations=0)
    g = validate(cfg)
    buckets = (16392, 63004)
    record = LoopResult({"a": 1.0}, (), 0, (Started(0.0, "a", Placement("a", (GpuSlot("h1", 0), GpuSlot("h16", 0)))),))

    def estimate(cfg):
        return simulate_schedule(cfg, g, record, {"a": buckets}, [["a"]])["a"]

    plain = estimate(cfg).comm_mean_s
    assert plain == pytest.approx(job_bound_s(g, link_rates_mbps(g, cfg.scale), ("h1", "h16"), "ring", buckets,
                                              cfg.mtu), rel=1e-9)
    slow = estimate(dataclasses.replace(cfg, simulator=SimulatorConfig(latency_us=1000)))
    assert slow.comm_mean_s == pytest.approx(plain + 2 * 2 * 1e-3)  # 2 buckets x 2 sequential ring steps
    burst = estimate(dataclasses.replace(cfg, simulator=SimulatorConfig(token_buckets=True)))
    assert burst.comm_mean_s < plain


def test_marks_stats_of_hand_computed_jobs():
    """Five jobs: three marked (two found by the estimate, one missed), one unmarked estimated marked,
    one unmarked and unestimated. Detection counts, the errors on the marked jobs, Pearson's r and the
    rank correlation (ties sharing their mean rank) as computed by hand."""
    cs = [MarksComparison("p", "a", 100, 50.0, "contended"), MarksComparison("p", "b", 200, 300.0, "contended"),
          MarksComparison("p", "c", 10, 0.2, "contended"), MarksComparison("p", "d", 0, 3.0, "uncontended"),
          MarksComparison("p", "e", 0, 0.0, "uncontended")]
    st = marks_stats(cs)
    assert (st.n, st.marked, st.detected, st.false_marked) == (5, 3, 2, 1)
    assert (st.measured_total, st.estimated_total) == (310, pytest.approx(353.2))
    errors = sorted([0.5, 0.5, 0.98])  # |50-100|/100, |300-200|/200, |0.2-10|/10
    assert st.median_abs_rel_error == pytest.approx(errors[1])
    assert st.p90_abs_rel_error == pytest.approx(errors[1] + 0.8 * (errors[2] - errors[1]))
    assert st.pearson_r == pytest.approx(pearson_r([100, 200, 10, 0, 0], [50, 300, 0.2, 3, 0]))
    # ranks: measured 4, 5, 3, 1.5, 1.5; estimated 4, 5, 2, 3, 1
    assert st.rank_r == pytest.approx(pearson_r([4, 5, 3, 1.5, 1.5], [4, 5, 2, 3, 1]))
    by = marks_by_class(cs)
    assert list(by) == ["uncontended", "contended"]
    assert (by["uncontended"].marked, by["uncontended"].false_marked, by["uncontended"].median_abs_rel_error) == (
        0, 1, None)
    assert "3 marked: 2 found, 1 of the 2 others estimated marked" in st.line()
    assert marks_stats([]).line() == "no job to compare" and marks_to_dict([]) is None
    d = marks_to_dict(cs)
    assert d["all"]["detected"] == 2 and set(d["by_class"]) == {"uncontended", "contended"} and len(d["jobs"]) == 5
    assert d["jobs"][3]["rel_error"] is None and d["jobs"][0]["rel_error"] == pytest.approx(-0.5)
