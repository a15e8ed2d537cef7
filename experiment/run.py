"""One policy's run of an experiment config on a back end: the config's jobs, cluster, policy and
scheduler handed to the loop (:func:`experiment.loop.run_loop`), for every back end alike."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence

from backend.protocol import Backend, ExperimentJob
from common.errors import ConfigError, PlacementError
from experiment.loop import LoopEvent, LoopResult, NeverPlaced, run_loop
from experiment.measurements import StartRecord
from placement import make_policy
from placement.base import Cluster, PlacementContext
from scheduling import make_scheduler


def experiment_jobs(cfg, g=None) -> list[ExperimentJob]:
    """The jobs of config ``cfg`` as the loop runs them: each ``cfg.iterations`` measured iterations;
    or, with a trace, its jobs that fit the cluster of topology ``g`` (:func:`trace_jobs`)."""
    if cfg.trace.file:
        if g is None:
            raise ValueError("the jobs of a trace depend on the cluster: give the topology")
        return list(trace_jobs(cfg, config_cluster(cfg, g).view().total_free))
    return [ExperimentJob(j.name, j.workers, j.arrival_s, model=j.model, collective=j.collective,
                          iterations=cfg.iterations, machines=j.machines) for j in cfg.jobs]


def trace_jobs(cfg, free_gpus: int) -> tuple[ExperimentJob, ...]:
    """The jobs of the config's trace (:class:`experiment.config.TraceConfig`) that fit ``free_gpus``:
    each with its trace duration as ``duration_s`` and as measured iterations, duration over its
    model's compute time per iteration (at least 1), as the config section says. Read once per
    trace file version, window and cluster size."""
    t = cfg.trace
    try:
        version = os.stat(t.file).st_mtime_ns
    except OSError:
        version = None  # read_trace reports it
    return _trace_jobs(t, cfg.seed, free_gpus, version)


@functools.lru_cache(maxsize=4)
def _trace_jobs(t, seed: int, free_gpus: int, _version) -> tuple[ExperimentJob, ...]:
    from experiment.traces import assign_models, read_trace
    from jobs.models import MODELS, get_model

    trace = read_trace(t.file, t.format, max_jobs=t.max_jobs or None, start_s=t.start_s, span_s=t.span_s or None,
                       max_gpus=free_gpus, min_gpus=t.min_gpus)
    jobs = trace.jobs
    if t.model_source == "pool":
        jobs = tuple(dataclasses.replace(j, model=None) for j in jobs)
    unknown = sorted({j.model for j in jobs if j.model is not None and j.model not in MODELS})
    if unknown:
        raise ConfigError(f"config.trace: {t.file} names models with no profile ({', '.join(unknown)}; profiles: "
                          f"{', '.join(sorted(MODELS))}); set trace.model_source: pool to draw every job's model "
                          f"from trace.models")
    return tuple(ExperimentJob(j.name, j.gpus, j.arrival_s, model=j.model, collective=t.collective,
                               iterations=max(1, round(j.duration_s / get_model(j.model).compute_time_s)),
                               duration_s=j.duration_s)
                 for j in assign_models(jobs, t.models, seed))


def config_cluster(cfg, g) -> Cluster:
    """The cluster of topology ``g`` with the config's background load."""
    cluster = Cluster.from_topology(g)
    cluster.set_background(cfg.background)
    return cluster


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
    ``cluster`` (default: :func:`config_cluster`), the policy and scheduler seeded from the config.

    Raises:
        PlacementError: the policy left waiting jobs that nothing would ever let it place.
    """
    cluster = cluster if cluster is not None else config_cluster(cfg, g)
    try:
        return run_loop(experiment_jobs(cfg, g), make_scheduler(cfg.scheduler, seed=cfg.seed), backend,
                        cluster=cluster, policy=make_policy(spec, seed=cfg.seed, context=placement_context(cfg)),
                        on_event=on_event)
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
