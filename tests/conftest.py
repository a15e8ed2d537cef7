"""Shared fixtures. Emulation tests share one network fixture that always tears down."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCALE = 500.0  # 10 Gbit/s paper-scale links -> 20 Mbit/s emulated
ECN_QUEUE_PACKETS = 100  # the FIFO under each shaper in the ECN tests


def ecn_marking(threshold_bytes: float):
    """The ECN tests' marking: step marking at ``threshold_bytes`` for a port of any rate (MTU 1500)."""
    from measure.marking import marking_params

    return lambda rate: marking_params(threshold_bytes, 0, 0, 1.0, rate, ECN_QUEUE_PACKETS, 1500)
# A transfer's time over its bound: measured 1.03-1.17 for 2-machine rings at SCALE, processes or
# containers, one machine or two; a ring whose traffic crossed a link twice, or whose two directions
# took turns, would take twice its bound.
MAX_STRUCTURE_RATIO = 1.5


def ring_bound_ratio(net, machines, buckets, comm_s: float) -> float:
    """A ring's measured communication time per iteration over its contention-free bound on
    ``net``'s links (:func:`jobs.steps.job_bound_s`, bytes on the wire at the network's MTU)."""
    from emulator.net import link_rates_mbps
    from jobs.steps import job_bound_s

    rates = link_rates_mbps(net.g, net.options.scale)
    return comm_s / job_bound_s(net.g, rates, tuple(machines), "ring", tuple(buckets), net.options.mtu)


REQUIRE_SETUP = os.environ.get("TESTBED_REQUIRE_SETUP") == "1"
"""Set by `make test`, whose set-up installs every tool these tests need: missing, they fail."""


def needs(why: str | None, what: str) -> None:
    """A test's requirement that the set-up installs: nothing when it is there (``why`` None); when it
    is missing, skip naming ``what`` and why, or, under `make test` (:data:`REQUIRE_SETUP`), fail:
    the set-up should have installed it. Requirements optional by design (bmv2 without P4_PREFIX, a
    kernel without RED or AF_XDP, root) skip with ``pytest.skip`` instead."""
    if why is None:
        return
    if REQUIRE_SETUP:
        pytest.fail(f"{what}: {why}; `make test` runs its set-up (scripts/setup.sh --docker), which installs it")
    pytest.skip(f"{what}: {why}")


CONTROLLER_MARKER = "controller.serve"
MININET_SHELL_MARKER = "-is mininet:"  # the shell Mininet starts for every node


