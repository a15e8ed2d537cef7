"""Cluster mode: one emulated network spread over several servers with Mininet's cluster edition.

Mininet's cluster edition (``mininet.examples.cluster``) runs a node on another server by
starting its shell there over SSH (``RemoteHost``, ``RemoteOVSSwitch``) and joins two nodes on
different servers with a tunnel (``RemoteSSHLink``). This module uses those classes, with what a
measured run needs on top: pods or racks placed whole (:func:`topo.partition.assign_servers`),
one SSH session per server recorded by PID, tunnels with tap numbers of their own, a precheck of
every server before anything starts, and workers started through :mod:`emulator.remote_run`.
:class:`ThisMachine` and :class:`MultiServer` are where the nodes run, a variant chosen once.

How each piece works, the single-machine form (a second loopback address served by an ``sshd``
of its own) and the limits: ``docs/cluster.md``.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
import tempfile
import time

from common.errors import EmulationError
from common.paths import PROJECT_ROOT
from common.sockets import free_tcp_port
from emulator.journal import Change, RunJournal, process_change
from emulator.procs import run
from topo.partition import assign_servers

LOCAL = "localhost"
"""The name of this machine among a cluster's servers (always the first)."""
SESSION_START_S = 15.0
"""How long an SSH session may take to come up (on top of the connect timeout)."""
FIRST_TAP = 100
"""Tunnels' tap devices are ``tap<N>`` from this number up (Mininet uses ``tap9`` for all)."""
REMOTE_RUN = os.path.join(PROJECT_ROOT, "emulator", "remote_run.py")


@dataclasses.dataclass(frozen=True)
class ClusterOptions:
    """Where the emulated network runs.

    Attributes:
        servers: the servers, this machine first (``localhost``); each other one as ``ssh``
            knows it.
        user: the user on every server (root: Mininet, Open vSwitch and tc need it).
        ssh_config: an ``ssh_config`` file for every connection (``ssh -F``), or None for the
            user's own.
        connect_timeout_s: how long to wait for a server to answer.
    """

    servers: tuple[str, ...]
    user: str = "root"
    ssh_config: str | None = None
    connect_timeout_s: float = 10.0

    def __post_init__(self):
        if not self.servers or self.servers[0] != LOCAL:
            raise ValueError(f"a cluster's servers start with {LOCAL!r} (this machine), got {list(self.servers)}")
        if len(set(self.servers)) != len(self.servers):
            raise ValueError(f"a cluster's servers are named once each, got {list(self.servers)}")


def ssh_options(options: ClusterOptions) -> list[str]:
    """Options of every ``ssh`` to a server: no password prompt, bounded waits, the config file."""
    out = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, round(options.connect_timeout_s))}",
           "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
    if options.ssh_config:
        out += ["-F", options.ssh_config]
    return out


def precheck_script(congestion_control: str, probe: str) -> str:
    """The shell lines a server must pass: each problem printed as one line. ``probe`` is a file
    this machine just wrote in the run directory, which the server must see there."""
    tools = " ".join(["mnexec", "ovs-vsctl", "tc", "ethtool", "ip", "sudo", sys.executable])
    unshared = (f"does not see the run directory {os.path.dirname(probe)} (it must be on a filesystem every "
                f"server mounts at the same path)")
    return "; ".join([
        '[ "$(id -u)" = 0 ] || echo "not root"',
        f"for c in {tools}; do command -v $c >/dev/null || echo \"missing $c\"; done",
        f"[ -f {shlex.quote(REMOTE_RUN)} ] || echo \"the project is not at {PROJECT_ROOT}\"",
        "[ -e /dev/net/tun ] || echo 'no /dev/net/tun (tunnels need it)'",
        f"[ -f {shlex.quote(probe)} ] || echo {shlex.quote(unshared)}",
        "ovs-vsctl --timeout=5 show >/dev/null 2>&1 || echo 'Open vSwitch is not running'",
        f"grep -qw {shlex.quote(congestion_control)} /proc/sys/net/ipv4/tcp_available_congestion_control "
        f"|| echo 'congestion control {congestion_control} is not available'",
        "true",
    ])


def by_server(nodes, placement: dict[str, str]) -> dict[str, list[str]]:
    """``nodes`` grouped by the server ``placement`` puts them on, this machine first."""
    out: dict[str, list[str]] = {}
    for n in sorted(nodes, key=lambda n: placement[n] != LOCAL):
        out.setdefault(placement[n], []).append(n)
    return out


