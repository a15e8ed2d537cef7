"""Typed records of the report's per-policy summary (``summary.json``, the tables, the CSVs), the
same for every back end.

Each back end builds a :class:`PolicySummary` of every policy it ran: the emulator with
:func:`experiment.reporting.report.summarise_policy` from a policy's
:class:`experiment.reporting.measurements.PolicyResult` and its iteration records, the simulator with
:func:`experiment.run.policy.summarise_loop` from its loop and estimates (as any back end that
measures no network). The figures every back end reports are its fields; the emulator's own (the
network's bytes, CPU, ECN at ports, the fidelity monitor's) are one :class:`EmulatedFigures`, and
of each job one :class:`EmulatedJobFigures` (its verdict, the simulator's estimate beside it), None
elsewhere. A figure a back end does not measure is None (empty in the CSVs, "-" in the tables), never
zero, and ``backend`` says which back end measured the rest; the report's writers read
:meth:`PolicySummary.figure` and :meth:`JobSummary.figure`.
:meth:`PolicySummary.to_dict` is the layout of a policy's entry in ``summary.json`` (and of
``<policy>/summary.json``); :meth:`PolicySummary.from_dict` reads it back, for ``run_testbed.py
report`` to render a saved run again (the run-directory readers :mod:`experiment.reporting.export` and
:mod:`experiment.validate.estimates` parse it leniently, so older runs still load). Definitions of the
figures are in :mod:`experiment.reporting.report`. Times are virtual (paper-scale) seconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from experiment.reporting.breakdown import BucketComparison
from experiment.reporting.cluster_metrics import ClusterFigures
from experiment.reporting.ina_results import InaResult
from experiment.reporting.validation import (
    Comparison,
    MarksComparison,
    ValidationStats,
    comparable,
    job_class,
    validation_stats,
)
from measure.fidelity import LinkCheck


@dataclasses.dataclass(frozen=True)
class EmulatedJobFigures:
    """What the emulator measures of one job beside the figures every back end reports
    (:class:`JobSummary`): the fidelity monitor's verdict on it, and the simulator's estimate of it
    on the run's own placements.

    Attributes:
        fidelity: its verdict's status (:data:`measure.fidelity.JOB_STATUSES`; None: no verdict).
        bound_s: its contention-free bound per iteration (None: no verdict).
        bound_ratio: measured / bound (None: no verdict or not computable).
        contended_with: the jobs of its wave it shared a directed link with.
        estimate_s: the simulator's communication time per iteration (None: not simulated).
        estimate_error: ``(estimate_s - comm_mean_s) / comm_mean_s`` where the two are comparable
            (:func:`experiment.reporting.validation.comparable`), else None.
        estimate_ecn_marks: the simulator's ECN marks of the job (None: not estimated).
    """

    fidelity: str | None
    bound_s: float | None
    bound_ratio: float | None
    contended_with: tuple[str, ...]
    estimate_s: float | None
    estimate_error: float | None
    estimate_ecn_marks: float | None

    @classmethod
    def from_dict(cls, data: Mapping) -> EmulatedJobFigures | None:
        """The figures in a job's entry of ``summary.json`` (None: the entry holds none of them, as a
        back end that measures no network writes it).

        Raises:
            KeyError: a figure is missing.
        """
        values = _fields(cls, data, skip=())
        figures = cls(**{**values, "contended_with": tuple(values["contended_with"])})
        return None if figures == JOB_NOT_MEASURED else figures


JOB_NOT_MEASURED = EmulatedJobFigures(fidelity=None, bound_s=None, bound_ratio=None, contended_with=(),
                                      estimate_s=None, estimate_error=None, estimate_ecn_marks=None)
"""How ``summary.json`` writes the emulator's figures of a job a back end did not emulate: each None
or empty."""

EMULATED_JOB_FIGURES = frozenset(f.name for f in dataclasses.fields(EmulatedJobFigures))
"""The names of :class:`EmulatedJobFigures`' figures."""


