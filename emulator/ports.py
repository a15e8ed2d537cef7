"""How switch ports reach Open vSwitch's userspace datapath: ``system`` or ``afxdp`` ports.

``system``: the link's veth (``<switch>-eth<N>``) is itself the OVS port, polled by OVS's main
thread on every wake-up (a whole core for one slow flow across five switches). ``afxdp``: each
switch port is an AF_XDP socket polled by a PMD thread that sleeps up to ``PMD_MAXSLEEP_US`` when
idle, on a veth pair of its own (``<switch>-x<N>`` / ``<switch>-y<N>``) joined to the link's veth
by a two-port Linux bridge (``<switch>-b<N>``), so the link's veth keeps its shaper, FIFO, marker
and counters either way. Jumbo frames (MTU above ``AFXDP_MAX_MTU``) need ``system`` ports.

What each costs, the pipe's layout and when ``auto`` falls back: ``docs/fidelity.md`` (Switch ports).
"""

from __future__ import annotations

import os
import re

from common.errors import EmulationError
from emulator.procs import run
from emulator.scratch import remove_stale, scratch_names
from measure.ports import AFXDP_MAX_MTU, PORT_TYPES

PMD_MAXSLEEP_US = 50
OVS_TRANSACTION_TIMEOUT_S = 120
"""Limit of the one ovs-vsctl transaction that turns every switch port into an AF_XDP port (80 on a
k=4 fat-tree: ~15 s idle, more than 30 s on a loaded 2-core machine)."""


def pipe_names(intf: str) -> tuple[str, str, str]:
    """``(OVS side, peer, joint)`` of a switch port's pipe: ``e1-eth3`` -> ``e1-x3``, ``e1-y3``, ``e1-b3``."""
    node, port = intf.rsplit("-eth", 1)
    return f"{node}-x{port}", f"{node}-y{port}", f"{node}-b{port}"


def afxdp_missing() -> str | None:
    """Why AF_XDP switch ports cannot run here (None when a trial port on a scratch bridge worked).

    Needs root and a running Open vSwitch; takes about a second.
    """
    types = run(["ovs-vsctl", "--timeout=5", "get", "Open_vSwitch", ".", "iface_types"], check=False).stdout
    if "afxdp" not in types:
        return "this Open vSwitch build has no afxdp interface type"
    remove_stale("x")
    a, b, br, joint = scratch_names("x", "a", "b", "br", "j")
    try:
        if run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=False).returncode != 0:
            return "cannot create a veth pair"
        for dev in (a, b):
            run(["ip", "link", "set", dev, "up"], check=False)
        cp = run(
            [
                "ovs-vsctl",
                "--timeout=10",
                "add-br",
                br,
                "--",
                "set",
                "bridge",
                br,
                "datapath_type=netdev",
                "--",
                "add-port",
                br,
                a,
                "--",
                "set",
                "Interface",
                a,
                "type=afxdp",
                "options:xdp-mode=generic",
            ],
            check=False,
        )
        err = run(["ovs-vsctl", "--timeout=5", "get", "Interface", a, "error"], check=False).stdout.strip()
        if cp.returncode != 0 or err not in ("", "[]"):
            return f"an AF_XDP port does not open: {(err or cp.stderr).strip()}"
        if run(["ip", "link", "add", joint, "type", "bridge"], check=False).returncode != 0:
            return "the kernel has no bridge device (a pipe joins its veths with one)"
        return None
    finally:
        run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", br], check=False)
        for dev in (a, joint):
            run(["ip", "link", "del", dev], check=False)


def resolve_port_type(requested: str, mtu: int, datapath: str, missing: str | None,
                      too_big: str | None = None) -> tuple[str, str]:
    """The switch port type a run uses, and why.

    Args:
        requested: ``auto``, ``afxdp`` or ``system`` (config ``switch_ports``).
        mtu: the run's MTU.
        datapath: ``user`` or ``kernel`` OVS datapath.
        missing: :func:`afxdp_missing`'s answer.
        too_big: why AF_XDP ports would not fit in the memory available (None: they would; see
            :mod:`measure.footprint`): ``auto`` then takes plain veths; ``afxdp`` stays asked for
            (the run's memory check has the last word).

    Raises:
        EmulationError: ``afxdp`` was asked for and cannot be used.
    """
    if requested not in PORT_TYPES:
        raise EmulationError(f"unknown switch port type {requested!r}; choose from {', '.join(PORT_TYPES)}")
    blocker = (
        "the kernel datapath forwards in the kernel (AF_XDP ports are for the userspace datapath)"
        if datapath == "kernel"
        else f"MTU {mtu} is above AF_XDP's {AFXDP_MAX_MTU} (4 kB frames)"
        if mtu > AFXDP_MAX_MTU
        else missing
    )
    if requested == "system":
        return "system", "requested"
    if blocker is None and too_big is not None and requested == "auto":
        return "system", f"AF_XDP not used: {too_big}"
    if blocker is None:
        return "afxdp", f"AF_XDP sockets polled by a PMD thread (pmd-maxsleep {PMD_MAXSLEEP_US} us)"
    if requested == "afxdp":
        raise EmulationError(f"switch_ports: afxdp cannot be used: {blocker}; use `switch_ports: auto` or `system`")
    return "system", f"AF_XDP not used: {blocker}"


