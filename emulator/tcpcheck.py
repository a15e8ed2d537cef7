"""All-pairs TCP reachability check, run inside emulated hosts (no torch import, starts fast).

    python -m emulator.tcpcheck serve PORT            # accept connections, echo one message each
    python -m emulator.tcpcheck probe PORT IP [IP..]  # connect to each, exchange 1 KiB, print failures

``probe`` prints ``ok N`` on success or one ``fail IP reason`` line per failure and exits 1.
"""

from __future__ import annotations

import socket
import sys
import threading

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
