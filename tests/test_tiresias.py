"""Tiresias: scheduling (continuous and discretized 2D-LAS / 2D-Gittins) and placement (Tiresias-F).

Vectors from ``docs/resolutions.md`` (Tiresias) §2.4 (the paper's Fig. 7 toy example) and Appendix A.
"""

from __future__ import annotations

import csv
import json
import math
import random
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import REPO

from common.errors import ConfigError, JobError, PlacementError
from experiment.run.durations import duration_job, run_durations
from jobs.models import MIB, MODELS
from placement import Cluster, GpuSlot, JobRequest, MachineInfo, Placement, make_policy
from placement.tiresias_placement import TENSOR_SKEW, TRACE_MODEL_SKEW, TiresiasPolicy, tensor_skew
from scheduling import (
    GittinsScheduler,
    JobStatus,
    LasScheduler,
    SmallestFirstScheduler,
    SrsfScheduler,
    SrtfScheduler,
    TiresiasScheduler,
    make_scheduler,
)
from scheduling.tiresias import (
    GITTINS_SAMPLES_PATH,
    RGittinsTable,
    ServiceDistribution,
    _round_half_up,
    load_samples,
    parse_thresholds,
)

TOY_JOBS = [duration_job("J1", 2, 2), duration_job("J2", 1, 8), duration_job("J3", 2, 6)]
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
    result = run_durations(TOY_JOBS, scheduler, total_gpus=2, period_s=1.0)
    assert timeline(result) == slots
    assert tuple(result.jct_s[n] for n in ("J1", "J2", "J3")) == jcts
    assert result.avg_jct_s == pytest.approx(avg)


def test_toy_example_paper_rounded_values():
    """Rounded to one decimal the averages are the paper's: SRSF 9.3, 2D-LAS 11.7, 2D-Gittins ([R]) 10."""
    runs = {
        "srsf": SrsfScheduler(), "las": LasScheduler(),
        "gittins": GittinsScheduler(variant="r_compat", samples_gpu_s=TOY_D),
    }
    avg = {k: round(run_durations(TOY_JOBS, s, 2, period_s=1.0).avg_jct_s, 1) for k, s in runs.items()}
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
    """knob = 2: a job that ran 500 s since its reset is promoted after 1000 s of waiting and preempts a Q2 job.

    a is demoted at 500 s and b runs; b, demoted at 1000 s, is appended behind the waiting a
    ([R], §3.4), so a runs and b waits in Q2 from 1000 s; b is promoted 1000 s later (2000 s)
    and preempts a. (Before b went behind a this test had a promoted at 1500 s instead.)
    """
    sched = TiresiasScheduler(thresholds_gpu_s="500", promote_knob=2)
    jobs = [duration_job("a", 1, 10_000), duration_job("b", 1, 10_000, arrival_s=500)]
    result = run_durations(jobs, sched, total_gpus=1)
    assert result.running_at(250) == ("a",)
    assert result.running_at(750) == ("b",), "a is demoted at 500 s and waits behind the new b"
    assert result.running_at(1999) == ("a",), "b, demoted at 1000 s, goes behind the waiting a"
    assert result.running_at(2000.5) == ("b",), "b is promoted 1000 s later and preempts a (in Q2)"
    assert sched.n_promotions >= 1


