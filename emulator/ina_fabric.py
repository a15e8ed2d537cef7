"""INA aggregators in the emulated fabric: one engine per INA switch, attached one-armed.

:class:`emulator.net.EmulatedNetwork` gives each switch of its ``ina_switches`` an aggregator
port, and its controller steers INA packets there (:func:`controller.rules.ina_steering`).
:class:`InaFabric` serves those ports: an aggregator engine on each port's peer (bmv2 running
``ina/p4/aggregator.p4``, else the software engine, :mod:`ina.softswitch`), the jobs' table entries
from their plans (:func:`ina.plan.plan_job`), and the jobs' parameter servers, one ``python -m
ina.ps`` per PS machine (:mod:`emulator.ina_ps`). Before the engines start,
:func:`emulator.ina_engines.engine_rate` and :class:`emulator.ina_engines.EngineCapacity` say whether
the aggregators keep up with their links. Its engines are processes of the run, recorded by PID in
the network's run record.

A fixed set of jobs (:meth:`InaFabric.install`) or an online schedule (:meth:`InaFabric.add_jobs`,
:meth:`InaFabric.remove_jobs`): ``docs/ina.md`` (Aggregators attached to the ToRs; Capacity and PAT).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence

from common.errors import EmulationError, TestbedError
from common.lifecycle import StartStop
from emulator.ina_engines import INA_ENGINES, EngineCapacity, engine_rate, pat_burst, resolve_engine
from emulator.ina_ps import ParameterServers
from emulator.journal import Change, process_change
from ina.aggregator import AggregatorStats, JobTraffic
from ina.p4.build import DEFAULT_SLOTS
from ina.p4.switch import Bmv2Aggregator, aggregator_stats
from ina.plan import JobPlan, aggregator_demand_pps, switch_tables
from ina.protocol import VALUES_PER_PACKET, check_slots, check_values_per_packet
from ina.softswitch import SoftAggregator


def endpoints(net, plan: JobPlan) -> dict:
    """Each machine's :class:`workers.launcher.InaEndpoint` of a job planned on ``net``'s topology."""
    from workers.launcher import InaEndpoint

    ps_addr = net.g.nodes[plan.ps_host]["ip"]
    return {m: InaEndpoint(plan.job_id, bit, ps_addr, net.g.nodes[m]["ip"], plan.values_per_packet)
            for m, bit in plan.bits.items()}


class InaFabric(StartStop):
    """The aggregator engines of a running network's INA switches.

    Args:
        net: a started :class:`emulator.net.EmulatedNetwork` with ``ina_switches``.
        engine: ``auto``, ``bmv2`` or ``software`` (:func:`resolve_engine`).
        slots: register size of the bmv2 program's slot pool (a run uses up to this many).
        values_per_packet: int32 lanes per packet of every aggregator, PS and job on it.
        pat_pps: the declared PAT of every aggregator, packets/s of wall time (:func:`ina.plan.pat_pps`;
            inf: none declared; 0: no memory, so no switch aggregates, :attr:`aggregates`).
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
        self.ps = ParameterServers(net, self.values_per_packet)
        """The parameter servers running (:meth:`start_ps`, :meth:`add_jobs`)."""
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
                if math.isfinite(self.pat_pps) and self.aggregates:
                    sw.set_pat(self.pat_pps, pat_burst(self.pat_pps, self.values_per_packet, self.net.options.mtu))
            except TestbedError as e:
                raise EmulationError(f"the INA aggregator of {s} did not start: {e} (log: {log})") from None

    @property
    def aggregates(self) -> bool:
        """Whether the switches aggregate at all: a PAT of 0 (``ina.pat_gbps: 0``, NetPack's "no INA")
        leaves every job's packets to its parameter server, as the simulator's model does; the
        aggregators then forward them, and no job is installed on them (:class:`emulator.ina_runs.InaRuns`)."""
        return self.pat_pps > 0

    def processes(self) -> dict[str, int]:
        """The PID of every INA process running now by name: each aggregator (``bmv2 l1``) and
        each parameter server (``PS h1``)."""
        out = {f"{self.engine} {s}": sw.proc.pid for s, sw in list(self.switches.items()) if sw.proc is not None}
        out.update(self.ps.processes())
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
        acknowledged exactly its jobs (:data:`emulator.ina_ps.PS_READY_S` at most).

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
        self.ps.serve(plans, out_dir)

    def remove_jobs(self, job_ids: Iterable[int]) -> None:
        """Remove jobs while others run: their entries from every aggregator (the slots and the
        counters untouched), and from their parameter servers, reloaded as by :meth:`add_jobs`
        (one left with no job keeps running, serving nothing). Ids not added are ignored.

        Raises:
            EmulationError: an aggregator refused, or a parameter server exited or did not
                acknowledge its jobs in :data:`emulator.ina_ps.PS_READY_S` (its log named).
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
        self.ps.remove(ids)

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
        self.ps.check_alive()

    def start_ps(self, plans: Sequence[JobPlan], out_dir: str) -> list[str]:
        """Start the parameter servers of ``plans`` and wait until they serve them
        (:meth:`emulator.ina_ps.ParameterServers.start`); returns their machines, for :meth:`stop_ps`."""
        return self.ps.start(plans, out_dir)

    def stop_ps(self, hosts: Iterable[str]) -> dict[str, dict]:
        """Stop the parameter servers on ``hosts``; returns each one's counters
        (:meth:`emulator.ina_ps.ParameterServers.stop`)."""
        return self.ps.stop(hosts)

    def stop_all_ps(self) -> dict[str, dict]:
        """:meth:`stop_ps` of every parameter server running (:meth:`start_ps`'s and :meth:`add_jobs`')."""
        return self.ps.stop_all()

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
