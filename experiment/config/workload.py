"""The jobs a config runs, as the loop runs them: its jobs list, or its trace's jobs that fit the
cluster; and the cluster they run on, with the config's background load."""

from __future__ import annotations

import dataclasses
import functools
import os

from backend.protocol import ExperimentJob
from common.errors import ConfigError
from placement.base import Cluster


def experiment_jobs(cfg, g=None) -> list[ExperimentJob]:
    """The jobs of config ``cfg`` as the loop runs them: each ``cfg.iterations`` measured iterations;
    or, with a trace, its jobs that fit the cluster of topology ``g`` (:func:`trace_jobs`)."""
    if cfg.trace.file:
        if g is None:
            raise ValueError("the jobs of a trace depend on the cluster: give the topology")
        return list(trace_jobs(cfg, config_cluster(cfg, g).view().total_free))
    return [ExperimentJob(j.name, j.workers, j.arrival_s, model=j.model, collective=j.collective,
                          iterations=cfg.iterations, machines=j.machines, compute_ms=j.compute_ms) for j in cfg.jobs]


def trace_jobs(cfg, free_gpus: int) -> tuple[ExperimentJob, ...]:
    """The jobs of the config's trace (:class:`experiment.config.schema.TraceConfig`) that fit ``free_gpus``:
    each submitted at its trace time times ``arrival_scale``, with its trace duration as ``duration_s``
    and as measured iterations, duration over its model's compute time per iteration (at least 1),
    as the config section says. Read once per trace file version, window and cluster size."""
    t = cfg.trace
    try:
        version = os.stat(t.file).st_mtime_ns
    except OSError:
        version = None  # read_trace reports it
    return _trace_jobs(t, cfg.seed, free_gpus, version)


@functools.lru_cache(maxsize=4)
def _trace_jobs(t, seed: int, free_gpus: int, _version) -> tuple[ExperimentJob, ...]:
    from experiment.config.traces import assign_models, read_trace
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
    def job(j) -> ExperimentJob:
        compute_s, scale = get_model(j.model).compute_time_s, t.compute_scale
        return ExperimentJob(j.name, j.gpus, j.arrival_s * t.arrival_scale, model=j.model, collective=t.collective,
                             iterations=max(1, round(j.duration_s / compute_s)), duration_s=j.duration_s * scale,
                             compute_ms=0.0 if scale == 1 else compute_s * 1e3 * scale)

    return tuple(job(j) for j in assign_models(jobs, t.models, seed))


def config_cluster(cfg, g) -> Cluster:
    """The cluster of topology ``g`` with the config's background load."""
    cluster = Cluster.from_topology(g)
    cluster.set_background(cfg.background)
    return cluster
