"""A bmv2 ``simple_switch`` process and its runtime CLI: start it, run CLI commands, stop it.

One ``simple_switch`` (optionally in a network namespace) with one ``simple_switch_CLI`` kept
running beside it, stopped by their PIDs only; :class:`ina.p4.switch.Bmv2Aggregator` programs it
with ``aggregator.p4``'s tables.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence

from ina.p4.build import P4Error, Toolchain

_READY_S = 15.0
_CLI_TIMEOUT_S = 30.0
_PROMPT = "RuntimeCmd: "


def log_tail(path: str) -> str:
    """The last 1000 characters of a process's log, for a message saying why it failed."""
    try:
        with open(path, errors="replace") as f:
            return f.read()[-1000:].strip() or "(empty log)"
    except OSError as e:
        return f"(log unreadable: {e})"


def _free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _CliSession:
    """One ``simple_switch_CLI`` process kept running: commands written to its standard input, its
    output read up to the prompt that follows each (the CLI's start-up, a second or so, paid once
    per switch rather than once per batch of commands).

    Args:
        argv: the CLI's command line.
        env: its environment.
    """

    def __init__(self, argv: list[str], env: Mapping[str, str]):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=dict(env), start_new_session=True)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.banner = ""

    def open(self) -> bool:
        """Read the CLI's banner up to its first prompt (kept in :attr:`banner`); whether it got there
        (False: it exited first, not connected).

        Raises:
            subprocess.TimeoutExpired: no prompt in time (the process is closed).
        """
        self.banner, prompted = self._exchange(b"", 1)
        return prompted

    def run(self, commands: Sequence[str]) -> tuple[str, bool]:
        """Run ``commands``; their output, and whether the CLI answered every one (False: it exited).

        Raises:
            subprocess.TimeoutExpired: no answer in time (the process is closed).
        """
        return self._exchange(("\n".join(commands) + "\n").encode(), len(commands))

    def _exchange(self, data: bytes, prompts: int) -> tuple[str, bool]:
        out, fd_out = bytearray(), self.proc.stdout.fileno()
        deadline = time.monotonic() + _CLI_TIMEOUT_S
        with selectors.DefaultSelector() as sel:
            sel.register(fd_out, selectors.EVENT_READ)
            if data:
                os.set_blocking(self.proc.stdin.fileno(), False)
                sel.register(self.proc.stdin.fileno(), selectors.EVENT_WRITE)
            while out.count(_PROMPT.encode()) < prompts or not out.endswith(_PROMPT.encode()):
                left = deadline - time.monotonic()
                if left <= 0:
                    self.close()
                    raise subprocess.TimeoutExpired(self.proc.args, _CLI_TIMEOUT_S)
                for key, _ in sel.select(left):
                    if key.fd == fd_out:
                        chunk = os.read(fd_out, 65536)
                        if not chunk:  # it exited
                            self.close()
                            return out.decode(errors="replace"), False
                        out += chunk
                    else:
                        try:
                            data = data[os.write(key.fd, data):]
                        except BrokenPipeError:  # it exited: its output says how far it got
                            data = b""
                        if not data:
                            sel.unregister(key.fd)
        return out.decode(errors="replace"), True

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """End the CLI (idempotent): its input closed, killed if it has not exited in 5 s."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


class Bmv2Switch:
    """One ``simple_switch`` process running ``program``, driven through one ``simple_switch_CLI``
    kept running beside it.

    Args:
        toolchain: the P4 tools (:func:`ina.p4.build.find_toolchain`).
        program: the compiled JSON (:func:`ina.p4.build.compile_program`).
        ports: bmv2 port number -> interface name.
        thrift_port: the runtime CLI's TCP port (distinct per switch).
        device_id: distinct per switch (bmv2's nanomsg sockets clash otherwise).
        log_path: the switch's standard output and error.
        netns: network namespace to run in (None: this one).
    """

    def __init__(self, toolchain: Toolchain, program: str, ports: Mapping[int, str], thrift_port: int,
                 device_id: int, log_path: str, netns: str | None = None):
        self.toolchain = toolchain
        self.program = program
        self.ports = dict(ports)
        self.thrift_port = thrift_port
        self.device_id = device_id
        self.log_path = log_path
        self.netns = netns
        self.proc: subprocess.Popen | None = None
        self._session: _CliSession | None = None

    def _ns(self, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *cmd] if self.netns else cmd

    def start(self, on_spawn=None) -> None:
        """Start the switch and wait until its runtime CLI answers.

        Args:
            on_spawn: called with the process's PID as soon as it exists (to record it).

        Raises:
            P4Error: it exited or did not answer in 15 s (its log's tail included).
        """
        # Notifications over loopback TCP: bmv2's default is a socket file in /tmp
        # (bmv2-<device-id>-notifications.ipc) that outlives the switch.
        cmd = [self.toolchain.simple_switch, "--device-id", str(self.device_id), "--thrift-port",
               str(self.thrift_port), "--notifications-addr", f"tcp://127.0.0.1:{_free_loopback_port()}"]
        for port, intf in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{intf}"]
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(self._ns([*cmd, self.program]), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.toolchain.env(), start_new_session=True)
        finally:
            log.close()
        if on_spawn is not None:
            on_spawn(self.proc.pid)
        deadline = time.monotonic() + _READY_S
        while True:
            if self.proc.poll() is not None:
                raise P4Error(f"simple_switch exited with {self.proc.returncode}: {log_tail(self.log_path)}")
            try:
                if "Control utility" in self.cli(["set_queue_depth 1024"], check=False):
                    return
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise P4Error(f"simple_switch's runtime CLI did not answer in {_READY_S:g} s: "
                              f"{log_tail(self.log_path)}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the switch and its CLI by their PIDs (idempotent)."""
        if self._session is not None:
            self._session.close()
            self._session = None
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def __enter__(self) -> Bmv2Switch:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def cli(self, commands: Sequence[str], check: bool = True) -> str:
        """Run runtime CLI commands in one session; return its output (a session's first, its
        banner before it). The session is the switch's CLI process, started on first use and again
        after it exited.

        Raises:
            P4Error: with ``check``, a command the CLI refused (``Error`` or ``Invalid`` in its output),
                or the CLI exited before answering every command.
            subprocess.TimeoutExpired: the CLI did not answer in 30 s.
        """
        banner = ""
        if self._session is None or not self._session.alive():
            if self._session is not None:
                self._session.close()
            self._session = _CliSession(self._ns([self.toolchain.cli, "--thrift-port", str(self.thrift_port)]),
                                        self.toolchain.env())
            opened = self._session.open()
            banner = self._session.banner
            if not opened:
                self._session = None
                if check:
                    raise P4Error(f"simple_switch_CLI refused {list(commands)}: {banner.strip()[-1000:]}")
                return banner
        out, answered = self._session.run(commands)
        out = banner + out
        if not answered:
            self._session = None
        if check and (not answered or re.search(r"^(RuntimeCmd: )?(Error|Invalid)", out, re.M)):
            raise P4Error(f"simple_switch_CLI refused {list(commands)}: {out.strip()[-1000:]}")
        return out
