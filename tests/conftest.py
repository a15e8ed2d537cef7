"""Shared fixtures. Emulation tests share one network fixture that always tears down."""

from __future__ import annotations

import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from placement.base import Placement

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = pathlib.Path(ROOT)
CLI = [sys.executable, os.path.join(ROOT, "run_testbed.py")]
"""The command line of ``run_testbed.py`` as the tests run it (this Python, the repository's script)."""
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
EMULATOR_WAIT_S = "1800"
"""How long this suite, and the runs its tests start, wait for the machine's one emulator while another
suite holds it (``TESTBED_EMULATOR_WAIT_S``, :class:`emulator.journal.EmulatorLock`): two suites take turns."""
os.environ.setdefault("TESTBED_EMULATOR_WAIT_S", EMULATOR_WAIT_S)


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


def _stat(pid: int | str) -> list[str] | None:
    """``/proc/<pid>/stat``'s fields after the command name (state, parent, ...), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None


SUITE_ENV = "TESTBED_TEST_SUITE"
SUITE = f"{os.getpid()}-{(_stat(os.getpid()) or [''] * 20)[19]}"
"""This test process, as PID and start time, in the environment of every process it starts (and theirs)."""
os.environ[SUITE_ENV] = SUITE


def _is_pytest(argv: list[bytes]) -> bool:
    names = [os.path.basename(a) for a in argv[:2]]
    return bool(names) and (names[0] in (b"pytest", b"py.test") or (names[0].startswith(b"python") and (
        argv[1:3] == [b"-m", b"pytest"] or names[1:] in ([b"pytest"], [b"py.test"]))))


class _Processes:
    """Every process of this machine (PID, parent, command line), read once, and which of them belong to
    another test suite still running: tagged by it (:data:`SUITE_ENV`), or started, directly or not, by a
    pytest process that is neither this one nor one of its ancestors. A process whose parent is gone
    (reparented: what a leftover is) or that was started with an environment of its own counts as
    this suite's, so this suite's leftovers are never passed over."""

    def __init__(self):
        self.parent: dict[int, int] = {}
        self.argv: dict[int, list[bytes]] = {}
        for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
            stat = _stat(pid)
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    self.argv[pid] = f.read().split(b"\0")
            except OSError:
                continue
            if stat is not None:
                self.parent[pid] = int(stat[1])
        ours = self._chain(os.getpid())
        self.other_pytests = {p for p, argv in self.argv.items() if _is_pytest(argv) and p not in ours}

    def _chain(self, pid: int) -> list[int]:
        out = []
        while pid > 1 and pid not in out:
            out.append(pid)
            pid = self.parent.get(pid, 0)
        return out

    def of_another_suite(self, pid: int) -> bool:
        if any(p in self.other_pytests for p in self._chain(pid)):
            return True
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            return False
        tag = next((v.split(b"=", 1)[1].decode() for v in env if v.startswith(SUITE_ENV.encode() + b"=")), SUITE)
        owner, _, start = tag.partition("-")
        return tag != SUITE and owner.isdigit() and (_stat(owner) or [""] * 20)[19] == start


def scan_processes(markers=(CONTROLLER_MARKER, MININET_SHELL_MARKER)) -> tuple[set[str], list[str]]:
    """Every network namespace a process is in, and ``pid: command`` of the processes that belong to
    an emulated network: in a namespace other than this one's, or with one of ``markers`` in their
    command line. Not looked at: processes in a user namespace of their own (``unshare -rn``: never an
    emulated network's), and those of another test suite still running (:class:`_Processes`: its unit
    tests run workers and agents on loopback while this suite has the emulator)."""
    root_ns = os.readlink("/proc/self/ns/net")
    user_ns = os.readlink("/proc/self/ns/user")
    procs = _Processes()
    namespaces, found = set(), []
    for pid, argv in procs.argv.items():
        try:
            ns = os.readlink(f"/proc/{pid}/ns/net")
            if os.readlink(f"/proc/{pid}/ns/user") != user_ns or procs.of_another_suite(pid):
                continue
        except OSError:
            continue
        cmd = b" ".join(argv).decode(errors="replace")
        namespaces.add(ns)
        if ns != root_ns or any(m in cmd for m in markers):
            found.append(f"{pid}: {cmd.strip()[:120]}")
    return namespaces, found


def emulator_turn(purpose: str):
    """A hold on the machine's one emulator (:class:`emulator.journal.EmulatorLock`, nested in this
    suite's turn when it has one); nothing without root, where no emulation runs."""
    import contextlib

    if os.geteuid() != 0:
        return contextlib.nullcontext()
    from emulator.journal import EmulatorLock

    return EmulatorLock(f"{purpose} (pytest pid {os.getpid()})")


def leftovers() -> list[str]:
    """Bridges, interfaces and processes an emulation could leave behind, looked for in this suite's
    turn at the emulator: no other suite's network is up meanwhile (networks hold the turn for their
    whole life, :meth:`emulator.net.EmulatedNetwork.start`), so what is found is this suite's, or a
    dead run's that :func:`emulation_ok` refused to start beside. Looking at every object of those
    kinds, rather than at the ones a run recorded, is what catches a change no record names."""
    with emulator_turn("tests: leftovers check"):
        return _leftovers_now()


