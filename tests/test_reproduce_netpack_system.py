"""NetPack's system figures: its simulator against its testbed (Fig. 6: the regression and its pairing of
runs) and its placement's time (Fig. 10: the replay that times ``place`` alone)."""

import json
import os
from types import SimpleNamespace

import pytest

from reproduce.base import Context
from reproduce.netpack_system import (
    NetPackFig6,
    NetPackFig10,
    PlacementTime,
    paired,
    philly_jobs,
    placement_time,
    regression,
)


def test_a_regression_through_points_on_a_line_is_that_line_with_r_one():
    """y = 2x + 1 exactly: slope 2, intercept 1, r 1 (and -1 falling); too few points or a constant
    side determine no line."""
    up = regression([(1, 3), (2, 5), (4, 9)])
    assert (up.slope, up.intercept, up.r, up.r_squared) == pytest.approx((2.0, 1.0, 1.0, 1.0))
    assert regression([(1, 3), (2, 1), (3, -1)]).r == pytest.approx(-1.0)
    scattered = regression([(0, 0), (1, 1), (2, 0), (3, 1)])
    assert scattered.r == pytest.approx(0.4472135955) and scattered.r_squared == pytest.approx(0.2)
    assert regression([(1, 1), (2, 2)]) is None
    assert regression([(1, 1), (1, 2), (1, 3)]) is None and regression([(1, 2), (2, 2), (3, 2)]) is None


def test_runs_pair_on_value_seed_and_policy_among_the_baselines_with_a_figure_on_both_sides():
    """A measured run pairs with the simulated run of its value, seed and policy; NetPack's own (1 on both
    sides by construction) and runs missing a figure on either side are left out."""
    def row(value, policy, norm, seed=1):
        return SimpleNamespace(value=value, seed=seed, policy=policy, jct_norm=norm)

    measured = [row(0, "netpack", 1.0), row(0, "tetris", 1.2), row(25, "tetris", 1.1), row(25, "optimus", None),
                row(50, "tetris", 1.3), row(0, "tetris", 1.4, seed=2)]
    simulated = [row(0, "netpack", 1.0), row(0, "tetris", 1.5), row(25, "tetris", 1.05), row(25, "optimus", 1.0),
                 row(50, "tetris", None)]
    assert paired(measured, simulated) == [(1.5, 1.2), (1.05, 1.1)]


def test_fig6_sets_each_baselines_run_beside_the_same_run_on_the_other_back_end(tmp_path, monkeypatch):
    """With the simulator standing in for the testbed, the two sweeps are the same runs: every point lies on
    testbed = simulator, r 1, and both sweeps' directories are kept."""
    monkeypatch.setattr(NetPackFig6, "vary", "ina.pat_gbps=0,25")
    fig = NetPackFig6()
    out = fig.run(Context(str(tmp_path), lambda line: None, backend="sim"))
    (r,) = out.figures
    assert r.ours == pytest.approx(1.0)
    fit_note = next(n for n in out.notes if n.startswith("10 points"))
    assert "r 1.000, R² 1.000; testbed = 1 x simulator + " in fit_note
    assert [os.path.basename(d) for d in out.runs] == ["testbed", "simulator"] and os.path.isfile(out.plot)
    with open(os.path.join(out.runs[0], "sweep.json")) as f:
        assert json.load(f)["runs_done"] == 2  # both PATs, NetPack and its 5 baselines in each


def test_placement_time_counts_the_calls_and_the_jobs_placed():
    """One call per arrival that fits the cluster; a cluster with room for every job places them all,
    one too small for the largest skips it; the times are the calls' own."""
    jobs = philly_jobs(120)
    roomy = placement_time(1_000, jobs)
    assert (roomy.calls, roomy.placed) == (120, 120) and roomy.seconds > 0
    assert roomy.per_job_s == pytest.approx(roomy.seconds / 120) == roomy.per_call_s
    small = placement_time(2, jobs)  # 8 GPUs
    assert small.calls == sum(j.gpus <= 8 for j in jobs) and small.placed <= small.calls
    alone = placement_time(2, jobs, hold=False)  # every job gone before the next: all that fit are placed
    assert alone.placed == alone.calls == small.calls
    assert PlacementTime(4, 0, 0, 0.0).per_call_s is None and PlacementTime(4, 0, 3, 1.0).per_job_s is None


def test_fig10_compares_the_per_job_time_at_the_papers_sizes_and_the_total(tmp_path):
    """On the paper's two sizes, a short trace: each size's time per job, their growth and the total."""
    fig = NetPackFig10()
    fig.jobs = 200
    out = fig.run(Context(str(tmp_path), lambda line: None, backend="placement"))
    by = {f.quantity: f for f in out.figures}
    assert set(by) == {"time per placed job at 100 servers", "time per placed job at 10,000 servers",
                       "its growth from 100 to 10,000 servers", "total time for the 200 jobs at 10,000 servers"}
    small, large = by["time per placed job at 100 servers"].ours, by["time per placed job at 10,000 servers"].ours
    assert by["its growth from 100 to 10,000 servers"].ours == pytest.approx(large / small)
    assert by["total time for the 200 jobs at 10,000 servers"].ours == pytest.approx(large * 200)
    assert by["its growth from 100 to 10,000 servers"].paper == pytest.approx((1.36e-2 / 3.25e-4,) * 2)
    assert any(n.startswith("the queue, which the paper does not describe: with each job placed into an empty "
                            "cluster") for n in out.notes)
    assert os.path.isfile(out.plot)
