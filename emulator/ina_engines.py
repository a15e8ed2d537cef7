"""The INA aggregator engines and whether they keep up: bmv2 (``ina/p4/aggregator.p4``) or the
software engine (:mod:`ina.softswitch`), one object per engine in :data:`INA_ENGINES` chosen once
per fabric (:func:`resolve_engine`), its packet rate on this machine (:func:`engine_rate`) against
what the INA switches must take (:class:`EngineCapacity`), and the PAT meter's depth (:func:`pat_burst`).

Used by :class:`emulator.ina_fabric.InaFabric`; ``docs/ina.md`` (Capacity and PAT).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Mapping

from common.errors import EmulationError, TestbedError
from common.jsonfile import write_json_atomic
from common.paths import PROJECT_ROOT
from common.sockets import free_tcp_port
from ina.p4.build import BUILD_DIR, compile_program, engine_available, find_toolchain
from ina.p4.switch import Bmv2Aggregator
from ina.plan import carrying_dilation
from ina.protocol import frame_bytes
from ina.rig import packet_rate
from ina.softswitch import SoftAggregator
from measure.shaping import burst_bytes

RATES_FILE = os.path.join(BUILD_DIR, "engine-rates.json")
"""Each engine's measured packet rate on this machine, by engine, values per packet and program
(:func:`engine_rate`); beside the compiled programs, which are this machine's too."""


@dataclasses.dataclass(frozen=True)
class EngineCapacity:
    """Whether the aggregators carry what the experiment declares (:attr:`emulator.ina_fabric.InaFabric.capacity`):
    each switch's aggregator must take every INA packet its links can bring it, aggregated or not
    (a seq the PAT meter refuses still crosses the aggregator's pipeline, which forwards it
    unaggregated), and an engine slower than the declared Peak Aggregation Throughput
    (``ina.pat_gbps``, mapped as links are) could never aggregate at it.

    Attributes:
        engine_pps: packets per second one aggregator of the fabric's engine takes here
            (:func:`ina.rig.packet_rate`, at the fabric's values per packet).
        source: ``measured now`` or when it was measured (:data:`RATES_FILE`).
        demand_pps: per INA switch, the most INA packets per second its links can bring it
            (:func:`ina.plan.aggregator_demand_pps`, at the run's scale and dilation).
        pat_pps: the declared PAT in packets per second at the run's scale and dilation
            (:func:`ina.plan.pat_pps`; inf: none declared).
        dilation: the run's.
    """

    engine_pps: float
    source: str
    demand_pps: Mapping[str, float]
    pat_pps: float
    dilation: float

    @property
    def needed_pps(self) -> dict[str, float]:
        """Per INA switch, what its aggregator must take: every INA packet its links can bring it
        (none where the PAT is 0: no switch aggregates, and no INA packet is sent to one)."""
        return {s: d if self.aggregates else 0.0 for s, d in self.demand_pps.items()}

    @property
    def aggregates(self) -> bool:
        """Whether any switch aggregates: not at a declared PAT of 0
        (:attr:`emulator.ina_fabric.InaFabric.aggregates`)."""
        return self.pat_pps > 0

    @property
    def carrying_dilation(self) -> float | None:
        """The least dilation at which every aggregator carries what it must (None: it does now)."""
        return carrying_dilation(max(self.needed_pps.values()), self.engine_pps, self.dilation)

    @property
    def keeps_up(self) -> bool:
        """Every aggregator takes what it must."""
        return self.carrying_dilation is None

    @property
    def refuses(self) -> bool:
        """The engine cannot aggregate at the declared PAT (a run that requires INA stops)."""
        return math.isfinite(self.pat_pps) and self.pat_pps > self.engine_pps

    @property
    def pat_dilation(self) -> float | None:
        """The least dilation at which the engine aggregates at the declared PAT (None: it does now)."""
        return carrying_dilation(self.pat_pps, self.engine_pps, self.dilation) if math.isfinite(self.pat_pps) \
            else None

    def line(self, engine: str, values_per_packet: int) -> str:
        """One line for people: the rate, what the busiest switch must take and why, and what to do
        where the engine falls short."""
        if not self.aggregates:
            return (f"INA: {engine} aggregators, ina.pat_gbps 0: no switch aggregates, every job's packets go to "
                    f"its parameter server")
        needed = self.needed_pps
        busiest = max(needed, key=needed.get)
        head = (f"INA: a {engine} aggregator takes {self.engine_pps:,.0f} packets/s of {values_per_packet} values "
                f"here ({self.source}); ")
        if self.refuses:
            return (head + f"ina.pat_gbps declares {self.pat_pps:,.0f} claims/s of wall time at dilation "
                           f"{self.dilation:g}: it cannot aggregate at the declared PAT; dilation "
                           f"{self.pat_dilation:g} would, or declare a lower ina.pat_gbps")
        metered = (f", each metered at the declared PAT ({self.pat_pps:,.0f} claims/s: seqs beyond it pass "
                   f"unaggregated, through it)" if math.isfinite(self.pat_pps) else "")
        head += (f"{busiest} must take {needed[busiest]:,.0f}/s (every INA packet its links can bring) at dilation "
                 f"{self.dilation:g}")
        if self.keeps_up:
            return head + ": the aggregators carry it" + metered
        return (head + f": its aggregator may not keep up, and INA jobs through it may be judged slow; dilation "
                       f"{self.carrying_dilation:g} carries it" + metered)

    def to_dict(self) -> dict:
        """JSON form (``measurements.json``'s ``ina.capacity``)."""
        return {"engine_pps": self.engine_pps, "source": self.source, "demand_pps": dict(self.demand_pps),
                "pat_pps": self.pat_pps if math.isfinite(self.pat_pps) else None, "dilation": self.dilation,
                "carrying_dilation": self.carrying_dilation, "keeps_up": self.keeps_up}