def test_promotion_resets_queue_service():
    """Right after promotion the job is in Q1 with zero queue service (its real service is kept)."""
    sched = TiresiasScheduler(thresholds_gpu_s="500", promote_knob=2)
    sched.schedule([JobStatus("a", 1)], 1, 0.0)
    ran = JobStatus("a", 1, running=True, service_gpu_s=500)
    d = sched.schedule([ran, JobStatus("b", 1, arrival_s=500)], 1, 500.0)
    assert sched.queue_of("a") == 1 and d.preempt == ("a",) and d.start == ("b",)
    assert d.wake_s == pytest.approx(1000.0), "the earlier internal event: b's demotion, before a's promotion"
    d = sched.schedule([JobStatus("a", 1, service_gpu_s=500), JobStatus("b", 1, 500, running=True,
                                                                       service_gpu_s=500)], 1, 1000.0)
    assert sched.queue_of("a") == 1 and sched.queue_of("b") == 1
    assert d.preempt == ("b",) and d.start == ("a",), "demoted b is appended behind the waiting a"
    assert d.wake_s == pytest.approx(2000.0), "b's promotion"
    d = sched.schedule([JobStatus("a", 1, running=True, service_gpu_s=1500), JobStatus("b", 1, 500,
                                                                                      service_gpu_s=500)], 1, 2000.0)
    assert sched.queue_of("b") == 0 and sched.queue_service_gpu_s("b") == 0.0
    assert d.start == ("b",) and d.preempt == ("a",)


def test_no_preemption_with_a_single_las_queue():
    """With K = 1 (θ = ∞) Tiresias-L never preempts, whatever the arrivals."""
    rng = random.Random(5)
    jobs = [duration_job(f"j{i}", rng.choice([1, 2, 4, 8]), rng.uniform(10, 500), rng.uniform(0, 2000))
            for i in range(40)]
    result = run_durations(jobs, TiresiasScheduler(thresholds_gpu_s="inf"), total_gpus=8)
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
    jobs = [duration_job(f"j{i}", rng.choice([1, 2, 4, 8, 16]), rng.uniform(60, 3000), rng.uniform(0, 4000))
            for i in range(60)]
    for sched in (TiresiasScheduler(thresholds_gpu_s="3600:7200", promote_knob=4),
                  TiresiasScheduler(priority="gittins", thresholds_gpu_s="3600:7200", promote_knob=4)):
        result = run_durations(jobs, sched, total_gpus=32)
        assert sorted(result.jct_s) == sorted(j.name for j in jobs)
        assert all(result.jct_s[j.name] >= j.duration_s - 1e-6 for j in jobs)


def test_same_input_same_output():
    """Two fresh Tiresias schedulers produce identical runs for the same workload."""
    rng = random.Random(2)
    jobs = [duration_job(f"j{i}", rng.choice([1, 2, 4]), rng.uniform(10, 900), rng.uniform(0, 900))
            for i in range(30)]
    a = run_durations(jobs, TiresiasScheduler(thresholds_gpu_s="400", promote_knob=2), 8)
    b = run_durations(jobs, TiresiasScheduler(thresholds_gpu_s="400", promote_knob=2), 8)
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
    with pytest.raises(ConfigError, match="valid: exact, r_compat"):
        TiresiasScheduler(timing="late")
    with pytest.raises(ConfigError, match="finite"):
        RGittinsTable([100, 200], math.inf)
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


def test_smallest_first_serves_fewest_gpus_first_and_preempts_for_them():
    """SF (Table 1) ranks by GPU count alone, ties by arrival, without any job length, and a
    narrower arrival preempts a running wider job when the GPUs run short."""
    running = JobStatus("wide", 6, arrival_s=0.0, running=True, service_gpu_s=600.0)
    arrived = JobStatus("narrow", 4, arrival_s=100.0)
    early = JobStatus("narrow0", 4, arrival_s=50.0)
    d = make_scheduler("sf").schedule([running, arrived], 8, 100.0)
    assert d.order == ("narrow", "wide") and d.preempt == ("wide",) and d.start == ("narrow",)
    assert SmallestFirstScheduler().schedule([arrived, early], 8, 100.0).order == ("narrow0", "narrow")


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


# --- every model of the shipped traces (traces/) is placeable ---

SHIPPED_TRACES = Path(__file__).resolve().parents[1] / "traces"
TRACE_MODELS = {  # model_name values of every shipped trace that has the column
    "tiresias/60_job.csv": {"alexnet", "googlenet", "inception3", "inception4", "resnet50", "resnet101",
                            "resnet152", "vgg11", "vgg16", "vgg19"},
    "elasticflow-itp/195job.csv": {"bert", "deepspeech2", "gpt2", "inception3", "resnet50", "vgg16"},
    "philly/philly_103959.csv": {"bert", "deepspeech2", "gpt2", "inception3", "resnet50", "vgg16"},
}
ALL_TRACE_MODELS = sorted(set().union(*TRACE_MODELS.values()))


