"""Detect what this machine offers the emulator, and check the preconditions of a run.

The result is recorded with every run (``capabilities.json``: :class:`RunCapabilities`) so a reader
knows which path was used: OVS datapath, whether AF_XDP switch ports can run, available qdiscs,
congestion controls, CPU count, whether the BPF ECN marker can run (:class:`MachineCapabilities`),
and every variant the run chose (the ECN marking path, the INA engine, the switch port type, the
servers or the memory check, the container engine), each with why.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess

from common.errors import EmulationError
from emulator import ecn, ports
from emulator.scratch import remove_stale, scratch_names
from ina.p4.build import engine_available


def _ok(argv: list[str], timeout_s: float = 10.0) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=timeout_s).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def kernel_datapath_available() -> bool:
    """Whether Open vSwitch's kernel datapath can run: the ``openvswitch`` module is loaded or loadable."""
    return os.path.exists("/sys/module/openvswitch") or _ok(["modprobe", "-n", "openvswitch"])


def resolve_datapath(requested: str) -> str:
    """The OVS datapath a network uses: ``kernel`` or ``user``; ``auto`` is the kernel's where it can run.

    Raises:
        EmulationError: on anything but ``auto``, ``user`` or ``kernel``, or ``kernel`` where it cannot run.
    """
    if requested not in ("auto", "user", "kernel"):
        raise EmulationError(f"unknown OVS datapath {requested!r}; choose from auto, user, kernel")
    if requested == "auto":
        return "kernel" if kernel_datapath_available() else "user"
    if requested == "kernel" and not kernel_datapath_available():
        raise EmulationError("the OVS kernel datapath cannot run here: the kernel has no openvswitch module")
    return requested


def require_root() -> None:
    """Raise EmulationError unless running as root."""
    if os.geteuid() != 0:
        raise EmulationError("the emulator must run as root (Mininet, Open vSwitch and tc need it): "
                             "run `sudo python3 run_testbed.py ...`, or `python3 run_testbed.py check CONFIG` "
                             "to validate a config without root")


def require_tools() -> None:
    """Raise EmulationError naming any missing program, or a stopped Open vSwitch."""
    missing = [t for t in ("mnexec", "ovs-vsctl", "ovs-ofctl", "tc", "ethtool", "ip", "sysctl")
               if shutil.which(t) is None]
    if missing:
        raise EmulationError(f"missing programs: {', '.join(missing)}; run `make setup` (scripts/setup.sh)")
    if not _ok(["ovs-vsctl", "--timeout=3", "show"]):
        raise EmulationError("Open vSwitch is not running (`ovs-vsctl show` fails); start it with "
                             "`/usr/share/openvswitch/scripts/ovs-ctl start` or run `make setup`")


QDISC_TRIALS: dict[str, list[str] | None] = {
    "htb": ["htb"], "tbf": ["tbf", "rate", "10mbit", "burst", "15k", "latency", "10ms"],
    "netem": ["netem", "delay", "1ms"],
    "red": ["red", "limit", "400000", "min", "30000", "max", "90000", "avpkt", "1500", "burst", "30", "bandwidth",
            "10mbit", "ecn"],
    "fq_codel": ["fq_codel"], "clsact": None}
"""The qdiscs :func:`qdisc_probe` tries, each with the arguments it tries it with as the root qdisc
(None: clsact, added beside the root). One left out has no entry, which readers take as the kernel
refusing it: without ``red``, any kernel runs as one without sch_red (the tests run that path so)."""


def qdisc_probe() -> dict[str, bool]:
    """Which qdiscs of :data:`QDISC_TRIALS` the kernel accepts, tried on a throw-away veth pair."""
    remove_stale("q")
    a, b = scratch_names("q", "a", "b")
    if not _ok(["ip", "link", "add", a, "type", "veth", "peer", "name", b]):
        return {}
    try:
        out = {}
        for name, args in QDISC_TRIALS.items():
            if args is None:
                out[name] = _ok(["tc", "qdisc", "add", "dev", a, "clsact"])
                subprocess.run(["tc", "qdisc", "del", "dev", a, "clsact"], capture_output=True)
            else:
                out[name] = _ok(["tc", "qdisc", "add", "dev", a, "root", *args])
                subprocess.run(["tc", "qdisc", "del", "dev", a, "root"], capture_output=True)
        return out
    finally:
        subprocess.run(["ip", "link", "del", a], capture_output=True)


