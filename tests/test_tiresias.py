"""Tiresias: scheduling (continuous and discretized 2D-LAS / 2D-Gittins) and placement (Tiresias-F).

Vectors from ``shared/specs/tiresias.md`` §2.4 (the paper's Fig. 7 toy example) and Appendix A.
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from pathlib import Path

import pytest

from common.errors import ConfigError, JobError, PlacementError
from placement import Cluster, GpuSlot, JobRequest, MachineInfo, Placement, make_policy
from placement.tiresias_placement import TENSOR_SKEW, TiresiasPolicy, tensor_skew
from scheduling import (
    GittinsScheduler,
    JobStatus,
    LasScheduler,
    SrsfScheduler,
    SrtfScheduler,
    TiresiasScheduler,
)
from scheduling.driver import SimJob, simulate
from scheduling.tiresias import GITTINS_SAMPLES_PATH, ServiceDistribution, load_samples, parse_thresholds

TOY_JOBS = [SimJob("J1", 2, 2), SimJob("J2", 1, 8), SimJob("J3", 2, 6)]
TOY_D = [4, 8, 12]


def timeline(result, length: int = 16) -> str:
    """The job index running in each unit slot, as in the spec's table ('-' when idle)."""
    return " ".join("".join(n[1:] for n in result.running_at(t + 0.5)) or "-" for t in range(length))


@pytest.mark.parametrize("scheduler,slots,jcts,avg", [
    (SrsfScheduler(), "1 1 2 2 2 2 2 2 2 2 3 3 3 3 3 3", (2, 10, 16), 28 / 3),
    (LasScheduler(), "1 2 3 2 1 2 3 2 2 3 2 2 3 2 3 3", (5, 14, 16), 35 / 3),
    (GittinsScheduler(samples_gpu_s=TOY_D), "1 1 2 2 2 2 2 2 2 2 3 3 3 3 3 3", (2, 10, 16), 28 / 3),
    (GittinsScheduler(variant="r_compat", samples_gpu_s=TOY_D),
     "1 1 2 2 2 2 3 3 2 2 2 2 3 3 3 3", (2, 12, 16), 10.0),
], ids=["srsf", "las", "gittins_textbook", "gittins_r_compat"])
def test_toy_example_timelines_and_average_jct(scheduler, slots, jcts, avg):
    """The Fig. 7 toy example (2 GPUs, re-decided every unit) gives the spec's exact schedules and JCTs."""
    result = simulate(TOY_JOBS, scheduler, total_gpus=2, period_s=1.0)
    assert timeline(result) == slots
    assert tuple(result.jct_s[n] for n in ("J1", "J2", "J3")) == jcts
    assert result.avg_jct_s == pytest.approx(avg)


def test_toy_example_paper_rounded_values():
    """Rounded to one decimal the averages are the paper's: SRSF 9.3, 2D-LAS 11.7, 2D-Gittins ([R]) 10."""
    runs = {
        "srsf": SrsfScheduler(), "las": LasScheduler(),
        "gittins": GittinsScheduler(variant="r_compat", samples_gpu_s=TOY_D),
    }
    avg = {k: round(simulate(TOY_JOBS, s, 2, period_s=1.0).avg_jct_s, 1) for k, s in runs.items()}
    assert avg == {"srsf": 9.3, "las": 11.7, "gittins": 10.0}


@pytest.mark.parametrize("variant,expected", [
    ("textbook", "1/8 1/7 1/6 1/3 1/6 1/5 1/4 1/2 1/4 1/3 1/2 1"),
    ("r_compat", "1/8 1/8 1/8 1/6 1/10 1/10 1/10 1/9 1/12 1/12 1/12 1/12"),
])
def test_gittins_index_table(variant, expected):
    """The sup-form Gittins index for D = {4, 8, 12} matches the spec's table for a = 0..11."""
    dist = ServiceDistribution(TOY_D)
    got = " ".join(str(Fraction(dist.sup_index(a, variant)).limit_denominator(1000)) for a in range(12))
    assert got == expected


