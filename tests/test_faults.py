"""Fault injection (emulation tests): signals, kill -9 of the runner, the controller and a worker,
and ``clean`` beside things that are not ours.

After every fault the machine is compared with its state before the run: interfaces, OVS
bridges and ``other_config``, the sysctls a run may change, network namespaces, mounts, BPF
programs, run records and the processes a run starts. A run records each change before making
it (:mod:`emulator.journal`), so even after kill -9 ``clean`` puts the machine back.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading

import pytest
from conftest import CLI, ROOT, scan_processes, session_ifname, two_rack_run, wait_until

pytestmark = pytest.mark.emulation

RUN_MARKERS = ("controller.serve", "-is mininet:", "workers.agent", "workers.worker", "emulator.tcpcheck")
SYSCTLS = ("net/ipv4/tcp_allowed_congestion_control", "net/ipv4/tcp_congestion_control")
LONG = two_rack_run(400, extra="congestion_control: reno\n")
"""The smallest run with every kind of part (and a congestion control to set): a wave that runs for
minutes unless a fault ends it."""
SHORT = two_rack_run(1, model="small_cnn", extra="congestion_control: reno\n")
"""The same network and job as :data:`LONG`, one iteration of the smallest model: a run that finishes."""

def machine_state() -> dict:
    """What a run could change on this machine, now."""
    from emulator import journal

    namespaces, ours = scan_processes(RUN_MARKERS)
    with open("/proc/mounts") as f:
        mounts = sorted(line.split()[1] for line in f)
    progs = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
    return {
        "interfaces": sorted(os.listdir("/sys/class/net")),
        "bridges": subprocess.run(["ovs-vsctl", "--timeout=10", "list-br"], capture_output=True,
                                  text=True).stdout.split(),
        "ovs_other_config": subprocess.run(["ovs-vsctl", "--timeout=10", "get", "Open_vSwitch", ".", "other_config"],
                                           capture_output=True, text=True).stdout.strip(),
        "sysctls": {k: open(f"/proc/sys/{k}").read().strip() for k in SYSCTLS},
        "net_namespaces": len(namespaces),
        "run_processes": sorted(ours),
        "mounts": mounts,
        "bpf_markers": sorted(p["id"] for p in json.loads(progs or "[]") if p.get("name") == "vq_ecn"),
        "records": journal.records(),
    }


@pytest.fixture
def before(emulation_ok):
    """The machine state before the test's run; the test must leave it so (checked after it)."""
    state = machine_state()
    assert state["records"] == [] and state["run_processes"] == [], state
    yield state
    assert machine_state() == state