def test_trace_model_list_covers_the_shipped_traces():
    """TRACE_MODELS lists every model_name of every shipped trace."""
    found: dict[str, set[str]] = {}
    for path in sorted(SHIPPED_TRACES.rglob("*.csv")):
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            if "model_name" in (reader.fieldnames or ()):
                found[str(path.relative_to(SHIPPED_TRACES))] = {row["model_name"] for row in reader}
    assert found, "no trace with a model_name column"
    for rel, models in found.items():
        key = next(k for k in TRACE_MODELS if Path(rel).match(k))
        assert models == TRACE_MODELS[key], rel


@pytest.mark.parametrize("pack_limit", [0.3, 0.5])
@pytest.mark.parametrize("model", ALL_TRACE_MODELS)
def test_every_trace_model_is_placeable(model, pack_limit):
    """Tiresias places a 1-, 4- and 6-worker job of every model named in a shipped trace (googlenet raised)."""
    for workers in (1, 4, 6):
        view = placement_cluster([4, 4, 4, 2]).view()
        (p,) = TiresiasPolicy(pack_limit=pack_limit).place([JobRequest("j", model, workers)], view)
        assert len(p.slots) == workers and all(view.owner(s) is None for s in p.slots)


def test_googlenet_matches_table6_and_is_not_consolidated():
    """Tiresias Table 6: GoogleNet 26.7 MB, 7 tensors >= 1 MB, largest 3.9 MB, skew 14.6%: insensitive."""
    profile = MODELS["googlenet"]
    assert round(profile.param_bytes / MIB, 1) == 26.7
    assert sum(1 for b in profile.tensor_bytes if b >= MIB) == 7
    assert round(max(profile.tensor_bytes) / MIB, 1) == 3.9
    assert TRACE_MODEL_SKEW["googlenet"] == pytest.approx(max(profile.tensor_bytes) / profile.param_bytes,
                                                          abs=5e-4)
    assert not TiresiasPolicy(pack_limit=0.3).sensitive("googlenet")


def _largest_ratio(elems: list[int]) -> float:
    return max(elems) / sum(elems)