def test_gittins_index_beyond_every_sample_is_zero():
    """A job older than every sample gets index 0, the lowest priority (⚠ A9)."""
    dist = ServiceDistribution(TOY_D)
    assert dist.sup_index(12) == 0.0 and dist.index(20, 100) == 0.0


def test_fixed_quantum_index_matches_direct_formula():
    """The O(log n) fixed-quantum index equals the spec's direct computation on the [R] samples."""
    samples = load_samples()
    dist = ServiceDistribution(samples)
    for a, delta in [(0, 3200), (500, 2700), (3000, 200), (1e5, 3250)]:
        surv = [s for s in samples if s > a]
        p = sum(1 for s in surv if s - a <= delta) / len(surv)
        e = sum(min(s - a, delta) for s in surv) / len(surv)
        e_r = sum((s if s <= a + delta else delta) for s in surv) / len(surv)
        assert dist.index(a, delta) == pytest.approx(p / e)
        assert dist.index(a, delta, "r_compat") == pytest.approx(p / e_r)


def test_r_samples_file_summary():
    """[R]'s sample file has 1001 samples from 121 GPU-s, 62.5% of them at most 3600 GPU-s."""
    samples = load_samples(GITTINS_SAMPLES_PATH)
    assert len(samples) == 1001 and min(samples) == 121
    assert sum(1 for s in samples if s <= 3600) / len(samples) == pytest.approx(0.625, abs=0.001)


@pytest.mark.parametrize("workers,demote_s", [(4, 800.0), (8, 400.0), (1, 3200.0)])
def test_demotion_timing(workers, demote_s):
    """With θ = 3200 GPU-s a job running without interruption is demoted after 3200 / workers seconds."""
    sched = TiresiasScheduler(thresholds_gpu_s="3200")
    first = sched.schedule([JobStatus("a", workers)], total_gpus=8, now_s=0.0)
    assert first.start == ("a",) and first.wake_s == pytest.approx(demote_s)
    before = JobStatus("a", workers, running=True, service_gpu_s=workers * (demote_s - 1))
    sched.schedule([before], 8, demote_s - 1)
    assert sched.queue_of("a") == 0
    sched.schedule([JobStatus("a", workers, running=True, service_gpu_s=3200.0)], 8, demote_s)
    assert sched.queue_of("a") == 1 and sched.n_demotions == 1


def test_promotion_timing_and_reset():
    """knob = 2: a Q2 job that ran 500 s is promoted after 1000 s of waiting, with t and δ reset."""
    sched = TiresiasScheduler(thresholds_gpu_s="500", promote_knob=2)
    jobs = [SimJob("a", 1, 10_000), SimJob("b", 1, 10_000, arrival_s=500)]
    result = simulate(jobs, sched, total_gpus=1)
    assert result.running_at(250) == ("a",)
    assert result.running_at(1499) == ("b",), "a is demoted at 500 s and waits behind b"
    assert result.running_at(1500.5) == ("a",), "a is promoted 1000 s later and preempts b (now in Q2)"
    assert sched.n_promotions >= 1


def test_promotion_resets_queue_service():
    """Right after promotion the job is in Q1 with zero queue service (its real service is kept)."""
    sched = TiresiasScheduler(thresholds_gpu_s="500", promote_knob=2)
    sched.schedule([JobStatus("a", 1)], 1, 0.0)
    ran = JobStatus("a", 1, running=True, service_gpu_s=500)
    d = sched.schedule([ran, JobStatus("b", 1, arrival_s=500)], 1, 500.0)
    assert sched.queue_of("a") == 1 and d.preempt == ("a",) and d.start == ("b",)
    assert d.wake_s == pytest.approx(1000.0), "the earlier internal event: b's demotion, before a's promotion"
    waiting = JobStatus("a", 1, service_gpu_s=500)
    d = sched.schedule([waiting, JobStatus("b", 1, 500, running=True, service_gpu_s=500)], 1, 1000.0)
    assert sched.queue_of("a") == 1 and sched.queue_of("b") == 1 and d.preempt == ()
    d = sched.schedule([waiting, JobStatus("b", 1, 500, running=True, service_gpu_s=1000)], 1, 1500.0)
    assert sched.queue_of("a") == 0 and sched.queue_service_gpu_s("a") == 0.0
    assert d.start == ("a",) and d.preempt == ("b",)


