"""Sockets on the loopback interface: a free port for a listener the testbed starts."""

import socket


def free_tcp_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
