"""INA aggregators in the emulated fabric: one engine per INA switch, attached one-armed.

:class:`testbed.net.EmulatedNetwork` gives each switch of its ``ina_switches`` an aggregator
port, and its controller steers INA packets there (:func:`controller.rules.ina_steering`).
:class:`InaFabric` serves those ports: it starts an aggregator engine on each port's peer, the
bmv2 ``simple_switch`` running ``ina/p4/aggregator.p4`` where a P4 toolchain runs here, else
the software engine (:mod:`ina.softswitch`, the same rules), and installs the jobs' table
entries from their plans (:func:`ina.plan.plan_job`). Every engine leaves by the port it came
in on (``ina_out`` empty: one-armed), back to its switch, which routes it on.

It also runs the jobs' parameter servers (:meth:`InaFabric.start_ps`): one ``python -m ina.ps``
per PS machine, serving every job whose PS is there, stopped with :meth:`InaFabric.stop_ps`,
which returns their counters.

The engines are processes of the run: recorded by PID in the network's run record when
spawned (so ``run_testbed.py clean`` stops them after a crash) and stopped by :meth:`stop`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Sequence

from common.errors import EmulationError, TestbedError
from common.lifecycle import StartStop
from ina.engine import AggregatorStats
from ina.p4.build import DEFAULT_SLOTS, ENGINES, compile_program, engine_available, find_toolchain
from ina.p4.switch import Bmv2Aggregator, aggregator_stats
from ina.plan import JobPlan, switch_tables
from ina.protocol import INA_UDP_PORT, check_slots
from ina.ps import PsJob
from ina.softswitch import SoftAggregator
from testbed.controller_proc import PROJECT_ROOT, free_tcp_port
from testbed.procs import stop_process
from testbed.record import process_change

PS_READY_S = 20.0
"""How long a parameter server may take to bind its port."""


def resolve_engine(requested: str = "auto") -> tuple[str, str]:
    """The engine to use and why: ``auto`` -> bmv2 where it runs here, else software.

    Raises:
        EmulationError: an unknown engine, or ``bmv2`` asked for where it cannot run.
    """
    if requested not in ("auto", *ENGINES):
        raise EmulationError(f"INA engine {requested!r}: valid: auto, {', '.join(ENGINES)}")
    available, why = engine_available()
    if requested == "software":
        return "software", "asked for"
    if requested == "bmv2" and available != "bmv2":
        raise EmulationError(f"INA engine bmv2 asked for, but it cannot run here: {why}")
    return available, why


def endpoints(net, plan: JobPlan) -> dict:
    """Each machine's :class:`jobs.agent.InaEndpoint` of a job planned on ``net``'s topology."""
    from jobs.agent import InaEndpoint

    ps_addr = net.g.nodes[plan.ps_host]["ip"]
    return {m: InaEndpoint(plan.job_id, bit, ps_addr) for m, bit in plan.bits.items()}


class InaFabric(StartStop):
    """The aggregator engines of a running network's INA switches.

    Args:
        net: a started :class:`testbed.net.EmulatedNetwork` with ``ina_switches``.
        engine: ``auto``, ``bmv2`` or ``software`` (:func:`resolve_engine`).
        slots: register size of the bmv2 program's slot pool (a run uses up to this many).
    """

    def __init__(self, net, engine: str = "auto", slots: int = DEFAULT_SLOTS):
        if not net.ina_ports:
            raise EmulationError("the network has no INA switches (NetOptions.ina_switches)")
        self.net = net
        self.engine, self.engine_why = resolve_engine(engine)
        self.slots = check_slots(slots)
        self.log_dir = os.path.join(net.run_dir, "ina")
        self.switches: dict[str, Bmv2Aggregator | SoftAggregator] = {}
        self._changes = {}

    def start(self) -> None:
        """Start one engine per INA switch on its aggregator port's peer.

        Raises:
            EmulationError: the program did not compile or an engine did not start (its log named).
        """
        os.makedirs(self.log_dir, exist_ok=True)
        program = toolchain = None
        if self.engine == "bmv2":
            toolchain, _ = find_toolchain()
            try:
                program = compile_program(toolchain, self.slots)
            except TestbedError as e:
                raise EmulationError(str(e)) from None
        for k, s in enumerate(sorted(self.net.ina_ports)):
            ports = {0: self.net.ina_peer(s)}
            log = os.path.join(self.log_dir, f"{s}.log")
            if self.engine == "bmv2":
                sw = Bmv2Aggregator(toolchain, program, ports, free_tcp_port(), 100 + k, log)
            else:
                sw = SoftAggregator(ports, os.path.join(self.log_dir, f"{s}.sock"), log)
            self.switches[s] = sw

            def spawned(pid: int, s=s) -> None:
                self._changes[s] = self.net.record.add(process_change(pid, f"INA aggregator ({self.engine}) of {s}"))

            try:
                sw.start(on_spawn=spawned)
            except TestbedError as e:
                raise EmulationError(f"the INA aggregator of {s} did not start: {e} (log: {log})") from None

    def install(self, plans: Iterable[JobPlan], n_slots: int) -> None:
        """Program every aggregator with the jobs' entries (:func:`ina.plan.switch_tables`) and
        ``n_slots`` slots in use; every slot free and every counter 0 afterwards.

        Raises:
            EmulationError: more slots than the program has, a plan naming a switch without an
                aggregator, or an engine refused the tables.
        """
        check_slots(n_slots)
        if self.engine == "bmv2" and n_slots > self.slots:
            raise EmulationError(f"{n_slots} INA slots asked for; the bmv2 program has {self.slots}")
        tables = switch_tables(plans)
        missing = sorted(set(tables) - set(self.switches))
        if missing:
            raise EmulationError(f"INA plans use {', '.join(missing)}, which have no aggregator in this network")
        try:
            for s, sw in self.switches.items():
                sw.configure(n_slots, tables.get(s, {}))
                sw.reset()
        except TestbedError as e:
            raise EmulationError(f"programming the INA aggregators: {e}") from None

    def counters(self) -> dict[str, dict[str, int]]:
        """Each aggregator's counters by name (:data:`ina.p4.switch.STAT_NAMES`)."""
        return {s: sw.counters() for s, sw in self.switches.items()}

    def stats(self) -> dict[str, AggregatorStats]:
        """Each aggregator's counters as :class:`ina.engine.AggregatorStats`."""
        return {s: aggregator_stats(c) for s, c in self.counters().items()}

    def check_alive(self) -> None:
        """Raise :class:`EmulationError` naming the first aggregator engine that died."""
        for s, sw in self.switches.items():
            if sw.proc is not None and sw.proc.poll() is not None:
                raise EmulationError(f"the INA aggregator of {s} ({self.engine}, pid {sw.proc.pid}) exited with "
                                     f"{sw.proc.returncode}: see {sw.log_path}")

    def start_ps(self, plans: Sequence[JobPlan], out_dir: str) -> dict[str, tuple]:
        """Start one parameter server per PS machine of ``plans``, serving its jobs; wait until each
        has bound its port.

        Returns:
            PS machine -> (process, its counters' path), for :meth:`stop_ps`.

        Raises:
            EmulationError: a PS exited or did not bind its port in :data:`PS_READY_S` (its log named).
        """
        os.makedirs(out_dir, exist_ok=True)
        env = {"PYTHONPATH": PROJECT_ROOT, "PATH": os.environ.get("PATH", "")}
        started: dict[str, tuple] = {}
        try:
            for ps in sorted({p.ps_host for p in plans}):
                cfg, stats = os.path.join(out_dir, f"ps-{ps}.json"), os.path.join(out_dir, f"ps-{ps}.stats.json")
                with open(cfg, "w") as f:
                    json.dump({"jobs": [PsJob(p.tree, p.addresses).to_dict() for p in plans if p.ps_host == ps]}, f)
                log = os.path.join(out_dir, f"ps-{ps}.log")
                proc = self.net.popen(ps, [sys.executable, "-m", "ina.ps", "--config", cfg, "--stats", stats,
                                           "--bind", self.net.g.nodes[ps]["ip"]], env=env, cwd=PROJECT_ROOT,
                                      log_path=log)
                started[ps] = (proc, stats)
                deadline = time.monotonic() + PS_READY_S
                while f":{INA_UDP_PORT}" not in self.net.host_exec(ps, "ss -Huln"):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise EmulationError(f"the parameter server on {ps} did not start: see {log}")
                    time.sleep(0.05)
        except BaseException:
            self.stop_ps(started)
            raise
        return started

    def stop_ps(self, started: dict[str, tuple]) -> dict[str, dict]:
        """Stop the parameter servers of :meth:`start_ps` (SIGTERM: each writes its counters).

        Returns:
            PS machine -> its counters (:meth:`ina.ps.PsService.stats`; empty where none were written).
        """
        out = {}
        for ps, (proc, stats) in started.items():
            stop_process(proc)
            self.net.forget(proc)
            try:
                with open(stats) as f:
                    out[ps] = json.load(f)
            except (OSError, ValueError):
                out[ps] = {}
        return out

    def stop(self) -> None:
        """Stop every engine by its PID and drop it from the record (idempotent)."""
        for s, sw in self.switches.items():
            sw.stop()
            change = self._changes.pop(s, None)
            if change is not None:
                self.net.record.discard(change)
        self.switches.clear()
