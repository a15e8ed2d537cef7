"""The cluster at each arrival in the Titan paper's metrics (experiment/reporting/cluster_metrics.py), worked by
hand, and every run's cluster.csv, summary figures, report table and plot."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import random

import pytest
from conftest import ROOT, ranks_on

from experiment.reporting import cluster_metrics as cm

GPUS = {"m1": 4, "m2": 4, "m3": 4}
BACKGROUND = {"m3": 1}
A = cm.JobSpan("a", 0.0, 100.0, ranks_on("a", ["m1", "m1", "m2", "m2"]))  # 2 + 2 GPUs, crosses machines
B = cm.JobSpan("b", 50.0, 150.0, ranks_on("b", ["m1", "m1"]))  # 2 GPUs on m1
TERMS = {"a": cm.JobTerms(4, 100.0, lambda p: 6.0e9), "b": cm.JobTerms(2, 300.0, lambda p: None)}


def test_samples_at_each_arrival_worked_by_hand():
    """Three machines of 4 GPUs, one GPU of m3 held by background. Job a (4 GPUs over m1 and m2, 6 GB of
    cross-machine traffic per allreduce, duration 100 s) runs 0-100 s, job b (2 GPUs on m1, a collective
    without a pattern, trace duration 300 s) 50-150 s; arrivals at 0, 50 and 120 (twice).

    t = 0: busy m1 2, m2 2, m3 1: 3 used machines; idle shares 2/4, 2/4, 3/4: fragmentation rate
    (0.5 + 0.5 + 0.75) / 3 = 0.5833; all 3 partly used; overhead 6 GB; profit rate K P / (N T) with K 1,
    P = 4 x 100, N 3, T 100: 400 / 300 = 1.3333.
    t = 50: m1 is full (4), m2 2, m3 1: fragmentation (0 + 0.5 + 0.75) / 3 = 0.4167, 2 partly used;
    overhead 6 GB and b not in it; K 2, P (400 + 600) / 2 = 500, T 200: 2 x 500 / (3 x 200) = 1.6667.
    t = 120: a has ended (a span does not cover its end); m1 2, m3 1: 2 used machines, fragmentation
    (0.5 + 0.75) / 2 = 0.625; K 1, P 600, T 300, N 2: 600 / 600 = 1.
    """
    s0, s50, s120 = cm.samples(GPUS, BACKGROUND, [A, B], [0.0, 50.0, 120.0, 120.0], TERMS)
    assert (s0.used_machines, s0.busy_gpus, s0.jobs_running) == (3, 5, 1)
    assert s0.fragmentation_rate == pytest.approx(1.75 / 3) and s0.partly_used_share == 1.0
    assert s0.non_idle_share == 1.0 and s0.comm_overhead_bytes == 6.0e9 and s0.jobs_not_in_overhead == 0
    assert s0.profit_rate == pytest.approx(4 / 3)
    assert s50.fragmentation_rate == pytest.approx(1.25 / 3) and s50.partly_used_share == pytest.approx(2 / 3)
    assert (s50.comm_overhead_bytes, s50.jobs_not_in_overhead, s50.profit_rate) == (6.0e9, 1, pytest.approx(5 / 3))
    assert (s120.time_s, s120.used_machines, s120.jobs_running) == (120.0, 2, 1)
    assert s120.fragmentation_rate == pytest.approx(0.625) and s120.non_idle_share == pytest.approx(2 / 3)
    assert (s120.comm_overhead_bytes, s120.profit_rate) == (0.0, pytest.approx(1.0))


def test_machine_hours_integrate_the_machines_in_use_while_jobs_run():
    """0-50 s: m1, m2 and m3 (its background) in use; 50-100 s: the same 3; 100-150 s: m1 and m3. That is
    3 x 100 + 2 x 50 = 400 machine-seconds; nothing before the first start or after the last end."""
    assert cm.machine_hours(GPUS, BACKGROUND, [A, B], TERMS) == pytest.approx(400 / 3600)
    assert cm.machine_hours(GPUS, BACKGROUND, [], TERMS) == 0.0


def test_the_sweep_agrees_with_recounting_every_sample_from_scratch():
    """Random spans on 8 machines: each sample equals a direct recount of the spans covering it."""
    rng = random.Random(3)
    gpus = {f"m{i}": 4 for i in range(8)}
    spans, terms = [], {}
    for k in range(40):
        start = rng.uniform(0, 100)
        machines = [f"m{rng.randrange(8)}" for _ in range(rng.randint(1, 3))]
        spans.append(cm.JobSpan(f"j{k}", start, start + rng.uniform(1, 30), ranks_on(f"j{k}", machines)))
        terms[f"j{k}"] = cm.JobTerms(len(machines), rng.uniform(1, 50), lambda p: float(len(set(p.machines)) - 1))
    arrivals = sorted(rng.uniform(0, 120) for _ in range(30))
    for s in cm.samples(gpus, {}, spans, arrivals, terms):
        running = [sp for sp in spans if sp.start_s <= s.time_s < sp.end_s]
        busy = {m: 0 for m in gpus}
        for sp in running:
            for slot in sp.placement.slots:
                busy[slot.machine] += 1
        used = [m for m in gpus if busy[m]]
        assert (s.jobs_running, s.used_machines, s.busy_gpus) == (len(running), len(used), sum(busy.values()))
        assert s.comm_overhead_bytes == pytest.approx(sum(len(set(sp.placement.machines)) - 1 for sp in running))
        if used:
            assert s.fragmentation_rate == pytest.approx(sum((4 - busy[m]) / 4 for m in used) / len(used))


def test_a_pattern_s_pair_totals_give_titan_s_cross_machine_traffic():
    """X(x) from the pair totals equals Titan's cross-machine traffic of the pattern (§1.4), on random
    placements of every collective."""
    from placement.titan_patterns import COLLECTIVES, comm_pattern, cross_traffic_bytes, pair_totals

    rng = random.Random(5)
    for collective in COLLECTIVES:
        for p in (2, 3, 6, 8):
            pattern = comm_pattern(collective, p, 1.0e6)
            totals = pair_totals(pattern)
            for _ in range(5):
                assign = [rng.randrange(3) for _ in range(p)]
                assert sum(v for (a, b), v in totals.items() if assign[a] != assign[b]) == pytest.approx(
                    cross_traffic_bytes(pattern, assign))


def test_every_run_writes_its_cluster_and_reports_it(tmp_path):
    """The default experiment on the simulator: each policy's cluster.csv (one arrival: every job at 0),
    the figures in summary.json (consolidation on fewer machines than spreading), the report's table, and
    the saved run read back."""
    from experiment import make_backend
    from experiment.config import schema as config
    from experiment.reporting.rerender import load_run
    from experiment.run.driver import run_experiment

    cfg = config.load(os.path.join(ROOT, "experiments", "default.yaml"))
    cfg = dataclasses.replace(cfg, policies=("consolidate", "spread"), plots=False)
    run_dir = run_experiment(cfg, make_backend("sim"), say=lambda m: None, run_dir=str(tmp_path / "run"),
                             stream=io.StringIO())
    with open(os.path.join(run_dir, "summary.json")) as f:
        policies = {p["policy"]: p for p in json.load(f)["policies"]}
    for name in ("consolidate", "spread"):
        (sample,) = cm.read_csv(os.path.join(run_dir, name, "cluster.csv"))
        figures = policies[name]["cluster"]
        assert sample.time_s == 0.0 and sample.jobs_running == len(cfg.jobs)
        assert figures["used_machines_mean"] == sample.used_machines and figures["samples"] == 1
        assert figures["machine_hours"] > 0
    used = {name: policies[name]["cluster"]["used_machines_mean"] for name in policies}
    assert used["consolidate"] < used["spread"]
    with open(os.path.join(run_dir, "report.txt")) as f:
        assert "The cluster at each arrival (Titan's metrics" in f.read()
    saved = {s.policy: s.cluster for s in load_run(run_dir).summaries}
    assert saved["spread"] == cm.ClusterFigures(**policies["spread"]["cluster"])
