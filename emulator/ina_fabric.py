"""INA aggregators in the emulated fabric: one engine per INA switch, attached one-armed.

:class:`emulator.net.EmulatedNetwork` gives each switch of its ``ina_switches`` an aggregator
port, and its controller steers INA packets there (:func:`controller.rules.ina_steering`).
:class:`InaFabric` serves those ports: an aggregator engine on each port's peer (bmv2 running
``ina/p4/aggregator.p4``, else the software engine, :mod:`ina.softswitch`), the jobs' table entries
from their plans (:func:`ina.plan.plan_job`), and the jobs' parameter servers, one ``python -m
ina.ps`` per PS machine. Before the engines start, :func:`engine_rate` and
:class:`EngineCapacity` say whether the aggregators keep up with their links. Its engines are
processes of the run, recorded by PID in the network's run record.

A fixed set of jobs (:meth:`InaFabric.install`) or an online schedule (:meth:`InaFabric.add_jobs`,
:meth:`InaFabric.remove_jobs`): ``docs/ina.md`` (Aggregators attached to the ToRs; Capacity and PAT).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence

from common.errors import EmulationError, TestbedError
from common.jsonfile import write_json_atomic
from common.lifecycle import StartStop
from common.paths import PROJECT_ROOT
from common.sockets import free_tcp_port
from emulator.journal import Change, process_change
from emulator.procs import stop_process
from ina.aggregator import AggregatorStats, JobTraffic
from ina.p4.build import BUILD_DIR, DEFAULT_SLOTS, compile_program, engine_available, find_toolchain
from ina.p4.switch import Bmv2Aggregator, aggregator_stats
from ina.plan import JobPlan, aggregator_demand_pps, carrying_dilation, switch_tables
from ina.protocol import VALUES_PER_PACKET, check_slots, check_values_per_packet, frame_bytes
from ina.ps import PsJob
from ina.rig import packet_rate
from ina.softswitch import SoftAggregator
from measure.shaping import burst_bytes

PS_READY_S = 20.0
"""How long a parameter server may take to acknowledge a config (its first after binding its port)."""
RATES_FILE = os.path.join(BUILD_DIR, "engine-rates.json")
"""Each engine's measured packet rate on this machine, by engine, values per packet and program
(:func:`engine_rate`); beside the compiled programs, which are this machine's too."""