def test_no_preemption_with_a_single_las_queue():
    """With K = 1 (θ = ∞) Tiresias-L never preempts, whatever the arrivals."""
    rng = random.Random(5)
    jobs = [SimJob(f"j{i}", rng.choice([1, 2, 4, 8]), rng.uniform(10, 500), rng.uniform(0, 2000))
            for i in range(40)]
    result = simulate(jobs, TiresiasScheduler(thresholds_gpu_s="inf"), total_gpus=8)
    assert result.preemptions == 0 and len(result.jct_s) == 40


def test_las_queue_is_fifo_by_start_not_arrival():
    """Within a queue running jobs stay ahead of waiting ones, so an earlier arrival never preempts."""
    sched = TiresiasScheduler(thresholds_gpu_s="1e9")
    big = JobStatus("big", 4, arrival_s=0.0)
    small = JobStatus("small", 1, arrival_s=1.0)
    d = sched.schedule([big, small], total_gpus=3, now_s=1.0)
    assert d.start == ("small",), "big does not fit and is skipped"
    d = sched.schedule([big, JobStatus("small", 1, 1.0, running=True, service_gpu_s=1)], 4, 2.0)
    assert d.order == ("small", "big") and d.preempt == ()


def test_new_arrival_preempts_a_demoted_job():
    """Under Tiresias-L an arrival (Q1) preempts a job already demoted to Q2 when GPUs are short."""
    sched = TiresiasScheduler(thresholds_gpu_s="100")
    sched.schedule([JobStatus("old", 2)], 2, 0.0)
    d = sched.schedule([JobStatus("old", 2, running=True, service_gpu_s=200),
                        JobStatus("new", 2, arrival_s=100)], 2, 100.0)
    assert d.order == ("new", "old") and d.preempt == ("old",) and d.start == ("new",)


def test_discretized_gittins_resorts_running_jobs():
    """Tiresias-G re-sorts Q1 by index and preempts a running job with a lower index; Tiresias-L does not."""
    x = JobStatus("x", 1, arrival_s=0.0, running=True, service_gpu_s=150)
    y = JobStatus("y", 1, arrival_s=1.0)
    g = TiresiasScheduler(priority="gittins", thresholds_gpu_s="2000", samples_gpu_s=[100, 1000])
    assert g.gittins_index(150, 0) == pytest.approx(1 / 850)
    assert g.gittins_index(0, 0) == pytest.approx(1 / 550)
    d = g.schedule([x, y], 1, 10.0)
    assert d.order == ("y", "x") and d.preempt == ("x",) and d.start == ("y",)
    d = TiresiasScheduler(thresholds_gpu_s="2000").schedule([x, y], 1, 10.0)
    assert d.order == ("x", "y") and d.preempt == ()


def test_gittins_delta_modes_differ_as_specified():
    """'literal' uses Δ = Q^hi, 'to_threshold' Δ = Q^hi - a; they agree only at a = 0."""
    kw = {"priority": "gittins", "thresholds_gpu_s": "3200", "samples_gpu_s": load_samples()}
    lit = TiresiasScheduler(gittins_delta="literal", **kw)
    thr = TiresiasScheduler(gittins_delta="to_threshold", **kw)
    assert lit.gittins_index(0, 0) == pytest.approx(thr.gittins_index(0, 0))
    assert lit.gittins_index(1000, 0) != pytest.approx(thr.gittins_index(1000, 0))
    assert thr.gittins_index(1000, 0) == pytest.approx(thr.dist.index(1000, 2200))


