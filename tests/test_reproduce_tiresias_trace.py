"""Tiresias's Table 5 on the public Philly trace: each scheduler's JCT over Tiresias-L's at the compared
cluster size, and the cluster's size swept."""

import csv
import os

import pytest

from reproduce.base import Context
from reproduce.tiresias_trace import PAPER, SWEPT, TiresiasTable5, factors, jct_stats, trace_jobs


def test_trace_jobs_are_the_first_philly_jobs_in_arrival_order():
    jobs = trace_jobs(50)
    assert len(jobs) == 50 and [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert all(j.workers >= 1 and j.duration_s > 0 for j in jobs)


def test_with_room_for_every_job_no_scheduler_differs_and_a_crowded_cluster_ranks_them():
    """On a cluster no job waits for, every scheduler's JCTs are the jobs' durations (factors of 1); on a
    crowded one, YARN-CS (no preemption, head-of-line blocking) is slower than Tiresias-L on average."""
    jobs = trace_jobs(300)
    roomy = factors(jobs, 100_000)
    assert roomy["Gandiva"] is None
    assert all(r[k] == pytest.approx(1.0) for label, r in roomy.items() if r is not None for k in r)
    assert jct_stats(jobs, "fifo", 100_000)["mean"] == pytest.approx(sum(j.duration_s for j in jobs) / len(jobs))
    crowded = factors(jobs, 32)
    assert crowded["YARN-CS"]["mean"] > 1.0


def test_the_reproduction_compares_every_figure_of_table_5_and_sweeps_the_clusters_size(tmp_path):
    """Fifteen figures (Gandiva's three not measured), a factors.csv per swept size and the gap's sweep."""
    fig = TiresiasTable5()
    fig.jobs, fig.gpus, fig.swept_gpus = 300, 64, (64, 32)
    out = fig.run(Context(str(tmp_path), lambda line: None, backend="durations"))
    assert len(out.figures) == 3 * len(PAPER)
    assert [f.ours for f in out.figures if "Gandiva" in f.quantity] == [None, None, None]
    (explanation,) = out.explanations
    assert explanation.sensitivity.quantity == SWEPT and [x for x, _ in explanation.points] == [64.0, 32.0]
    yarn = next(f for f in out.figures if f.quantity == "average JCT, YARN-CS over Tiresias-L")
    assert explanation.points[0][1] == pytest.approx(yarn.ours) and yarn.paper == (2.41, 2.41)
    with open(os.path.join(str(tmp_path), "factors.csv")) as f:
        rows = list(csv.DictReader(f))
    assert {r["gpus"] for r in rows} == {"64", "32"} and len(rows) == 2 * 4
    assert os.path.isfile(out.plot)
