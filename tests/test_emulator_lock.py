"""The machine's one emulator (:class:`emulator.journal.EmulatorLock`): two processes contending for its
lock file (a private one, so no root is needed). Every wait here is for an event a process prints."""

from __future__ import annotations

import fcntl
import os
import queue
import signal
import subprocess
import sys
import threading

import pytest
from conftest import ROOT

from common.errors import EmulationError
from emulator.journal import WAIT_ENV, EmulatorLock

CONTENDER = r"""
import sys
from common.errors import EmulationError
from emulator.journal import EmulatorLock

lock = EmulatorLock(sys.argv[2], path=sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    try:
        if line.strip() == "acquire":
            lock.acquire()
            print("held", flush=True)
        elif line.strip() == "release":
            lock.release()
            print("released", flush=True)
        elif line.strip() == "again":
            lock.release()
            lock.acquire()
            print("held again", flush=True)
    except EmulationError as e:
        print(f"refused: {e}", flush=True)
"""


class Contender:
    """A process taking turns at the lock on commands (``acquire``, ``release``, ``again``: release and
    ask at once), its output (stderr, where the waiting line goes, included) read line by line."""

    def __init__(self, path: str, purpose: str, wait_s: float | None = None):
        env = {k: v for k, v in os.environ.items() if k != WAIT_ENV}
        if wait_s is not None:
            env[WAIT_ENV] = f"{wait_s:g}"
        self.proc = subprocess.Popen([sys.executable, "-c", CONTENDER, path, purpose], cwd=ROOT, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.expect("ready")

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("<end of output>")

    def send(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def expect(self, start: str, timeout_s: float = 60.0) -> str:
        """The next line starting with ``start``, the lines before it kept in :attr:`seen`; fails the test
        with the output so far when the process ends or stays silent ``timeout_s`` first."""
        while True:
            try:
                line = self.lines.get(timeout=timeout_s)
            except queue.Empty:
                pytest.fail(f"pid {self.pid} printed no {start!r} within {timeout_s:g} s; output: {self.seen}")
            assert line != "<end of output>", f"pid {self.pid} ended before printing {start!r}; output: {self.seen}"
            self.seen.append(line)
            if line.startswith(start):
                return line

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()


@pytest.fixture
def lock_path(tmp_path):
    return str(tmp_path / "run" / "emulator.lock")


@pytest.fixture
def contenders():
    """Starts :class:`Contender` processes, killed at the end of the test."""
    started: list[Contender] = []

    def start(*args, **kwargs) -> Contender:
        started.append(Contender(*args, **kwargs))
        return started[-1]

    yield start
    for c in started:
        c.close()


def free(path: str) -> bool:
    """Whether a new open of the lock file could lock it now (nobody holds it)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_a_second_run_refuses_at_once_naming_the_holder(lock_path, contenders):
    """Without a wait, a run finding the lock held fails with the holder's PID and purpose, and the holder keeps it."""
    a = contenders(lock_path, "run a")
    a.send("acquire")
    a.expect("held")
    b = contenders(lock_path, "run b")
    b.send("acquire")
    assert b.expect("refused") == (f"refused: another run (pid {a.pid}, run a) is using the emulator; wait for it "
                                   f"to finish or stop it")
    assert EmulatorLock("x", path=lock_path).holder() == (a.pid, "run a") and not free(lock_path)


def test_a_waiting_run_says_once_whom_it_waits_for_and_goes_when_the_holder_releases(lock_path, contenders):
    """With TESTBED_EMULATOR_WAIT_S the second run prints one line naming the holder, then takes the
    lock as soon as the holder releases it."""
    a = contenders(lock_path, "run a")
    a.send("acquire")
    a.expect("held")
    b = contenders(lock_path, "run b", wait_s=1800)
    b.send("acquire")
    assert b.expect("waiting") == (f"waiting up to 1800 s for the emulator: another run (pid {a.pid}, run a) is "
                                   f"using it")
    assert EmulatorLock("x", path=lock_path).holder() == (a.pid, "run a")
    a.send("release")
    a.expect("released")
    b.expect("held")
    assert sum(line.startswith("waiting") for line in b.seen) == 1
    assert EmulatorLock("x", path=lock_path).holder() == (b.pid, "run b")


def test_the_wait_ends_at_its_deadline_with_the_refusal(lock_path, contenders):
    """A wait that runs out fails with the holder named and the wait it gave."""
    a = contenders(lock_path, "run a")
    a.send("acquire")
    a.expect("held")
    b = contenders(lock_path, "run b", wait_s=0.5)
    b.send("acquire")
    b.expect("waiting")
    assert b.expect("refused") == (f"refused: another run (pid {a.pid}, run a) is using the emulator; wait for it "
                                   f"to finish or stop it (waited 0.5 s, {WAIT_ENV})")
    assert not free(lock_path)


def test_a_holder_that_asks_again_at_once_lets_the_waiting_run_go_first(lock_path, contenders):
    """Turns alternate: a holder releasing and asking again at once waits behind the run already waiting."""
    a = contenders(lock_path, "run a", wait_s=1800)
    a.send("acquire")
    a.expect("held")
    b = contenders(lock_path, "run b", wait_s=1800)
    b.send("acquire")
    b.expect("waiting")
    a.send("again")
    b.expect("held")
    assert a.expect("waiting") == (f"waiting up to 1800 s for the emulator: another run (pid {b.pid}, run b) is "
                                   f"using it")
    b.send("release")
    b.expect("released")
    a.expect("held again")


def test_a_killed_holders_turn_ends_with_it(lock_path, contenders):
    """kill -9 of the holder frees the lock (the kernel drops it), and its stale name is not reported."""
    a = contenders(lock_path, "run a")
    a.send("acquire")
    a.expect("held")
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait()
    assert EmulatorLock("x", path=lock_path).holder() is None
    b = contenders(lock_path, "run b")
    b.send("acquire")
    b.expect("held")


def test_holds_nest_in_a_process_and_the_turn_is_lent_to_its_descendants(lock_path, contenders):
    """A nested hold keeps the lock until the outer one ends; a child of the holder runs under its turn
    without taking the lock or renaming the holder."""
    outer = EmulatorLock("suite", path=lock_path, wait_s=0).acquire()
    try:
        inner = EmulatorLock("network", path=lock_path, wait_s=0).acquire()
        inner.release()
        assert not free(lock_path) and outer.holder() == (os.getpid(), "suite")
        child = contenders(lock_path, "child run")
        child.send("acquire")
        child.expect("held")
        child.send("release")
        child.expect("released")
        assert not free(lock_path) and outer.holder() == (os.getpid(), "suite")
    finally:
        outer.release()
    assert free(lock_path) and outer.holder() is None


def test_a_wait_that_is_not_a_number_of_seconds_is_refused(lock_path, monkeypatch):
    """TESTBED_EMULATOR_WAIT_S must be seconds, 0 or more: anything else is one clear error."""
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv(WAIT_ENV, bad)
        with pytest.raises(EmulationError, match=f"^{WAIT_ENV}='{bad}' is not a number of seconds"):
            EmulatorLock("x", path=lock_path).acquire()


def test_the_process_scan_passes_over_only_another_running_suites_processes(tmp_path):
    """Processes tagged by another suite that still runs, or started by another pytest process, are not this
    suite's; those it started (tagged or not) and those of a suite that has ended are found."""
    from conftest import SUITE_ENV, scan_processes

    marker = f"scan-marker-{os.getpid()}"
    idle = [sys.executable, "-c", "import sys; sys.stdin.read()", marker]
    untagged = {k: v for k, v in os.environ.items() if k != SUITE_ENV}
    other_suite = subprocess.Popen(idle[:3], stdin=subprocess.PIPE)
    with open(f"/proc/{other_suite.pid}/stat") as f:
        other_tag = f"{other_suite.pid}-{f.read().rsplit(') ', 1)[1].split()[19]}"
    ended_suite = subprocess.Popen([sys.executable, "-c", "pass"])
    ended_suite.wait()
    fake_pytest = tmp_path / "pytest"  # what a pytest process's command line starts with
    fake_pytest.symlink_to(sys.executable)
    starter = (f"import subprocess, sys; p = subprocess.Popen({idle!r}, env={untagged!r}, stdin=subprocess.PIPE); "
               f"print(p.pid, flush=True); sys.stdin.read(); p.kill()")
    procs = [other_suite, subprocess.Popen([str(fake_pytest), "-c", starter], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, text=True)]
    try:
        label = {int(procs[-1].stdout.readline()): "started by another pytest"}
        for what, env in (("ours", os.environ), ("ours untagged", untagged),
                          ("tagged by a running suite", dict(os.environ, **{SUITE_ENV: other_tag})),
                          ("tagged by an ended suite", dict(os.environ, **{SUITE_ENV: f"{ended_suite.pid}-1"}))):
            procs.append(subprocess.Popen(idle, stdin=subprocess.PIPE, env=env))
            label[procs[-1].pid] = what
        found = sorted(label[int(line.split(":", 1)[0])] for line in scan_processes(markers=(marker,))[1]
                       if int(line.split(":", 1)[0]) in label)
        assert found == ["ours", "ours untagged", "tagged by an ended suite"], found
    finally:
        for p in procs:
            p.stdin.close()  # the fake pytest stops its child
            p.wait()
