"""Typed records of a simulated run's results (``sim_jobs.csv``, ``sim_policies.json``, the table).

:func:`experiment.simrun.run_policy_sim` builds a :class:`SimJobRow` per job of a policy, and
:func:`policy_summary` a :class:`SimPolicySummary` from them; a policy that could not place every
job is a :class:`SimPolicyError` instead. Their ``to_dict`` methods are the layouts the run
directory has always held: :meth:`SimJobRow.to_dict` an entry of ``<policy>/jobs.json`` (and,
but for ``placements``, a row of ``sim_jobs.csv``), :meth:`SimJobStart.to_dict` an entry of
``<policy>/placements.json``, :meth:`SimPolicySummary.to_dict` and :meth:`SimPolicyError.to_dict`
a policy's entry of ``sim_policies.json``. Times are virtual (paper-scale) seconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from experiment.efficiency import distribution_efficiency
from placement.base import Placement

JOB_COLUMNS = ("policy", "job", "model", "workers", "collective", "arrival_s", "start_s", "end_s", "jct_s", "runs",
               "comm_mean_s", "compute_mean_s", "iteration_mean_s", "iterations", "ecn_marks", "duration_s",
               "machines")
"""The columns of ``sim_jobs.csv``: the keys of :meth:`SimJobRow.to_dict` but ``placements``."""


@dataclasses.dataclass(frozen=True)
class SimJobStart:
    """A start of a job in the simulated run: when, and on which GPUs.

    Attributes:
        start_s: the loop's time of the start.
        placement: where the job ran from then on.
    """

    start_s: float
    placement: Placement

    def to_dict(self) -> dict:
        """JSON form: an entry of ``<policy>/placements.json`` (the placement's keys and ``start_s``)."""
        return {"start_s": self.start_s, **self.placement.to_dict()}


@dataclasses.dataclass(frozen=True)
class SimJobRow:
    """One job of one policy on the simulator.

    Attributes:
        policy: the policy spec.
        job, model, workers, collective: the job's spec.
        arrival_s: when it arrived.
        start_s: its first start.
        end_s: the end of its last run.
        jct_s: job completion time (end minus arrival).
        runs: runs (starts; more than one after preemption).
        comm_mean_s, compute_mean_s, iteration_mean_s: means over its measured iterations of the
            slowest rank's times (:class:`sim.flowsim.JobEstimate`; None: none measured).
        iterations: measured iterations.
        ecn_marks: estimated ECN-marked packets (None: ECN not simulated).
        duration_s: its duration in the trace (None: not from a trace).
        machines: the machines of its last placement, each once, in rank order.
        placements: every start, in order.
    """

    policy: str
    job: str
    model: str
    workers: int
    collective: str
    arrival_s: float
    start_s: float
    end_s: float
    jct_s: float
    runs: int
    comm_mean_s: float | None
    compute_mean_s: float | None
    iteration_mean_s: float | None
    iterations: int
    ecn_marks: float | None
    duration_s: float | None
    machines: tuple[str, ...]
    placements: tuple[SimJobStart, ...]

    def to_dict(self) -> dict:
        """JSON form: an entry of ``<policy>/jobs.json`` (:data:`JOB_COLUMNS` and ``placements``)."""
        return {
            "policy": self.policy, "job": self.job, "model": self.model, "workers": self.workers,
            "collective": self.collective, "arrival_s": self.arrival_s, "start_s": self.start_s, "end_s": self.end_s,
            "jct_s": self.jct_s, "runs": self.runs, "comm_mean_s": self.comm_mean_s,
            "compute_mean_s": self.compute_mean_s, "iteration_mean_s": self.iteration_mean_s,
            "iterations": self.iterations, "ecn_marks": self.ecn_marks, "duration_s": self.duration_s,
            "machines": " ".join(self.machines), "placements": [p.to_dict() for p in self.placements],
        }

    def csv_row(self) -> dict:
        """A row of ``sim_jobs.csv``: :meth:`to_dict` restricted to :data:`JOB_COLUMNS`."""
        d = self.to_dict()
        return {k: d[k] for k in JOB_COLUMNS}


@dataclasses.dataclass(frozen=True)
class SimPolicySummary:
    """One policy's jobs on the simulator, summarised (:func:`policy_summary`).

    Attributes:
        policy: the policy spec (the key of its entry in ``sim_policies.json``, not a field of it).
        jobs: jobs run.
        comm_mean_s, comm_p90_s: mean and 90th percentile (nearest rank) over jobs of their mean
            communication time per iteration (None: no job measured one).
        jct_mean_s, jct_p90_s: mean and 90th percentile over jobs of their completion time.
        makespan_s: the end of the last job's last run.
        jct_over_duration_mean: mean over jobs from a trace of JCT / trace duration, queueing
            and network together (None: no job from a trace).
        distribution_efficiency: NetPack's DE over the jobs (:mod:`experiment.efficiency`).
    """

    policy: str
    jobs: int
    comm_mean_s: float | None
    comm_p90_s: float | None
    jct_mean_s: float
    jct_p90_s: float
    makespan_s: float
    jct_over_duration_mean: float | None
    distribution_efficiency: float | None = None

    def to_dict(self) -> dict:
        """JSON form: the policy's entry of ``sim_policies.json`` (every field but ``policy``)."""
        return {"jobs": self.jobs, "comm_mean_s": self.comm_mean_s, "comm_p90_s": self.comm_p90_s,
                "jct_mean_s": self.jct_mean_s, "jct_p90_s": self.jct_p90_s, "makespan_s": self.makespan_s,
                "jct_over_duration_mean": self.jct_over_duration_mean,
                "distribution_efficiency": self.distribution_efficiency}


@dataclasses.dataclass(frozen=True)
class SimPolicyError:
    """A policy that could not place every job: nothing of it was summarised.

    Attributes:
        policy: the policy spec.
        error: why (the :class:`common.errors.PlacementError`'s message).
    """

    policy: str
    error: str

    def to_dict(self) -> dict:
        """JSON form: the policy's entry of ``sim_policies.json``."""
        return {"error": self.error}


SimPolicyOutcome = SimPolicySummary | SimPolicyError
"""What a simulated run reports of a policy."""


def policy_summary(policy: str, rows: Sequence[SimJobRow]) -> SimPolicySummary:
    """The summary of policy ``policy``'s rows (at least one)."""
    comm = sorted(r.comm_mean_s for r in rows if r.comm_mean_s is not None)
    jct = sorted(r.jct_s for r in rows)
    stretch = [r.jct_s / r.duration_s for r in rows if r.duration_s]
    return SimPolicySummary(
        policy=policy, jobs=len(rows), comm_mean_s=sum(comm) / len(comm) if comm else None,
        comm_p90_s=_p90(comm), jct_mean_s=sum(jct) / len(jct), jct_p90_s=_p90(jct),
        makespan_s=max(r.end_s for r in rows),
        jct_over_duration_mean=sum(stretch) / len(stretch) if stretch else None,
        distribution_efficiency=distribution_efficiency((r.iterations, r.compute_mean_s, r.jct_s) for r in rows))


def _p90(ordered: list[float]) -> float | None:
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] if ordered else None