def test_tiresias_runs_a_mixed_workload_to_completion():
    """Tiresias-L and -G with K = 3 and promotion finish a seeded random workload without over-commit."""
    rng = random.Random(11)
    jobs = [SimJob(f"j{i}", rng.choice([1, 2, 4, 8, 16]), rng.uniform(60, 3000), rng.uniform(0, 4000))
            for i in range(60)]
    for sched in (TiresiasScheduler(thresholds_gpu_s="3600:7200", promote_knob=4),
                  TiresiasScheduler(priority="gittins", thresholds_gpu_s="3600:7200", promote_knob=4)):
        result = simulate(jobs, sched, total_gpus=32)
        assert sorted(result.jct_s) == sorted(j.name for j in jobs)
        assert all(result.jct_s[j.name] >= j.duration_s - 1e-6 for j in jobs)


def test_same_input_same_output():
    """Two fresh Tiresias schedulers produce identical runs for the same workload."""
    rng = random.Random(2)
    jobs = [SimJob(f"j{i}", rng.choice([1, 2, 4]), rng.uniform(10, 900), rng.uniform(0, 900))
            for i in range(30)]
    a = simulate(jobs, TiresiasScheduler(thresholds_gpu_s="400", promote_knob=2), 8)
    b = simulate(jobs, TiresiasScheduler(thresholds_gpu_s="400", promote_knob=2), 8)
    assert a == b


def test_bad_tiresias_parameters():
    """Bad thresholds, knob, priority or Gittins mode are ConfigErrors naming the value."""
    with pytest.raises(ConfigError, match="increasing"):
        parse_thresholds("7200:3600")
    with pytest.raises(ConfigError, match="expected numbers"):
        parse_thresholds("abc")
    with pytest.raises(ConfigError, match="promote_knob"):
        TiresiasScheduler(promote_knob=0)
    with pytest.raises(ConfigError, match="valid: las, gittins"):
        TiresiasScheduler(priority="srtf")
    with pytest.raises(ConfigError, match="gittins_delta"):
        TiresiasScheduler(gittins_delta="whatever")
    with pytest.raises(ConfigError, match="cannot read"):
        TiresiasScheduler(priority="gittins", samples_path="/nonexistent/samples.csv")
    assert TiresiasScheduler(thresholds_gpu_s="inf").limits_gpu_s == (math.inf,)


def test_oracles_need_remaining_service():
    """SRSF/SRTF raise a JobError naming the job when remaining service is unknown."""
    with pytest.raises(JobError, match="'a'.*remaining_gpu_s"):
        SrsfScheduler().schedule([JobStatus("a", 1)], 1, 0.0)


def test_srtf_orders_by_time_srsf_by_service():
    """SRTF ranks by remaining time, SRSF by remaining GPU-seconds (§6.3-6.4)."""
    wide = JobStatus("wide", 4, remaining_gpu_s=40)     # 10 s left on 4 GPUs
    narrow = JobStatus("narrow", 1, remaining_gpu_s=20)  # 20 s left on 1 GPU
    assert SrsfScheduler().schedule([wide, narrow], 8, 0.0).order == ("narrow", "wide")
    assert SrtfScheduler().schedule([wide, narrow], 8, 0.0).order == ("wide", "narrow")


def test_time_going_backwards_is_rejected():
    """Tiresias refuses a call with an earlier now_s than the previous one."""
    sched = TiresiasScheduler()
    sched.schedule([JobStatus("a", 1)], 1, 10.0)
    with pytest.raises(JobError, match="backwards"):
        sched.schedule([JobStatus("a", 1)], 1, 5.0)


# --- Tiresias placement (Tiresias-F, titan.md §3.3 / tiresias.md §4) ---

TENSOR_FILE = (Path(__file__).resolve().parents[1] / "data" / "tiresias"
               / "model_large_tensors_mb.json")
SENSITIVE = {"vgg11", "vgg16", "vgg19", "alexnet"}


def placement_cluster(free: list[int], gpus: int = 4) -> Cluster:
    """Machines m0.. with ``gpus`` GPUs and the given free GPUs, in one rack."""
    c = Cluster([MachineInfo(f"m{i}", gpus, rack="r0", pod="p0") for i in range(len(free))])
    c.set_background({f"m{i}": gpus - f for i, f in enumerate(free)})
    return c


