"""Names of the throw-away devices a capability probe makes (a veth pair, a bridge): one set per
process, so two runs or two test suites probe at once without deleting each other's, each name
ending in the prober's PID (``tbq<pid>a``). A probe killed before its cleanup leaves them behind;
the next probe removes those whose process is gone (:func:`remove_stale`), and nothing else.
"""

from __future__ import annotations

import os
import re
import subprocess

from emulator.procs import pid_alive

PREFIX = "tb"
"""Every scratch name starts with this and a one-letter tag; a PID and a suffix follow (15 characters
at most, Linux's limit for an interface name)."""


def scratch_names(tag: str, *suffixes: str) -> tuple[str, ...]:
    """This process's scratch names for probe ``tag`` (one letter), one per suffix."""
    return tuple(f"{PREFIX}{tag}{os.getpid()}{s}" for s in suffixes)


def _owner(name: str, tag: str) -> int | None:
    m = re.fullmatch(rf"{PREFIX}{re.escape(tag)}(\d+)[a-z]+", name)
    return int(m.group(1)) if m else None


def stale(names, tag: str) -> list[str]:
    """Those of ``names`` that are scratch names of probe ``tag`` whose process is gone."""
    return [n for n in names if (pid := _owner(n, tag)) is not None and pid != os.getpid() and not pid_alive(pid)]


def remove_stale(tag: str) -> list[str]:
    """Delete the interfaces (and Open vSwitch bridges) a dead prober of ``tag`` left; returns their
    names."""
    gone = []
    bridges = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True)
    for br in stale(bridges.stdout.split() if bridges.returncode == 0 else [], tag):
        subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", br], capture_output=True)
        gone.append(br)
    for dev in stale(os.listdir("/sys/class/net") if os.path.isdir("/sys/class/net") else [], tag):
        subprocess.run(["ip", "link", "del", dev], capture_output=True)
        gone.append(dev)
    return gone
