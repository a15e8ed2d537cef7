"""One policy's run of an experiment config on a back end: the config's jobs, cluster, policy and
scheduler handed to the loop (:func:`experiment.run.loop.run_loop`), for every back end alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from backend.protocol import Backend, ExperimentJob
from common.errors import PlacementError
from experiment.config.workload import config_cluster, experiment_jobs
from experiment.reporting.measurements import StartRecord
from experiment.run.loop import LoopEvent, LoopResult, NeverPlaced, run_loop
from experiment.run.preemption import preemption_cost
from placement import make_policy
from placement.base import Cluster, PlacementContext
from scheduling import make_scheduler


def placement_context(cfg) -> PlacementContext:
    """What the run tells policies that cost transfers: bytes on the wire at the config's MTU, the
    simulator's per-message latency (paper-scale) and the scale, as the simulator costs them; and
    the jobs' measured timings of ``cassini.profiles``.

    Raises:
        ConfigError: ``cassini.profiles`` cannot be read as measured timings.
    """
    return PlacementContext(mtu=cfg.mtu if cfg.simulator.headers else None, latency_s=cfg.simulator.latency_us * 1e-6,
                            scale=cfg.scale, timings=cfg.cassini.timings())


def place_and_run(cfg, g, spec: str, backend: Backend, on_event: Callable[[LoopEvent], None] | None = None,
                  cluster: Cluster | None = None) -> LoopResult:
    """The loop for placement policy ``spec`` and the config's scheduler on ``backend``, on
    ``cluster`` (default: :func:`experiment.config.workload.config_cluster`), the policy and scheduler
    seeded from the config.

    Raises:
        PlacementError: the policy left waiting jobs that nothing would ever let it place.
    """
    cluster = cluster if cluster is not None else config_cluster(cfg, g)
    try:
        return run_loop(experiment_jobs(cfg, g), make_scheduler(cfg.scheduler, seed=cfg.seed), backend,
                        cluster=cluster, policy=make_policy(spec, seed=cfg.seed, context=placement_context(cfg)),
                        on_event=on_event, preemption=preemption_cost(cfg.preemption))
    except NeverPlaced as e:
        raise PlacementError(f"policy {spec!r} placed none of the waiting jobs ({', '.join(e.jobs)}) even with "
                             f"every other job finished") from None


def last_starts(starts: Sequence[StartRecord]) -> tuple[StartRecord, ...]:
    """Each job's last start (where it finished), in the order of those starts: what the report,
    the fidelity monitor and ``experiment.json`` describe of a job; ``starts`` holds them all."""
    last = {st.job: i for i, st in enumerate(starts)}
    return tuple(starts[i] for i in sorted(last.values()))


def batches_of(loop: LoopResult) -> list[list[str]]:
    """The batches of a loop's starts: the jobs started at one time, in start order (the loop
    starts at most one batch per pass, and a pass at the same time as the last starts none)."""
    out: list[list[str]] = []
    last_s = None
    for st in loop.starts:
        if not out or st.time_s != last_s:
            out.append([])
        out[-1].append(st.job)
        last_s = st.time_s
    return out


def batch_starts(loop: LoopResult) -> tuple[StartRecord, ...]:
    """Every start of ``loop`` with its batch (:func:`batches_of`)."""
    index = [i for i, batch in enumerate(batches_of(loop)) for _ in batch]
    return tuple(StartRecord(i, st.time_s, st.placement) for i, st in zip(index, loop.starts, strict=True))


def cluster_over_run(cfg, g, loop: LoopResult, jobs: Sequence[ExperimentJob]):
    """The cluster at each arrival of a policy's run and its figures over the run, in the Titan
    paper's metrics (:mod:`experiment.reporting.cluster_metrics`): every placed run of ``loop`` as a
    span, the config's background load, each job's one allreduce costed by Titan's pattern of its
    collective. Returns ``(samples, figures)``."""
    from experiment.reporting import cluster_metrics as cm
    from jobs.models import get_model
    from placement.titan_patterns import COLLECTIVES, comm_pattern, pair_totals

    placed: dict[str, list] = {}  # each job's starts in order; its k-th run is its k-th start's
    for st in loop.starts:
        placed.setdefault(st.job, []).append(st)
    spans, seen = [], {}
    for r in loop.runs:
        k = seen[r.job] = seen.get(r.job, -1) + 1
        st = placed.get(r.job, [])[k] if k < len(placed.get(r.job, [])) else None
        if st is not None and st.placement is not None:
            spans.append(cm.JobSpan(r.job, st.time_s, max(st.time_s, r.end_s), st.placement))
    ran: dict[str, float] = {}
    for s in spans:
        ran[s.job] = ran.get(s.job, 0.0) + (s.end_s - s.start_s)

    totals: dict[tuple, dict] = {}  # one pattern's pair totals per collective, size and model

    def overhead(job: ExperimentJob):
        if job.collective not in COLLECTIVES:
            return lambda p: None
        size = get_model(job.model).param_bytes

        def cross_bytes(p) -> float:
            key = (job.collective, len(p.slots), size)
            if key not in totals:
                totals[key] = pair_totals(comm_pattern(*key))
            machine = [slot.machine for slot in p.slots]
            return sum(v for (a, b), v in totals[key].items() if machine[a] != machine[b])

        return cross_bytes

    terms = {j.name: cm.JobTerms(j.workers, j.duration_s if j.duration_s is not None else ran.get(j.name, 0.0),
                                 overhead(j)) for j in jobs}
    gpus = {n: d["gpus"] for n, d in g.nodes(data=True) if d["role"] == "machine"}
    series = cm.samples(gpus, cfg.background, spans, (j.arrival_s for j in jobs), terms)
    return series, cm.ClusterFigures.of(series, cm.machine_hours(gpus, cfg.background, spans, terms))


@dataclasses.dataclass(frozen=True)
class PolicyLoop:
    """One policy's loop on a clock (:func:`run_policy_loop`), with what its summary takes beyond the
    loop's result.

    Attributes:
        jobs: the config's jobs as the loop ran them (:func:`experiment.config.workload.experiment_jobs`).
        loop: the loop's result.
        starts: every start, with its batch (:func:`batch_starts`).
        states: the machines in use and fragmented as each batch started.
        cluster, cluster_figures: the cluster at each arrival and over the run (:func:`cluster_over_run`).
    """

    jobs: tuple[ExperimentJob, ...]
    loop: LoopResult
    starts: tuple[StartRecord, ...]
    states: tuple[tuple[int, int], ...]
    cluster: tuple = ()
    cluster_figures: Any = None

    def policy_run(self, summary, timeline: Sequence = ()):
        """The :class:`experiment.reporting.summary.PolicyRun` of this loop with ``summary`` (and the jobs'
        iterations ``timeline``): where each job last started, every start, the placer's decisions."""
        from experiment.reporting.summary import PolicyRun

        return PolicyRun(summary, None, tuple(s.to_dict() for s in last_starts(self.starts)),
                         tuple(s.to_dict() for s in self.starts), tuple(d.to_dict() for d in self.loop.decisions),
                         tuple(timeline), self.cluster)


