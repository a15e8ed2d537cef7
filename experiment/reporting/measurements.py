"""Typed records of one policy's emulated run, as the runner hands them to the report.

:class:`PolicyResult` is what :class:`emulator.policy_run.PolicyMeasurement` measured;
:meth:`PolicyResult.to_dict` is ``<policy>/measurements.json``, whose layout readers of a run
directory (:mod:`experiment.reporting.export`, :mod:`experiment.validate.estimates`) rely on. The per-wave link data
(:class:`WaveLinks`), the CPU summaries (:class:`measure.cpu.CpuSummary`) and the port
sampler's figures (:class:`PortSamplerStats`) are typed too; only a wave's ECN counters (the
marker's per-job attribution, :func:`emulator.backend.ecn_of_wave`) stay in their JSON form,
read through :meth:`WaveLinks.job_marks`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from experiment.reporting.ina_results import InaResult
from experiment.reporting.summary import PolicySummary
from measure.cpu import CpuSummary
from measure.fidelity import FidelityVerdict
from placement.base import Placement
from sim.flowsim import JobEstimate

Link = tuple[str, str]


def _link_list(d: Mapping[Link, float]) -> list[list]:
    """``{(u, v): x}`` as the JSON ``[[u, v, x], ...]``, sorted by link."""
    return [[u, v, x] for (u, v), x in sorted(d.items())]


@dataclasses.dataclass(frozen=True)
class StartRecord:
    """A start of a job: the batch (wave) it started in, when (virtual seconds) and where."""

    wave: int
    start_s: float
    placement: Placement

    @property
    def job(self) -> str:
        """The job's name."""
        return self.placement.job

    @property
    def machines_by_rank(self) -> tuple[str, ...]:
        """The machine of each rank, in rank order."""
        return tuple(s.machine for s in self.placement.slots)

    def to_dict(self) -> dict:
        """JSON form (``placements.json``): ``wave``, ``start_s`` and the placement's fields."""
        return {"wave": self.wave, "start_s": self.start_s, **self.placement.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping) -> "StartRecord":
        """Inverse of :meth:`to_dict` (``start_s`` 0 where an older file has none)."""
        return cls(int(d["wave"]), float(d.get("start_s", 0.0)), Placement.from_dict(d))


@dataclasses.dataclass(frozen=True)
class ClusterState:
    """The cluster as a wave started: machines holding any job (background included), and fragmented ones."""

    wave: int
    machines_in_use: int
    fragmented_machines: int


@dataclasses.dataclass(frozen=True)
class EcnSetup:
    """The ECN marking path of the run (``none``, ``bpf`` or ``red``), why, and the hosts' TCP settings."""

    method: str
    why: str
    hosts: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class WaveLinks:
    """One wave's traffic per directed link: over the whole wave (kernel counters, start-up
    included) and inside its measurement window (first recorded iteration start .. last end).

    ``window_link_bytes`` holds only the links the port samples cover; ``window_link_marks`` is
    None when ECN was not measured (never zeros). ``ecn`` is the wave's marker counters
    (:func:`emulator.backend.ecn_of_wave`), None when not measured.
    """

    index: int
    jobs: tuple[str, ...]
    duration_s: float
    startup_s: float | None
    window_s: tuple[float, float] | None
    link_bytes: dict[Link, int]
    window_link_bytes: dict[Link, int]
    window_link_marks: dict[Link, int] | None
    ecn: dict | None = None

    @property
    def window_length_s(self) -> float:
        """Length of the measurement window (0 without one)."""
        return self.window_s[1] - self.window_s[0] if self.window_s else 0.0

    def job_marks(self) -> dict[str, int]:
        """ECN marks per job in this wave (empty when not measured or not attributed per job)."""
        return {job: c["marks"] for job, c in ((self.ecn or {}).get("jobs") or {}).items()}

    def to_dict(self) -> dict:
        """JSON form (an entry of ``measurements.json``'s ``waves``)."""
        return {"index": self.index, "jobs": list(self.jobs), "duration_s": self.duration_s,
                "startup_s": self.startup_s, "window_s": list(self.window_s) if self.window_s else None,
                "link_bytes": _link_list(self.link_bytes), "window_link_bytes": _link_list(self.window_link_bytes),
                "window_link_marks": None if self.window_link_marks is None else _link_list(self.window_link_marks),
                "ecn": self.ecn}


@dataclasses.dataclass(frozen=True)
class PortSamplerStats:
    """How the switch-port sampler ran: samples taken, its interval, and the mean cost of a sample."""

    samples: int
    interval_s: float
    mean_cost_s: float

    def to_dict(self) -> dict:
        """JSON form (``measurements.json``'s ``port_sampler``)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class PolicyResult:
    """What one policy's run measured (see the module docstring); ``summary`` is the report's
    (:func:`experiment.reporting.report.summarise_policy`)."""

    policy: str
    scheduler: str
    placements: tuple[StartRecord, ...]  # one per job: where it last started (where it finished)
    starts: tuple[StartRecord, ...]  # every start, a preempted job's earlier ones included
    cluster_states: tuple[ClusterState, ...]
    waves: tuple[WaveLinks, ...]  # bytes (and marks) per link of every wave, whole and windowed
    jct_s: dict[str, float]
    preemptions: int
    link_bytes: dict[tuple[str, str], int]  # over the whole policy (kernel counters), every batch once
    link_rate_mbps: dict[tuple[str, str], float]
    cpu: CpuSummary  # the whole run
    cpu_measured: CpuSummary  # inside the waves' measurement windows
    ecn: EcnSetup
    fidelity: FidelityVerdict
    estimates: dict[str, JobEstimate]
    scale: float
    dilation: float
    port_sampler: PortSamplerStats
    dir: str
    queue_stats: str
    wall_time_s: float
    ina: InaResult | None = None  # None: no job of the run uses collective ina
    summary: PolicySummary | None = None
    decisions: tuple[dict, ...] = ()  # the placer's decisions that timed jobs or logged (decisions.json)
    timeline: tuple = ()  # every job's iterations and Up phases (experiment.reporting.timeline.UpPhase)
    preemption_overhead_s: float = 0.0  # GPU-holding time of checkpoints and restores, over jobs

    def to_dict(self) -> dict:
        """JSON form (``measurements.json``), without the summary (``summary.json`` holds it)."""
        return {
            "policy": self.policy, "scheduler": self.scheduler,
            "placements": [p.to_dict() for p in self.placements], "starts": [s.to_dict() for s in self.starts],
            "cluster_states": [dataclasses.asdict(c) for c in self.cluster_states],
            "waves": [w.to_dict() for w in self.waves],
            "jct_s": dict(self.jct_s), "preemptions": self.preemptions,
            "preemption_overhead_s": self.preemption_overhead_s,
            "link_bytes": _link_list(self.link_bytes), "link_rate_mbps": _link_list(self.link_rate_mbps),
            "cpu": self.cpu.to_dict(), "cpu_measured": self.cpu_measured.to_dict(), "ecn": dataclasses.asdict(self.ecn),
            "fidelity": self.fidelity.to_dict(), "estimates": {j: e.to_dict() for j, e in self.estimates.items()},
            "scale": self.scale, "dilation": self.dilation, "port_sampler": self.port_sampler.to_dict(),
            "dir": self.dir,
            "queue_stats": self.queue_stats, "wall_time_s": self.wall_time_s,
            **({"ina": self.ina.to_dict()} if self.ina is not None else {}),
        }

