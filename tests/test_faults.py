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
import sys
import threading
import time

import pytest
from conftest import ROOT, scan_processes

pytestmark = pytest.mark.emulation

CLI = [sys.executable, os.path.join(ROOT, "run_testbed.py")]
RUN_MARKERS = ("controller.serve", "-is mininet:", "jobs.agent", "jobs.worker", "emulator.tcpcheck")
SYSCTLS = ("net/ipv4/tcp_allowed_congestion_control", "net/ipv4/tcp_congestion_control")
# Two machines on two leaves, one long job: the wave runs for minutes unless a fault ends it.
LONG = ("topology: {kind: leaf_spine, n_leaf: 2, n_spine: 1, hosts_per_leaf: 1}\n"
        "jobs: [{name: j, model: resnet50, workers: 8, collective: ring}]\n"
        "policies: [consolidate]\niterations: 400\nwarmup_iterations: 0\ncongestion_control: reno\n")
SHORT = LONG.replace("iterations: 400", "iterations: 2")


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
        deadline = time.monotonic() + timeout_s
        while not any(text in line for line in self.out):
            assert self.proc.poll() is None, f"run ended before {text!r}: {''.join(self.out + self.err)}"
            assert time.monotonic() < deadline, f"no {text!r} after {timeout_s} s: {''.join(self.out)}"
            time.sleep(0.1)

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

    def recorded_pid(self, what: str) -> int:
        """PID of the first recorded process whose description starts with ``what``."""
        from emulator import journal

        for path in journal.records():
            rec = journal.RunJournal.load(path)
            if rec.pid == self.proc.pid:
                for c in rec.changes:
                    if c.kind == "process" and c.what.startswith(what):
                        return int(c.name)
        raise AssertionError(f"no recorded process {what!r} of run {self.proc.pid}")


def assert_one_line_error(run: Run, code: int, pattern: str) -> None:
    err = "".join(run.err).strip().splitlines()
    assert run.proc.returncode == code, run.text
    assert "Traceback" not in run.text
    assert err and pattern in err[-1], run.text


@pytest.mark.parametrize("signals", [
    [signal.SIGINT],
    [signal.SIGTERM],
    [signal.SIGINT, signal.SIGINT],  # the second while the first is being handled
    [signal.SIGINT, signal.SIGINT, signal.SIGTERM, signal.SIGINT],  # more, during teardown
], ids=["sigint", "sigterm", "sigint-twice", "signals-during-teardown"])
def test_signals_stop_the_run_and_leave_the_machine_as_before(before, tmp_path, signals):
    """A wave is running: one or more signals end the run with exit code 130 and one line; the results
    directory says the run was interrupted; nothing of the run is left on the machine."""
    run = Run(tmp_path, LONG)
    run.wait_for("ranks joined")
    for i, sig in enumerate(signals):
        run.signal(sig)
        time.sleep(0.3 if i == 0 else 0.7)
    run.finish()
    assert_one_line_error(run, 130, "interrupted")
    (run_dir,) = (tmp_path / "res").iterdir()
    assert json.loads((run_dir / "status.json").read_text())["status"] == "interrupted"
    if len(signals) > 2:
        assert machine_state() == before
        nxt = Run(tmp_path, SHORT, "next")
        assert nxt.finish() == 0, nxt.text


def test_kill_9_of_the_runner_then_clean(before, tmp_path):
    """kill -9 leaves the network behind, recorded; the next run refuses to start and names `clean`;
    `clean` undoes exactly the record, and then a run succeeds."""
    run = Run(tmp_path, LONG)
    run.wait_for("ranks joined")
    run.signal(signal.SIGKILL)
    run.finish()
    left = machine_state()
    assert left["records"] and left["bridges"], left
    refused = Run(tmp_path, SHORT, "refused")
    refused.finish()
    assert_one_line_error(refused, 2, "run_testbed.py clean")
    cp = subprocess.run([*CLI, "clean"], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert cp.returncode == 0 and "Traceback" not in cp.stdout + cp.stderr, cp.stdout + cp.stderr
    assert machine_state() == before
    ok = Run(tmp_path, SHORT, "ok")
    assert ok.finish() == 0, ok.text


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
    os.kill(run.recorded_pid("python -m jobs.agent"), signal.SIGKILL)
    run.finish(timeout_s=120)
    assert_one_line_error(run, 2, "job 'j'")


def test_clean_leaves_what_is_not_ours(before, tmp_path):
    """A foreign OVS bridge, a foreign file in /tmp and a foreign process named `controller` all survive
    `clean`, with and without a killed run's leftovers to undo; a run whose bridge name is taken by a
    foreign bridge refuses to start and leaves that bridge alone."""
    foreign_file = tmp_path / "foreign-file"
    tmp_file = "/tmp/mn-foreign-keep-me.sock"
    fake_dir = tmp_path / "bin"
    fake_dir.mkdir()
    shutil.copy("/bin/sleep", fake_dir / "controller")
    proc = subprocess.Popen([str(fake_dir / "controller"), "600"])
    try:
        subprocess.run(["ovs-vsctl", "add-br", "foreign0"], check=True)
        with open(tmp_file, "w") as f:
            f.write("not ours\n")
        foreign_file.write_text("not ours\n")
        run = Run(tmp_path, LONG)
        run.wait_for("ranks joined")
        run.signal(signal.SIGKILL)
        run.finish()
        for _ in range(2):  # with leftovers to undo, then with none
            cp = subprocess.run([*CLI, "clean"], capture_output=True, text=True, timeout=240, cwd=ROOT)
            assert cp.returncode == 0, cp.stdout + cp.stderr
            assert proc.poll() is None and os.path.exists(tmp_file) and foreign_file.exists()
            assert "foreign0" in subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
        subprocess.run(["ovs-vsctl", "add-br", "l1"], check=True)  # a bridge named like one of the run's switches
        try:
            taken = Run(tmp_path, SHORT, "taken")
            taken.finish()
            assert_one_line_error(taken, 2, "l1")
            assert "l1" in subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout.split()
        finally:
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", "l1"], check=True)
    finally:
        proc.kill()
        proc.wait()
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", "foreign0"], check=True)
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