def run_policy_loop(cfg, g, spec: str, clock: Backend,
                    on_event: Callable[[LoopEvent], None] | None = None) -> PolicyLoop:
    """:func:`place_and_run` for policy ``spec`` on ``clock``, noting the cluster's machines in use and
    fragmented as each batch starts (``on_event`` sees every event too).

    Raises:
        PlacementError: the policy left waiting jobs that nothing would ever let it place.
    """
    from placement.metrics import fragmentation, used_machines

    states: list[tuple[int, int]] = []
    cluster = config_cluster(cfg, g)
    last_start_s = None

    def noting(event: LoopEvent) -> None:
        nonlocal last_start_s
        if event.kind == "started" and event.time_s != last_start_s:  # a new batch, as batches_of cuts them
            view = cluster.view()
            states.append((used_machines(view), fragmentation(view)))
            last_start_s = event.time_s
        if on_event is not None:
            on_event(event)

    jobs = tuple(experiment_jobs(cfg, g))
    loop = place_and_run(cfg, g, spec, clock, on_event=noting, cluster=cluster)
    series, figures = cluster_over_run(cfg, g, loop, jobs)
    return PolicyLoop(jobs, loop, batch_starts(loop), tuple(states), series, figures)


def summarise_loop(cfg, spec: str, run: PolicyLoop, backend: str, wall_time_s: float,
                   figures: Callable[[str], Any] | None = None, phases: Mapping[str, dict] | None = None):
    """The :class:`experiment.reporting.summary.PolicySummary` of a policy's loop on a back end that measures no
    network: each job's placement, runs and completion from the loop, and the cluster figures every
    back end reports; what the back end does not give is None.

    Args:
        backend: the back end's name (``experiment.BACKENDS``).
        figures: a job's name -> its per-iteration figures (``iterations``, ``comm_mean_s``,
            ``compute_mean_s``, ``iteration_mean_s``, ``ecn_marks``: :class:`sim.flowsim.JobEstimate`);
            None: the clock ran every iteration and times none of them.
        phases: a time-shifted job's name -> its phase figures (``shift_s``, ``max_abs_error_s``,
            ``beyond``, ``threshold_s``, ``realignments``, ``stretch``).
    """
    from experiment.reporting.efficiency import distribution_efficiency
    from experiment.reporting.summary import PolicySummary, completion_figures

    loop, starts = run.loop, run.starts
    per_job = _loop_jobs(run, figures, phases or {})
    measured = [(j.comm_mean_s, j.iterations_recorded) for j in per_job if j.comm_mean_s is not None]
    iterations = sum(n for _, n in measured)
    machines = {m for j in per_job for m in j.machines}
    return PolicySummary(
        policy=spec, machines_used=len(machines),
        idle_machines_used=sum(1 for m in machines if cfg.background.get(m, 0) == 0),
        cluster_machines_in_use=max((u for u, _ in run.states), default=0),
        fragmented_machines=max((f for _, f in run.states), default=0),
        comm_mean_s=sum(c * n for c, n in measured) / iterations if iterations else None, comm_p99_s=None,
        waves=len({s.wave for s in starts}), scheduler=cfg.scheduler, preemptions=loop.preemptions,
        preemption_overhead_s=loop.preemption_overhead_s,
        jct_mean_s=sum(loop.jct_s.values()) / len(loop.jct_s), wall_time_s=wall_time_s,
        ecn_marks=_total([j.ecn_marks for j in per_job]), scale=cfg.scale, dilation=cfg.dilation,
        jobs=tuple(per_job),
        distribution_efficiency=distribution_efficiency((j.iterations_recorded, j.compute_mean_s, j.jct_s)
                                                        for j in per_job),
        backend=backend, cluster=run.cluster_figures, **completion_figures(per_job))