class ThisMachine:
    """Where the nodes of a network on this machine alone run: here, with nothing to reach.

    The same interface as :class:`MultiServer`, so the network never asks which it has.
    """

    def __init__(self, g):
        self.placement = dict.fromkeys(g.nodes, LOCAL)

    def refuse(self, one_machine_ports: bool, marks: bool, ina: bool) -> None:
        """Every variant runs on one machine."""

    def via(self, server: str) -> tuple[str, ...]:
        """No prefix: every command runs here."""
        return ()

    def wrap(self, server: str, argv: list[str]) -> list[str]:
        """``argv`` as it is."""
        return list(argv)

    def run(self, server: str, argv: list[str], timeout_s: float = 30.0) -> subprocess.CompletedProcess:
        """Run a short command here; raise EmulationError naming it if it fails."""
        return run(argv, timeout_s=timeout_s)

    def precheck(self, congestion_control: str, run_dir: str) -> None:
        """Nothing to check beyond what the run checked of this machine."""

    def start(self, controller_port: int) -> None:
        """No sessions to open."""

    def check_alive(self) -> None:
        """No sessions to lose."""

    def mininet_classes(self) -> tuple[dict, type]:
        """Mininet's own classes: ``({}, OVSSwitch)``."""
        from mininet.node import OVSSwitch

        return {}, OVSSwitch

    def node_params(self, node: str) -> dict:
        """No cluster parameters."""
        return {}


