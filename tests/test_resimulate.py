"""The simulator re-drives a recorded schedule through the loop (:mod:`experiment.run.resimulate`): the
recorded scheduler alone on hand-made schedules, and its estimates against two independent
references written here without the loop (``replay_on_simulator``: the record's events made on a
bare simulator back end at their times; ``sim_estimates``: each wave on the batch simulator
alone), the two ways estimates of emulated runs were computed before they went through the loop."""

from __future__ import annotations

import dataclasses
import math

import pytest
from conftest import REPO
from test_experiment_loop import small_cfg  # the loop tests' three jobs on a k=4 fat-tree

from backend.protocol import RunEnd
from common.errors import PlacementError
from experiment.config.schema import ExperimentConfig, JobConfig, SimulatorConfig, load, validate
from experiment.config.workload import experiment_jobs
from experiment.run.durations import DurationBackend, duration_job
from experiment.run.loop import Started, run_loop
from experiment.run.policy import batches_of, place_and_run
from experiment.run.resimulate import RecordedPlacements, estimate_recorded_run, simulate_schedule
from experiment.run.simrun import sim_backend, sim_options
from jobs.collective import INA
from jobs.models import get_model, scaled_buckets
from jobs.steps import job_bound_s
from measure.fidelity import JobEvidence
from measure.shaping import link_rates_mbps
from placement.base import Cluster, GpuSlot, MachineInfo, Placement
from scheduling.recorded import RecordedSchedule
from sim.flowsim import SimJob, simulate

FIELDS = ("comm_mean_s", "compute_mean_s", "iteration_mean_s")