def _loop_jobs(run: PolicyLoop, figures: Callable[[str], Any] | None, phases: Mapping[str, dict]) -> list:
    """Every job's :class:`experiment.reporting.summary.JobSummary` of a policy's loop, in the config's
    order (``figures`` and ``phases`` as :func:`summarise_loop` takes them)."""
    from experiment.reporting.summary import JobSummary

    last = {s.job: s for s in last_starts(run.starts)}
    runs_of: dict[str, list] = {}
    for r in run.loop.runs:
        runs_of.setdefault(r.job, []).append(r)
    first_start: dict[str, float] = {}
    for s in run.starts:
        first_start.setdefault(s.job, s.start_s)
    per_job = []
    for j in run.jobs:
        est = figures(j.name) if figures is not None else None
        iterations = j.iterations if est is None else est.iterations
        p = last[j.name]
        phase = phases.get(j.name) or {}
        per_job.append(JobSummary(
            job=j.name, model=j.model, workers=j.workers, collective=j.collective, wave=p.wave,
            machines=tuple(dict.fromkeys(p.machines_by_rank)), iterations_recorded=iterations,
            complete=iterations == j.iterations, comm_mean_s=_figure(est, "comm_mean_s"), comm_p99_s=None,
            compute_mean_s=_figure(est, "compute_mean_s"), ecn_marks=_figure(est, "ecn_marks"),
            jct_s=run.loop.jct_s[j.name], arrival_s=j.arrival_s, start_s=first_start[j.name],
            end_s=runs_of[j.name][-1].end_s, runs=len(runs_of[j.name]),
            iteration_mean_s=_figure(est, "iteration_mean_s"), duration_s=j.duration_s,
            time_shift_s=phase.get("shift_s"), phase_error_max_s=phase.get("max_abs_error_s"),
            phase_errors_beyond=phase.get("beyond"), drift_threshold_s=phase.get("threshold_s"),
            realignments=phase.get("realignments"), pace_stretch=phase.get("stretch")))
    return per_job


def _figure(est, key: str):
    """A job's figure ``key`` of its per-iteration figures ``est``, None without them."""
    return None if est is None else getattr(est, key)


def _total(values: Sequence[float | None]) -> float | None:
    """The sum of ``values``, None when any is None (not estimated)."""
    return None if not values or any(v is None for v in values) else sum(values)