class MultiServer:
    """The servers of one emulated network spread over several (cluster mode), and the SSH
    sessions to them.

    Args:
        g: the topology; its nodes are placed with :func:`topo.partition.assign_servers`.
        options: the servers and how to reach them.
        record: the network's run record; sessions, tunnels and remote devices go into it.
    """

    def __init__(self, g, options: ClusterOptions, record: RunJournal):
        self.options = options
        self.record = record
        self.placement = assign_servers(g, list(options.servers))
        self.ctl_dir = f"/tmp/dtnet-ssh-{os.getpid()}"
        self.sessions: dict[str, subprocess.Popen] = {}
        self.controller_port: dict[str, int] = {}  # server -> the controller's port on its loopback
        self._next_tap = FIRST_TAP

    @property
    def remote_servers(self) -> list[str]:
        return [s for s in self.options.servers if s != LOCAL]

    def dest(self, server: str) -> str:
        return f"{self.options.user}@{server}"

    def refuse(self, one_machine_ports: bool, marks: bool, ina: bool) -> None:
        """Raise EmulationError for what runs on one machine only: AF_XDP ports, a marker, INA."""
        unsupported = [what for what, used in (("AF_XDP switch ports", one_machine_ports),
                                               ("an ECN marker", marks), ("INA aggregators", ina)) if used]
        if unsupported:
            raise EmulationError(f"cluster mode runs without {' and '.join(unsupported)} (plain switch ports, "
                                 f"no ECN marking, no INA)")

    def node_params(self, node: str) -> dict:
        """Mininet's cluster parameters of a node: its server, the user there and the server's SSH
        session."""
        server = self.placement[node]
        remote = {"controlPath": self.control_path(server)} if server != LOCAL else {}
        # serverIP: the name as ssh knows it (Mininet would resolve it, losing an ssh_config alias)
        return {"server": server, "serverIP": server, "user": self.options.user, **remote}

    def control_path(self, server: str) -> str:
        return os.path.join(self.ctl_dir, str(self.options.servers.index(server)))

    def via(self, server: str) -> tuple[str, ...]:
        """The command prefix that runs a command on ``server`` (empty for this machine). Over
        the server's session while it lives; a direct connection after (``clean`` after a crash)."""
        if server == LOCAL:
            return ()
        return ("ssh", *ssh_options(self.options), "-S", self.control_path(server), "-o", "ControlMaster=no",
                self.dest(server))

    def wrap(self, server: str, argv: list[str]) -> list[str]:
        """``argv`` as a command run on ``server``."""
        return list(argv) if server == LOCAL else [*self.via(server), shlex.join(argv)]

    def run(self, server: str, argv: list[str], timeout_s: float = 30.0) -> subprocess.CompletedProcess:
        """Run a short command on ``server``; raise EmulationError naming it if it fails."""
        return self.run_shell(server, shlex.join(argv), timeout_s)

    def run_shell(self, server: str, cmd: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess:
        """Run a shell command line on ``server``; raise EmulationError naming it if it fails."""
        argv = ["sh", "-c", cmd] if server == LOCAL else [*self.via(server), cmd]
        shown = cmd if len(cmd) <= 200 else cmd[:200] + " ..."
        try:
            cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise EmulationError(f"`{shown}` on {server} did not finish within {timeout_s:.0f} s") from None
        if cp.returncode != 0:
            raise EmulationError(f"`{shown}` on {server} failed ({cp.returncode}): {(cp.stderr or cp.stdout).strip()}")
        return cp

    # -- start and liveness ------------------------------------------------------------------

    def precheck(self, congestion_control: str, run_dir: str) -> None:
        """Check every other server before anything starts on any of them.

        Raises:
            EmulationError: naming the first server that cannot serve and why.
        """
        probe = os.path.join(os.path.abspath(run_dir), f".cluster-probe-{os.getpid()}")
        with open(probe, "w"):
            pass
        try:
            self._precheck(precheck_script(congestion_control, probe))
        finally:
            os.unlink(probe)

    def _precheck(self, script: str) -> None:
        for server in self.remote_servers:
            argv = ["ssh", *ssh_options(self.options), "-n", self.dest(server), script]
            try:
                cp = subprocess.run(argv, capture_output=True, text=True,
                                    timeout=self.options.connect_timeout_s + SESSION_START_S)
            except subprocess.TimeoutExpired:
                cp = None
            if cp is None or cp.returncode == 255:
                said = "no answer" if cp is None else (cp.stderr.strip().splitlines() or ["ssh exited 255"])[-1]
                raise EmulationError(f"cluster server {server!r} is unreachable ({said}); nothing was started on any "
                                     f"server. It needs `ssh {self.dest(server)}` to work without a password")
            problems = [line for line in cp.stdout.splitlines() if line.strip()]
            if cp.returncode != 0 or problems:
                raise EmulationError(f"cluster server {server!r} cannot run the emulation: "
                                     f"{'; '.join(problems) or cp.stderr.strip()}; nothing was started on any server")

    def start(self, controller_port: int) -> None:
        """Open one SSH session per server, forwarding the controller's port to its loopback.

        Raises:
            EmulationError: a session did not come up (the message names the server and what
                ``ssh`` said).
        """
        self.record.add(Change("dir", self.ctl_dir, what="SSH control sockets"))
        os.makedirs(self.ctl_dir, mode=0o700, exist_ok=True)
        for server in self.remote_servers:
            port = free_tcp_port()
            ctl = self.control_path(server)
            argv = ["ssh", *ssh_options(self.options), "-M", "-N", "-S", ctl, "-o", "ExitOnForwardFailure=yes",
                    "-R", f"127.0.0.1:{port}:127.0.0.1:{controller_port}", self.dest(server)]
            said = tempfile.TemporaryFile()  # not a pipe: a session that lives long must never block on it
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=said,
                                 start_new_session=True)
            self.record.add(process_change(p.pid, f"SSH session to {server}"))
            self.sessions[server] = p
            deadline = time.monotonic() + self.options.connect_timeout_s + SESSION_START_S
            while not os.path.exists(ctl) and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if not os.path.exists(ctl):
                if p.poll() is None:
                    p.kill()
                p.wait(timeout=5)
                said.seek(0)
                why = said.read().decode(errors="replace").strip()
                raise EmulationError(f"the SSH session to cluster server {server!r} did not start: "
                                     f"{why or 'no control socket'}")
            said.close()
            self.controller_port[server] = port

    def check_alive(self) -> None:
        """Raise EmulationError when a server's SSH session has ended (its nodes went with it)."""
        for server, p in self.sessions.items():
            if p.poll() is not None:
                raise EmulationError(f"the SSH session to cluster server {server!r} (pid {p.pid}) ended "
                                     f"(exit {p.returncode}): its switches and machines are gone")

    def new_tap_numbers(self) -> tuple[int, int]:
        """Two tap device numbers no tunnel of this network has used."""
        taken = set(os.listdir("/sys/class/net"))
        while f"tap{self._next_tap}" in taken or f"tap{self._next_tap + 1}" in taken:
            self._next_tap += 2
        n = self._next_tap
        self._next_tap += 2
        return n, n + 1

    # -- Mininet's cluster classes -------------------------------------------------------------

    def mininet_classes(self) -> tuple[dict, type]:
        """Mininet's keyword arguments for its host and link classes, and the switch class: its
        cluster edition's, on our sessions."""
        from mininet.examples.cluster import RemoteHost, RemoteOVSSwitch, RemoteSSHLink
        from mininet.util import decode

        cluster = self
        extra = ssh_options(self.options)

        class ClusterHost(RemoteHost):
            sshbase = RemoteHost.sshbase + extra

        class ClusterSwitch(RemoteOVSSwitch):
            sshbase = RemoteOVSSwitch.sshbase + extra

            @classmethod
            def batchStartup(cls, switches, **_kwargs):  # noqa: N802 - Mininet's name
                """Mininet's batch per server, run as one command there rather than typed into a
                switch's shell: a terminal cuts a line at 4 kB, and a batch of 20 switches is longer."""
                from mininet.node import OVSSwitch

                for server in {sw.server for sw in switches}:
                    group = tuple(sw for sw in switches if sw.server == server)
                    OVSSwitch.batchStartup(group, run=lambda cmd, shell=True, _s=server: cluster.run_shell(_s, cmd))
                return switches

            def start(self, controllers):
                if self.isRemote:  # the controller as the server sees it: its forwarded port
                    controllers = [_Forwarded(c, cluster.controller_port[self.server]) for c in controllers]
                super().start(controllers)

        class ClusterLink(RemoteSSHLink):
            def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None):
                """Mininet's SSH tunnel (tap devices joined by ``ssh -w``), with tap numbers of its
                own and every piece recorded. One end is on this machine (the placement's rule)."""
                if node1.server != LOCAL:
                    if node2.server != LOCAL:
                        raise EmulationError(f"link {node1}-{node2} joins two other servers ({node1.server}, "
                                             f"{node2.server}); tunnels start on this machine")
                    return self.makeTunnel(node2, node1, intfname2, intfname1, addr2, addr1)
                taps = dict(zip((node1, node2), cluster.new_tap_numbers(), strict=True))
                for node, n in taps.items():
                    cluster.record.add(Change("link", f"tap{n}", what=f"tunnel end of {node}",
                                              via=cluster.via(node.server)))
                    out = node.rcmd(f"ip tuntap add dev tap{n} mode tap user {node.user}").strip()
                    if out:
                        raise EmulationError(f"cannot create tap{n} on {node.server} for link {node1}-{node2}: {out}")
                cmd = ["ssh", *extra, "-n", "-o", "ControlPath=none", "-o", "Tunnel=Ethernet",
                       "-w", f"{taps[node1]}:{taps[node2]}", cluster.dest(node2.server), "echo @"]
                self.cmd = cmd
                tunnel = node1.rpopen(cmd, sudo=False)
                cluster.record.add(process_change(tunnel.pid, f"tunnel {node1}-{node2} to {node2.server}"))
                ch = decode(tunnel.stdout.read(1))
                if ch != "@":
                    tunnel.wait(timeout=10)
                    said = (ch + decode(tunnel.stdout.read())).strip()
                    raise EmulationError(f"the tunnel of link {node1}-{node2} to {node2.server} did not come up: "
                                         f"{said or 'ssh exited'} (its sshd needs `PermitTunnel ethernet`)")
                for node, intf, addr in ((node1, intfname1, addr1), (node2, intfname2, addr2)):
                    self.moveIntf(f"tap{taps[node]}", node)
                    args = f"ip link set tap{taps[node]} name {intf}" + (f" address {addr}" if addr else "")
                    out = node.cmd(args).strip()
                    if out:
                        raise EmulationError(f"{node.server}: `{args}` failed: {out}")
                return tunnel

        return {"host": ClusterHost, "link": ClusterLink}, ClusterSwitch


class _Forwarded:
    """A controller as a switch on another server reaches it: the same controller at the port
    the server's SSH session forwards to it (Mininet's ``OVSSwitch.start`` reads these four)."""

    def __init__(self, controller, port: int):
        self.name = controller.name
        self.protocol = controller.protocol
        self.port = port

    def IP(self) -> str:  # noqa: N802 - Mininet's name
        return "127.0.0.1"
