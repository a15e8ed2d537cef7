"""Typed records of one policy's emulated run, as the runner hands them to the report.

:class:`PolicyResult` is what :func:`testbed.runner.run_policy` measured;
:meth:`PolicyResult.to_dict` is ``<policy>/measurements.json``, whose layout readers of a run
directory (:mod:`experiment.export`, :mod:`experiment.estimates`) rely on. The per-wave link data
(``waves``), the CPU summaries and the port sampler's figures stay in their JSON form.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from placement.base import Placement
from sim.flowsim import JobEstimate
from testbed.fidelity import FidelityVerdict


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


@dataclasses.dataclass
class PolicyResult:
    """What one policy's run measured (see the module docstring); ``summary`` is the report's."""

    policy: str
    scheduler: str
    placements: tuple[StartRecord, ...]  # one per job: where it last started (where it finished)
    starts: tuple[StartRecord, ...]  # every start, a preempted job's earlier ones included
    cluster_states: tuple[ClusterState, ...]
    waves: tuple[dict, ...]  # runner.wave_dict of every wave: bytes (and marks) per link, whole and windowed
    jct_s: dict[str, float]
    preemptions: int
    link_bytes: dict[tuple[str, str], int]  # over the whole policy (kernel counters), every batch once
    link_rate_mbps: dict[tuple[str, str], float]
    cpu: dict
    cpu_measured: dict
    ecn: EcnSetup
    fidelity: FidelityVerdict
    estimates: dict[str, JobEstimate]
    scale: float
    dilation: float
    port_sampler: dict
    dir: str
    queue_stats: str
    wall_time_s: float
    summary: dict | None = None

    def to_dict(self) -> dict:
        """JSON form (``measurements.json``), without the summary (``summary.json`` holds it)."""
        return {
            "policy": self.policy, "scheduler": self.scheduler,
            "placements": [p.to_dict() for p in self.placements], "starts": [s.to_dict() for s in self.starts],
            "cluster_states": [dataclasses.asdict(c) for c in self.cluster_states], "waves": list(self.waves),
            "jct_s": dict(self.jct_s), "preemptions": self.preemptions,
            "link_bytes": [[u, v, b] for (u, v), b in sorted(self.link_bytes.items())],
            "link_rate_mbps": [[u, v, r] for (u, v), r in sorted(self.link_rate_mbps.items())],
            "cpu": self.cpu, "cpu_measured": self.cpu_measured, "ecn": dataclasses.asdict(self.ecn),
            "fidelity": self.fidelity.to_dict(), "estimates": {j: e.to_dict() for j, e in self.estimates.items()},
            "scale": self.scale, "dilation": self.dilation, "port_sampler": self.port_sampler, "dir": self.dir,
            "queue_stats": self.queue_stats, "wall_time_s": self.wall_time_s,
        }
