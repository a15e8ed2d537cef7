"""A bmv2 ``simple_switch`` running the INA aggregator: start, program, read counters, stop.

The impure shell around :mod:`ina.p4.build`'s JSON: one ``simple_switch`` process, started on
named interfaces (optionally inside a network namespace), programmed through
``simple_switch_CLI`` with the tables of ``aggregator.p4`` (``ina_config``, ``ina_job``,
``ina_out``, ``plain``), its ``stats`` register read back as :class:`ina.engine.AggregatorStats`.
Stopped by its PID only.

Port numbers of ``ina_out``: direction 0 is towards the parameter server, 1 towards the workers
(:data:`TO_PS`, :data:`TO_WORKERS`); without an entry a packet leaves by the port it came in on
(an aggregator attached one-armed to its ToR).

Jobs come and go while others run (:meth:`Bmv2Aggregator.add_jobs`,
:meth:`Bmv2Aggregator.remove_jobs`): the ``ina_job`` entries are changed one by one through the
entry handles bmv2 gave them (``table_add`` prints ``Entry has been added with handle N``;
``table_modify`` and ``table_delete`` take ``N``), so the other jobs' entries, the slot registers
and the ``stats`` register are never touched. After a CLI session that failed part-way the
handles are unknown and only :meth:`Bmv2Aggregator.configure` (which clears the table) is
accepted until it succeeds.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence

from ina.engine import Aggregator, AggregatorStats, JobEntry, JobTraffic, Role
from ina.p4.build import P4Error, Toolchain
from ina.protocol import MALFORMED_REASONS, check_slots

TO_PS, TO_WORKERS = 0, 1
STAT_NAMES: tuple[str, ...] = tuple(
    [f for f in AggregatorStats.__dataclass_fields__ if f != "malformed"]
    + [f"malformed:{r}" for r in MALFORMED_REASONS] + ["other"])
"""The ``stats`` register's entries in index order (``aggregator.p4``'s ``ST_*`` constants):
:class:`ina.engine.AggregatorStats`' counters, the malformed reasons, then ``other`` (non-INA
packets no ``plain`` entry forwards)."""
SLOT_REGISTERS = ("slot_state", "slot_key", "slot_bitmap", "slot_count", "slot_flags", "slot_values")
JOB_COUNTERS = ("job_to_ps", "job_to_workers")
"""The per-job packet counters (:class:`ina.engine.JobTraffic`'s fields in order), indexed by job id."""
_COUNTER_READ = re.compile(r"(job_to_ps|job_to_workers)\[(\d+)\]=\s*\(\d+ bytes, (\d+) packets\)")
"""A ``counter_read`` answer: ``job_to_ps[3]= (380 bytes, 2 packets)``."""
_READY_S = 15.0
_ADDED = re.compile(r"Entry has been added with handle (\d+)")


def added_handles(cli_output: str, expected: int) -> list[int]:
    """The entry handles ``simple_switch_CLI`` printed for its ``table_add`` commands, in order.

    Args:
        cli_output: the output of one CLI session.
        expected: how many ``table_add`` commands the session ran.

    Raises:
        P4Error: not exactly ``expected`` handles printed.
    """
    handles = [int(h) for h in _ADDED.findall(cli_output)]
    if len(handles) != expected:
        raise P4Error(f"simple_switch_CLI printed {len(handles)} entry handles for {expected} table_add "
                      f"commands: {cli_output.strip()[-1000:]}")
    return handles


def _job_args(job_id: int, e: JobEntry) -> str:
    """The ``set_job`` action's parameters of an entry, checked as the software engine checks them."""
    Aggregator(1).install(job_id, e.fan_in, e.role, e.out_bit, e.members)  # raises InaError on a bad entry
    return f"{e.fan_in} {int(Role(e.role) is Role.LEAF)} {e.out_bit} {int(bool(e.members))}"


def _member_adds(job_id: int, e: JobEntry) -> list[str]:
    """The ``ina_member`` entries of a job: one per source address it may send from."""
    return [f"table_add ina_member NoAction {job_id} {addr} =>" for addr in sorted(e.members)]


def _free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Bmv2Aggregator:
    """One ``simple_switch`` process running ``program``.

    Args:
        toolchain: the P4 tools (:func:`ina.p4.build.find_toolchain`).
        program: the compiled JSON (:func:`ina.p4.build.compile_program`).
        ports: bmv2 port number -> interface name.
        thrift_port: the runtime CLI's TCP port (distinct per switch).
        device_id: distinct per switch (bmv2's nanomsg sockets clash otherwise).
        log_path: the switch's standard output and error.
        netns: network namespace to run in (None: this one).
    """

    def __init__(self, toolchain: Toolchain, program: str, ports: Mapping[int, str], thrift_port: int,
                 device_id: int, log_path: str, netns: str | None = None):
        self.toolchain = toolchain
        self.program = program
        self.ports = dict(ports)
        self.thrift_port = thrift_port
        self.device_id = device_id
        self.log_path = log_path
        self.netns = netns
        self.proc: subprocess.Popen | None = None
        self._handles: dict[int, int] | None = {}
        self._members: dict[int, list[int]] = {}  # job id -> handles of its ina_member entries
        """``ina_job`` entry handle by job id; None after a failed update (see the module docstring)."""

    def _ns(self, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *cmd] if self.netns else cmd

    def start(self, on_spawn=None) -> None:
        """Start the switch and wait until its runtime CLI answers.

        Args:
            on_spawn: called with the process's PID as soon as it exists (to record it).

        Raises:
            P4Error: it exited or did not answer in 15 s (its log's tail included).
        """
        # Notifications over loopback TCP: bmv2's default is a socket file in /tmp
        # (bmv2-<device-id>-notifications.ipc) that outlives the switch.
        cmd = [self.toolchain.simple_switch, "--device-id", str(self.device_id), "--thrift-port",
               str(self.thrift_port), "--notifications-addr", f"tcp://127.0.0.1:{_free_loopback_port()}"]
        for port, intf in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{intf}"]
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(self._ns([*cmd, self.program]), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.toolchain.env(), start_new_session=True)
        finally:
            log.close()
        if on_spawn is not None:
            on_spawn(self.proc.pid)
        deadline = time.monotonic() + _READY_S
        while True:
            if self.proc.poll() is not None:
                raise P4Error(f"simple_switch exited with {self.proc.returncode}: {self._log_tail()}")
            try:
                if "Control utility" in self.cli(["set_queue_depth 1024"], check=False):
                    return
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise P4Error(f"simple_switch's runtime CLI did not answer in {_READY_S:g} s: {self._log_tail()}")
            time.sleep(0.2)

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-1000:].strip() or "(empty log)"
        except OSError as e:
            return f"(log unreadable: {e})"

    def stop(self) -> None:
        """Stop the switch by its PID (idempotent)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def __enter__(self) -> Bmv2Aggregator:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def cli(self, commands: Sequence[str], check: bool = True) -> str:
        """Run runtime CLI commands in one session; return its output.

        Raises:
            P4Error: with ``check``, a command the CLI refused (``Error`` or ``Invalid`` in its output).
        """
        p = subprocess.run(self._ns([self.toolchain.cli, "--thrift-port", str(self.thrift_port)]),
                           input="\n".join(commands) + "\n", capture_output=True, text=True,
                           env=self.toolchain.env(), timeout=30)
        out = p.stdout + p.stderr
        if check and (p.returncode != 0 or re.search(r"^(RuntimeCmd: )?(Error|Invalid)", out, re.M)):
            raise P4Error(f"simple_switch_CLI refused {list(commands)}: {out.strip()[-1000:]}")
        return out

    def configure(self, n_slots: int, jobs: Mapping[int, JobEntry], routes: Mapping[int, int] | None = None,
                  plain: Mapping[str, int] | None = None) -> None:
        """Program the tables: slots in use, the per-job entries, where each direction leaves
        (``routes``: :data:`TO_PS`/:data:`TO_WORKERS` -> port; none: back out of the ingress
        port) and plain Ethernet forwarding (destination MAC -> port). The ``ina_job`` entries'
        handles are recorded for :meth:`add_jobs` and :meth:`remove_jobs`.

        Raises:
            InaError: a bad slot count or table entry (nothing sent to the switch).
            P4Error: the CLI refused a command or did not print every entry's handle.
        """
        check_slots(n_slots)
        job_ids = sorted(jobs)
        cmds = [f"table_set_default ina_config set_slots {n_slots - 1}", "table_clear ina_job",
                "table_clear ina_member", "table_clear ina_out", "table_clear plain"]
        adds = []  # what each table_add of the session adds: (job id, True for its ina_job entry)
        for j in job_ids:
            cmds.append(f"table_add ina_job set_job {j} => {_job_args(j, jobs[j])}")
            adds.append((j, True))
            members = _member_adds(j, jobs[j])
            cmds += members
            adds += [(j, False)] * len(members)
        for direction, port in sorted((routes or {}).items()):
            cmds.append(f"table_add ina_out to_port {direction} => {port}")
        for mac, port in sorted((plain or {}).items()):
            cmds.append(f"table_add plain to_port {mac} => {port}")
        self._handles = None
        handles = added_handles(self.cli(cmds), sum(c.startswith("table_add ") for c in cmds))
        self._handles, self._members = {}, {}
        self._record(adds, handles)  # the jobs' adds come first

    def _record(self, adds: Sequence[tuple[int, bool]], handles: Sequence[int]) -> None:
        for (job_id, is_job), handle in zip(adds, handles, strict=False):
            if is_job:
                self._handles[job_id] = handle
            else:
                self._members.setdefault(job_id, []).append(handle)

    def _known_handles(self) -> dict[int, int]:
        if self._handles is None:
            raise P4Error(f"the ina_job table of the switch on thrift port {self.thrift_port} is unknown after a "
                          f"failed update; configure() it again")
        return self._handles

    def _update(self, cmds: list[str], adds: Sequence[tuple[int, bool]], removed: Sequence[int]) -> None:
        """Run a session of ``ina_job``/``ina_member`` commands; record the handles of ``adds`` (one
        per ``table_add``, in order) after forgetting those of the ``removed`` jobs' members (and,
        for jobs not added again, their ``ina_job`` entry)."""
        handles = self._known_handles()
        self._handles = None  # unknown until the whole session has gone through
        new = added_handles(self.cli(cmds), len(adds))
        readded = {j for j, is_job in adds if is_job}
        for job_id in removed:
            self._members.pop(job_id, None)
            if job_id not in readded:
                handles.pop(job_id, None)
        self._handles = handles
        self._record(adds, new)

    def add_jobs(self, jobs: Mapping[int, JobEntry]) -> None:
        """Add these jobs' ``ina_job`` and ``ina_member`` entries (an id already installed: its
        ``ina_job`` entry modified in place, ``table_modify`` by handle, and its members replaced);
        every other entry, the slots and the counters untouched.

        Raises:
            InaError: a bad entry (nothing sent to the switch).
            P4Error: the CLI refused a command, or the handles are unknown (see the module docstring).
        """
        handles = self._known_handles()
        cmds, adds, replaced = [], [], []
        for job_id, e in sorted(jobs.items()):
            args = _job_args(job_id, e)
            if job_id in handles:
                cmds.append(f"table_modify ina_job set_job {handles[job_id]} => {args}")
                cmds += [f"table_delete ina_member {h}" for h in self._members.get(job_id, [])]
                replaced.append(job_id)
            else:
                cmds.append(f"table_add ina_job set_job {job_id} => {args}")
                adds.append((job_id, True))
            members = _member_adds(job_id, e)
            cmds += members
            adds += [(job_id, False)] * len(members)
        if cmds:
            self._update(cmds, adds, replaced)

    def remove_jobs(self, job_ids: Iterable[int]) -> None:
        """Delete these jobs' ``ina_job`` and ``ina_member`` entries by handle (ids not installed
        are ignored); the slots (a removed job's are freed by their results) and the counters untouched.

        Raises:
            P4Error: the CLI refused a command, or the handles are unknown (see the module docstring).
        """
        handles = self._known_handles()
        removed = [j for j in sorted(set(job_ids)) if j in handles]
        cmds = [c for j in removed for c in (f"table_delete ina_job {handles[j]}",
                                             *(f"table_delete ina_member {h}" for h in self._members.get(j, [])))]
        if cmds:
            self._update(cmds, (), removed)

    def release_slots(self) -> None:
        """Every slot free (the slot registers reset); the tables and the ``stats`` register stay."""
        self.cli([f"register_reset {r}" for r in SLOT_REGISTERS])

    def reset(self) -> None:
        """Every slot free and every counter 0 (the tables stay)."""
        self.cli([f"register_reset {r}" for r in (*SLOT_REGISTERS, "stats")]
                 + [f"counter_reset {c}" for c in JOB_COUNTERS])

    def job_traffic(self, job_ids: Iterable[int]) -> dict[int, JobTraffic]:
        """The packets of each of ``job_ids`` forwarded by direction (the ``job_to_ps`` and
        ``job_to_workers`` counters; :meth:`ina.engine.Aggregator.job_traffic`).

        Raises:
            P4Error: the CLI's answer does not hold every counter asked for.
        """
        ids = sorted(set(job_ids))
        if not ids:
            return {}
        out = self.cli([f"counter_read {c} {j}" for j in ids for c in JOB_COUNTERS])
        got = {(name, int(j)): int(n) for name, j, n in _COUNTER_READ.findall(out)}
        if len(got) != len(ids) * len(JOB_COUNTERS):
            raise P4Error(f"unexpected per-job counter read: {out.strip()[-500:]}")
        return {j: JobTraffic(*(got[c, j] for c in JOB_COUNTERS)) for j in ids}

    def counters(self) -> dict[str, int]:
        """The ``stats`` register by name (:data:`STAT_NAMES`).

        Raises:
            P4Error: the CLI's answer does not hold the register.
        """
        out = self.cli(["register_read stats"])
        m = re.search(r"stats=\s*([\d,\s]+)", out)
        values = [int(v) for v in m.group(1).replace(",", " ").split()] if m else []
        if len(values) != len(STAT_NAMES):
            raise P4Error(f"unexpected stats register read: {out.strip()[-500:]}")
        return dict(zip(STAT_NAMES, values, strict=True))


def aggregator_stats(counters: Mapping[str, int]) -> AggregatorStats:
    """Counters by :data:`STAT_NAMES` as the software engine reports them (``other`` left out)."""
    return AggregatorStats(**{k: v for k, v in counters.items() if ":" not in k and k != "other"},
                           malformed={r: counters[f"malformed:{r}"] for r in MALFORMED_REASONS})


def log_dir_for(run_dir: str) -> str:
    """Where the switches of a run write their logs."""
    path = os.path.join(run_dir, "bmv2")
    os.makedirs(path, exist_ok=True)
    return path
