"""The parameter server as a process: :class:`ina.aggregator.ParameterServer` behind a UDP socket.

One PS process per machine serves every job whose PS is on it, on UDP port
:data:`ina.protocol.INA_UDP_PORT`: it finishes each seq from whatever reaches it, sends the result
to the job's workers (or where the plan's multicast says), ORs the datagrams' ECN into it, keeps
the last :data:`KEEP_SEQS` results per job for resends, and counts each job's datagrams
(:class:`PsJobCounters`). ``python -m ina.ps --config ps.json``; SIGHUP reloads the jobs, SIGTERM
writes the counters.

Its command line, config, reload and acknowledgement protocol: ``docs/ina-internals.md``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import select
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from common.errors import TestbedError
from common.jsonfile import write_json_atomic
from ina.aggregator import Dest, JobTree, LeafGroup, ParameterServer
from ina.protocol import (
    FIELD_NAMES,
    HEADER,
    HEADER_BYTES,
    INA_UDP_PORT,
    SO_RCVBUFFORCE,
    TOS_SPACE,
    VALUES_PER_PACKET,
    Flag,
    InaError,
    ce_of,
    check_values_per_packet,
    ecn_capable,
    worker_port,
)

KEEP_SEQS = 4096
"""Completed seqs kept per job to answer resends (at least; up to :data:`FORGET_EVERY` more)."""
FORGET_EVERY = 512
"""Older seqs are forgotten once per this many seqs."""
RCVBUF_BYTES = 8 << 20
"""The PS socket's receive buffer: every worker's window of datagrams at once (4 workers x 256 seqs
take about 1 MB of kernel memory at ~1 KB each; the default 208 KB drops them, and every drop costs
a worker a resend timeout). Set beyond ``net.core.rmem_max`` where the PS may (``SO_RCVBUFFORCE``,
root), else up to it."""
DRAIN_BATCH = 256
"""Datagrams the serve loop takes without waiting once the socket is readable, before it checks
for a stop or a reload again."""
_COLLISION, _RESEND = int(Flag.COLLISION), int(Flag.RESEND)  # plain ints per packet: IntFlag ops are slow


@dataclasses.dataclass(frozen=True)
class PsJob:
    """A job the PS serves: its aggregation tree, each worker bit's machine address, and the
    addresses each result is sent to (empty: every worker's; results multicast by the switches:
    the plan's :attr:`ina.plan.JobPlan.result_to`)."""

    tree: JobTree
    workers: Mapping[int, str]
    result_to: tuple[str, ...] = ()

    @property
    def members(self) -> frozenset[str]:
        """The addresses the job's datagrams may come from: its machines'."""
        return frozenset(self.workers.values())

    def addresses(self) -> list[tuple[str, int]]:
        """Where the job's results go, at the job's worker port: ``result_to``, else every worker machine."""
        port = worker_port(self.tree.job_id)
        return [(ip, port) for ip in self.result_to or [ip for _, ip in sorted(self.workers.items())]]

    def to_dict(self) -> dict:
        """JSON form (an entry of the config's ``jobs``)."""
        t = self.tree
        return {"job_id": t.job_id, "root_workers": list(t.root_workers),
                "leaves": [[leaf.bit, list(leaf.workers)] for leaf in t.leaves],
                "workers": {str(b): ip for b, ip in sorted(self.workers.items())},
                **({"result_to": list(self.result_to)} if self.result_to else {})}

    @classmethod
    def from_dict(cls, d: Mapping) -> PsJob:
        """Inverse of :meth:`to_dict`.

        Raises:
            InaError: a malformed entry, or a worker bit without an address.
        """
        try:
            tree = JobTree(int(d["job_id"]), tuple(int(b) for b in d["root_workers"]),
                           tuple(LeafGroup(int(bit), tuple(int(w) for w in ws)) for bit, ws in d.get("leaves", [])))
            workers = {int(b): str(ip) for b, ip in d["workers"].items()}
            result_to = tuple(str(ip) for ip in d.get("result_to", ()))
        except (KeyError, TypeError, ValueError) as e:
            raise InaError(f"PS job entry {d!r}: {e}") from None
        bits = [*tree.root_workers, *(b for leaf in tree.leaves for b in leaf.workers)]
        missing = sorted(set(bits) - set(workers))
        if missing:
            raise InaError(f"PS job {tree.job_id}: worker bits {missing} have no address")
        return cls(tree, workers, result_to)


@dataclasses.dataclass
class PsJobCounters:
    """One job's datagrams at the PS, classified by their header whatever the PS rules then did with
    them (stored, duplicate, late, ...).

    Counted only for well-formed datagrams of a job the PS serves when they arrive: a malformed one
    is only in the engine's ``malformed``, one of a job not served only in its ``unknown_job``. The
    counters outlive the job (:meth:`PsService.set_jobs` removing it), so a run's totals can be read
    when it ends; a job id installed again counts on.
    """

    received: int = 0
    """Datagrams of the job reaching the PS (every kind, RESULT packets too)."""
    aggregated: int = 0
    """Of those, the ones carrying more than one worker's contribution: their ``bitmap`` expanded by
    the job's tree (:meth:`ina.aggregator.JobTree.expand`, a leaf's bit standing for its workers)
    covers two or more workers. That is a leaf's partial or the root's aggregate, also when it fell
    back at the root; a worker's own packet (a resend too) carries its one bit. [R] Not the PARTIAL
    flag: a switch entry of fan-in 1 marks a single worker's packet PARTIAL, which summed nothing."""
    fallback: int = 0
    """Of those, the ones with COLLISION set (fell back at a switch whose slot was held)."""
    resend: int = 0
    """Of those, the ones with RESEND set (a worker's retransmission)."""
    results: int = 0
    """Datagrams the PS sent to the job's workers: one per address of :meth:`PsJob.addresses` (every
    worker machine, or with results multicast those the switches' copies do not reach) per RESULT
    packet (a completion, an answer to a resend, or a resend request). Summed over jobs:
    ``datagrams_sent``."""
    completed_seqs: int = 0
    """Seqs the PS completed (rule 7; answers to resends of completed seqs not counted again)."""
    foreign: int = 0
    """Datagrams of the job from an address that is none of its machines': dropped unread (a host
    outside the job must not add to its sums); not in ``received``."""

    def to_dict(self) -> dict[str, int]:
        """Plain data: every counter by name."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class JobsChange:
    """What :meth:`PsService.set_jobs` did, by job id (each ascending)."""

    added: tuple[int, ...] = ()
    replaced: tuple[int, ...] = ()
    """Listed again with a different tree or addresses: installed afresh, their seqs' state dropped."""
    removed: tuple[int, ...] = ()
    kept: tuple[int, ...] = ()
    """Listed again unchanged: untouched, their pending and completed seqs kept."""

    def __str__(self) -> str:
        return ", ".join(f"{name} {list(getattr(self, name))}" for name in ("added", "replaced", "removed", "kept"))


_FIELD = {name: FIELD_NAMES.index(name) for name in ("flags", "job_id", "seq", "bitmap")}


class PsService:
    """The PS behind ``sock`` (bound by the caller); :meth:`serve` until stopped.

    Args:
        sock: a bound UDP socket.
        jobs: the jobs to serve at first.

    Raises:
        InaError: two jobs share an id.
    """

    def __init__(self, sock: socket.socket, jobs: Sequence[PsJob], values_per_packet: int = VALUES_PER_PACKET):
        self.sock = ecn_capable(sock)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
        except PermissionError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
        self.engine = ParameterServer(check_values_per_packet(values_per_packet))
        self.jobs: dict[int, PsJob] = {}
        self.job_counters: dict[int, PsJobCounters] = {}
        self.sent = 0
        self.foreign = 0
        self.set_jobs(jobs)

    def set_jobs(self, jobs: Sequence[PsJob]) -> JobsChange:
        """Serve exactly ``jobs``: install the new ones, uninstall those not listed (their state
        dropped), leave those listed unchanged untouched (their pending and completed seqs kept)
        and install afresh those listed with a different tree or addresses.

        Raises:
            InaError: two jobs share an id (then nothing changes).
        """
        wanted: dict[int, PsJob] = {}
        for job in jobs:
            if job.tree.job_id in wanted:
                raise InaError(f"PS job {job.tree.job_id} is listed twice")
            wanted[job.tree.job_id] = job
        removed = sorted(set(self.jobs) - set(wanted))
        for job_id in removed:
            self.engine.uninstall(job_id)
            del self.jobs[job_id]
        added, replaced, kept = [], [], []
        for job_id, job in sorted(wanted.items()):
            old = self.jobs.get(job_id)
            if old == job:
                kept.append(job_id)
                continue
            if old is not None:
                self.engine.uninstall(job_id)  # a different tree: its seqs' bits meant other workers
            (added if old is None else replaced).append(job_id)
            self.engine.install(job.tree)
            self.jobs[job_id] = job
            self.job_counters.setdefault(job_id, PsJobCounters())
        return JobsChange(tuple(added), tuple(replaced), tuple(removed), tuple(kept))

    def handle(self, data: bytes, ecn_ce: bool = False, src: str | None = None) -> None:
        """One datagram: run the PS rules, send what they emit to the job's workers, count it for
        its job (:class:`PsJobCounters`). A datagram of a served job from ``src`` not among the
        job's machines is dropped and counted as ``foreign`` (switches' aggregates carry the
        source address of a worker of the job; None: not checked)."""
        fields = HEADER.unpack_from(data) if len(data) >= HEADER_BYTES else None
        job = self.jobs.get(fields[_FIELD["job_id"]]) if fields else None
        if job is not None and src is not None and src not in job.members:
            self.foreign += 1
            self.job_counters[job.tree.job_id].foreign += 1
            return
        was_done = job is not None and self.engine.result(job.tree.job_id, fields[_FIELD["seq"]]) is not None
        outs = self.engine.process(data, ecn_ce)
        if job is not None and not any(o.reason.startswith("malformed:") for o in outs):
            self._count(job, fields, was_done)
        for out in outs:
            if out.dest is not Dest.TO_WORKERS:
                continue
            job_id = int.from_bytes(out.data[2:4], "big")
            addresses = self.jobs[job_id].addresses()
            for addr in addresses:
                self.sock.sendto(out.data, addr)
            self.sent += len(addresses)
            self.job_counters[job_id].results += len(addresses)
            seq = int.from_bytes(out.data[4:8], "big")
            if seq >= KEEP_SEQS and seq % FORGET_EVERY == 0:  # amortised: forget scans the tables
                self.engine.forget(job_id, below_seq=seq - KEEP_SEQS + 1)

    def _count(self, job: PsJob, fields: tuple[int, ...], was_done: bool) -> None:
        """Count a well-formed datagram of a served job by its header (:class:`PsJobCounters`)."""
        job_id, seq, flags = job.tree.job_id, fields[_FIELD["seq"]], fields[_FIELD["flags"]]
        c = self.job_counters[job_id]
        covered = job.tree.expand(fields[_FIELD["bitmap"]]) or 0
        c.received += 1
        c.aggregated += covered & (covered - 1) != 0
        c.fallback += bool(flags & _COLLISION)
        c.resend += bool(flags & _RESEND)
        c.completed_seqs += not was_done and self.engine.result(job_id, seq) is not None

    def receive(self, flags: int = 0) -> bool:
        """Handle one datagram waiting on the socket (``flags``: ``recvmsg``'s, e.g. ``MSG_DONTWAIT``);
        False when none was waiting."""
        try:
            data, ancdata, _, addr = self.sock.recvmsg(65535, TOS_SPACE, flags)
        except BlockingIOError:
            return False
        self.handle(data, ce_of(ancdata), addr[0])
        return True

    def serve(self, stop: list, reload: ConfigReload | None = None, wake: socket.socket | None = None) -> None:
        """Receive until ``stop`` is non-empty, applying ``reload`` whenever it is requested.

        Args:
            stop: non-empty: return (checked at least every half second).
            reload: re-reads the config when its ``requested`` is non-empty (set by a signal
                handler; the reload itself runs here, between datagrams).
            wake: a socket that becomes readable when a signal arrived
                (:func:`signal.set_wakeup_fd`), so a stop or reload is seen at once; drained here.
        """
        while not stop:
            if reload is not None and reload.requested:
                reload.requested.clear()
                reload.reload(self)
            sock = self.sock  # read each time: a caller may wrap it while serving
            try:
                ready = select.select([sock] if wake is None else [sock, wake], [], [], 0.5)[0]
            except InterruptedError:
                continue
            if wake is not None and wake in ready:
                try:
                    wake.recv(4096)
                except BlockingIOError:
                    pass
            if sock in ready:  # drain what waits, a batch at most, without a select per datagram
                for _ in range(DRAIN_BATCH):
                    if not self.receive(socket.MSG_DONTWAIT) or stop:
                        break

    def stats(self) -> dict:
        """The engine's counters, the datagrams sent (one per worker per result packet) and, under
        ``jobs``, each job's :class:`PsJobCounters` by its id as a string."""
        return {**self.engine.stats.to_dict(), "datagrams_sent": self.sent, "foreign": self.foreign,
                "jobs": {str(j): c.to_dict() for j, c in sorted(self.job_counters.items())}}


class ConfigReload:
    """The PS's config file, loaded again on request, and the file acknowledging each load.

    A signal handler appends to :attr:`requested`; :meth:`PsService.serve` then calls
    :meth:`reload` between datagrams (never inside the handler, which could interrupt a packet
    half handled).

    Args:
        config_path: the ``--config`` file.
        ack_path: the ``--ack`` file (None: no acknowledgement).
        log: where reloads are reported, one line each.
    """

    def __init__(self, config_path: str, ack_path: str | None = None, log: TextIO | None = None):
        self.config_path, self.ack_path = config_path, ack_path
        self.log = log if log is not None else sys.stderr
        self.requested: list = []
        self.generation = 0
        """Loads so far (the first, at start, is 1)."""

    def acknowledge(self, service: PsService) -> None:
        """Count a load and write ``{"generation": n, "jobs": [sorted job ids]}`` to the ack file,
        atomically (a reader sees the previous acknowledgement or this one).

        Raises:
            OSError: the ack file cannot be written.
        """
        self.generation += 1
        if self.ack_path:
            write_json_atomic(self.ack_path, {"generation": self.generation, "jobs": sorted(service.jobs)})

    def reload(self, service: PsService) -> JobsChange | None:
        """Load the config again and serve exactly its jobs (:meth:`PsService.set_jobs`), then
        acknowledge. A malformed config (or one the service refuses) changes nothing and is not
        acknowledged; either way one line goes to the log.

        Returns:
            What changed, or None where the config was refused.
        """
        try:
            change = service.set_jobs(load_jobs(self.config_path))
        except InaError as e:
            print(f"ina.ps: reload refused, still serving jobs {sorted(service.jobs)}: {e}", file=self.log, flush=True)
            return None
        try:
            self.acknowledge(service)
        except OSError as e:
            print(f"ina.ps: reload {self.generation} ({change}) not acknowledged: {e}", file=self.log, flush=True)
            return change
        print(f"ina.ps: reload {self.generation}: {change}", file=self.log, flush=True)
        return change


def load_jobs(path: str) -> list[PsJob]:
    """The jobs of a PS config file (see ``docs/ina-internals.md``).

    Raises:
        InaError: unreadable or malformed, or a job id listed twice.
    """
    try:
        with open(path) as f:
            d = json.load(f)
        jobs = [PsJob.from_dict(j) for j in d["jobs"]]
    except (OSError, ValueError, KeyError, TypeError, InaError) as e:
        raise InaError(f"PS config {path}: {e}") from None
    twice = sorted(j for j, n in collections.Counter(j.tree.job_id for j in jobs).items() if n > 1)
    if twice:
        raise InaError(f"PS config {path}: job ids {twice} listed more than once")
    return jobs


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ina.ps``: serve until SIGTERM, then write the counters; reload on SIGHUP."""
    ap = argparse.ArgumentParser(description="the INA parameter server")
    ap.add_argument("--config", required=True)
    ap.add_argument("--stats")
    ap.add_argument("--bind", default="0.0.0.0")
    ap.add_argument("--ack", help="file acknowledging each load of the config: {generation, jobs}")
    ap.add_argument("--values-per-packet", type=int, default=VALUES_PER_PACKET,
                    help=f"int32 lanes per packet, as the workers and switches use (default {VALUES_PER_PACKET})")
    args = ap.parse_args(argv)
    try:
        check_values_per_packet(args.values_per_packet)
        jobs = load_jobs(args.config)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((args.bind, INA_UDP_PORT))
    except (TestbedError, OSError) as e:
        print(f"ina.ps: {e}", file=sys.stderr)
        return 1
    stop: list = []
    reload = ConfigReload(args.config, args.ack)
    wake, waker = socket.socketpair()
    for s in (wake, waker):
        s.setblocking(False)
    signal.set_wakeup_fd(waker.fileno())
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGHUP, lambda *_: reload.requested.append(1))
    service = PsService(sock, jobs, args.values_per_packet)
    try:
        reload.acknowledge(service)  # after the handlers: whoever reads the ack may signal at once
    except OSError as e:
        print(f"ina.ps: cannot acknowledge the config: {e}", file=sys.stderr)
        return 1
    service.serve(stop, reload, wake)
    if args.stats:
        write_json_atomic(args.stats, service.stats())
    return 0


if __name__ == "__main__":
    sys.exit(main())