class Run:
    """``run_testbed.py`` in the background, its output collected line by line."""

    def __init__(self, tmp_path, config: str, name: str = "res"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(config)
        self.proc = subprocess.Popen([*CLI, "-c", str(path), "--results", str(tmp_path / name)], cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(s, dst), daemon=True)
                         for s, dst in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for t in self._readers:
            t.start()

    def _read(self, stream, dst):
        for line in stream:
            dst.append(line)

    def wait_for(self, text: str, timeout_s: float = 180.0) -> None:
        """Wait until the run prints a line holding ``text``; fail if it ends first."""
        def printed():
            assert self.proc.poll() is None, f"run ended before {text!r}: {self.text}"
            return any(text in line for line in self.out)

        wait_until(printed, timeout_s, f"{text!r} printed by the run")

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def finish(self, timeout_s: float = 240.0) -> int:
        code = self.proc.wait(timeout=timeout_s)
        for t in self._readers:
            t.join(timeout=10)
        return code

    @property
    def text(self) -> str:
        return "".join(self.out + self.err)

    def changes(self) -> list | None:
        """The changes this run's record holds now (None: no record, none left)."""
        from emulator import journal

        for path in journal.records():
            try:
                rec = journal.RunJournal.load(path)
            except FileNotFoundError:  # its run finished undoing meanwhile
                continue
            if rec.pid == self.proc.pid:
                return rec.changes
        return None

    def recorded_pid(self, what: str) -> int:
        """PID of the first recorded process whose description starts with ``what``."""
        for c in self.changes() or ():
            if c.kind == "process" and c.what.startswith(what):
                return int(c.name)
        raise AssertionError(f"no recorded process {what!r} of run {self.proc.pid}")


def assert_one_line_error(run: Run, code: int, pattern: str) -> None:
    err = "".join(run.err).strip().splitlines()
    assert run.proc.returncode == code, run.text
    assert "Traceback" not in run.text
    assert err and pattern in err[-1], run.text


WORKER = "python -m workers.agent"  # how the run records a worker process
AGAIN = "interrupted again"  # the line a signal prints once the run is already stopping
UNDOING = "interrupted again: still undoing this run's changes"  # ... printed by the unwind's shield


def wait_for_phase(run: Run, phase: str, wave: list) -> None:
    """Wait until the interrupted ``run`` is in ``phase``: ``handling`` once it has stopped its workers
    (the first thing it does), ``teardown`` once it is undoing its network (the unwind has dropped the
    workers from the record ``wave`` is a copy of, and changes are left to undo)."""
    workers = {c.name for c in wave if c.kind == "process" and c.what.startswith(WORKER)}
    assert workers, wave

    def handling():
        return not any(os.path.exists(f"/proc/{pid}") for pid in workers)

    def teardown():
        changes = run.changes()
        assert changes, f"the run had undone everything before its teardown could be signalled: {run.text}"
        return not workers & {c.name for c in changes if c.kind == "process"}

    wait_until({"handling": handling, "teardown": teardown}[phase], 60, f"the interrupted run's {phase}",
               poll_s=0.01)


@pytest.mark.parametrize("signals", [
    [(signal.SIGINT, "wave")],
    [(signal.SIGTERM, "wave")],
    [(signal.SIGINT, "wave"), (signal.SIGINT, "handling")],
    [(signal.SIGINT, "wave"), (signal.SIGINT, "handling"), (signal.SIGTERM, "teardown"), (signal.SIGINT, "teardown")],
], ids=["sigint", "sigterm", "sigint-twice", "signals-during-teardown"])
def test_signals_stop_the_run_and_leave_the_machine_as_before(before, tmp_path, signals):
    """A wave is running: the first signal ends the run with exit code 130 and one line; each further one,
    sent while the run stops its jobs (handling) or undoes its network (teardown), is answered in that
    phase with one line and obeyed no further; the results directory says the run was interrupted;
    nothing of the run is left on the machine."""
    run = Run(tmp_path, LONG)
    run.wait_for("ranks joined")
    wave = run.changes()
    for i, (sig, phase) in enumerate(signals):
        if phase != "wave":
            wait_for_phase(run, phase, wave)
        run.signal(sig)
        # each signal is answered before the next is sent: two of one kind pending at once would be one
        wait_until(lambda i=i: sum(AGAIN in line for line in run.err) >= i, 30, f"the run's answer to signal {i + 1}")
    run.finish()
    assert_one_line_error(run, 130, "interrupted")
    answers = [line.strip() for line in run.err if AGAIN in line]
    assert len(answers) == len(signals) - 1, run.text
    for (_, phase), answer in zip(signals[1:], answers, strict=True):
        assert phase != "teardown" or answer.startswith(UNDOING), (phase, answer, run.text)
    (run_dir,) = (tmp_path / "res").iterdir()
    assert json.loads((run_dir / "status.json").read_text())["status"] == "interrupted"
    if len(signals) > 2:
        assert machine_state() == before
        nxt = Run(tmp_path, SHORT, "next")
        assert nxt.finish() == 0, nxt.text


def test_controller_death_fails_the_run_naming_it(before, tmp_path):
    """kill -9 of the controller during a wave: the run fails (exit 2) with one line naming the
    controller, long before the wave could have finished, instead of reporting idle links."""
    run = Run(tmp_path, LONG)
    run.wait_for("ranks joined")
    pid = run.recorded_pid("controller")
    os.kill(pid, signal.SIGKILL)
    run.finish(timeout_s=120)
    assert_one_line_error(run, 2, f"the controller (pid {pid}) was killed by signal 9")
    assert machine_state() == before
    nxt = Run(tmp_path, SHORT, "next")
    assert nxt.finish() == 0, nxt.text


def test_worker_death_fails_the_run_naming_it(before, tmp_path):
    """kill -9 of a worker process during a wave: exit 2, one line naming the job, rank and machine."""
    run = Run(tmp_path, LONG)
    run.wait_for("ranks joined")
    os.kill(run.recorded_pid("python -m workers.agent"), signal.SIGKILL)
    run.finish(timeout_s=120)
    assert_one_line_error(run, 2, "job 'j'")


def test_kill_9_of_the_runner_then_clean_which_leaves_what_is_not_ours(before, tmp_path):
    """Beside a foreign OVS bridge, a foreign file in /tmp and a foreign process named `controller`:
    kill -9 leaves the network behind, recorded; the next run refuses to start and names `clean`;
    `clean` undoes exactly the record and the foreign things all survive it, with a killed run's
    leftovers to undo and again with none; a run whose bridge name is taken by a foreign bridge
    refuses to start and leaves that bridge alone; then a run succeeds."""
    foreign = session_ifname("foreign")
    foreign_file = tmp_path / "foreign-file"
    tmp_file = f"/tmp/mn-{foreign}-keep-me.sock"  # named like Mininet's sockets
    fake_dir = tmp_path / "bin"
    fake_dir.mkdir()
    shutil.copy("/bin/sleep", fake_dir / "controller")
    proc = subprocess.Popen([str(fake_dir / "controller"), "600"])
    try:
        subprocess.run(["ovs-vsctl", "add-br", foreign], check=True)
        with open(tmp_file, "w") as f:
            f.write("not ours\n")
        foreign_file.write_text("not ours\n")
        with_foreign = machine_state()
        run = Run(tmp_path, LONG)
        run.wait_for("ranks joined")
        run.signal(signal.SIGKILL)
        run.finish()
        left = machine_state()
        assert left["records"] and set(left["bridges"]) > set(with_foreign["bridges"]), left
        refused = Run(tmp_path, SHORT, "refused")
        refused.finish()
        assert_one_line_error(refused, 2, "run_testbed.py clean")
        for _ in range(2):  # with leftovers to undo, then with none
            cp = subprocess.run([*CLI, "clean"], capture_output=True, text=True, timeout=240, cwd=ROOT)
            assert cp.returncode == 0 and "Traceback" not in cp.stdout + cp.stderr, cp.stdout + cp.stderr
            assert machine_state() == with_foreign
            assert proc.poll() is None and os.path.exists(tmp_file) and foreign_file.exists()
            assert foreign in subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout.split()
        subprocess.run(["ovs-vsctl", "add-br", "l1"], check=True)  # a bridge named like one of the run's switches
        try:
            taken = Run(tmp_path, SHORT, "taken")
            taken.finish()
            assert_one_line_error(taken, 2, "l1")
            assert "l1" in subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout.split()
        finally:
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", "l1"], check=True)
        ok = Run(tmp_path, SHORT, "ok")
        assert ok.finish() == 0, ok.text
    finally:
        proc.kill()
        proc.wait()
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", foreign], check=True)
        if os.path.exists(tmp_file):
            os.unlink(tmp_file)


def test_network_start_does_not_probe_the_controller_port(emulation_ok):
    """Mininet's RemoteController probes the controller's port with telnet and decodes the reply (an
    OpenFlow HELLO, binary) as text, which crashed network start at random. The network's controller
    node makes no connection at all: the controller process was already seen listening."""
    import socket

    from emulator.net import _controller_class

    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)
            conn.sendall(b"\x04\x00\x00\x08\xff\xfe\xfd\xfc")  # a HELLO header, then bytes that are not UTF-8
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    node = _controller_class()("c9", ip="127.0.0.1", port=server.getsockname()[1])
    try:
        assert accepted == []
    finally:
        node.terminate()
        server.close()
