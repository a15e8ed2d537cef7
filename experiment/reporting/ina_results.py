"""Typed records of in-network aggregation over one policy's emulated run (:mod:`emulator.ina_runs`).

:class:`InaResult` is ``measurements.json``'s ``ina`` and ``summary.json``'s per-policy ``ina``;
``ina.csv`` has a row per INA job (:func:`experiment.reporting.report.write_run_report`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ina.protocol import VALUES_PER_PACKET, frame_bytes


@dataclasses.dataclass(frozen=True)
class InaJobResult:
    """What one INA job did over the policy's run (every run of it, when preempted and restarted).

    Attributes:
        job: job name.
        job_ids: its INA id in each run (a restart gets a new id: the PS keeps no old results for it).
        ps_host: the machine of its parameter server.
        leaves: the switches that aggregated its machines' packets (:class:`ina.plan.JobPlan`).
        root: the PS's ToR where it aggregated the job, else None.
        client: its workers' client counters summed over machines and runs (:class:`ina.client.ClientStats`:
            ``sent``, ``resent``, ``timeouts``, ``results``, ``ecn_results``, ...).
        ps: its parameter server's counters of it summed over runs (:meth:`ina.ps.PsService.stats`'s
            per-job counters: ``received``, ``aggregated``, ``fallback``, ...); empty when not read.
        uplink: ToR -> its packets up that rack's uplinks towards the PS, summed over runs, as the
            ToR's aggregator counted them (:func:`ina.plan.uplink_packets`); every ToR of its
            machines but the PS's.
        uplink_unaggregated: ToR -> the packets its workers there sent: what the uplinks would
            have carried with no switch summing them (a parameter server without INA).
        uplink_complete: every worker's client counters were read in every run (a preempted
            agent writes none); when False the unaggregated figure is short and no ratio is given.
        values_per_packet: int32 values each of its packets carried.
    """

    job: str
    job_ids: tuple[int, ...]
    ps_host: str
    leaves: tuple[str, ...]
    root: str | None
    client: Mapping[str, int]
    ps: Mapping[str, int]
    uplink: Mapping[str, int] = dataclasses.field(default_factory=dict)
    uplink_unaggregated: Mapping[str, int] = dataclasses.field(default_factory=dict)
    uplink_complete: bool = True
    values_per_packet: int = VALUES_PER_PACKET

    @property
    def uplink_bytes(self) -> int:
        """Bytes of its INA packets up its racks' uplinks (frames of :func:`ina.protocol.frame_bytes`)."""
        return sum(self.uplink.values()) * frame_bytes(self.values_per_packet)

    @property
    def uplink_bytes_unaggregated(self) -> int:
        """Bytes its workers' packets would have carried up the same uplinks unaggregated."""
        return sum(self.uplink_unaggregated.values()) * frame_bytes(self.values_per_packet)

    @property
    def uplink_fraction(self) -> float | None:
        """Uplink bytes with INA over unaggregated (0.25: a quarter); None when nothing crossed an
        uplink or some worker's counters are missing."""
        base = self.uplink_bytes_unaggregated
        return self.uplink_bytes / base if base and self.uplink_complete else None

    @property
    def packets_per_ps_packet(self) -> float | None:
        """Worker packets sent per packet reaching the PS: the in-network reduction (1: none); None
        when the PS received nothing."""
        received = self.ps.get("received", 0)
        return self.client.get("sent", 0) / received if received else None

    @property
    def fallback_fraction(self) -> float | None:
        """Fraction of the packets reaching the PS that fell back after a slot collision."""
        received = self.ps.get("received", 0)
        return self.ps.get("fallback", 0) / received if received else None

    def to_dict(self) -> dict:
        """JSON form (an entry of ``measurements.json``'s ``ina.jobs``)."""
        return {"job_ids": list(self.job_ids), "ps_host": self.ps_host, "leaves": list(self.leaves),
                "values_per_packet": self.values_per_packet,
                "root": self.root, "client": dict(self.client), "ps": dict(self.ps),
                "packets_per_ps_packet": self.packets_per_ps_packet, "fallback_fraction": self.fallback_fraction,
                "uplink_packets": dict(self.uplink), "uplink_packets_unaggregated": dict(self.uplink_unaggregated),
                "uplink_complete": self.uplink_complete, "uplink_bytes": self.uplink_bytes,
                "uplink_bytes_unaggregated": self.uplink_bytes_unaggregated, "uplink_fraction": self.uplink_fraction}

    @classmethod
    def from_dict(cls, job: str, data: dict) -> InaJobResult:
        """Job ``job``'s result as :meth:`to_dict` wrote it (the derived figures are derived again)."""
        return cls(job=job, job_ids=tuple(data["job_ids"]), ps_host=data["ps_host"], leaves=tuple(data["leaves"]),
                   root=data["root"], client=dict(data["client"]), ps=dict(data["ps"]),
                   uplink=dict(data.get("uplink_packets", {})),
                   uplink_unaggregated=dict(data.get("uplink_packets_unaggregated", {})),
                   uplink_complete=data.get("uplink_complete", True),
                   values_per_packet=data.get("values_per_packet", VALUES_PER_PACKET))


@dataclasses.dataclass(frozen=True)
class InaResult:
    """In-network aggregation over one policy's run.

    Attributes:
        used: whether the INA jobs ran over INA (False: no engine could run and ``ina.use`` was
            ``optional``, so they ran the ring allreduce).
        engine: ``bmv2`` or ``software`` (``none`` when not used).
        why: why that engine (or why none).
        slots: aggregator slots in use at every switch.
        switches: the switches with an aggregator.
        aggregators: each aggregator's counters over the policy (:class:`ina.aggregator.AggregatorStats`).
        parameter_servers: each PS machine's counters over the policy (all its jobs).
        jobs: every INA job's result.
        capacity: whether the aggregators keep up with their switches' links
            (:meth:`emulator.ina_engines.EngineCapacity.to_dict`); None when not used.
        cpu: each INA process (an aggregator, a PS) by name: its busiest thread's 95th percentile
            share of one core while the iterations were measured (a process near 1 held its jobs
            back, not their links); empty where none was sampled.
    """

    used: bool
    engine: str
    why: str
    slots: int
    switches: tuple[str, ...]
    aggregators: Mapping[str, Mapping[str, int]]
    parameter_servers: Mapping[str, Mapping]
    jobs: Mapping[str, InaJobResult]
    capacity: Mapping | None = None
    cpu: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON form (``measurements.json``'s ``ina``)."""
        return {"used": self.used, "engine": self.engine, "why": self.why, "slots": self.slots,
                "capacity": dict(self.capacity) if self.capacity is not None else None,
                "switches": list(self.switches), "aggregators": {s: dict(c) for s, c in self.aggregators.items()},
                "parameter_servers": {h: dict(c) for h, c in self.parameter_servers.items()},
                "jobs": {j: r.to_dict() for j, r in self.jobs.items()}, "cpu": dict(self.cpu)}

    @classmethod
    def from_dict(cls, data: dict) -> InaResult:
        """The result :meth:`to_dict` wrote."""
        return cls(used=data["used"], engine=data["engine"], why=data["why"], slots=data["slots"],
                   switches=tuple(data["switches"]), aggregators={s: dict(c) for s, c in data["aggregators"].items()},
                   parameter_servers={h: dict(c) for h, c in data["parameter_servers"].items()},
                   jobs={j: InaJobResult.from_dict(j, r) for j, r in data["jobs"].items()},
                   capacity=data.get("capacity"), cpu=dict(data.get("cpu", {})))