@dataclasses.dataclass(frozen=True)
class MachineCapabilities:
    """What this machine offers the emulator (:func:`detect`).

    Attributes:
        kernel: the kernel release.
        cpus: the CPU count.
        ovs_version: ``ovs-vsctl --version``'s first line (None: no answer).
        ovs_datapath: the datapath an ``auto`` run uses: ``kernel`` where its module can run, else ``user``.
        qdiscs: each qdisc of :data:`QDISC_TRIALS` -> whether the kernel accepts it (empty: no probe).
        congestion_controls: the TCP congestion controls the kernel has available.
        bpf_marker: whether the BPF ECN marker can run; bpf_marker_missing: why not (None: it can).
        afxdp_missing: why AF_XDP switch ports cannot run (None: they can).
        ina_engine_available, ina_engine_why: the INA engine a run here would use, and why.
    """

    kernel: str
    cpus: int | None
    ovs_version: str | None
    ovs_datapath: str
    qdiscs: dict[str, bool]
    congestion_controls: list[str]
    bpf_marker: bool
    bpf_marker_missing: str | None
    afxdp_missing: str | None
    ina_engine_available: str
    ina_engine_why: str

    @property
    def has_red(self) -> bool:
        """Whether the kernel takes the RED qdisc (with ECN)."""
        return bool(self.qdiscs.get("red"))

    def to_dict(self) -> dict:
        """JSON form: the first keys of ``capabilities.json``, in field order."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class RunCapabilities:
    """What a run records of this machine and of what it chose (``capabilities.json`` but its
    ``backend``, which the driver adds), each choice with why.

    Attributes:
        machine: what the machine offers.
        ecn_method, ecn_why: the ECN marking path (``red``, ``bpf``, ``none``).
        switch_ports, switch_ports_why: the switch port kind.
        container: the container engine and, for ``docker``, its CPUs and image.
        ina_engine, ina_why: the INA engine (``none``: the INA jobs run without one; None: no INA jobs).
        cluster: a cluster-mode run's servers, nodes and tunnels (None: on this machine alone).
        memory: the network's predicted memory against what is available (None: in cluster mode).
    """

    machine: MachineCapabilities
    ecn_method: str
    ecn_why: str
    switch_ports: str
    switch_ports_why: str
    container: dict
    ina_engine: str | None = None
    ina_why: str | None = None
    cluster: dict | None = None
    memory: dict | None = None

    def to_dict(self) -> dict:
        """JSON form: the machine's keys, then the choices, an absent one left out."""
        out = {**self.machine.to_dict(), "ecn_method": self.ecn_method, "ecn_why": self.ecn_why}
        if self.ina_engine is not None:
            out["ina_engine"], out["ina_why"] = self.ina_engine, self.ina_why
        out["switch_ports"], out["switch_ports_why"] = self.switch_ports, self.switch_ports_why
        if self.cluster is not None:
            out["cluster"] = self.cluster
        if self.memory is not None:
            out["memory"] = self.memory
        out["container"] = self.container
        return out


def detect() -> MachineCapabilities:
    """Probe the machine (needs root)."""
    def sysctl(key):
        cp = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True)
        return cp.stdout.split() if cp.returncode == 0 else []

    ovs = subprocess.run(["ovs-vsctl", "--version"], capture_output=True, text=True).stdout.splitlines()
    kernel_ovs = kernel_datapath_available()
    ina_engine, ina_why = engine_available()
    bpf_why = ecn.bpf_marker_missing()
    return MachineCapabilities(
        kernel=os.uname().release, cpus=os.cpu_count(), ovs_version=ovs[0] if ovs else None,
        ovs_datapath="kernel" if kernel_ovs else "user", qdiscs=qdisc_probe(),
        congestion_controls=sysctl("net.ipv4.tcp_available_congestion_control"),
        bpf_marker=bpf_why is None, bpf_marker_missing=bpf_why,
        afxdp_missing=ports.afxdp_missing() if not kernel_ovs else "kernel datapath",
        # No job runs over INA yet: which engine would aggregate here, and why.
        ina_engine_available=ina_engine, ina_engine_why=ina_why)