@dataclasses.dataclass(frozen=True)
class JobSummary:
    """What a policy's run measured of one job: the figures every back end reports, and the
    emulator's own (its verdict, the simulator's estimate beside it).

    Attributes:
        job: job name (the key of the JSON's ``jobs`` object, not a field of its entry).
        model, workers, collective: the job's spec.
        wave: the wave (batch) it last started in.
        machines: the machines of its ranks, in topology order, each once.
        iterations_recorded: iterations with at least one rank's record.
        complete: every rank recorded every iteration.
        comm_mean_s, comm_p99_s: mean and 99th percentile over iterations of the slowest rank's
            communication time (None: nothing recorded).
        compute_mean_s: mean over iterations of the slowest rank's compute time.
        ecn_marks: ECN-marked packets of the job's connections, or the simulator's estimate of them
            (None: not measured).
        jct_s: job completion time, from arrival to the end of its last run (None: not recorded).
        measured: the emulator's figures of the job (its verdict, the simulator's estimate beside
            it; None: a back end that emulates no network, or a job with neither).
        arrival_s: when the job arrived (its submission time).
        start_s: its first start; end_s: the end of its last run (None: not recorded).
        runs: its runs (starts; more than one after preemption).
        iteration_mean_s: mean over its measured iterations of the slowest rank's iteration time
            (None: not measured).
        duration_s: its duration in the trace it came from (None: not from a trace).
        time_shift_s: its last time shift (Cassini's, :class:`placement.base.TimeShift`; None: never
            shifted, or not by this back end).
        phase_error_max_s: the largest phase error of its iterations after the shift's first wait
            (:class:`jobs.phase.PhaseKeeper`; None: not shifted or not measured).
        phase_errors_beyond: how many of those iterations erred beyond the drift threshold.
        drift_threshold_s: the phase error beyond which it counts as drifted.
        realignments: its re-alignments after drift (on a paced line: its waits when early).
        pace_stretch: the last pace of the line it kept, wall over profiled time (1: the wall
            clock; :mod:`jobs.pace`).
    """

    job: str
    model: str
    workers: int
    collective: str
    wave: int
    machines: tuple[str, ...]
    iterations_recorded: int
    complete: bool
    comm_mean_s: float | None
    comm_p99_s: float | None
    compute_mean_s: float | None
    ecn_marks: int | float | None
    jct_s: float | None
    measured: EmulatedJobFigures | None = None
    arrival_s: float | None = None
    start_s: float | None = None
    end_s: float | None = None
    runs: int | None = None
    iteration_mean_s: float | None = None
    duration_s: float | None = None
    time_shift_s: float | None = None
    phase_error_max_s: float | None = None
    phase_errors_beyond: int | None = None
    drift_threshold_s: float | None = None
    realignments: int | None = None
    pace_stretch: float | None = None

    def to_dict(self) -> dict:
        """JSON form: an entry of ``summary.json``'s ``jobs`` object (every field but ``job``; the
        emulator's figures among the others, None or empty where not measured)."""
        m = self.emulated
        return {
            "model": self.model, "workers": self.workers, "collective": self.collective, "wave": self.wave,
            "machines": list(self.machines), "iterations_recorded": self.iterations_recorded,
            "complete": self.complete, "comm_mean_s": self.comm_mean_s, "comm_p99_s": self.comm_p99_s,
            "compute_mean_s": self.compute_mean_s, "ecn_marks": self.ecn_marks, "fidelity": m.fidelity,
            "bound_s": m.bound_s, "bound_ratio": m.bound_ratio, "contended_with": list(m.contended_with),
            "estimate_s": m.estimate_s, "estimate_error": m.estimate_error,
            "estimate_ecn_marks": m.estimate_ecn_marks, "jct_s": self.jct_s, "arrival_s": self.arrival_s,
            "start_s": self.start_s, "end_s": self.end_s, "runs": self.runs,
            "iteration_mean_s": self.iteration_mean_s, "duration_s": self.duration_s,
            "time_shift_s": self.time_shift_s, "phase_error_max_s": self.phase_error_max_s,
            "phase_errors_beyond": self.phase_errors_beyond,
            "drift_threshold_s": self.drift_threshold_s, "realignments": self.realignments,
            "pace_stretch": self.pace_stretch,
        }

    @classmethod
    def from_dict(cls, job: str, data: Mapping) -> JobSummary:
        """Job ``job``'s summary as :meth:`to_dict` wrote it (``summary.json``)."""
        values = _fields(cls, data, skip=("job", "measured"))
        values["machines"] = tuple(values["machines"])
        return cls(job=job, **values, measured=EmulatedJobFigures.from_dict(data))

    @property
    def emulated(self) -> EmulatedJobFigures:
        """:attr:`measured`, or :data:`JOB_NOT_MEASURED` where nothing of them was measured."""
        return self.measured if self.measured is not None else JOB_NOT_MEASURED

    def figure(self, name: str):
        """The figure called ``name``, its own or the emulator's (:data:`EMULATED_JOB_FIGURES`; None
        where not measured): the columns of the job tables and of ``jobs.csv``."""
        return getattr(self.emulated if name in EMULATED_JOB_FIGURES else self, name)

    @property
    def shift_held(self) -> bool | None:
        """Whether its phase stayed within the drift threshold after the shift's first wait (None:
        not shifted or not measured)."""
        if self.phase_error_max_s is None or self.drift_threshold_s is None:
            return None
        return self.phase_error_max_s <= self.drift_threshold_s