PAT_METER_BYTES = 15000
"""Least depth of the PAT meter, in bytes of claims: an aggregator takes a window's burst of seqs
(about ten packets) without refusing them, as a switch's aggregation pipeline has no idle-time
serialisation to emulate; a link's shaper is held to two frames (:func:`measure.shaping.burst_bytes`)."""


def pat_burst(pat_pps: float, values_per_packet: int, mtu: int) -> int:
    """The depth, in claims, of the meter that holds an aggregator to ``pat_pps`` (rule 8a of
    :mod:`ina.aggregator`): the token bucket of a link shaped at that rate in frames of
    ``values_per_packet`` (:func:`measure.shaping.burst_bytes`), at least
    :data:`PAT_METER_BYTES`, in whole frames."""
    frame = frame_bytes(values_per_packet)
    return math.ceil(max(PAT_METER_BYTES, burst_bytes(pat_pps * frame * 8 / 1e6, mtu)) / frame)


def engine_rate(engine, values_per_packet: int, prepared, log_dir: str, record, path: str = RATES_FILE
                ) -> tuple[float, str]:
    """Packets per second an aggregator of ``engine`` (:data:`INA_ENGINES`' object, with what its
    ``prepare`` gave) takes on this machine, and where the figure is from: read from ``path`` where
    this engine, values per packet and code (its ``code_stamp``) were measured, else measured now
    (its ``packet_rate``: :func:`ina.rig.packet_rate`, its namespace, veths and processes told to
    ``record(kind, name)`` first) and written there.

    Raises:
        EmulationError: the measurement failed.
    """
    key = f"{engine.name}/{values_per_packet}/{engine.code_stamp(prepared)[:16]}/{os.cpu_count()}cpu"
    try:
        with open(path) as f:
            known = json.load(f)
        if isinstance(known, dict) and isinstance(known.get(key), dict):
            return float(known[key]["packets_per_s"]), f"measured {known[key]['measured']}"
    except (OSError, ValueError, TypeError, KeyError):
        known = {}
    try:
        pps = engine.packet_rate(prepared, values_per_packet, os.path.join(log_dir, "rate"), record)
    except TestbedError as e:
        raise EmulationError(f"measuring the {engine.name} aggregator's packet rate: {e}") from None
    known = known if isinstance(known, dict) else {}
    known[key] = {"packets_per_s": pps, "measured": time.strftime("%Y-%m-%d %H:%M")}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json_atomic(path, known)
    except OSError:
        pass  # measured again next time
    return pps, "measured now"


