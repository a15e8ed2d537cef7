"""All-pairs TCP reachability check, run inside emulated hosts (no torch import, starts fast).

    python -m emulator.tcpcheck serve PORT            # accept connections, echo one message each
    python -m emulator.tcpcheck probe PORT IP [IP..]  # connect to each, exchange 1 KiB, print failures

``probe`` prints ``ok N`` on success or one ``fail IP reason`` line per failure and exits 1.
:func:`check` runs both in a network's machines. The host side imports the standard library only.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

PAYLOAD = b"x" * 1024


def serve(port: int) -> None:
    """Echo server: each connection gets back what it sent."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(128)
    print("listening", flush=True)

    def echo(conn):
        with conn:
            conn.settimeout(10)
            data = b""
            while len(data) < len(PAYLOAD):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            conn.sendall(data)

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=echo, args=(conn,), daemon=True).start()


def probe(port: int, ips: list[str], timeout_s: float = 5.0) -> int:
    """Connect to every address and check the echo; return the number of failures."""
    failures = 0
    for ip in ips:
        try:
            with socket.create_connection((ip, port), timeout=timeout_s) as s:
                s.sendall(PAYLOAD)
                data = b""
                while len(data) < len(PAYLOAD):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            if data != PAYLOAD:
                raise OSError(f"echo mismatch ({len(data)} bytes)")
        except OSError as e:
            failures += 1
            print(f"fail {ip} {e}", flush=True)
    if not failures:
        print(f"ok {len(ips)}", flush=True)
    return failures


def check(net, sources: list[str], targets: list[str], port: int = 5999,
          timeout_s: float = 60.0) -> dict[str, list[str]]:
    """TCP echo from every source machine to every target machine (not itself) of a running
    :class:`emulator.net.EmulatedNetwork` ``net``: a ``serve`` in each target, a ``probe`` from each source.

    Returns:
        Failure lines per source machine; empty when every connection worked.
    """
    from common.paths import PROJECT_ROOT
    from emulator.procs import stop_process

    env = {"PYTHONPATH": PROJECT_ROOT, "PATH": os.environ.get("PATH", "")}
    servers = [net.popen(t, [sys.executable, "-m", "emulator.tcpcheck", "serve", str(port)], env=env,
                         cwd=PROJECT_ROOT) for t in targets]
    try:
        # Probe once every server listens: one on another server of a cluster starts over SSH.
        deadline = time.monotonic() + timeout_s
        for t, srv in zip(targets, servers, strict=True):
            while not net.host_exec(t, f"ss -Hltn sport = :{port}").strip():
                if srv.poll() is not None:
                    return {t: [f"fail the check's server on {t} (port {port}) exited ({srv.returncode})"]}
                if time.monotonic() > deadline:
                    return {t: [f"fail the check's server on {t} (port {port}) not listening in {timeout_s:g} s"]}
                time.sleep(0.05)
        probes = {}
        for src in sources:
            ips = [net.g.nodes[t]["ip"] for t in targets if t != src]
            # Standard input open while it runs: on another server, its end ends the probe.
            probes[src] = subprocess.Popen(
                net.machine_argv(src, [sys.executable, "-m", "emulator.tcpcheck", "probe", str(port), *ips],
                                 env, PROJECT_ROOT), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=PROJECT_ROOT)
        failures = {}
        for src, p in probes.items():
            try:
                p.wait(timeout=timeout_s)  # its few lines fit the pipe
                out = p.stdout.read()
            except subprocess.TimeoutExpired:
                stop_process(p)
                out = "fail timeout"
            finally:
                p.stdin.close()
                p.stdout.close()
            bad = [line for line in out.splitlines() if not line.startswith("ok")]
            if bad or p.returncode != 0:
                failures[src] = bad or [f"exit {p.returncode}"]
        return failures
    finally:
        for srv in servers:
            stop_process(srv)
            net.forget(srv)


def main(argv: list[str]) -> int:
    """Command-line entry."""
    if len(argv) >= 2 and argv[0] == "serve":
        serve(int(argv[1]))
        return 0
    if len(argv) >= 3 and argv[0] == "probe":
        return 1 if probe(int(argv[1]), argv[2:]) else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