def test_elasticflow_model_skews_match_their_architectures():
    """TRACE_MODEL_SKEW's bert, gpt2 and deepspeech2 are the largest-tensor ratios of ElasticFlow's models."""
    bert = [b // 4 for b in MODELS["bert_base"].tensor_bytes] + [768 * 2, 2]  # + 2-label classifier
    h, v, n_pos = 768, 50257, 1024
    gpt2 = [v * h, n_pos * h]
    for _ in range(12):
        gpt2 += [h, h, h * 3 * h, 3 * h, h * h, h, h, h, h * 4 * h, 4 * h, 4 * h * h, h]
    gpt2 += [h, h, h * 2]  # final LayerNorm, 2-label score head without bias
    feats, r = 64, 512  # DeepSpeech2: n_feats 128 // 2, rnn_dim 512
    ds2 = [32 * 9, 32] + [32 * 32 * 9, 32, 32 * 32 * 9, 32, feats, feats, feats, feats] * 3
    ds2 += [feats * 32 * r, r]
    for i in range(5):
        inp = r if i == 0 else 2 * r
        ds2 += [3 * r * inp, 3 * r * r, 3 * r, 3 * r] * 2 + [inp, inp]
    ds2 += [2 * r * r, r, r * 29, 29]
    assert (sum(bert), sum(gpt2), sum(ds2)) == (109_483_778, 124_441_344, 23_705_373)
    for name, elems in (("bert", bert), ("gpt2", gpt2), ("deepspeech2", ds2)):
        assert TRACE_MODEL_SKEW[name] == pytest.approx(_largest_ratio(elems), abs=5e-4), name


# --- reproducing the authors' simulator ([R] SymbioticLab/Tiresias simulator/run_sim.py) ---
# Expected values follow [R]'s rules (dlas_sim_jobs, cal_r_gittins_index, get_gittins_index,
# with jobs.py's defaults: num_queue 3, queue_limit 3250 / 7200 GPU-s, gittins_delta 3250);
# each was also checked by running that simulator (count placement) on the same jobs.

R_LIMITS = "3250:7200"
TABLE_D = [1000, 4000, 9001, 30000]


def jcts(result) -> dict[str, float]:
    """JCTs by job name."""
    return dict(sorted(result.jct_s.items()))


def test_las_demoted_running_job_goes_behind_waiting_jobs():
    """Tiresias-L: a job demoted while running is appended behind the jobs waiting in its new queue ([R]).

    1 GPU: a (0 s, 5000 s) is demoted at 3250 s and b (arrived at 100 s) runs; b is demoted at
    6500 s behind the waiting a, so a runs to 8250 s and b to 10000 s. Running jobs used to stay
    ahead: b then ran to 8250 s and a to 10000 s.
    """
    jobs = [duration_job("a", 1, 5000), duration_job("b", 1, 5000, arrival_s=100)]
    for timing in ("exact", "r_compat"):
        result = run_durations(jobs, TiresiasScheduler(thresholds_gpu_s=R_LIMITS, timing=timing), total_gpus=1)
        assert jcts(result) == {"a": 8250, "b": 9900}
        assert result.running_at(6500.5) == ("a",)


def test_r_compat_timing_sees_a_multi_gpu_demotion_at_the_reference_events():
    """[R] schedules a running job's next demotion check (limit - t) // W s ahead, t in seconds (not GPU-s).

    4 GPUs: a (4 GPUs, 2000 s) and b (4 GPUs, 100 s) arrive at 0. a reaches 3250 GPU-s at 812.5 s;
    [R] checks at 812 s (3248 GPU-s, no demotion), then 609 s later, so b starts at 1421 s.
    """
    jobs = [duration_job("a", 4, 2000), duration_job("b", 4, 100)]
    exact = run_durations(jobs, TiresiasScheduler(thresholds_gpu_s=R_LIMITS), total_gpus=4)
    r = run_durations(jobs, TiresiasScheduler(thresholds_gpu_s=R_LIMITS, timing="r_compat"), total_gpus=4)
    assert jcts(exact) == {"a": 2100, "b": 912.5}
    assert jcts(r) == {"a": 2100, "b": 1521}
    gittins = TiresiasScheduler(priority="gittins", thresholds_gpu_s=R_LIMITS, gittins_delta="r_compat")
    assert gittins.timing == "r_compat" and TiresiasScheduler().timing == "exact"


def test_r_gittins_table_by_hand():
    """[R]'s index for D = (1000, 4000, 9001, 30000), Δ = 3250, read at the first sample above a.

    At v - 1 for each sample v: P = round(done / surv, 5), E = round((Σ done + Δ·rest) // surv, 5)
    (Python 2 integer division), index = round(P·1e6 / E, 4):
    v=1000: P 0.5, E 11500 // 4 = 2875 -> 173.913; v=4000: P 0.33333, E 10500 // 3 = 3500 -> 95.2371;
    v=9001: P 0.5, E 12251 // 2 = 6125 (not 6125.5) -> 81.6327; v=30000: the largest sample never
    counts as done -> 0.
    """
    table = RGittinsTable(TABLE_D, 3250)
    assert table.table == (173.913, 95.2371, 81.6327, 0.0)
    got = [table.index(a) for a in (0, 999.5, 1000, 3999, 4000, 9000, 9001, 29999, 30000, 1e9)]
    assert got == [173.913, 173.913, 95.2371, 95.2371, 81.6327, 81.6327, 0.0, 0.0, 0.0, 0.0]
    sched = TiresiasScheduler(priority="gittins", thresholds_gpu_s=R_LIMITS, samples_gpu_s=TABLE_D,
                              gittins_delta="r_compat")
    assert [sched.gittins_index(1000, q) for q in range(3)] == [95.2371] * 3, "one quantum in every queue"
    one_queue = TiresiasScheduler(priority="gittins", thresholds_gpu_s="inf", gittins_delta="r_compat")
    assert one_queue.r_table.delta_gpu_s == 3250
    assert _round_half_up(0.015625, 5) == 0.01563 != round(0.015625, 5), "Python 2 rounds halves away from 0"


def test_r_gittins_table_on_the_shipped_samples():
    """On [R]'s 1001 samples the table starts and ends with the values [R]'s functions compute."""
    table = RGittinsTable(load_samples(), 3250).table
    assert table[:5] == (299.701, 299.2165, 298.7329, 298.2502, 297.7686)
    assert table[-3:] == (0.1264, 0.0881, 0.0)


def test_r_compat_sorts_every_queue_including_the_last():
    """Tiresias-G r_compat ranks the last queue by the table index too; the default serves it FIFO.

    1 GPU, D = TABLE_D: a (0 s) and b (10 s) of 20000 s each go Q1 -> Q2 -> Q3 in turns (a runs
    0-3250 and 6500-10450, b 3250-6500 and 10450-14400), then a runs in Q3. c (100 s) arrives at
    17000 s: at that event a has 9800 GPU-s (index 0) and b 7200 (81.6327), so after c, b runs
    (to 29900 s) before a (to 40100 s). FIFO in Q3 resumes a first (27300 s, then b 40100 s).
    """
    jobs = [duration_job("a", 1, 20000), duration_job("b", 1, 20000, 10), duration_job("c", 1, 100, 17000)]
    kw = {"priority": "gittins", "thresholds_gpu_s": R_LIMITS, "samples_gpu_s": TABLE_D}
    r = run_durations(jobs, TiresiasScheduler(gittins_delta="r_compat", **kw), total_gpus=1)
    assert jcts(r) == {"a": 40100, "b": 29890, "c": 100} and r.preemptions == 5
    default = run_durations(jobs, TiresiasScheduler(**kw), total_gpus=1)
    assert jcts(default) == {"a": 27300, "b": 40090, "c": 100}




def authors_jcts(column: str) -> list[float]:
    """[R]'s per-job JCTs (job_id order) for its 60-job trace on 2 machines x 4 GPUs, count placement,
    from run_sim.py --schedule=dlas-gpu (``dlas_gpu_jct_s``) / dlas-gpu-gittins with jobs.py's defaults
    (data/tiresias/README.md)."""
    with (REPO / "data" / "tiresias" / "authors_sim_60_job_jct.csv").open(newline="") as f:
        return [float(r[column]) for r in csv.DictReader(f)]


@pytest.mark.parametrize("kw,column", [
    ({"priority": "gittins", "gittins_delta": "r_compat"}, "dlas_gpu_gittins_jct_s"),
    ({"priority": "las", "timing": "r_compat"}, "dlas_gpu_jct_s"),
    ({"priority": "las"}, "dlas_gpu_jct_s"),
], ids=["gittins_r_compat", "las_r_timing", "las_exact"])
def test_60_job_trace_matches_the_reference_job_by_job(kw, column):
    """On the shipped Tiresias trace (traces/tiresias/60_job.csv, 8 GPUs) every JCT equals [R]'s."""
    expected = authors_jcts(column)
    with (REPO / "traces" / "tiresias" / "60_job.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    jobs = [duration_job(f"j{r['job_id']}", int(r["num_gpu"]), float(r["duration"]), float(r["submit_time"]))
            for r in rows]
    result = run_durations(jobs, TiresiasScheduler(thresholds_gpu_s=R_LIMITS, **kw), total_gpus=8)
    assert [result.jct_s[f"j{i}"] for i in range(len(rows))] == expected
