"""Mininet's CLI on a run's live fabric (``run_testbed.py run --cli``).

Once a policy has placed its first jobs, and before any of their workers starts, :func:`open_cli`
prints where each job runs and opens Mininet's own CLI on the network (``pingall``, ``dump``,
``links``, ``h1 ping h2``, ``sh ovs-ofctl -O OpenFlow13 dump-flows e1``, ``xterm h1``: names
from the fabric). The run goes
on when the user leaves it (``exit`` or Ctrl-D; Ctrl-C interrupts a command, as in Mininet). The
time spent there is not counted (:class:`emulator.backend.EmulatorBackend` moves its clock on by
it) and neither is the traffic typed there (:class:`emulator.policy_run.PolicyMeasurement` reads
the switch counters again afterwards).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence


def hint(host: str, other: str, switch: str) -> str:
    """Commands worth trying first, on nodes of the fabric."""
    return (f"pingall, dump, links, '{host} ping -c1 {other}', 'sh ovs-ofctl -O OpenFlow13 dump-flows {switch}', "
            f"'xterm {host}'")


def placement_lines(spec: str, runs: Sequence, hosts: Sequence[str], switch: str) -> list[str]:
    """The banner: the policy and, per job of its first batch, the machines it was placed on; then
    commands to try on ``hosts`` (two machines) and ``switch``."""
    lines = [f"  {spec} placed {len(runs)} job{'s' if len(runs) != 1 else ''}; none has started:"]
    for job, p in runs:
        machines = ", ".join(p.machines) if p is not None else "no machine"
        lines.append(f"    {job.name}: {job.model}, {job.collective}, {job.workers} workers on {machines}")
    lines.append(f"  Mininet's CLI on the live fabric: {hint(hosts[0], hosts[-1], switch)}; exit or Ctrl-D goes "
                 f"on (not timed, not counted)")
    return lines


@contextlib.contextmanager
def _mininet_output() -> Iterator[None]:
    """Mininet's log at its own ``output`` level while the CLI is open (the run keeps it at
    ``error``), and SIGINT as Python's own KeyboardInterrupt (the run's handler stops the run)."""
    from mininet.log import lg

    level, handler = lg.level, None
    lg.setLogLevel("output")
    with contextlib.suppress(ValueError):  # not the main thread: the run's handler stays
        handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if handler is not None:
            signal.signal(signal.SIGINT, handler)
        lg.setLevel(level)
        lg.ch.setLevel(level)


def open_cli(mn, spec: str, runs: Sequence, say: Callable[[str], None], stdin=None) -> float:
    """Print the placement of ``runs`` and open Mininet's CLI on ``mn`` until the user leaves it;
    returns the seconds it was open."""
    from mininet.cli import CLI

    for line in placement_lines(spec, runs, [h.name for h in mn.hosts[:2]], mn.switches[0].name):
        say(line)
    t = time.monotonic()
    with _mininet_output():
        CLI(mn, stdin=stdin or sys.stdin)
    open_s = time.monotonic() - t
    say(f"  left the CLI after {open_s:.1f} s; {spec}'s jobs start")
    return open_s
