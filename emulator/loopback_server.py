"""A second "server" for cluster mode on this machine: an ``sshd`` of our own on a loopback address.

Cluster mode (:mod:`emulator.cluster`) reaches its servers over SSH. Its single-machine form, used
by the tests and ``bench/cluster.py``, names a second loopback address (``127.0.0.2``) served
by this ``sshd``: its own host and client keys, configuration and port, root by key only,
Ethernet tunnels allowed (Mininet's SSH tunnels), nothing of the machine's SSH set-up touched.
:attr:`LoopbackServer.ssh_config` is the ``ssh_config`` that reaches it (``ssh -F``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

from common.errors import EmulationError
from common.lifecycle import StartStop

SSHD = "/usr/sbin/sshd"


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


class LoopbackServer(StartStop):
    """``with LoopbackServer() as srv: ClusterOptions(("localhost", srv.address), ssh_config=srv.ssh_config)``.

    Args:
        address: the loopback address it listens on.
        also: other names the ``ssh_config`` routes to the same port (a test's unreachable one).
    """

    def __init__(self, address: str = "127.0.0.2", also: tuple[str, ...] = ()):
        self.address = address
        self.also = also
        self.dir = ""
        self.ssh_config = ""
        self._sshd: subprocess.Popen | None = None
        self._made_privsep_dir = False

    def start(self) -> None:
        """Write keys and configuration, start the sshd, and wait until it lets root in.

        Raises:
            EmulationError: no sshd is installed, or it did not answer within 10 s.
        """
        if not os.path.exists(SSHD):
            raise EmulationError(f"{SSHD} is not installed (Debian's openssh-server; the set-up installs it)")
        self.dir = tempfile.mkdtemp(prefix="dtnet-sshd-")
        d = self.dir
        for key in ("host", "client"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{d}/{key}"], check=True,
                           capture_output=True)
        shutil.copy(f"{d}/client.pub", f"{d}/authorized_keys")
        port = _free_port(self.address)
        with open(f"{d}/sshd_config", "w") as f:
            f.write(f"ListenAddress {self.address}:{port}\nHostKey {d}/host\nPidFile none\n"
                    f"AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n"
                    "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                    "PermitTunnel ethernet\nAllowTcpForwarding yes\nMaxSessions 200\nMaxStartups 100\n")
        self.ssh_config = f"{d}/ssh_config"
        with open(self.ssh_config, "w") as f:
            f.write(f"Host {' '.join((self.address, *self.also))}\n  Port {port}\n  IdentityFile {d}/client\n"
                    "  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
                    "  LogLevel ERROR\n")
        self._made_privsep_dir = not os.path.isdir("/run/sshd")  # sshd's privilege separation directory
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self._sshd = subprocess.Popen([SSHD, "-D", "-f", f"{d}/sshd_config", "-E", f"{d}/sshd.log"],
                                      stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            cp = subprocess.run(["ssh", "-F", self.ssh_config, "-o", "BatchMode=yes", f"root@{self.address}", "true"],
                                capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
            if cp.returncode == 0:
                return
            if time.monotonic() > deadline or self._sshd.poll() is not None:
                with open(f"{d}/sshd.log") as f:
                    raise EmulationError(f"the loopback sshd on {self.address}:{port} did not let root in: "
                                         f"{cp.stderr.strip()} {f.read().strip()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the sshd and remove its files (idempotent)."""
        if self._sshd is not None:
            self._sshd.terminate()
            try:
                self._sshd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._sshd.kill()
                self._sshd.wait()
            self._sshd = None
        if self._made_privsep_dir:
            shutil.rmtree("/run/sshd", ignore_errors=True)
            self._made_privsep_dir = False
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = ""