@dataclasses.dataclass(frozen=True)
class EngineCapacity:
    """Whether the aggregators carry what the experiment declares (:meth:`InaFabric.capacity`): each
    switch's aggregator must take its declared Peak Aggregation Throughput (``ina.pat_gbps``,
    mapped as links are), or, where that is more than its links can bring it, what they bring.

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
        """Per INA switch, what its aggregator must take: its PAT, or less where its links bring less."""
        return {s: min(d, self.pat_pps) for s, d in self.demand_pps.items()}

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
        """The engine cannot carry a declared PAT (a run that requires INA stops)."""
        return math.isfinite(self.pat_pps) and not self.keeps_up

    def line(self, engine: str, values_per_packet: int) -> str:
        """One line for people: the rate, what the busiest switch must take and why, and what to do
        where the engine falls short."""
        needed = self.needed_pps
        busiest = max(needed, key=needed.get)
        why = ("its links can bring" if self.demand_pps[busiest] <= self.pat_pps
               else f"ina.pat_gbps declares, as {self.pat_pps:,.0f} packets/s of wall time")
        head = (f"INA: a {engine} aggregator takes {self.engine_pps:,.0f} packets/s of {values_per_packet} values "
                f"here ({self.source}); {busiest} must take {needed[busiest]:,.0f}/s ({why}) at dilation "
                f"{self.dilation:g}")
        if self.keeps_up:
            metered = (f", each metered at the declared PAT ({self.pat_pps:,.0f} claims/s: seqs beyond it pass "
                       f"unaggregated)" if math.isfinite(self.pat_pps) else "")
            return head + ": the aggregators carry it" + metered
        if self.refuses:
            return (head + f": it cannot carry the declared PAT; dilation {self.carrying_dilation:g} would, or "
                           f"declare a lower ina.pat_gbps")
        return (head + f": its aggregator may not keep up, and INA jobs through it may be judged slow; dilation "
                       f"{self.carrying_dilation:g} carries it")

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


def endpoints(net, plan: JobPlan) -> dict:
    """Each machine's :class:`workers.launcher.InaEndpoint` of a job planned on ``net``'s topology."""
    from workers.launcher import InaEndpoint

    ps_addr = net.g.nodes[plan.ps_host]["ip"]
    return {m: InaEndpoint(plan.job_id, bit, ps_addr, net.g.nodes[m]["ip"], plan.values_per_packet)
            for m, bit in plan.bits.items()}


@dataclasses.dataclass
class PsProcess:
    """A parameter server the fabric started (:meth:`InaFabric.start_ps`, :meth:`InaFabric.add_jobs`),
    its files and the jobs it serves.

    Attributes:
        host: its machine.
        proc: the process.
        config, stats, ack, log: its ``--config``, ``--stats`` and ``--ack`` files and its output.
        jobs: job id -> what its config lists (the jobs it serves once it acknowledged).
    """

    host: str
    proc: subprocess.Popen
    config: str
    stats: str
    ack: str
    log: str
    jobs: dict[int, PsJob] = dataclasses.field(default_factory=dict)

    def write_config(self) -> None:
        """Write its config file listing :attr:`jobs` (atomically: it may be reading the last one)."""
        _write_ps_config(self.config, self.jobs)

    def acknowledged(self) -> tuple[int, list[int]] | None:
        """``(generation, job ids)`` of its ack file, or None while there is none."""
        try:
            with open(self.ack) as f:
                d = json.load(f)
            return int(d["generation"]), [int(j) for j in d["jobs"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _write_ps_config(path: str, jobs: Mapping[int, PsJob]) -> None:
    """A parameter server's config file (:func:`ina.ps.load_jobs`), written atomically."""
    write_json_atomic(path, {"jobs": [j.to_dict() for _, j in sorted(jobs.items())]})