def _leftovers_now() -> list[str]:
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
        from emulator.mltcp import VARIANTS, struct_ops_registered

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
    """Skip (naming what is missing) unless emulation can run here; fail when a run that did not finish
    left changes (its record's owner is dead), or when anything a network leaves is on the machine in
    this suite's turn, before its first network."""
    if os.geteuid() != 0:
        pytest.skip("emulation: needs root (Mininet, Open vSwitch, tc)")
    needs(emulation_missing(), "emulation")
    from emulator.journal import RunJournal, records

    with emulator_turn("tests: machine check"):
        dead = [f"pid {r.pid} ({r.purpose}): {len(r.changes)} change(s)" for r in map(RunJournal.load, records())
                if not r.owner_alive()]
        assert not dead, (f"runs that did not finish left changes: {dead}; undo them: "
                          "`sudo python3 run_testbed.py clean`")
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


_suite_turn: list = []  # this suite's hold on the emulator while one module's emulation tests run


def _takes_emulator(item) -> bool:
    return os.geteuid() == 0 and (item.get_closest_marker("emulation") is not None
                                  or "emulation_ok" in getattr(item, "fixturenames", ()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """A module's emulation tests run in one turn at the machine's emulator, from their fixtures' set-up
    to their teardown: another suite's tests wait for the turn to end, and the runs a test starts
    (``run_testbed.py``) run under it. Two suites so never build networks at once, nor see each other's
    objects, nor clean each other's killed runs."""
    if _takes_emulator(item) and not _suite_turn:
        _suite_turn.append(emulator_turn("test suite").acquire())
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Ends the turn after the module's last emulation test, once its fixtures are torn down."""
    try:
        return (yield)
    finally:
        same_module = nextitem is not None and getattr(nextitem, "module", None) is getattr(item, "module", None)
        if _suite_turn and not (same_module and _takes_emulator(nextitem)):
            _suite_turn.pop().release()


# This test process's own loopback addresses: the whole of 127/8 is this machine on Linux, so each
# pytest process takes a /24 of its own (127.0.0.0/24 left to fixed addresses), and two suites
# running side by side bind the same UDP and TCP ports on different addresses.
_LOOPBACK_BLOCKS = 254 * 256  # 127.1.0.0/24 .. 127.254.255.0/24
_loopback_claim: list = []  # [(prefix, the socket whose name holds the claim while this process lives)]


def loopback_prefix() -> str:
    """This process's loopback /24 (``"127.a.b"``), chosen on first use from its PID and claimed by
    binding an abstract Unix socket named after it (freed by the kernel when the process ends); a
    block another process holds is skipped."""
    import socket

    if not _loopback_claim:
        start = os.getpid() % _LOOPBACK_BLOCKS
        for i in range(_LOOPBACK_BLOCKS):
            n = (start + i) % _LOOPBACK_BLOCKS
            prefix = f"127.{1 + n // 256}.{n % 256}"
            claim = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                claim.bind(f"\0testbed-tests-loopback-{prefix}")
            except OSError:
                claim.close()
                continue
            _loopback_claim.append((prefix, claim))
            break
        else:
            raise RuntimeError("every loopback /24 in 127.1.0.0-127.254.255.0 is claimed by another process")
    return _loopback_claim[0][0]


def loopback(host: int) -> str:
    """Address ``host`` (1..254) of this process's loopback /24 (:func:`loopback_prefix`)."""
    if not 1 <= host <= 254:
        raise ValueError(f"loopback host {host}: need 1..254")
    return f"{loopback_prefix()}.{host}"


IFNAME_MAX = 15  # Linux's IFNAMSIZ less its terminating NUL: the longest interface or OVS bridge name


def session_ifname(prefix: str) -> str:
    """``prefix`` followed by this test process's PID in base 36: an interface or bridge name that a
    suite running beside this one (another pytest process) does not use at the same time."""
    n, digits = os.getpid(), ""
    while n:
        n, d = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    name = prefix + digits
    if len(name) > IFNAME_MAX:
        raise ValueError(f"interface name {name!r}: longer than {IFNAME_MAX} characters; shorten {prefix!r}")
    return name


def counters_settled(read, what: str = "the switch counters", interval_s: float = 0.25, timeout_s: float = 15.0):
    """``read()`` once two reads ``interval_s`` apart are equal: the packets still queued under the
    shapers when the senders ended have been counted. Fails naming ``what`` after ``timeout_s``."""
    last = {"at": time.monotonic(), "value": read()}

    def settled():
        if time.monotonic() - last["at"] < interval_s:
            return None
        value = read()
        same = value == last["value"]
        last.update(at=time.monotonic(), value=value)
        return (value,) if same else None

    return wait_until(settled, timeout_s, f"{what} to settle (two reads {interval_s:g} s apart equal)",
                      poll_s=interval_s / 5)[0]


def run_bench(script: str, *args: str, timeout_s: float = 600) -> str:
    """Standard output of ``bench/<script>`` run with ``args`` from the repository root, as its
    documentation runs it; the test fails, showing its output, when it exits non-zero. ``timeout_s``
    only stops a hung run."""
    import sys

    cp = subprocess.run([sys.executable, os.path.join("bench", script), *args], cwd=ROOT, capture_output=True,
                        text=True, timeout=timeout_s)
    assert cp.returncode == 0, f"bench/{script} exited {cp.returncode}:\n{cp.stdout[-4000:]}\n{cp.stderr[-4000:]}"
    return cp.stdout


def read_table(text: str, first_header: str, nth: int = 0) -> list[dict[str, str]]:
    """The rows of the ``nth`` table (from 0) whose first column is ``first_header`` in ``text``, as
    :func:`experiment.reporting.tables.format_table` prints it: one dict of header -> cell per row. Columns are
    the separator line's runs of dashes; the table ends at the first line that does not fit them."""
    import re

    lines = text.splitlines()
    heads = [i for i in range(len(lines) - 1) if lines[i].startswith(first_header) and lines[i + 1]
             and set(lines[i + 1]) <= {"-", " "} and len(lines[i]) == len(lines[i + 1])]
    assert len(heads) > nth, f"no table {nth} headed {first_header!r} in:\n{text[-3000:]}"
    i = heads[nth]
    sep = lines[i + 1]
    spans = [m.span() for m in re.finditer(r"-+", sep)]
    gaps = [(a[1], b[0]) for a, b in zip(spans, spans[1:], strict=False)]
    cells = lambda line: [line[a:b].strip() for a, b in spans]  # noqa: E731
    headers, rows = cells(lines[i]), []
    for line in lines[i + 2:]:
        if len(line) != len(sep) or any(line[a:b].strip() for a, b in gaps):
            break
        rows.append(dict(zip(headers, cells(line), strict=True)))
    return rows


TWO_RACKS = "topology: {kind: leaf_spine, n_leaf: 2, n_spine: 1, hosts_per_leaf: 1}\n"
"""The smallest network with every kind of part a run makes (switches with their port pipes, hosts,
the controller, workers): two machines, each under its own leaf, and one spine."""


def two_rack_run(iterations: int, model: str = "resnet50", policy: str = "spread", extra: str = "") -> str:
    """A run's config on :data:`TWO_RACKS`: one ring job ``j`` of ``model`` on 2 workers, ``iterations``
    measured and none to warm up, placed by ``policy`` (``spread``: one worker on each machine, so its
    traffic crosses both leaves and the spine), no plots drawn; ``extra`` is YAML added to it."""
    return (f"{TWO_RACKS}jobs: [{{name: j, model: {model}, workers: 2, collective: ring}}]\n"
            f"policies: [{policy}]\niterations: {iterations}\nwarmup_iterations: 0\nplots: false\n{extra}")


def ranks_on(job: str, machines) -> Placement:
    """A placement of ``job`` with rank ``r`` on ``machines[r]``, each machine's GPUs taken from 0 up."""
    from placement.base import GpuSlot, Placement

    taken: dict[str, int] = {}
    slots = []
    for m in machines:
        slots.append(GpuSlot(m, taken.get(m, 0)))
        taken[m] = taken.get(m, 0) + 1
    return Placement(job, tuple(slots))


def run_cli(*args, env=None, timeout=600, **kw) -> subprocess.CompletedProcess:
    """Run ``run_testbed.py`` with ``args`` from the repository and return the completed process (output
    captured as text). The timeout only stops a hung command; a slow machine never reaches it."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=env or dict(os.environ), **kw)


def uniform_rates(g, mbps: float) -> dict:
    """Every link of ``g`` at ``mbps``."""
    return {(u, v): mbps for u, v in g.edges()}


def contending_mix() -> list:
    """Four jobs that contend on a k = 4 fat-tree: ring, halving-doubling (one starting late), gloo and a
    job with two ranks on one machine, with buckets of several sizes."""
    from sim.flowsim import SimJob

    return [
        SimJob("a", ("h1", "h5", "h9", "h13"), "ring", (16000, 4000), 0.003, 3, 1),
        SimJob("b", ("h2", "h6", "h10", "h14", "h3"), "hd", (20000,), 0.001, 2, 0, start_s=0.001),
        SimJob("c", ("h4", "h8", "h12", "h16"), "gloo", (8000, 8000), 0.0, 4, 2),
        SimJob("d", ("h1", "h1", "h7", "h15"), "hd", (16000,), 0.002, 3),
    ]


M_BYTES = 4 * 1024 * 16
"""The placement tests' unit of traffic M (a model's gradient size), in bytes."""


def cross_traffic(p, steps):
    """Cross-machine traffic of placement ``p`` in units of M (the Titan paper's accounting,
    :func:`placement.metrics.cross_machine_traffic_bytes`), exact."""
    from fractions import Fraction

    from placement.metrics import cross_machine_traffic_bytes

    return Fraction(cross_machine_traffic_bytes(p, steps), M_BYTES)
