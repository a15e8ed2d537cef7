"""Mininet's CLI on a run's live fabric (``run_testbed.py run --cli``).

Once a policy has placed its first jobs, and before any of their workers starts, :func:`open_cli`
prints where each job runs and opens Mininet's own CLI on the network (``pingall``, ``dump``,
``links``, ``h1 ping h2``, ``sh ovs-ofctl -O OpenFlow13 dump-flows e1``, ``xterm h1``: names from
the fabric). The run goes on when the user leaves it (``exit`` or Ctrl-D; Ctrl-C interrupts a
command, as in Mininet; SIGTERM stops the run, as it does outside the CLI). The time spent there
is not counted (:class:`emulator.backend.EmulatorBackend` moves its clock on by it) and neither is
the traffic typed there (:class:`emulator.policy_run.PolicyMeasurement` reads the switch counters
again afterwards).
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
        lines.append(f"    {job.name}: {job.model}, {job.collective}, {job.workers} workers on {', '.join(p.machines)}")
    lines.append(f"  Mininet's CLI on the live fabric: {hint(hosts[0], hosts[-1], switch)}; exit or Ctrl-D goes "
                 f"on (not timed, not counted)")
    return lines


class _Stopped(BaseException):
    """SIGTERM while the CLI is open. Mininet's CLI swallows KeyboardInterrupt (Ctrl-C ends a command,
    not the CLI), so the signal leaves it as this and reaches the run's own handler once it is closed."""


def _stop(signum, frame):
    raise _Stopped


@contextlib.contextmanager
def _cli_session() -> Iterator[None]:
    """Mininet's log at its own ``output`` level while the CLI is open (the run keeps it at
    ``error``); Ctrl-C as Python's own KeyboardInterrupt, which the CLI turns into the end of a
    command; SIGTERM handed to the run's own handler, which stops the run, once the CLI is closed."""
    from mininet.log import lg

    level, handlers, stopped = lg.level, {}, False
    lg.setLogLevel("output")
    with contextlib.suppress(ValueError):  # not the main thread: the run's handlers stay
        handlers[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
        handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, _stop)
    try:
        yield
    except _Stopped:
        stopped = True
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        lg.setLevel(level)
        lg.ch.setLevel(level)
    if stopped:
        run_handler = handlers.get(signal.SIGTERM)
        if callable(run_handler):
            run_handler(signal.SIGTERM, None)
        raise KeyboardInterrupt


def open_cli(mn, spec: str, runs: Sequence, say: Callable[[str], None], stdin=None) -> None:
    """Print the placement of ``runs`` (every job placed: the emulator runs placed jobs only) and open
    Mininet's CLI on ``mn`` until the user leaves it."""
    from mininet.cli import CLI

    for line in placement_lines(spec, runs, [h.name for h in mn.hosts[:2]], mn.switches[0].name):
        say(line)
    t = time.monotonic()
    with _cli_session():
        CLI(mn, stdin=stdin or sys.stdin)
    say(f"  left the CLI after {time.monotonic() - t:.1f} s; {spec}'s jobs start")