def _read_stats(path: str) -> dict:
    """A parameter server's counters file, or ``{}`` where none was written."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


class InaFabric(StartStop):
    """The aggregator engines of a running network's INA switches.

    Args:
        net: a started :class:`emulator.net.EmulatedNetwork` with ``ina_switches``.
        engine: ``auto``, ``bmv2`` or ``software`` (:func:`resolve_engine`).
        slots: register size of the bmv2 program's slot pool (a run uses up to this many).
        values_per_packet: int32 lanes per packet of every aggregator, PS and job on it.
        pat_pps: the declared PAT of every aggregator, packets/s of wall time (:func:`ina.plan.pat_pps`;
            inf: none declared).
    """

    def __init__(self, net, engine: str = "auto", slots: int = DEFAULT_SLOTS,
                 values_per_packet: int = VALUES_PER_PACKET, pat_pps: float = math.inf):
        if not net.ina_ports:
            raise EmulationError("the network has no INA switches (NetOptions.ina_switches)")
        self.net = net
        self.engine, self.engine_why = resolve_engine(engine)
        self._engine = INA_ENGINES[self.engine]
        self.slots = check_slots(slots)
        try:
            self.values_per_packet = check_values_per_packet(values_per_packet)
        except TestbedError as e:
            raise EmulationError(str(e)) from None
        self.log_dir = os.path.join(net.run_dir, "ina")
        self.switches: dict[str, Bmv2Aggregator | SoftAggregator] = {}
        self._changes = {}
        self._plans: dict[int, JobPlan] = {}
        """The jobs whose entries the aggregators hold, by id."""
        self._ps: dict[str, PsProcess] = {}
        """The parameter servers running (:meth:`start_ps`, :meth:`add_jobs`), by machine."""
        self.pat_pps = pat_pps
        self.capacity: EngineCapacity | None = None
        """Whether the aggregators carry what they must (set by :meth:`start`)."""

    def start(self) -> None:
        """Start one engine per INA switch on its aggregator port's peer, having measured (or read)
        the engine's packet rate here against what the switches' links can bring (:attr:`capacity`).
        With a declared PAT every engine's claims are metered at it (:func:`pat_burst`
        deep; rule 8a of :mod:`ina.aggregator`): seqs beyond it pass unaggregated, as the simulator has
        what a ToR's PAT cannot take pass it.

        Raises:
            EmulationError: the program did not compile or an engine did not start (its log named).
        """
        os.makedirs(self.log_dir, exist_ok=True)
        prepared = self._engine.prepare(self.slots, self.values_per_packet)
        self.capacity = self._capacity(prepared)
        for k, s in enumerate(sorted(self.net.ina_ports)):
            log = os.path.join(self.log_dir, f"{s}.log")
            sw = self._engine.aggregator(prepared, {0: self.net.ina_peer(s)}, k, self.log_dir, s, log)
            self.switches[s] = sw

            def spawned(pid: int, s=s) -> None:
                self._changes[s] = self.net.record.add(process_change(pid, f"INA aggregator ({self.engine}) of {s}"))

            try:
                sw.start(on_spawn=spawned)
                if math.isfinite(self.pat_pps):
                    sw.set_pat(self.pat_pps, pat_burst(self.pat_pps, self.values_per_packet, self.net.options.mtu))
            except TestbedError as e:
                raise EmulationError(f"the INA aggregator of {s} did not start: {e} (log: {log})") from None

    def processes(self) -> dict[str, int]:
        """The PID of every INA process running now by name: each aggregator (``bmv2 l1``) and
        each parameter server (``PS h1``)."""
        out = {f"{self.engine} {s}": sw.proc.pid for s, sw in list(self.switches.items()) if sw.proc is not None}
        out.update({f"PS {h}": ps.proc.pid for h, ps in list(self._ps.items())})
        return out

    def _capacity(self, prepared) -> EngineCapacity:
        """The engine's packet rate here (:func:`engine_rate`, what a measurement makes recorded in
        the network's record) against what each INA switch must take (:class:`EngineCapacity`)."""

        def record(kind: str, name: str) -> None:
            what = "INA aggregator rate measurement"
            self.net.record.add(process_change(int(name), what) if kind == "process" else Change(kind, name, what=what))

        pps, source = engine_rate(self._engine, self.values_per_packet, prepared, self.log_dir, record)
        demand = {s: aggregator_demand_pps(self.net.g, s, self.net.rates, self.values_per_packet)
                  for s in sorted(self.net.ina_ports)}
        return EngineCapacity(pps, source, demand, self.pat_pps, self.net.options.dilation)

    def install(self, plans: Iterable[JobPlan], n_slots: int) -> None:
        """Program every aggregator with the jobs' entries (:func:`ina.plan.switch_tables`) and
        ``n_slots`` slots in use; every slot free and every counter 0 afterwards. The parameter
        servers of :meth:`add_jobs` are not touched (:meth:`stop_all_ps` stops them).

        Raises:
            EmulationError: more slots than the program has, a plan naming a switch without an
                aggregator, or an engine refused the tables.
        """
        check_slots(n_slots)
        self._engine.check_slots(n_slots, self.slots)
        plans = list(plans)
        tables = self._tables(plans)
        self._plans = {}
        try:
            for s, sw in self.switches.items():
                sw.configure(n_slots, tables.get(s, {}))
                sw.reset()
        except TestbedError as e:
            raise EmulationError(f"programming the INA aggregators: {e}") from None
        self._plans = {p.job_id: p for p in plans}

    def _tables(self, plans: Sequence[JobPlan]) -> dict[str, dict]:
        """:func:`ina.plan.switch_tables` of ``plans``, every switch checked to have an aggregator.

        Raises:
            EmulationError: two plans share a job id, or a plan names a switch without an aggregator.
        """
        try:
            tables = switch_tables(plans)
        except TestbedError as e:
            raise EmulationError(f"INA plans: {e}") from None
        other = sorted({p.values_per_packet for p in plans} - {self.values_per_packet})
        if other:
            raise EmulationError(f"INA plans of {other} values per packet on aggregators built for "
                                 f"{self.values_per_packet}")
        missing = sorted(set(tables) - set(self.switches))
        if missing:
            raise EmulationError(f"INA plans use {', '.join(missing)}, which have no aggregator in this network")
        return tables

    def add_jobs(self, plans: Sequence[JobPlan], out_dir: str) -> None:
        """Add jobs while others run: their entries on every aggregator they use (the other
        jobs' entries, the slots and the counters untouched; a job id already added is replaced,
        its entries on switches its new plan does not use removed), then each plan's PS machine
        serves it. A machine with no parameter server yet gets one (its files in ``out_dir``:
        ``ps-<machine>.json``, ``.stats.json``, ``.ack.json``, ``.log``); a running one gets its
        config rewritten with every job it now serves and SIGHUP. Returns once every one of them
        acknowledged exactly its jobs (:data:`PS_READY_S` at most).

        Args:
            plans: the jobs' plans (:func:`ina.plan.plan_job`), distinct job ids.
            out_dir: where a parameter server started now keeps its files.

        Raises:
            EmulationError: a bad plan, an aggregator refused an entry, or a parameter server
                exited or did not acknowledge its jobs in time (its log named).
        """
        plans = list(plans)
        if not plans:
            return
        tables = self._tables(plans)
        stale: dict[str, list[int]] = {}  # entries of re-added jobs on switches their new plans do not use
        for p in plans:
            old = self._plans.get(p.job_id)
            for s in sorted(set(old.entries) - set(p.entries)) if old is not None else ():
                stale.setdefault(s, []).append(p.job_id)
        for s in sorted(set(tables) | set(stale)):
            sw = self.switches[s]
            try:
                sw.remove_jobs(stale.get(s, ()))
                sw.add_jobs(tables.get(s, {}))
            except TestbedError as e:
                raise EmulationError(f"adding INA jobs {sorted(p.job_id for p in plans)} to the aggregator of {s}: "
                                     f"{e} (log: {sw.log_path})") from None
        self._plans.update((p.job_id, p) for p in plans)
        serving = {j: host for host, ps in self._ps.items() for j in ps.jobs}
        targets: dict[str, dict[int, PsJob]] = {}  # machine -> every job it is to serve
        for p in plans:
            old_host = serving.get(p.job_id)
            if old_host is not None and old_host != p.ps_host:  # the job's PS moved
                targets.setdefault(old_host, dict(self._ps[old_host].jobs)).pop(p.job_id)
            current = self._ps[p.ps_host].jobs if p.ps_host in self._ps else {}
            targets.setdefault(p.ps_host, dict(current))[p.job_id] = PsJob(p.tree, p.addresses, p.result_to)
        started: list[PsProcess] = []
        try:
            waits = []
            for host, jobs in sorted(targets.items()):
                if host in self._ps:
                    waits.append(self._reload_ps(self._ps[host], jobs))
                else:
                    ps = self._spawn_managed_ps(host, jobs, out_dir)
                    started.append(ps)
                    waits.append((ps, 0))
            self._wait_acks(waits)
        except BaseException:
            self.stop_ps(ps.host for ps in started)  # a parameter server that never served is not left behind
            raise

    def remove_jobs(self, job_ids: Iterable[int]) -> None:
        """Remove jobs while others run: their entries from every aggregator (the slots and the
        counters untouched), and from their parameter servers, reloaded as by :meth:`add_jobs`
        (one left with no job keeps running, serving nothing). Ids not added are ignored.

        Raises:
            EmulationError: an aggregator refused, or a parameter server exited or did not
                acknowledge its jobs in :data:`PS_READY_S` (its log named).
        """
        ids = set(job_ids)
        if not ids:
            return
        for s, sw in sorted(self.switches.items()):
            try:
                sw.remove_jobs(ids)
            except TestbedError as e:
                raise EmulationError(f"removing INA jobs {sorted(ids)} from the aggregator of {s}: {e} "
                                     f"(log: {sw.log_path})") from None
        for j in ids:
            self._plans.pop(j, None)
        self._wait_acks([self._reload_ps(ps, {j: pj for j, pj in ps.jobs.items() if j not in ids})
                         for _, ps in sorted(self._ps.items()) if ids & set(ps.jobs)])

    def release_slots(self) -> None:
        """Free every slot of every aggregator; the tables and the counters stay.

        Raises:
            EmulationError: an aggregator refused.
        """
        for s, sw in sorted(self.switches.items()):
            try:
                sw.release_slots()
            except TestbedError as e:
                raise EmulationError(f"freeing the slots of the INA aggregator of {s}: {e} "
                                     f"(log: {sw.log_path})") from None

    def _spawn_managed_ps(self, host: str, jobs: Mapping[int, PsJob], out_dir: str) -> PsProcess:
        """Start a parameter server serving ``jobs`` and record it in :attr:`_ps` (not waited for)."""
        os.makedirs(out_dir, exist_ok=True)
        stem = os.path.join(out_dir, f"ps-{host}")
        config, stats, ack, log = f"{stem}.json", f"{stem}.stats.json", f"{stem}.ack.json", f"{stem}.log"
        for old in (stats, ack):  # an earlier parameter server's, in a reused directory
            if os.path.exists(old):
                os.remove(old)
        _write_ps_config(config, jobs)
        env = {"PYTHONPATH": PROJECT_ROOT, "PATH": os.environ.get("PATH", "")}
        argv = [sys.executable, "-m", "ina.ps", "--config", config, "--stats", stats, "--bind",
                self.net.g.nodes[host]["ip"], "--ack", ack, "--values-per-packet", str(self.values_per_packet)]
        proc = self.net.popen(host, argv, env=env, cwd=PROJECT_ROOT, log_path=log)
        ps = PsProcess(host, proc, config, stats, ack, log, dict(jobs))
        self._ps[host] = ps
        return ps

    def _reload_ps(self, ps: PsProcess, jobs: Mapping[int, PsJob]) -> tuple[PsProcess, int]:
        """Have a running parameter server serve exactly ``jobs``: rewrite its config, SIGHUP.

        Returns:
            ``(ps, generation it had acknowledged before)``, for :meth:`_wait_acks`.

        Raises:
            EmulationError: it is not running.
        """
        if ps.proc.poll() is not None:
            raise EmulationError(f"the parameter server on {ps.host} exited with {ps.proc.returncode}: see {ps.log}")
        before = ps.acknowledged()
        ps.jobs = dict(jobs)
        ps.write_config()
        try:
            os.kill(ps.proc.pid, signal.SIGHUP)
        except ProcessLookupError:
            raise EmulationError(f"the parameter server on {ps.host} is gone: see {ps.log}") from None
        return ps, before[0] if before else 0

    def _wait_acks(self, waits: Sequence[tuple[PsProcess, int]]) -> None:
        """Wait until each parameter server acknowledged a generation after the given one listing
        exactly its jobs; :data:`PS_READY_S` for them all.

        Raises:
            EmulationError: one exited, acknowledged other jobs, or did not acknowledge in time.
        """
        pending = list(waits)
        deadline = time.monotonic() + PS_READY_S
        while pending:
            for ps, generation in list(pending):
                if ps.proc.poll() is not None:
                    raise EmulationError(f"the parameter server on {ps.host} exited with {ps.proc.returncode}: "
                                         f"see {ps.log}")
                ack = ps.acknowledged()
                if ack is None or ack[0] <= generation:
                    continue
                if ack[1] != sorted(ps.jobs):
                    raise EmulationError(f"the parameter server on {ps.host} acknowledged jobs {ack[1]}, not "
                                         f"{sorted(ps.jobs)}: see {ps.log}")
                pending.remove((ps, generation))
            if not pending:
                return
            if time.monotonic() > deadline:
                ps, _ = pending[0]
                raise EmulationError(f"the parameter server on {ps.host} did not acknowledge jobs {sorted(ps.jobs)} "
                                     f"in {PS_READY_S:g} s: see {ps.log}")
            time.sleep(0.05)

    def counters(self) -> dict[str, dict[str, int]]:
        """Each aggregator's counters by name (:data:`ina.p4.switch.STAT_NAMES`)."""
        return {s: sw.counters() for s, sw in self.switches.items()}

    def job_traffic(self, switches: Iterable[str], job_ids: Iterable[int]) -> dict[str, dict[int, JobTraffic]]:
        """Each of ``switches`` (those with an aggregator; others are left out): the packets of
        each of ``job_ids`` it forwarded by direction (:meth:`ina.aggregator.Aggregator.job_traffic`)."""
        job_ids = sorted(set(job_ids))
        return {s: self.switches[s].job_traffic(job_ids) for s in sorted(set(switches)) if s in self.switches}

    def stats(self) -> dict[str, AggregatorStats]:
        """Each aggregator's counters as :class:`ina.aggregator.AggregatorStats`."""
        return {s: aggregator_stats(c) for s, c in self.counters().items()}

    def check_alive(self) -> None:
        """Raise :class:`EmulationError` naming the first aggregator engine or parameter server that died."""
        for s, sw in self.switches.items():
            if sw.proc is not None and sw.proc.poll() is not None:
                raise EmulationError(f"the INA aggregator of {s} ({self.engine}, pid {sw.proc.pid}) exited with "
                                     f"{sw.proc.returncode}: see {sw.log_path}")
        for host, ps in sorted(self._ps.items()):
            if ps.proc.poll() is not None:
                raise EmulationError(f"the parameter server on {host} (pid {ps.proc.pid}) exited with "
                                     f"{ps.proc.returncode}: see {ps.log}")

    def start_ps(self, plans: Sequence[JobPlan], out_dir: str) -> list[str]:
        """Start one parameter server per PS machine of ``plans``, serving its jobs (files in
        ``out_dir``, as :meth:`add_jobs`'s); wait until each has acknowledged them (it binds its
        port first).

        Returns:
            The PS machines, for :meth:`stop_ps`.

        Raises:
            EmulationError: a machine already runs one, or a PS exited or did not acknowledge its
                jobs in :data:`PS_READY_S` (its log named).
        """
        by_host: dict[str, dict[int, PsJob]] = {}
        for p in plans:
            by_host.setdefault(p.ps_host, {})[p.job_id] = PsJob(p.tree, p.addresses, p.result_to)
        busy = sorted(set(by_host) & set(self._ps))
        if busy:
            raise EmulationError(f"parameter servers already run on {', '.join(busy)}")
        started: list[str] = []
        try:
            waits = []
            for host, jobs in sorted(by_host.items()):
                waits.append((self._spawn_managed_ps(host, jobs, out_dir), 0))
                started.append(host)
            self._wait_acks(waits)
        except BaseException:
            self.stop_ps(started)
            raise
        return started

    def stop_ps(self, hosts: Iterable[str]) -> dict[str, dict]:
        """Stop the parameter servers on ``hosts`` (SIGTERM: each writes its counters) and forget
        them; machines running none are skipped.

        Returns:
            PS machine -> its counters (:meth:`ina.ps.PsService.stats`, each job's under ``jobs``;
            empty where none were written).
        """
        out = {}
        for host in sorted(hosts):
            ps = self._ps.pop(host, None)
            if ps is not None:
                stop_process(ps.proc)
                self.net.forget(ps.proc)
                out[host] = _read_stats(ps.stats)
        return out

    def stop_all_ps(self) -> dict[str, dict]:
        """:meth:`stop_ps` of every parameter server running (:meth:`start_ps`'s and :meth:`add_jobs`')."""
        return self.stop_ps(list(self._ps))

    def stop(self) -> None:
        """Stop every parameter server and every engine by its PID, dropping each from the record
        (idempotent)."""
        try:
            self.stop_all_ps()
        finally:
            for s, sw in self.switches.items():
                sw.stop()
                change = self._changes.pop(s, None)
                if change is not None:
                    self.net.record.discard(change)
            self.switches.clear()
            self._plans.clear()