def job_comparisons(policy: str, jobs: Iterable[JobSummary]) -> list[Comparison]:
    """Measured against estimated communication time of every comparable job of one policy."""
    return [Comparison(policy, j.job, j.comm_mean_s, j.emulated.estimate_s, job_class(j.emulated.fidelity))
            for j in jobs if comparable(j.comm_mean_s, j.emulated.estimate_s)]


def job_mark_comparisons(policy: str, jobs: Iterable[JobSummary]) -> list[MarksComparison]:
    """Measured against estimated ECN marks of every job of one policy that has both and a class
    of job (a job on one machine has none: nothing of it crossed a switch)."""
    out = []
    for j in jobs:
        estimated, cls = j.emulated.estimate_ecn_marks, job_class(j.emulated.fidelity)
        if j.ecn_marks is not None and estimated is not None and cls is not None:
            out.append(MarksComparison(policy, j.job, j.ecn_marks, estimated, cls))
    return out


@dataclasses.dataclass(frozen=True)
class EmulatedFigures:
    """What the emulator measures of a policy's network and of itself, beside the figures every back
    end reports (:class:`PolicySummary`).

    Attributes:
        cross_machine_bytes: bytes sent from machines onto the fabric over the whole policy.
        busiest_link: ``src->dst`` of the directed link busiest in its measurement window (None: none sampled).
        busiest_link_utilisation: its utilisation (0.0 when none was sampled).
        cpu_mean, cpu_p95, cpu_saturated, cpu_switch_thread_p95: CPU inside the measurement
            windows (:class:`measure.cpu.CpuSummary`).
        ecn_method: the ECN marking path (``none``, ``bpf`` or ``red``).
        host_tcp: how many hosts used each TCP setting, e.g. ``{"cubic, tcp_ecn=1": 16}``.
        ecn_busiest_port: the busiest link leaving a switch port (None: none sampled).
        ecn_marks_busiest_port: its marks (None: not measured).
        ecn_most_marked_link, ecn_most_marked_link_marks: the link with the most marks, and
            them (None: not measured).
        trustworthy, fidelity_reasons: the fidelity monitor's verdict and why it flagged the run.
        links_checked, links_failed: ports given a link-rate check, and those that failed it.
        link_check_methods: ports covered by each link check.
        worst_link_check: the worst port's check (None: none checked).
        jobs_checked, jobs_failed: jobs checked against their bound, and those slow or fast.
        worst_job_ratio: the checked job's measured / bound furthest from 1 (None: none checked).
    """

    cross_machine_bytes: int | None
    busiest_link: str | None
    busiest_link_utilisation: float | None
    cpu_mean: float | None
    cpu_p95: float | None
    cpu_saturated: bool | None
    cpu_switch_thread_p95: float | None
    ecn_method: str | None
    host_tcp: Mapping[str, int]
    ecn_busiest_port: str | None
    ecn_marks_busiest_port: int | None
    ecn_most_marked_link: str | None
    ecn_most_marked_link_marks: int | None
    trustworthy: bool | None
    fidelity_reasons: tuple[str, ...]
    links_checked: int | None
    links_failed: int | None
    link_check_methods: Mapping[str, int]
    worst_link_check: LinkCheck | None
    jobs_checked: int | None
    jobs_failed: int | None
    worst_job_ratio: float | None

    @classmethod
    def from_dict(cls, data: Mapping) -> EmulatedFigures | None:
        """The figures in a policy's entry of ``summary.json`` (None: the entry holds none of them,
        as a back end that measures no network writes it).

        Raises:
            KeyError: a figure is missing.
        """
        values = _fields(cls, data, skip=("worst_link_check",))
        check = data["worst_link_check"]
        values.update(fidelity_reasons=tuple(values["fidelity_reasons"]), host_tcp=dict(values["host_tcp"]),
                      link_check_methods=dict(values["link_check_methods"]),
                      worst_link_check=LinkCheck.from_dict(check) if check is not None else None)
        figures = cls(**values)
        return None if figures == NOT_MEASURED else figures