def emulation_missing() -> str | None:
    """Why emulation tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (Mininet, Open vSwitch, tc)"
    for tool in ("mnexec", "ovs-vsctl", "iperf3", "ethtool"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (run scripts/setup.sh)"
    if subprocess.run(["ovs-vsctl", "--timeout=3", "show"], capture_output=True).returncode != 0:
        return "Open vSwitch is not running (run scripts/setup.sh)"
    return None


def scan_processes(markers=(CONTROLLER_MARKER, MININET_SHELL_MARKER)) -> tuple[set[str], list[str]]:
    """Every network namespace a process is in, and ``pid: command`` of the processes that belong to
    an emulated network: in a namespace other than this one's, or with one of ``markers`` in their
    command line."""
    root_ns = os.readlink("/proc/self/ns/net")
    namespaces, found = set(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ns = os.readlink(f"/proc/{pid}/ns/net")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        namespaces.add(ns)
        if ns != root_ns or any(m in cmd for m in markers):
            found.append(f"{pid}: {cmd.strip()[:120]}")
    return namespaces, found


def leftovers() -> list[str]:
    """Bridges, interfaces and processes an emulation could leave behind."""
    found = []
    br = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True).stdout.split()
    found += [f"bridge {b}" for b in br]
    found += [f"interface {i}" for i in os.listdir("/sys/class/net") if "-eth" in i]
    from emulator.ports import stale_pipes

    found += [f"switch port pipe {i}" for i in stale_pipes()]
    # Processes left in an emulated host's network namespace, or a controller still running.
    found += [f"process {p}" for p in scan_processes()[1]]
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    found += [f"netns {n}" for n in netns]
    # The ECN marker: its private bpffs mounts and its loaded program.
    from emulator.ecn import stale_pin_dirs

    found += [f"bpffs {p}" for p in stale_pin_dirs()]
    # bmv2's default notification socket, a file that outlives the switch (ours use loopback TCP).
    found += [f"bmv2 socket {p}" for p in glob.glob("/tmp/bmv2-*-notifications.ipc")]
    if shutil.which("bpftool"):
        progs = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
        found += [f"bpf program {p['id']}" for p in json.loads(progs or "[]") if p.get("name") == "vq_ecn"]
        from emulator.journal import struct_ops_registered
        from emulator.mltcp import VARIANTS

        found += [f"struct_ops {v.struct_ops}" for v in VARIANTS.values() if struct_ops_registered(v.struct_ops)]
    # Worker containers and unfinished worker image layers (emulator.containers, emulator.worker_image).
    from emulator.containers import LABEL, docker, docker_missing

    if docker_missing() is None:
        found += [f"container {n}" for n in docker(["ps", "-a", "--format", "{{.Names}}", "--filter",
                                                     f"label={LABEL}"]).stdout.split()]
        found += [f"image layer {i}" for i in docker(["images", "-q", "--filter", "dangling=true", "--filter",
                                                       f"label={LABEL}"]).stdout.split()]
    return found


def wait_until(condition, timeout_s: float = 10.0, what: str = "the condition", poll_s: float = 0.05):
    """Poll ``condition()`` until it returns something true, and return that; fail the test naming
    ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:g} s"
        time.sleep(poll_s)


def wait_listening(net, machine: str, port: int, timeout_s: float = 10.0) -> None:
    """Wait until a TCP socket listens on ``port`` in ``machine``'s namespace (``ss``)."""
    wait_until(lambda: net.host_exec(machine, f"ss -Hltn sport = :{port}").strip(), timeout_s,
               f"a listener on {machine}:{port}")


def read_until(proc: subprocess.Popen, marker: str, timeout_s: float = 120) -> list[str]:
    """Lines of ``proc``'s output up to the first holding ``marker``; the test fails, showing the
    output, when the output ends or ``timeout_s`` passes first."""
    seen = []
    deadline = time.monotonic() + timeout_s
    for line in proc.stdout:
        seen.append(line)
        if marker in line or time.monotonic() > deadline:
            break
    assert seen and marker in seen[-1], f"{marker!r} not printed within {timeout_s:g} s: {''.join(seen)[-3000:]}"
    return seen


@pytest.fixture(scope="session")
def emulation_ok():
    """Skip (naming what is missing) unless emulation can run here, and start from a clean machine."""
    if os.geteuid() != 0:
        pytest.skip("emulation: needs root (Mininet, Open vSwitch, tc)")
    needs(emulation_missing(), "emulation")
    left = leftovers()
    assert not left, f"the machine is not clean before emulation tests: {left}"


@pytest.fixture(scope="module")
def fabric(emulation_ok, tmp_path_factory):
    """A k=4 fat-tree (16 machines, 20 switches) at 20 Mbit/s with its controller, torn down afterwards.

    It starts with a TCP sanity check and fails the module if the controller logged an exception.
    """
    from emulator.net import EmulatedNetwork, NetOptions
    from topo import fat_tree

    run_dir = str(tmp_path_factory.mktemp("fabric"))
    g = fat_tree(4)
    net = EmulatedNetwork(g, run_dir, NetOptions(scale=SCALE))
    with net:
        failures = net.tcp_check(["h1"], ["h16"])
        assert not failures, f"TCP sanity check failed: {failures}; evidence in {run_dir}"
        yield net
        error = net.controller.logged_exception()
    assert error is None, f"controller logged an exception: {error}; see {net.controller.log_path}"
    assert not leftovers(), f"network left behind: {leftovers()}"


def pytest_collection_modifyitems(config, items):
    """Run emulation tests last, after the fast unit tests."""
    items.sort(key=lambda it: 1 if it.get_closest_marker("emulation") else 0)