class Bmv2Engine:
    """bmv2's ``simple_switch`` running ``ina/p4/aggregator.p4``, compiled for the run's slot pool."""

    name = "bmv2"

    def prepare(self, slots: int, values_per_packet: int):
        """The toolchain and the program compiled with ``slots`` slots and ``values_per_packet`` lanes.

        Raises:
            EmulationError: the program did not compile.
        """
        toolchain, _ = find_toolchain()
        try:
            return toolchain, compile_program(toolchain, slots, lanes=values_per_packet)
        except TestbedError as e:
            raise EmulationError(str(e)) from None

    def aggregator(self, prepared, ports: dict[int, str], index: int, log_dir: str, switch: str, log: str):
        """One switch's aggregator process (not started)."""
        toolchain, program = prepared
        return Bmv2Aggregator(toolchain, program, ports, free_tcp_port(), 100 + index, log)

    def check_slots(self, n_slots: int, slots: int) -> None:
        """Raise EmulationError when more slots are asked for than the program has."""
        if n_slots > slots:
            raise EmulationError(f"{n_slots} INA slots asked for; the bmv2 program has {slots}")

    def code_stamp(self, prepared) -> str:
        """What a measured packet rate holds for: the compiled program's stamp."""
        _, program = prepared
        with open(program + ".sha256") as f:
            return f.read().strip()

    def packet_rate(self, prepared, values_per_packet: int, log_dir: str, record) -> float:
        """One aggregator's packets per second here (:func:`ina.rig.packet_rate`)."""
        toolchain, program = prepared
        return packet_rate(self.name, values_per_packet, log_dir, toolchain, program, record=record,
                           thrift_port=free_tcp_port())


class SoftwareEngine:
    """The software engine (:mod:`ina.softswitch`): the same rules, any number of slots."""

    name = "software"

    def prepare(self, slots: int, values_per_packet: int):
        """Nothing to compile: the lanes go to each process."""
        return values_per_packet

    def aggregator(self, prepared, ports: dict[int, str], index: int, log_dir: str, switch: str, log: str):
        """One switch's aggregator process (not started)."""
        return SoftAggregator(ports, os.path.join(log_dir, f"{switch}.sock"), log, values_per_packet=prepared)

    def check_slots(self, n_slots: int, slots: int) -> None:
        """Any number of slots runs."""

    def code_stamp(self, prepared) -> str:
        """What a measured packet rate holds for: the engine's and its process's source."""
        digest = hashlib.sha256()
        for module in ("aggregator.py", "softswitch.py"):
            with open(os.path.join(PROJECT_ROOT, "ina", module), "rb") as f:
                digest.update(f.read())
        return digest.hexdigest()

    def packet_rate(self, prepared, values_per_packet: int, log_dir: str, record) -> float:
        """One aggregator's packets per second here (:func:`ina.rig.packet_rate`)."""
        return packet_rate(self.name, values_per_packet, log_dir, record=record)


INA_ENGINES = {"bmv2": Bmv2Engine(), "software": SoftwareEngine()}
"""Engine name -> the engine, chosen once per fabric (:func:`resolve_engine` picks the name)."""


def resolve_engine(requested: str = "auto") -> tuple[str, str]:
    """The engine to use and why: ``auto`` -> bmv2 where it runs here, else software.

    Raises:
        EmulationError: an unknown engine, or ``bmv2`` asked for where it cannot run.
    """
    if requested not in ("auto", *INA_ENGINES):
        raise EmulationError(f"INA engine {requested!r}: valid: auto, {', '.join(INA_ENGINES)}")
    available, why = engine_available()
    if requested == "software":
        return "software", "asked for"
    if requested == "bmv2" and available != "bmv2":
        raise EmulationError(f"INA engine bmv2 asked for, but it cannot run here: {why}")
    return available, why