PMD_SLEEP_KEY = "pmd-maxsleep"


def set_pmd_sleep(record, maxsleep_us: int = PMD_MAXSLEEP_US) -> None:
    """Let PMD threads sleep when idle while a network runs. The previous value (or its absence)
    goes into ``record`` (:class:`emulator.journal.RunJournal`) first, which restores it."""
    from emulator.journal import Change

    cp = run(["ovs-vsctl", "--timeout=5", "--if-exists", "get", "Open_vSwitch", ".", f"other_config:{PMD_SLEEP_KEY}"],
             check=False)
    record.add(Change("ovs_other_config", PMD_SLEEP_KEY, original=cp.stdout.strip().strip('"') or None,
                      what="PMD idle sleep"))
    run(["ovs-vsctl", "--timeout=5", "set", "Open_vSwitch", ".", f"other_config:{PMD_SLEEP_KEY}={maxsleep_us}"])


def attach_afxdp(bridge_ports: dict[str, dict[str, int]], mtu: int, offloads_off: list[str]) -> None:
    """Move every switch port onto an AF_XDP pipe, keeping its OpenFlow port number.

    Args:
        bridge_ports: bridge -> {link veth name -> OpenFlow port number}; the veths are OVS
            ``system`` ports when called and are removed from OVS here.
        mtu: MTU of the pipes.
        offloads_off: ``ethtool -K`` arguments that turn offloads off.

    Raises:
        EmulationError: a command failed or a port did not open.
    """
    pipes = [(intf, *pipe_names(intf)) for ports in bridge_ports.values() for intf in ports]
    # Pipes an earlier run left (most are absent: failures expected), then each port's pipe, step by
    # step for every port at once: one process per step, ethtool's apart.
    _ip_batch([f"link del {dev}" for _, x, _, joint in pipes for dev in (x, joint)], check=False)
    _ip_batch([line for _, x, y, joint in pipes for line in (
        f"link add {x} mtu {mtu} type veth peer name {y} mtu {mtu}",
        f"link add {joint} mtu {mtu} type bridge stp_state 0 mcast_snooping 0 forward_delay 0")])
    # No IPv6 on the pipe: its own neighbour discovery would be sent into the link.
    run(["sysctl", "-qw", *(f"net.ipv6.conf.{dev}.disable_ipv6=1" for _, *devs in pipes for dev in devs)])
    for _, x, y, _ in pipes:
        for dev in (x, y):
            run(["ethtool", "-K", dev, *offloads_off])
    _ip_batch([line for intf, x, y, joint in pipes for line in (
        f"link set {y} master {joint}", f"link set {intf} master {joint}",
        f"link set {x} up", f"link set {y} up", f"link set {joint} up")])
    argv = ["ovs-vsctl", f"--timeout={OVS_TRANSACTION_TIMEOUT_S}"]
    for bridge, ports in bridge_ports.items():
        for intf, ofport in ports.items():
            x = pipe_names(intf)[0]
            argv += [
                "--",
                "del-port",
                bridge,
                intf,
                "--",
                "add-port",
                bridge,
                x,
                "--",
                "set",
                "Interface",
                x,
                "type=afxdp",
                "options:xdp-mode=generic",
                f"ofport_request={ofport}",
            ]
    # One transaction for every port; ovs-vsctl bounds its own wait (--timeout), so give it that.
    run(argv, timeout_s=OVS_TRANSACTION_TIMEOUT_S + 10)
    rows = run(
        ["ovs-vsctl", "--timeout=10", "-f", "csv", "--no-headings", "--columns=name,ofport,error", "list", "Interface"],
        check=False,
    ).stdout
    wanted = {pipe_names(i)[0]: p for ports in bridge_ports.values() for i, p in ports.items()}
    for line in rows.splitlines():
        name, ofport, error = (line.split(",", 2) + ["", ""])[:3]
        if name in wanted and (ofport.strip() != str(wanted[name]) or error.strip() not in ("", "[]")):
            raise EmulationError(
                f"AF_XDP port {name}: OpenFlow port {ofport} (wanted {wanted[name]}), error {error.strip() or 'none'}"
            )


def _ip_batch(commands: list[str], check: bool = True) -> None:
    """``ip`` commands in one process (``ip -batch``): with ``check`` the first failure stops them and
    raises ``EmulationError``, else every one is tried and failures are ignored."""
    if commands:
        run(["ip", *(() if check else ("-force",)), "-batch", "-"], check=check, input_text="\n".join(commands) + "\n")


def stale_pipes() -> list[str]:
    """Pipe devices present on this machine: ``<node>-x<N>`` veths with their ``-y<N>`` peer, and
    ``<node>-b<N>`` bridges."""
    names = set(os.listdir("/sys/class/net"))
    return sorted(
        n
        for n in names
        if (re.fullmatch(r"\w+-x\d+", n) and n.replace("-x", "-y", 1) in names)
        or (re.fullmatch(r"\w+-b\d+", n) and os.path.isdir(f"/sys/class/net/{n}/bridge"))
    )