NOT_MEASURED = EmulatedFigures(
    cross_machine_bytes=None, busiest_link=None, busiest_link_utilisation=None, cpu_mean=None, cpu_p95=None,
    cpu_saturated=None, cpu_switch_thread_p95=None, ecn_method=None, host_tcp={}, ecn_busiest_port=None,
    ecn_marks_busiest_port=None, ecn_most_marked_link=None, ecn_most_marked_link_marks=None, trustworthy=None,
    fidelity_reasons=(), links_checked=None, links_failed=None, link_check_methods={}, worst_link_check=None,
    jobs_checked=None, jobs_failed=None, worst_job_ratio=None)
"""How ``summary.json`` writes the emulator's figures of a policy a back end did not emulate: each
None or empty."""

EMULATED_FIGURES = frozenset(f.name for f in dataclasses.fields(EmulatedFigures))
"""The names of :class:`EmulatedFigures`' figures."""


@dataclasses.dataclass(frozen=True)
class PolicySummary:
    """One policy's summary: cluster, traffic, timing and ECN figures every back end reports, its
    jobs, and the emulator's own figures of the network and of itself.

    Attributes:
        policy: the policy spec.
        machines_used: machines hosting a worker of some job.
        idle_machines_used: those of them without background load.
        cluster_machines_in_use, fragmented_machines: the most over the waves.
        comm_mean_s, comm_p99_s: over every iteration of every job (None: nothing recorded, or no
            per-iteration times).
        waves: waves (batches) run.
        scheduler: the scheduler's name.
        preemptions: jobs preempted.
        preemption_overhead_s: the time preempted jobs held their GPUs for checkpoints and restores,
            summed over jobs (0: preemption had no cost, ``preemption`` in the config).
        jct_mean_s: mean job completion time (None: none recorded).
        wall_time_s: wall-clock time of the policy's run.
        ecn_marks: marks at switch egress ports in the windows, or the simulator's estimate over
            the jobs (None: not measured).
        scale, dilation: the run's bandwidth scale and time dilation factor.
        jobs: every placed job, in placement order.
        measured: the emulator's figures of the network and of itself (cross-machine bytes, busiest
            link, CPU, ECN at ports, the fidelity monitor's; None: a back end that emulates no network).
        ina: in-network aggregation over the policy (None: no job uses collective ``ina``).
        distribution_efficiency: NetPack's DE over the jobs (:mod:`experiment.reporting.efficiency`; None:
            no job with a JCT).
        backend: the name of the back end that ran the policy (``experiment.BACKENDS``).
        comm_p90_s: 90th percentile (nearest rank) over jobs of their mean communication time
            per iteration (None: no job measured one).
        jct_p90_s: 90th percentile (nearest rank) over jobs of their completion time.
        makespan_s: the end of the last job's last run (None: not recorded).
        jct_over_duration_mean: mean over jobs from a trace of JCT / trace duration, queueing
            and network together (None: no job from a trace).
        cluster: the cluster over the run in the Titan paper's metrics (used machines, fragmentation
            rate, communication overhead, profit rate, machine hours:
            :class:`experiment.reporting.cluster_metrics.ClusterFigures`; None: not computed).
    """

    policy: str
    machines_used: int
    idle_machines_used: int
    cluster_machines_in_use: int
    fragmented_machines: int
    comm_mean_s: float | None
    comm_p99_s: float | None
    waves: int
    scheduler: str
    preemptions: int
    jct_mean_s: float | None
    wall_time_s: float
    ecn_marks: int | float | None
    scale: float
    dilation: float
    jobs: tuple[JobSummary, ...]
    measured: EmulatedFigures | None = None
    ina: InaResult | None = None
    distribution_efficiency: float | None = None
    backend: str = "emu"
    comm_p90_s: float | None = None
    jct_p90_s: float | None = None
    makespan_s: float | None = None
    jct_over_duration_mean: float | None = None
    buckets: tuple[BucketComparison, ...] = ()
    """Every job's buckets, measured against the simulator's estimate (:mod:`experiment.reporting.breakdown`;
    empty where either side has no per-bucket times)."""
    cluster: ClusterFigures | None = None
    preemption_overhead_s: float = 0.0

    @property
    def emulated(self) -> EmulatedFigures:
        """:attr:`measured`, or :data:`NOT_MEASURED` where the back end emulated no network."""
        return self.measured if self.measured is not None else NOT_MEASURED

    def figure(self, name: str):
        """The figure called ``name``, its own or the emulator's (:data:`EMULATED_FIGURES`; None where
        not measured): the columns of the tables and of ``summary.csv``."""
        return getattr(self.emulated if name in EMULATED_FIGURES else self, name)

    def job(self, name: str) -> JobSummary:
        """The summary of job ``name``.

        Raises:
            KeyError: no such job (the message lists the policy's jobs).
        """
        for j in self.jobs:
            if j.job == name:
                return j
        raise KeyError(f"no job {name!r} under {self.policy}; jobs: {', '.join(j.job for j in self.jobs)}")

    def comparisons(self) -> list[Comparison]:
        """:func:`job_comparisons` of this policy's jobs."""
        return job_comparisons(self.policy, self.jobs)

    def mark_comparisons(self) -> list[MarksComparison]:
        """:func:`job_mark_comparisons` of this policy's jobs."""
        return job_mark_comparisons(self.policy, self.jobs)

    @property
    def validation(self) -> ValidationStats:
        """The simulator against the measurements over this policy's comparable jobs."""
        return validation_stats(self.comparisons())

    def to_dict(self) -> dict:
        """JSON form: an entry of ``summary.json``'s ``policies`` (``jobs`` keyed by job name; the
        emulator's figures among the others, None or empty where not measured)."""
        m = self.emulated
        return {
            "policy": self.policy, "machines_used": self.machines_used, "idle_machines_used": self.idle_machines_used,
            "cross_machine_bytes": m.cross_machine_bytes, "cluster_machines_in_use": self.cluster_machines_in_use,
            "fragmented_machines": self.fragmented_machines, "comm_mean_s": self.comm_mean_s,
            "comm_p99_s": self.comm_p99_s, "busiest_link": m.busiest_link,
            "busiest_link_utilisation": m.busiest_link_utilisation, "waves": self.waves,
            "scheduler": self.scheduler, "preemptions": self.preemptions,
            "preemption_overhead_s": self.preemption_overhead_s, "jct_mean_s": self.jct_mean_s,
            "wall_time_s": self.wall_time_s, "cpu_mean": m.cpu_mean, "cpu_p95": m.cpu_p95,
            "cpu_saturated": m.cpu_saturated, "cpu_switch_thread_p95": m.cpu_switch_thread_p95,
            "ecn_method": m.ecn_method, "host_tcp": dict(m.host_tcp), "ecn_marks": self.ecn_marks,
            "ecn_busiest_port": m.ecn_busiest_port, "ecn_marks_busiest_port": m.ecn_marks_busiest_port,
            "ecn_most_marked_link": m.ecn_most_marked_link,
            "ecn_most_marked_link_marks": m.ecn_most_marked_link_marks, "scale": self.scale,
            "dilation": self.dilation, "trustworthy": m.trustworthy,
            "fidelity_reasons": list(m.fidelity_reasons), "links_checked": m.links_checked,
            "links_failed": m.links_failed, "link_check_methods": dict(m.link_check_methods),
            "worst_link_check": m.worst_link_check.to_dict() if m.worst_link_check else None,
            "jobs_checked": m.jobs_checked, "jobs_failed": m.jobs_failed,
            "worst_job_ratio": m.worst_job_ratio, "validation": self.validation.to_dict(),
            "distribution_efficiency": self.distribution_efficiency, "backend": self.backend,
            "comm_p90_s": self.comm_p90_s, "jct_p90_s": self.jct_p90_s, "makespan_s": self.makespan_s,
            "jct_over_duration_mean": self.jct_over_duration_mean,
            "jobs": {j.job: j.to_dict() for j in self.jobs},
            "buckets": [b.to_dict() for b in self.buckets],
            "cluster": dataclasses.asdict(self.cluster) if self.cluster is not None else None,
            **({"ina": self.ina.to_dict()} if self.ina is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> PolicySummary:
        """A policy's summary as :meth:`to_dict` wrote it (an entry of ``summary.json``'s ``policies``);
        the figures it derives (``validation``) are derived again.

        Raises:
            KeyError, TypeError, ValueError: the entry is not one :meth:`to_dict` writes.
        """
        values = _fields(cls, data, skip=("jobs", "measured", "ina", "buckets", "cluster"))
        ina, cluster = data.get("ina"), data.get("cluster")
        return cls(**values, jobs=tuple(JobSummary.from_dict(name, j) for name, j in data["jobs"].items()),
                   measured=EmulatedFigures.from_dict(data),
                   ina=InaResult.from_dict(ina) if ina is not None else None,
                   buckets=tuple(BucketComparison.from_dict(b) for b in data.get("buckets", ())),
                   cluster=ClusterFigures(**cluster) if cluster is not None else None)

    @property
    def ina_packets_per_ps_packet(self) -> float | None:
        """Worker packets per packet reaching a PS over every INA job of the policy (None: no INA
        job reached its PS, or INA not used)."""
        if self.ina is None:
            return None
        sent = sum(j.client.get("sent", 0) for j in self.ina.jobs.values())
        received = sum(j.ps.get("received", 0) for j in self.ina.jobs.values())
        return sent / received if received else None


def _fields(cls, data: Mapping, skip: Sequence[str]) -> dict:
    """``cls``'s fields but ``skip`` from ``data``: required ones must be there, the others take their
    defaults when absent."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if f.name in data:
            out[f.name] = data[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise KeyError(f"{cls.__name__}: {f.name!r} is missing")
    return out


def all_comparisons(summaries: Sequence[PolicySummary]) -> list[Comparison]:
    """:meth:`PolicySummary.comparisons` of every policy."""
    return [c for s in summaries for c in s.comparisons()]


def all_mark_comparisons(summaries: Sequence[PolicySummary]) -> list[MarksComparison]:
    """:meth:`PolicySummary.mark_comparisons` of every policy."""
    return [c for s in summaries for c in s.mark_comparisons()]


def p90(values) -> float | None:
    """The 90th percentile by nearest rank (None: no values)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] if ordered else None


def completion_figures(jobs: Sequence[JobSummary]) -> dict:
    """The completion figures of a policy's jobs, for either back end: p90 of the jobs' mean
    communication times and of their JCTs, the makespan, and the mean JCT over trace duration."""
    stretch = [j.jct_s / j.duration_s for j in jobs if j.duration_s and j.jct_s is not None]
    ends = [j.end_s for j in jobs if j.end_s is not None]
    return {"comm_p90_s": p90(j.comm_mean_s for j in jobs if j.comm_mean_s is not None),
            "jct_p90_s": p90(j.jct_s for j in jobs if j.jct_s is not None),
            "makespan_s": max(ends) if ends else None,
            "jct_over_duration_mean": sum(stretch) / len(stretch) if stretch else None}


@dataclasses.dataclass
class PolicyRun:
    """What a back end returns of one policy's run: the summary every back end writes alike, and
    the emulator's own measurements behind it (None on the simulator).

    Attributes:
        summary: the policy's :class:`PolicySummary`.
        measurements: the emulator's :class:`experiment.reporting.measurements.PolicyResult` (per-link bytes,
            port checks, queues), or None.
        placements: the entries of ``<policy>/placements.json``: where each job last started
            (:class:`experiment.reporting.measurements.StartRecord`, with its ``wave``).
        starts: the entries of ``<policy>/starts.json``: every start, a preempted job's earlier ones too.
        decisions: the entries of ``<policy>/decisions.json``: the placer's decisions that timed jobs
            or logged themselves (:class:`experiment.run.loop.PlacerDecision`; Cassini's log, §8.6).
        timeline: every job's iterations and their Up phases (:class:`experiment.reporting.timeline.UpPhase`;
            ``<policy>/timeline.csv`` and ``timelines.png``), empty where nothing was recorded.
        cluster: the cluster at each arrival (:class:`experiment.reporting.cluster_metrics.ClusterSample`;
            ``<policy>/cluster.csv`` and ``cluster.png``), empty where no job was placed.
    """

    summary: PolicySummary
    measurements: object | None = None
    placements: tuple[dict, ...] = ()
    starts: tuple[dict, ...] = ()
    decisions: tuple[dict, ...] = ()
    timeline: tuple = ()
    cluster: tuple = ()