def scaled(cfg, g, factor: float) -> dict[str, tuple[int, ...]]:
    """Every job's model buckets at the scale, times ``factor`` (multiples of 4 bytes, at least 4)."""
    return {j.name: tuple(max(4, int(b * factor) // 4 * 4) for b in scaled_buckets(get_model(j.model), cfg.scale))
            for j in experiment_jobs(cfg, g)}


def assert_same_estimates(got, want) -> None:
    """The same jobs, iterations and times (within 1e-9 relative) in two sets of estimates."""
    assert sorted(got) == sorted(want)
    for job, w in want.items():
        assert got[job].iterations == w.iterations, job
        for field in FIELDS:
            assert getattr(got[job], field) == pytest.approx(getattr(w, field), rel=1e-9, abs=1e-12), (job, field)


def replay_on_simulator(cfg, g, loop, bucket_bytes=None):
    """Reference: every start of ``loop`` made at its time on its placement and every preemption
    at its time, on a bare simulator back end (no loop, no cluster); an event of a job the
    simulator already finished is void. INA jobs only with the fluid engine."""
    backend = sim_backend(cfg, g, bucket_bytes)
    jobs = {j.name: j for j in experiment_jobs(cfg, g) if j.collective != INA or cfg.simulator.mode == "fluid"}
    events = sorted([(st.time_s, 1, i, st.job, st.placement) for i, st in enumerate(loop.starts)]
                    + [(r.end_s, 0, i, r.job, None) for i, r in enumerate(loop.runs) if not r.finished],
                    key=lambda e: e[:3])
    running: set[str] = set()

    def run_until(t: float) -> None:
        while running and backend.now_s < t:
            for end in backend.advance(t):
                running.discard(end.job)
        if backend.now_s < t:
            backend.advance(t)

    for t, kind, _, name, placement in events:
        if name not in jobs:
            continue
        run_until(t)
        if kind == 0:
            if name in running:
                backend.stop(name)
                running.discard(name)
        elif name not in running and backend.done.get(name, 0) < jobs[name].iterations:
            backend.start([(jobs[name], placement)])
            running.add(name)
    while running:
        for end in backend.advance(math.inf):
            running.discard(end.job)
    return {name: backend.estimate(name) for name in jobs if backend.done.get(name)}


def sim_estimates(cfg, g, evidence):
    """Reference: each wave of ``evidence`` on the batch simulator alone (``sim.flowsim.simulate``),
    its jobs starting together, with their buckets; jobs without buckets and INA jobs left out."""
    rates = link_rates_mbps(g, cfg.scale)
    options = sim_options(cfg, g)
    by_wave: dict[int, list[SimJob]] = {}
    for e in evidence:
        if not e.bucket_bytes or e.collective == INA:
            continue
        job = next(j for j in cfg.jobs if j.name == e.job)
        by_wave.setdefault(e.wave, []).append(SimJob(
            name=e.job, machines_by_rank=e.machines_by_rank, collective=e.collective, bucket_bytes=e.bucket_bytes,
            compute_s=get_model(job.model).compute_time_s, iterations=cfg.iterations,
            warmup_iterations=cfg.warmup_iterations))
    return {est.job: est for jobs in by_wave.values() for est in simulate(g, rates, jobs, options).jobs}


# -- the recorded scheduler alone, on the durations back end -------------------------------------

def count_loop(jobs, scheduler, total_gpus: int = 4):
    """The loop on the durations back end, GPUs counted."""
    return run_loop(jobs, scheduler, DurationBackend(), total_gpus=total_gpus)


def test_starts_and_preemptions_are_made_at_their_recorded_times():
    """Each recorded start and preemption happens at its time, and a preempted job resumes later."""
    jobs = [duration_job("a", 2, 3.0), duration_job("b", 2, 2.0)]
    sched = RecordedSchedule.at_recorded_times([(0.0, "a"), (1.0, "b"), (5.0, "a")], [(2.0, "a")])
    loop = count_loop(jobs, sched)
    assert [(s.time_s, s.job) for s in loop.starts] == [(0.0, "a"), (1.0, "b"), (5.0, "a")]
    assert loop.preemptions == 1
    assert loop.jct_s == {"a": pytest.approx(6.0), "b": pytest.approx(3.0)}, "a: 2 s, then its last 1 s from 5 s"


def test_events_of_a_job_already_finished_here_are_void():
    """A recorded preemption of a job that has finished on this back end is void, and so is its later start."""
    jobs = [duration_job("a", 2, 1.0), duration_job("b", 2, 3.0)]
    sched = RecordedSchedule.at_recorded_times([(0.0, "a"), (0.0, "b"), (2.5, "a")], [(2.0, "a")])
    loop = count_loop(jobs, sched)
    assert [(s.time_s, s.job) for s in loop.starts] == [(0.0, "a"), (0.0, "b")]
    assert loop.preemptions == 0
    assert loop.jct_s == {"a": pytest.approx(1.0), "b": pytest.approx(3.0)}


def test_a_batch_starts_when_every_job_of_the_previous_one_has_finished():
    """Batch k+1 starts at the last completion of batch k on this back end, whatever the record's times."""
    jobs = [duration_job("a", 1, 1.0), duration_job("b", 1, 3.0), duration_job("c", 2, 1.0),
            duration_job("d", 1, 2.0)]
    sched = RecordedSchedule.in_recorded_batches([["a", "b"], [], ["c"], ["d"]])
    loop = count_loop(jobs, sched)
    assert [(s.time_s, s.job) for s in loop.starts] == [(0.0, "a"), (0.0, "b"), (3.0, "c"), (4.0, "d")]
    assert [sched.start_asked(j) for j in "abcd"] == [0, 1, 2, 3]


def test_a_batch_waits_until_all_its_jobs_have_arrived():
    """A batch whose jobs have not all arrived starts together once the last of them arrives."""
    jobs = [duration_job("a", 1, 1.0), duration_job("b", 1, 1.0, arrival_s=2.0), duration_job("c", 1, 1.0)]
    loop = count_loop(jobs, RecordedSchedule.in_recorded_batches([["a"], ["b", "c"]]))
    assert [(s.time_s, s.job) for s in loop.starts] == [(0.0, "a"), (2.0, "b"), (2.0, "c")]


def two_machine_cluster() -> Cluster:
    """Two machines of 2 GPUs."""
    return Cluster([MachineInfo("m1", 2, "r1", "p1"), MachineInfo("m2", 2, "r1", "p1")])


def on(job: str, machine: str) -> Placement:
    """``job`` on both GPUs of ``machine``."""
    return Placement(job, (GpuSlot(machine, 0), GpuSlot(machine, 1)))


def test_a_start_waits_for_its_recorded_gpus_and_a_preemption_cancels_it():
    """A start waits for its recorded GPUs; a preemption cancels it; the next start gets its own placement."""
    jobs = [duration_job("x", 2, 3.0), duration_job("w", 2, 2.5), duration_job("z", 2, 0.5),
            duration_job("y", 2, 1.0)]
    record = [(0.0, on("x", "m1")), (0.0, on("w", "m2")), (1.0, on("z", "m1")), (1.0, on("y", "m2")),
              (4.0, on("y", "m1"))]
    sched = RecordedSchedule.at_recorded_times([(t, p.job) for t, p in record], [(2.0, "y")])
    placer = RecordedPlacements([p for _, p in record], sched.start_asked)
    loop = run_loop(jobs, sched, DurationBackend(), cluster=two_machine_cluster(), policy=placer)
    assert [(s.time_s, s.placement) for s in loop.starts] == [
        (0.0, on("x", "m1")), (0.0, on("w", "m2")), (3.0, on("z", "m1")), (4.0, on("y", "m1"))], \
        "z waits for x (m1, until 3 s); y's start on m2 waits for w and is cancelled at 2 s; its next is on m1"
    assert loop.preemptions == 0


def test_the_recorded_placer_rejects_a_start_of_another_job():
    """A recorded start that names another job is an error, not a silent misplacement."""
    placer = RecordedPlacements([on("x", "m1")], lambda job: 0)
    with pytest.raises(PlacementError, match="'y'"):
        placer.place([duration_job("y", 2, 1.0).request()], two_machine_cluster().view())


# -- at the recorded times, against replay_on_simulator -------------------------------------------

def tiresias_cfg(**changes) -> ExperimentConfig:
    """The schedule of ``test_replaying_a_schedule_on_the_simulator_reproduces_it``: b arrives at 1 s and
    preempts a, which resumes, then b is preempted and resumes."""
    return small_cfg(2, jobs=(JobConfig("a", "resnet50", 4, "ring"), JobConfig("b", "vgg16", 4, "hd", 1.0)),
                     scheduler="tiresias,thresholds_gpu_s=1", iterations=5, **changes)


def four_job_cfg(**changes) -> ExperimentConfig:
    """Tiresias on four jobs arriving over 1.5 s: several preemptions and overlapping runs."""
    return small_cfg(3, jobs=(JobConfig("a", "resnet50", 4, "ring"), JobConfig("b", "vgg16", 4, "hd", 0.3),
                              JobConfig("c", "resnet50", 2, "ring", 1.0), JobConfig("d", "vgg16", 2, "gloo", 1.5)),
                     scheduler="tiresias,thresholds_gpu_s=2", iterations=6, **changes)


@pytest.mark.parametrize("cfg", [tiresias_cfg(), four_job_cfg(), small_cfg(scheduler="fifo")],
                         ids=["tiresias", "tiresias-4-jobs", "fifo"])
@pytest.mark.parametrize("factor", [1.0, 3.0], ids=["own-schedule", "slower-record"])
def test_at_recorded_times_equals_replay_on_simulator(cfg, factor):
    """At the recorded times the loop gives replay_on_simulator's estimates, of its own or a slower run."""
    # A slower record (buckets x3) has the simulator finish runs before their recorded ends. A
    # faster one would not compare: replay_on_simulator starts a job on GPUs the simulator still
    # has busy, the loop waits for them (scheduling/recorded.py).
    g = validate(cfg, backend="sim")
    loop = place_and_run(cfg, g, "consolidate", sim_backend(cfg, g, scaled(cfg, g, factor)))
    if cfg.scheduler.startswith("tiresias"):
        assert loop.preemptions >= 2
    want = replay_on_simulator(cfg, g, loop)
    assert_same_estimates(simulate_schedule(cfg, g, loop), want)
    buckets = scaled(cfg, g, 0.5)
    assert_same_estimates(simulate_schedule(cfg, g, loop, buckets), replay_on_simulator(cfg, g, loop, buckets))


def test_events_after_the_simulator_finished_a_job_are_void_as_in_replay_on_simulator():
    """A preemption and a restart recorded after the simulator finished the job are void, as in replay_on_simulator."""
    cfg = small_cfg(scheduler="fifo")
    g = validate(cfg, backend="sim")
    backend = sim_backend(cfg, g)
    loop = place_and_run(cfg, g, "consolidate", backend)
    end = {r.job: r.end_s for r in loop.runs}
    assert end["a"] + 0.6 < end["b"], "b still runs when a's late events are due"
    placement = next(s.placement for s in loop.starts if s.job == "a")
    late = dataclasses.replace(loop, starts=(*loop.starts, Started(end["a"] + 0.6, "a", placement)),
                               runs=(*loop.runs, RunEnd("a", 0.0, end["a"] + 0.3, finished=False)))
    got = simulate_schedule(cfg, g, late)
    assert_same_estimates(got, replay_on_simulator(cfg, g, late))
    assert_same_estimates(got, {job: backend.estimate(job) for job in ("a", "b", "c")})


def test_ina_jobs_are_resimulated_only_by_the_fluid_engine():
    """An INA job is estimated by the fluid engine, at the recorded times and in the recorded batches (the
    simulator's own record: the same estimates either way), and left out in steps mode."""
    cfg = four_job_cfg(simulator=SimulatorConfig(mode="fluid"))
    cfg = dataclasses.replace(cfg, jobs=(dataclasses.replace(cfg.jobs[0], collective="ina"), *cfg.jobs[1:]))
    g = validate(cfg, backend="sim")
    loop = place_and_run(cfg, g, "consolidate", sim_backend(cfg, g))
    fluid = simulate_schedule(cfg, g, loop)
    assert "a" in fluid
    assert_same_estimates(fluid, replay_on_simulator(cfg, g, loop))
    steps = dataclasses.replace(cfg, simulator=SimulatorConfig(mode="steps"))
    assert sorted(simulate_schedule(steps, g, loop)) == sorted(replay_on_simulator(steps, g, loop)) == ["b", "c", "d"]
    waves = dataclasses.replace(cfg, scheduler="waves")
    wave_loop = place_and_run(waves, g, "consolidate", sim_backend(waves, g))
    assert len(batches_of(wave_loop)) == 3  # a alone, then b and c, then d
    batched = simulate_schedule(waves, g, wave_loop, batches=batches_of(wave_loop))
    assert "a" in batched
    assert_same_estimates(batched, replay_on_simulator(waves, g, wave_loop))


# -- in the recorded batches, against sim_estimates -------------------------------------------------

def default_cfg(two_waves: bool) -> ExperimentConfig:
    """``experiments/default.yaml``; with ``two_waves``, 16 GPUs free (h13-h16) and 4 iterations, so
    bert-a and cnn-a wait for a second wave."""
    cfg = load(str(REPO / "experiments" / "default.yaml"))
    if two_waves:
        cfg = dataclasses.replace(cfg, background={f"h{i}": 4 for i in range(1, 13)}, iterations=4)
    return cfg


@pytest.mark.parametrize("two_waves,spec", [(False, "consolidate"), (False, "netpack"), (True, "consolidate"),
                                            (True, "spread")])
def test_in_recorded_batches_equals_sim_estimates(two_waves, spec):
    """In batch mode every wave runs alone: sim_estimates' estimates, within 1e-9 relative."""
    # Buckets twice the record's, so the waves last longer than recorded (the second wave must wait
    # for the first here, not start at its recorded time); resnet-b has no buckets: left out.
    cfg = default_cfg(two_waves)
    g = validate(cfg, backend="sim")
    loop = place_and_run(cfg, g, spec, sim_backend(cfg, g))
    batches = batches_of(loop)
    assert len(batches) == (2 if two_waves else 1)
    wave = {job: k for k, batch in enumerate(batches) for job in batch}
    buckets = {job: b for job, b in scaled(cfg, g, 2.0).items() if job != "resnet-b"}
    evidence = [JobEvidence(st.job, wave[st.job], tuple(s.machine for s in st.placement.slots),
                            next(j.collective for j in cfg.jobs if j.name == st.job), buckets.get(st.job, ()),
                            None, True) for st in loop.starts]
    got = simulate_schedule(cfg, g, loop, buckets, batches)
    assert_same_estimates(got, sim_estimates(cfg, g, evidence))
    assert "resnet-b" not in got and len(got) == len(cfg.jobs) - 1


def test_start_offsets_are_each_jobs_first_iteration_after_its_batchs_earliest():
    from experiment.reporting.timeline import UpPhase
    from experiment.run.resimulate import start_offsets

    phases = [UpPhase("a", 0, 1.0, 1.5, 2.0), UpPhase("a", 1, 2.0, 2.5, 3.0), UpPhase("b", 0, 1.02, 1.5, 2.0),
              UpPhase("c", 0, 9.0, 9.5, 10.0)]
    assert start_offsets(phases, [["a", "b"], ["c", "d"]]) == pytest.approx({"a": 0.0, "b": 0.02, "c": 0.0})


def test_mltcp_jobs_started_in_step_never_separate_and_a_recorded_offset_lets_them():
    """experiments/cassini_mltcp.yaml, 12 iterations: re-simulated together, the two jobs share the uplink
    every iteration (the symmetric start is MLTCP's fixed point), each at half its rate all the time;
    with the second one 5 ms behind, as an emulated run measures its jobs' offsets, they separate and
    communicate at about their bound (alone on the uplink)."""
    cfg = dataclasses.replace(load(str(REPO / "experiments" / "cassini_mltcp.yaml")), iterations=12)
    g = validate(cfg, backend="sim")
    loop = place_and_run(cfg, g, "spread", sim_backend(cfg, g))
    assert {st.job: [s.machine for s in st.placement.slots] for st in loop.starts} == {
        "vgg19-a": ["h1", "h3"], "vgg19-b": ["h2", "h4"]}  # both cross l1 -> s1 -> l2
    batches = batches_of(loop)
    together = simulate_schedule(cfg, g, loop, None, batches)
    apart = simulate_schedule(cfg, g, loop, None, batches, {"vgg19-b": 0.005})
    # by arithmetic: every link runs at 25,000 / 500 = 50 Mbit/s, each job gets 25 of the uplink; a
    # 2-rank ring sends each bucket's two halves (whole 4-byte floats, the larger 4 ceil(b / 8) bytes
    # setting each step's time) in 2 steps, as TCP segments of 1,448 bytes with 66 bytes of headers
    buckets = scaled_buckets(get_model("vgg19"), cfg.scale)
    half = [4 * math.ceil(b / 8) for b in buckets]
    shared_s = sum(2 * (h + 66 * math.ceil(h / 1448)) * 8 / 25e6 for h in half)
    # and alone on the uplink, the chained bound of jobs.steps at the full 50 Mbit/s: half that
    bound = job_bound_s(g, {e: 25000 / 500 for e in g.edges()}, ["h1", "h3"], "ring", buckets, mtu=1500)
    assert bound == pytest.approx(shared_s / 2, rel=1e-12)
    for job in ("vgg19-a", "vgg19-b"):
        assert together[job].comm_mean_s == pytest.approx(shared_s, rel=1e-9)
        assert bound <= apart[job].comm_mean_s < 1.1 * bound


@pytest.mark.parametrize("scheduler", ["waves", "fifo"])
def test_the_estimator_handed_to_a_measuring_back_end_follows_its_scheduler(scheduler):
    """``estimate_recorded_run`` (what the driver hands the emulator's session) re-simulates in the run's
    batches where the scheduler starts jobs in batches (``waves``), else at the recorded times."""
    cfg = small_cfg(scheduler=scheduler)
    g = validate(cfg, backend="sim")
    loop = place_and_run(cfg, g, "consolidate", sim_backend(cfg, g))
    batches, buckets = batches_of(loop), scaled(cfg, g, 2.0)
    want = simulate_schedule(cfg, g, loop, buckets, batches if scheduler == "waves" else None)
    assert_same_estimates(estimate_recorded_run(cfg, g, loop, batches, (), buckets), want)

