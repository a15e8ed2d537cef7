"""One policy's run of an experiment config on a back end: the config's jobs, cluster, policy and
scheduler handed to the loop (:func:`experiment.loop.run_loop`), for every back end alike."""

from __future__ import annotations

from collections.abc import Callable

from common.errors import PlacementError
from experiment.backend import Backend, ExperimentJob
from experiment.loop import LoopEvent, LoopResult, NeverPlaced, run_loop
from placement import make_policy
from placement.base import Cluster
from scheduling import make_scheduler


def experiment_jobs(cfg) -> list[ExperimentJob]:
    """The jobs of config ``cfg`` as the loop runs them: each ``cfg.iterations`` measured iterations."""
    return [ExperimentJob(j.name, j.workers, j.arrival_s, model=j.model, collective=j.collective,
                          iterations=cfg.iterations) for j in cfg.jobs]


def config_cluster(cfg, g) -> Cluster:
    """The cluster of topology ``g`` with the config's background load."""
    cluster = Cluster.from_topology(g)
    cluster.set_background(cfg.background)
    return cluster


def place_and_run(cfg, g, spec: str, backend: Backend, on_event: Callable[[LoopEvent], None] | None = None,
                  cluster: Cluster | None = None) -> LoopResult:
    """The loop for placement policy ``spec`` and the config's scheduler on ``backend``, on
    ``cluster`` (default: :func:`config_cluster`), the policy and scheduler seeded from the config.

    Raises:
        PlacementError: the policy left waiting jobs that nothing would ever let it place.
    """
    cluster = cluster if cluster is not None else config_cluster(cfg, g)
    try:
        return run_loop(experiment_jobs(cfg), make_scheduler(cfg.scheduler, seed=cfg.seed), backend,
                        cluster=cluster, policy=make_policy(spec, seed=cfg.seed), on_event=on_event)
    except NeverPlaced as e:
        raise PlacementError(f"policy {spec!r} placed none of the waiting jobs ({', '.join(e.jobs)}) even with "
                             f"every other job finished") from None