def test_skew_table_matches_the_tensor_file():
    """TENSOR_SKEW is largest / total over each model's >= 1 MB tensors in Tiresias' list."""
    models = json.loads(TENSOR_FILE.read_text())["models"]
    assert set(models) == set(TENSOR_SKEW)
    for name, sizes in models.items():
        assert TENSOR_SKEW[name] == pytest.approx(max(sizes) / sum(sizes), abs=5e-4)


@pytest.mark.parametrize("pack_limit", [0.3, 0.5])
def test_exactly_vgg_and_alexnet_are_consolidated(pack_limit):
    """With PACKLIMIT 0.3 (Tiresias) or 0.5 (Titan) exactly VGG11/16/19 and AlexNet are sensitive."""
    policy = TiresiasPolicy(pack_limit=pack_limit)
    assert {m for m in TENSOR_SKEW if policy.sensitive(m)} == SENSITIVE
    assert not policy.sensitive("bert_base") and tensor_skew("bert_base") == pytest.approx(0.214, abs=1e-3)


def test_vgg16_matches_elasticflow_on_the_testbed_layout():
    """titan.md §3.3: for VGG-16 (8 workers) Tiresias makes ElasticFlow's choice, two idle machines."""
    view = placement_cluster([1, 1, 1, 2, 2, 3, 4, 4]).view()
    (t,) = make_policy("tiresias").place([JobRequest("j", "vgg16", 8)], view)
    (e,) = make_policy("elasticflow").place([JobRequest("j", "vgg16", 8)], view)
    assert t.slots == e.slots and t.machines == ("m6", "m7")


def test_sensitive_job_uses_idle_machines_plus_best_fit_remainder():
    """A 6-worker VGG job on K = 4: one idle machine plus the best-fit machine for the other 2."""
    view = placement_cluster([3, 2, 4, 4]).view()
    (p,) = make_policy("tiresias").place([JobRequest("j", "vgg16", 6)], view)
    assert [s.machine for s in p.slots] == ["m2"] * 4 + ["m1"] * 2


def test_sensitive_job_waits_unless_non_strict():
    """A VGG job that cannot be consolidated waits; with strict=false it takes the fewest machines now."""
    view = placement_cluster([3, 3, 2]).view()
    assert make_policy("tiresias").place([JobRequest("j", "vgg19", 4)], view) == []
    (p,) = make_policy("tiresias,strict=false").place([JobRequest("j", "vgg19", 4)], view)
    assert [s.machine for s in p.slots] == ["m0"] * 3 + ["m1"]


def test_insensitive_job_spreads_by_free_gpus():
    """A ResNet job takes the machines with the most free GPUs first (no NIC load yet)."""
    view = placement_cluster([2, 3, 4, 1]).view()
    (p,) = make_policy("tiresias").place([JobRequest("j", "resnet50", 6)], view)
    assert [s.machine for s in p.slots] == ["m2"] * 4 + ["m1"] * 2


def test_insensitive_job_avoids_machines_with_cross_machine_jobs():
    """Machines hosting a job that spans machines (NIC load) come after unloaded ones."""
    c = placement_cluster([4, 4, 4], gpus=4)
    c.apply(Placement("x", (GpuSlot("m0", 0), GpuSlot("m1", 0))))
    (p,) = make_policy("tiresias").place([JobRequest("j", "resnet50", 2)], c.view())
    assert p.machines == ("m2",)
    placed = make_policy("tiresias").place(
        [JobRequest("a", "resnet50", 6), JobRequest("b", "resnet50", 1)], placement_cluster([4, 4, 2]).view())
    assert [q.machines for q in placed] == [("m0", "m1"), ("m2",)], "a's machines carry its traffic now"


def test_unknown_model_is_an_error():
    """An unknown model fails with a PlacementError listing the valid models."""
    with pytest.raises(PlacementError, match="unknown model for Tiresias placement 'gpt5'.*vgg16"):
        make_policy("tiresias").place([JobRequest("j", "gpt5", 1)], placement_cluster([4]).view())
