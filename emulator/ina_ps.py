"""The parameter servers of an INA fabric: one ``python -m ina.ps`` per PS machine, started, told
its jobs (config file and SIGHUP), waited for until it acknowledges them, and stopped by PID.

:class:`ParameterServers` serves :class:`emulator.ina_fabric.InaFabric`; the config and ack
protocol: ``docs/ina-internals.md``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence

from common.errors import EmulationError
from common.jsonfile import write_json_atomic
from common.paths import PROJECT_ROOT
from emulator.procs import stop_process
from ina.plan import JobPlan
from ina.ps import PsJob

PS_READY_S = 20.0
"""How long a parameter server may take to acknowledge a config (its first after binding its port)."""


@dataclasses.dataclass
class PsProcess:
    """A parameter server :class:`ParameterServers` started, its files and the jobs it serves.

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


class ParameterServers:
    """The parameter servers running on a network's machines, by machine.

    Args:
        net: the started :class:`emulator.net.EmulatedNetwork` they run in (started and forgotten through it).
        values_per_packet: int32 lanes per packet of every job they serve.
    """

    def __init__(self, net, values_per_packet: int):
        self.net = net
        self.values_per_packet = values_per_packet
        self.running: dict[str, PsProcess] = {}

    def start(self, plans: Sequence[JobPlan], out_dir: str) -> list[str]:
        """Start one parameter server per PS machine of ``plans``, serving its jobs (files in
        ``out_dir``, as :meth:`serve`'s); wait until each has acknowledged them (it binds its
        port first).

        Returns:
            The PS machines, for :meth:`stop`.

        Raises:
            EmulationError: a machine already runs one, or a PS exited or did not acknowledge its
                jobs in :data:`PS_READY_S` (its log named).
        """
        by_host: dict[str, dict[int, PsJob]] = {}
        for p in plans:
            by_host.setdefault(p.ps_host, {})[p.job_id] = PsJob(p.tree, p.addresses, p.result_to)
        busy = sorted(set(by_host) & set(self.running))
        if busy:
            raise EmulationError(f"parameter servers already run on {', '.join(busy)}")
        started: list[str] = []
        try:
            waits = []
            for host, jobs in sorted(by_host.items()):
                waits.append((self._spawn(host, jobs, out_dir), 0))
                started.append(host)
            self._wait_acks(waits)
        except BaseException:
            self.stop(started)
            raise
        return started

    def serve(self, plans: Sequence[JobPlan], out_dir: str) -> None:
        """Have each plan's PS machine serve it while other jobs run (a job whose PS moved leaves
        its old one). A machine with no parameter server yet gets one (its files in ``out_dir``:
        ``ps-<machine>.json``, ``.stats.json``, ``.ack.json``, ``.log``); a running one gets its
        config rewritten with every job it now serves and SIGHUP. Returns once every one of them
        acknowledged exactly its jobs (:data:`PS_READY_S` at most).

        Raises:
            EmulationError: a parameter server exited or did not acknowledge its jobs in time (its log named).
        """
        serving = {j: host for host, ps in self.running.items() for j in ps.jobs}
        targets: dict[str, dict[int, PsJob]] = {}  # machine -> every job it is to serve
        for p in plans:
            old_host = serving.get(p.job_id)
            if old_host is not None and old_host != p.ps_host:  # the job's PS moved
                targets.setdefault(old_host, dict(self.running[old_host].jobs)).pop(p.job_id)
            current = self.running[p.ps_host].jobs if p.ps_host in self.running else {}
            targets.setdefault(p.ps_host, dict(current))[p.job_id] = PsJob(p.tree, p.addresses, p.result_to)
        started: list[PsProcess] = []
        try:
            waits = []
            for host, jobs in sorted(targets.items()):
                if host in self.running:
                    waits.append(self._reload(self.running[host], jobs))
                else:
                    ps = self._spawn(host, jobs, out_dir)
                    started.append(ps)
                    waits.append((ps, 0))
            self._wait_acks(waits)
        except BaseException:
            self.stop(ps.host for ps in started)  # a parameter server that never served is not left behind
            raise

    def remove(self, ids: set[int]) -> None:
        """Drop jobs ``ids`` from the parameter servers serving them, reloaded as by :meth:`serve` (one
        left with no job keeps running, serving nothing).

        Raises:
            EmulationError: a parameter server exited or did not acknowledge its jobs in
                :data:`PS_READY_S` (its log named).
        """
        self._wait_acks([self._reload(ps, {j: pj for j, pj in ps.jobs.items() if j not in ids})
                         for _, ps in sorted(self.running.items()) if ids & set(ps.jobs)])

    def processes(self) -> dict[str, int]:
        """The PID of each parameter server by name (``PS h1``)."""
        return {f"PS {h}": ps.proc.pid for h, ps in list(self.running.items())}

    def check_alive(self) -> None:
        """Raise :class:`EmulationError` naming the first parameter server that died."""
        for host, ps in sorted(self.running.items()):
            if ps.proc.poll() is not None:
                raise EmulationError(f"the parameter server on {host} (pid {ps.proc.pid}) exited with "
                                     f"{ps.proc.returncode}: see {ps.log}")

    def stop(self, hosts: Iterable[str]) -> dict[str, dict]:
        """Stop the parameter servers on ``hosts`` (SIGTERM: each writes its counters) and forget
        them; machines running none are skipped.

        Returns:
            PS machine -> its counters (:meth:`ina.ps.PsService.stats`, each job's under ``jobs``;
            empty where none were written).
        """
        out = {}
        for host in sorted(hosts):
            ps = self.running.pop(host, None)
            if ps is not None:
                stop_process(ps.proc)
                self.net.forget(ps.proc)
                out[host] = _read_stats(ps.stats)
        return out

    def stop_all(self) -> dict[str, dict]:
        """:meth:`stop` of every parameter server running."""
        return self.stop(list(self.running))

    def _spawn(self, host: str, jobs: Mapping[int, PsJob], out_dir: str) -> PsProcess:
        """Start a parameter server serving ``jobs`` and record it in :attr:`running` (not waited for)."""
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
        self.running[host] = ps
        return ps

    def _reload(self, ps: PsProcess, jobs: Mapping[int, PsJob]) -> tuple[PsProcess, int]:
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
