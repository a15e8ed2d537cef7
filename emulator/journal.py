"""What a run changed on this machine, written down before each change, and undone step by step.

Every change an emulated network (or a VM run, a worker image build) makes outside its own results
directory is one :class:`Change` of a kind in :data:`UNDO`, appended by a :class:`RunJournal` to a
JSON file under :data:`RECORDS_DIR` *before* the change is made, and removed once undone. Each kind
is undone by a handler of the module that makes it, named in :data:`UNDO` and imported only then,
so ``run_testbed.py clean`` undoes a dead run's record whatever it holds. :meth:`RunJournal.unwind`
undoes the changes newest first, each step isolated from the others' failures.
:class:`EmulatorLock` is the machine-wide turn at the emulator, an ``flock`` on :data:`EMULATOR_LOCK`.

What is recorded, how it is undone and why recording first is safe: ``docs/faults.md``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from common import registry
from common.errors import EmulationError
from common.jsonfile import write_json_atomic
from emulator.procs import process_start_time, run_in_session, signal_group

RECORDS_DIR = os.environ.get("TESTBED_RECORDS_DIR", "/var/lib/dtnet-testbed/runs")
UNDO: dict[str, str] = {
    "process": "emulator.journal:stop_processes",
    "bridge": "emulator.journal:remove_bridges",
    "link": "emulator.journal:remove_links",
    "mount": "emulator.journal:unmount",
    "dir": "emulator.journal:remove_dirs",
    "sysctl": "emulator.journal:restore_sysctls",
    "ovs_other_config": "emulator.journal:restore_ovs_other_config",
    "container": "emulator.containers:remove_containers",
    "tree": "emulator.worker_image:remove_trees",
    "image_build": "emulator.worker_image:remove_builds",
    "struct_ops": "emulator.mltcp:unregister",
    "netns": "emulator.journal:remove_namespaces",
    "vm_domain": "vm.run:remove_domains",
    "vm_network": "vm.run:remove_networks",
    "vm_pool": "vm.run:remove_pools",
    "fw_chain": "vm.run:remove_firewall_chains",
}
"""Kind of change -> ``module:function`` that undoes changes of that kind, imported on demand (a dead
run's record may hold kinds whose modules ``clean`` has not loaded). The function takes changes of its
kind, in the order to undo them, and returns ``{change: None when done, else why not}``; a change
that was never made, or is already gone, is done."""
KINDS = tuple(UNDO)
STOP_GRACE_S = 2.0
COMMAND_TIMEOUT_S = 30.0
REMOTE_KINDS = ("bridge", "link", "sysctl")
"""Kinds of change a run may make on another server of an emulation cluster."""
BRIDGE_TIMEOUT_S = 120  # deleting bridges with AF_XDP ports takes the daemon a while (emulator.ports)
EMULATOR_LOCK = os.environ.get("TESTBED_EMULATOR_LOCK", "/run/dtnet-testbed/emulator.lock")
"""The machine-wide emulator lock (:class:`EmulatorLock`); its holder's PID and purpose are written in it."""
WAIT_ENV = "TESTBED_EMULATOR_WAIT_S"
"""Seconds a run waits for the emulator while another run holds it (default 0: it refuses at once)."""
LOCK_POLL_S = 0.1


@dataclasses.dataclass(frozen=True)
class Change:
    """One change to the machine.

    Attributes:
        kind: one of :data:`KINDS` (the keys of :data:`UNDO`).
        name: the PID (as a string) for ``process``; bridge, interface or path; sysctl key;
            ``other_config`` key; the name of a registered BPF ``struct_ops`` (a congestion control); a network
            namespace's name (``netns``); a libvirt domain's, network's or storage pool's name (``vm_domain``,
            ``vm_network``, ``vm_pool``: a VM run's, :mod:`vm.run`); ``table/chain`` of a firewall chain that
            libvirt makes for the run's network and leaves behind, empty (``fw_chain``).
        original: the value before the change (``sysctl``, ``ovs_other_config``; None when
            the key was absent).
        start_time: a ``process``'s start time in clock ticks since boot (``/proc/<pid>/stat``
            field 22), so that a PID reused by another process is never signalled.
        what: a few words for messages (``controller``, ``host h1 shell``).
        via: for a change on another server of an emulation cluster (a ``bridge``, ``link`` or
            ``sysctl`` there, :mod:`emulator.cluster`), the command prefix that runs a command on it (``ssh
            ... root@server``); empty for this machine.
    """

    kind: str
    name: str
    original: str | None = None
    start_time: int | None = None
    what: str = ""
    via: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown change kind {self.kind!r}; valid: {', '.join(KINDS)}")
        object.__setattr__(self, "via", tuple(self.via))  # a list when read back from JSON
        if self.via and self.kind not in REMOTE_KINDS:
            raise ValueError(f"a {self.kind} change cannot be on another server (only {', '.join(REMOTE_KINDS)})")

    def describe(self) -> str:
        """``bridge e1``, ``process 1234 (controller)``, ``link s3-eth1 (...) on root@host2``."""
        return (f"{self.kind} {self.name}" + (f" ({self.what})" if self.what else "")
                + (f" on {self.via[-1]}" if self.via else ""))


def process_change(pid: int, what: str) -> Change:
    """The record of a process started by the run."""
    return Change("process", str(pid), start_time=process_start_time(pid), what=what)


def run_recorded(argv: list[str], record: RunJournal, log, timeout_s: float, failure: str, stdin=None) -> None:
    """One step of a build (a process in its own session), in ``record`` while it runs.

    Raises:
        EmulationError: ``failure`` (and the exit status) unless it exits 0 within ``timeout_s``.
    """
    proc = subprocess.Popen(argv, stdin=stdin if stdin is not None else subprocess.DEVNULL, stdout=log,
                            stderr=log, start_new_session=True)
    with recorded(proc, record, os.path.basename(argv[0])):
        finish(proc, timeout_s, failure)


@contextlib.contextmanager
def recorded(proc: subprocess.Popen, record: RunJournal, what: str) -> Iterator[subprocess.Popen]:
    """A process in the run record while the block runs; on any exception (a Ctrl-C included)
    its whole session is killed before the exception goes on."""
    started = record.add(process_change(proc.pid, what))
    try:
        yield proc
    except BaseException:
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        record.discard(started)


def finish(proc: subprocess.Popen, timeout_s: float, failure: str) -> None:
    """Wait for a process; raise EmulationError with ``failure`` unless it exits 0 in time."""
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise EmulationError(f"{failure}: still running after {timeout_s:g} s") from None
    if code != 0:
        raise EmulationError(f"{failure} (exit {code})")


# -- undoing changes ------------------------------------------------------------------------------


def undo_handler(kind: str) -> Callable[[list[Change]], dict[Change, str | None]]:
    """The function that undoes changes of ``kind`` (:data:`UNDO`), its module imported now.

    Raises:
        ValueError: unknown kind (the message lists the registered ones).
    """
    return registry.load(UNDO, kind, "change kind", ValueError)


def undo_group(changes: list[Change]) -> dict[Change, str | None]:
    """Undo changes of one kind together, by that kind's handler (:data:`UNDO`); None per change
    done, else why not."""
    kinds = {c.kind for c in changes}
    if len(kinds) != 1:
        raise ValueError(f"one kind per group, got {sorted(kinds)}")
    return undo_handler(kinds.pop())(changes)


def _on(via: tuple[str, ...], argv: list[str]) -> list[str]:
    """``argv`` as a command on the server ``via`` reaches (as ``ssh`` does: one string for its
    shell there), or as it is here."""
    return [*via, shlex.join(argv)] if via else list(argv)


def _by_server(changes: list[Change]) -> dict[tuple[str, ...], list[Change]]:
    """Changes grouped by the server they were made on (``via``), order kept."""
    out: dict[tuple[str, ...], list[Change]] = {}
    for c in changes:
        out.setdefault(c.via, []).append(c)
    return out


def _same_process(c: Change) -> bool:
    """Whether the recorded process still runs under its PID (a reused PID is someone else's)."""
    now = process_start_time(int(c.name))
    return now is not None and (c.start_time is None or now == c.start_time)


def _reap(pid: int) -> None:
    try:  # our own child: collect it, so it does not linger as a zombie
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_processes(changes: list[Change]) -> dict[Change, str | None]:
    """``process``: stop recorded processes together: SIGTERM (and SIGHUP, which an interactive
    shell obeys), then SIGKILL what is left after ``STOP_GRACE_S``."""
    out: dict[Change, str | None] = {}
    for sigs in ((signal.SIGTERM, signal.SIGHUP), (signal.SIGKILL,)):
        alive = [c for c in changes if c not in out and _same_process(c)]
        for c in changes:
            if c not in out and c not in alive:
                _reap(int(c.name))
                out[c] = None
        for c in alive:
            for sig in sigs:
                signal_group(int(c.name), sig)
        deadline = time.monotonic() + STOP_GRACE_S
        while alive and time.monotonic() < deadline:
            for c in alive:
                _reap(int(c.name))
            alive = [c for c in alive if _same_process(c)]
            time.sleep(0.02)
    for c in changes:
        _reap(int(c.name))
        out.setdefault(c, f"process {c.name} survived SIGKILL" if _same_process(c) else None)
    return out


def remove_bridges(changes: list[Change]) -> dict[Change, str | None]:
    """``bridge``: delete OVS bridges, in one transaction per server."""
    out = {}
    for via, group in _by_server(changes).items():
        argv = ["ovs-vsctl", f"--timeout={BRIDGE_TIMEOUT_S}"]
        for c in group:
            argv += ["--", "--if-exists", "del-br", c.name]
        cp = run_in_session(_on(via, argv), timeout_s=BRIDGE_TIMEOUT_S + 30)
        why = None if cp.returncode == 0 else cp.stderr.strip() or f"ovs-vsctl exited {cp.returncode}"
        out.update(dict.fromkeys(group, why))
    return out


def remove_links(changes: list[Change]) -> dict[Change, str | None]:
    """``link``: delete interfaces of the root namespace (a veth's peer goes with it); another
    server's in one command per server."""
    out = {}
    for via, group in _by_server(changes).items():
        out.update(_remove_remote_links(via, group) if via else {c: _remove_link(c) for c in group})
    return out


def _remove_link(c: Change) -> str | None:
    if not os.path.exists(f"/sys/class/net/{c.name}"):
        return None
    cp = run_in_session(["ip", "link", "del", c.name])
    return None if cp.returncode == 0 or not os.path.exists(f"/sys/class/net/{c.name}") else cp.stderr.strip()


def _remove_remote_links(via: tuple[str, ...], changes: list[Change]) -> dict[Change, str | None]:
    """Delete interfaces on another server in one command, then list which are still there."""
    names = " ".join(c.name for c in changes)
    script = (f"for i in {names}; do [ -e /sys/class/net/$i ] && ip link del $i; done; "
              f"for i in {names}; do [ -e /sys/class/net/$i ] && echo $i; done; true")
    try:
        cp = run_in_session(_on(via, ["sh", "-c", script]), timeout_s=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return dict.fromkeys(changes, f"{via[-1]} did not answer within {COMMAND_TIMEOUT_S:.0f} s")
    if cp.returncode != 0:
        return dict.fromkeys(changes, cp.stderr.strip() or f"ssh to {via[-1]} exited {cp.returncode}")
    left = set(cp.stdout.split())
    return {c: "still there after `ip link del`" if c.name in left else None for c in changes}


def remove_namespaces(changes: list[Change]) -> dict[Change, str | None]:
    """``netns``: delete network namespaces; their interfaces go with them (a veth's peer outside too)."""
    return {c: _remove_namespace(c) for c in changes}


def _remove_namespace(c: Change) -> str | None:
    if not os.path.exists(f"/run/netns/{c.name}"):
        return None
    # The kernel frees a deleted namespace's interfaces later, in its own time; deleted first, a veth's
    # peer outside is gone when the undo returns, and its name free for the next run.
    shown = run_in_session(["ip", "-n", c.name, "-o", "link", "show"])
    for line in shown.stdout.splitlines():  # "2: veth0@if3: <BROADCAST,...> ..."
        device = line.split(": ")[1].split("@")[0]
        if device != "lo":
            run_in_session(["ip", "-n", c.name, "link", "del", "dev", device])
    cp = run_in_session(["ip", "netns", "delete", c.name])
    return None if cp.returncode == 0 or not os.path.exists(f"/run/netns/{c.name}") else cp.stderr.strip()


def _mounted(path: str) -> bool:
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


def unmount(changes: list[Change]) -> dict[Change, str | None]:
    """``mount``: unmount what is still mounted."""
    return {c: _unmount(c) for c in changes}


def _unmount(c: Change) -> str | None:
    if _mounted(c.name):
        cp = run_in_session(["umount", c.name])
        if cp.returncode != 0 and _mounted(c.name):
            return cp.stderr.strip() or f"umount exited {cp.returncode}"
    return None


def remove_dirs(changes: list[Change]) -> dict[Change, str | None]:
    """``dir``: remove directories the run made, only while empty."""
    return {c: _remove_dir(c) for c in changes}


def _remove_dir(c: Change) -> str | None:
    try:
        os.rmdir(c.name)  # only ever an empty directory the run made
    except FileNotFoundError:
        pass
    except OSError as e:
        return e.strerror
    return None


def restore_sysctls(changes: list[Change]) -> dict[Change, str | None]:
    """``sysctl``: write back each key's original value (here or on its server)."""
    return {c: _restore_sysctl(c) for c in changes}


def _restore_sysctl(c: Change) -> str | None:
    if c.original is None:
        return None
    cp = run_in_session(_on(c.via, ["sysctl", "-w", f"{c.name}={c.original}"]))
    return None if cp.returncode == 0 else cp.stderr.strip()


def restore_ovs_other_config(changes: list[Change]) -> dict[Change, str | None]:
    """``ovs_other_config``: set each key back to its original value, or remove it when it was absent."""
    return {c: _restore_ovs_other_config(c) for c in changes}


def _restore_ovs_other_config(c: Change) -> str | None:
    argv = (["ovs-vsctl", "--timeout=10", "remove", "Open_vSwitch", ".", "other_config", c.name]
            if c.original is None else
            ["ovs-vsctl", "--timeout=10", "set", "Open_vSwitch", ".", f"other_config:{c.name}={c.original}"])
    cp = run_in_session(argv)
    return None if cp.returncode == 0 else cp.stderr.strip()


# -- the record --------------------------------------------------------------------------------


class RunJournal:
    """The changes one process made to the machine, on disk, newest last.

    Args:
        purpose: a few words for ``clean`` and for a run refused because of this one.
        records_dir: where record files live (one per owner process).
    """

    def __init__(self, purpose: str, records_dir: str | None = None):
        self.records_dir = records_dir or RECORDS_DIR
        self.pid = os.getpid()
        self.start_time = process_start_time(self.pid)
        self.purpose = purpose
        self.path = os.path.join(self.records_dir, f"{self.pid}-{self.start_time}.json")
        self.changes: list[Change] = []
        self._lock = threading.Lock()
        self._created = False

    @classmethod
    def load(cls, path: str) -> RunJournal:
        """A record read back from its file (by ``clean``).

        Raises:
            EmulationError: when the file is not a record.
        """
        try:
            with open(path) as f:
                d = json.load(f)
            rec = cls.__new__(cls)
            rec.records_dir, rec.path = os.path.dirname(path), path
            rec.pid, rec.start_time, rec.purpose = int(d["pid"]), d["start_time"], str(d["purpose"])
            rec.changes = [Change(**c) for c in d["changes"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise EmulationError(f"{path} is not a readable run record: {e}") from None
        rec._lock, rec._created = threading.Lock(), True
        return rec

    def owner_alive(self) -> bool:
        """Whether the process that wrote this record is still running."""
        return self.start_time is not None and process_start_time(self.pid) == self.start_time

    def _save(self) -> None:
        if not self.changes:
            if self._created:
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
                self._created = False
            return
        if not self._created:
            os.makedirs(self.records_dir, mode=0o700, exist_ok=True)
            self._created = True
        write_json_atomic(self.path, {"pid": self.pid, "start_time": self.start_time, "purpose": self.purpose,
                                      "changes": [dataclasses.asdict(c) for c in self.changes]}, durable=True)

    def add(self, change: Change) -> Change:
        """Record a change about to be made (call before making it)."""
        with self._lock:
            self.changes.append(change)
            self._save()
        return change

    def add_all(self, changes: Iterable[Change]) -> list[Change]:
        """Record changes about to be made, in one write (call before making any of them)."""
        changes = list(changes)
        with self._lock:
            self.changes.extend(changes)
            self._save()
        return changes

    def discard(self, change: Change) -> None:
        """Forget a change already undone by its owner (e.g. a finished worker)."""
        self.discard_all([change])

    def discard_all(self, changes: Iterable[Change]) -> None:
        """Forget changes already undone, in one write."""
        gone = set(changes)
        with self._lock:
            kept = [c for c in self.changes if c not in gone]
            if len(kept) != len(self.changes):
                self.changes = kept
                self._save()

    def undo(self, change: Change) -> str | None:
        """Undo one change now (and forget it when done); None when done, else why not."""
        try:
            why = undo_group([change])[change]
        except Exception as e:  # noqa: BLE001 - reported like unwind's failures
            why = f"{type(e).__name__}: {e}"
        if why is None:
            self.discard(change)
        return why

    def unwind(self, progress=None) -> list[str]:
        """Undo every change, newest first, shielded from further signals.

        Args:
            progress: called with a line per signal received meanwhile (default: stderr).

        Returns:
            One line per change that could not be undone (they stay in the record for
            ``clean``); empty when the machine is as before.
        """
        late: list[int] = []
        say = progress or (lambda line: print(line, file=sys.stderr, flush=True))

        def note(signum, frame):
            late.append(signum)
            say(f"interrupted again: still undoing this run's changes ({len(self.changes)} left); "
                f"they are recorded, so `sudo python3 run_testbed.py clean` can finish the job")

        shield = threading.current_thread() is threading.main_thread()
        previous = {}
        if shield:
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, note)
        failures = []
        try:
            for group in _runs_of_one_kind(list(reversed(self.changes))):
                try:
                    results = undo_group(group)
                except Exception as e:  # noqa: BLE001 - one step's failure must not stop the others
                    results = dict.fromkeys(group, f"{type(e).__name__}: {e}")
                self.discard_all(change for change, why in results.items() if why is None)
                failures += [f"{change.describe()}: {why}" for change, why in results.items() if why is not None]
        finally:
            if shield:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        return failures


def _runs_of_one_kind(changes: list[Change]) -> list[list[Change]]:
    """Consecutive changes grouped by kind, order kept."""
    groups: list[list[Change]] = []
    for c in changes:
        if groups and groups[-1][0].kind == c.kind:
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


def records(records_dir: str | None = None) -> list[str]:
    """Paths of every run record on this machine, oldest first."""
    d = records_dir or RECORDS_DIR
    try:
        names = [n for n in os.listdir(d) if n.endswith(".json")]
    except FileNotFoundError:
        return []
    paths = [os.path.join(d, n) for n in names]
    return sorted(paths, key=os.path.getmtime)


def require_no_leftovers(records_dir: str | None = None) -> None:
    """Refuse to start while another run is active or a dead run's changes are still in place.

    Raises:
        EmulationError: naming the other run, or the leftovers and ``clean``.
    """
    for path in records(records_dir):
        rec = RunJournal.load(path)
        if rec.owner_alive():
            raise EmulationError(f"another run (pid {rec.pid}, {rec.purpose}) is using the emulator; wait for "
                                 f"it to finish or stop it")
        kinds = sorted({c.kind for c in rec.changes})
        raise EmulationError(f"a run that did not finish (pid {rec.pid}, {rec.purpose}) left {len(rec.changes)} "
                             f"change(s) on this machine ({', '.join(kinds)}); undo them with "
                             f"`sudo python3 run_testbed.py clean`")


# -- the machine's one emulator -------------------------------------------------------------------


def wait_setting() -> float:
    """Seconds to wait for the emulator (:data:`WAIT_ENV`; 0 when unset).

    Raises:
        EmulationError: when it is not a number of seconds.
    """
    raw = os.environ.get(WAIT_ENV, "").strip()
    try:
        wait_s = float(raw or 0)
    except ValueError:
        wait_s = -1.0
    if not (math.isfinite(wait_s) and wait_s >= 0):
        raise EmulationError(f"{WAIT_ENV}={raw!r} is not a number of seconds (0 or more)")
    return wait_s


def _ancestors() -> set[int]:
    """PIDs of this process's parent, its parent's parent, ... up to init."""
    out, pid = set(), os.getppid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return out


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


_HOLDS: dict[str, list] = {}
"""Lock path -> [its descriptor (None when an ancestor holds it), how many holds of this process]."""
_HOLDS_LOCK = threading.Lock()


class EmulatorLock:
    """This process's turn at the emulator: an exclusive ``flock`` on ``path``, for as long as it is
    held, so "another run is using the emulator" is decided atomically and a dead holder's turn ends
    with it.

    Holds nest within a process (the file is locked once, released by the last release). A process
    whose ancestor holds the lock runs under that turn (a test suite holding it for a test lends it
    to the runs the test starts); such runs still meet each other's records in
    :func:`require_no_leftovers`. Waiting runs queue on ``path + ".queue"``, so that a holder that
    releases and at once asks again lets the one waiting go first.

    Args:
        purpose: a few words for another run's refusal or wait message.
        path: the lock file (default :data:`EMULATOR_LOCK`).
        wait_s: how long to wait for another run's turn to end (default :func:`wait_setting`).
        say: where the one line saying that it waits goes (default stderr).
    """

    def __init__(self, purpose: str, path: str | None = None, wait_s: float | None = None, say=None):
        self.purpose = purpose
        self.path = os.path.abspath(path or EMULATOR_LOCK)
        self.wait_s = wait_s
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.held = False

    def __enter__(self) -> EmulatorLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def holder(self) -> tuple[int, str] | None:
        """PID and purpose of the live process whose turn it is, from the lock file; None when there is
        none (or it has not written itself in yet)."""
        try:
            with open(self.path) as f:
                d = json.loads(f.read() or "null")
            pid, start, purpose = int(d["pid"]), d["start_time"], str(d["purpose"])
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return (pid, purpose) if process_start_time(pid) == start else None

    def acquire(self) -> EmulatorLock:
        """Take the turn (or a nested hold of this process's, or its ancestor's).

        Raises:
            EmulationError: "another run (pid N, ...) is using the emulator" when another run holds it
                and the wait (if any) ran out.
        """
        if self.held:
            return self
        wait_s = wait_setting() if self.wait_s is None else self.wait_s
        with _HOLDS_LOCK:
            hold = _HOLDS.get(self.path)
            if hold is None:
                hold = [self._take(wait_s), 0]
                _HOLDS[self.path] = hold
            hold[1] += 1
        self.held = True
        return self

    def release(self) -> None:
        """End this hold (idempotent); the turn ends with the process's last hold."""
        if not self.held:
            return
        self.held = False
        with _HOLDS_LOCK:
            hold = _HOLDS[self.path]
            hold[1] -= 1
            if hold[1] > 0:
                return
            del _HOLDS[self.path]
            fd = hold[0]
            if fd is not None:
                os.ftruncate(fd, 0)  # no stale holder for whoever reads it next
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def _take(self, wait_s: float) -> int | None:
        """The locked descriptor, or None when an ancestor holds the lock."""
        os.makedirs(os.path.dirname(self.path), mode=0o755, exist_ok=True)
        deadline = time.monotonic() + wait_s
        queue = os.open(self.path + ".queue", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        queued, polls = False, 0
        try:
            while True:
                who = self.holder()
                if who is not None and who[0] in _ancestors():
                    os.close(fd)
                    return None
                queued = queued or _try_flock(queue)
                if queued and _try_flock(fd):
                    break
                other = f"pid {who[0]}, {who[1]}" if who else f"holding {self.path}"
                if time.monotonic() >= deadline:
                    waited = f" (waited {wait_s:g} s, {WAIT_ENV})" if wait_s else ""
                    raise EmulationError(f"another run ({other}) is using the emulator; wait for it to finish or "
                                         f"stop it{waited}")
                # said once; a holder not yet written in is given a second to be
                if polls >= 0 and (who or polls * LOCK_POLL_S >= 1.0):
                    self.say(f"waiting up to {wait_s:g} s for the emulator: another run ({other}) is using it")
                    polls = -1
                elif polls >= 0:
                    polls += 1
                time.sleep(LOCK_POLL_S)
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.close(queue)  # the next in line may queue now
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "start_time": process_start_time(os.getpid()),
                                  "purpose": self.purpose}).encode(), 0)
        return fd


def clean(records_dir: str | None = None, say=print) -> list[str]:
    """Undo the recorded changes of every run whose owner is gone; leave running runs alone.

    Returns:
        One line per change that could not be undone.
    """
    failures = []
    for path in records(records_dir):
        rec = RunJournal.load(path)
        if rec.owner_alive():
            say(f"run pid {rec.pid} ({rec.purpose}) is still running: left alone")
            continue
        n = len(rec.changes)
        left = rec.unwind()
        say(f"undid {n - len(left)} of {n} change(s) of run pid {rec.pid} ({rec.purpose})")
        failures.extend(left)
    return failures
