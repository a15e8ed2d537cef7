"""The parameter server as a process: :class:`ina.engine.ParameterServer` behind a UDP socket.

One PS process per machine serves every job whose PS is on it, on UDP port
:data:`~ina.protocol.INA_UDP_PORT`. It finishes each seq from whatever reaches it (the root
switch's aggregates, fall-backs, resends, or every worker's own packet where no switch
aggregates) and sends the result, from its port, to every worker of the job at the worker's
address (:func:`~ina.protocol.worker_port` of the job on the worker's machine). The IP header's
ECN field of each datagram is read (``IP_RECVTOS``) and OR-ed into the seq's result, as a switch
does with a CE mark.

A job's completed seqs are kept to answer resends; the oldest are forgotten beyond
:data:`KEEP_SEQS` per job (a packet of a forgotten seq is dropped as ``late``). A worker's
window is a range of seqs much smaller than that (:class:`ina.client.AimdWindow`), so no worker
still needs a forgotten result.

Run as ``python -m ina.ps --config ps.json [--stats stats.json] [--bind ADDR]``, the config
``{"jobs": [{"job_id": 1, "root_workers": [0, 1], "leaves": [[2, [3, 4]]],
"workers": {"0": "10.0.0.1", ...}}]}`` (worker bit -> machine IP; a :class:`ina.engine.JobTree`
plus addresses). On SIGTERM it writes its counters to ``--stats`` and exits 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import select
import signal
import socket
import sys
from collections.abc import Mapping, Sequence

from common.errors import TestbedError
from ina.engine import Dest, JobTree, LeafGroup, ParameterServer
from ina.protocol import INA_UDP_PORT, InaError, worker_port

KEEP_SEQS = 4096
"""Completed seqs kept per job to answer resends (at least; up to :data:`FORGET_EVERY` more)."""
FORGET_EVERY = 512
"""Older seqs are forgotten once per this many seqs."""
_TOS_SPACE = socket.CMSG_SPACE(1)


@dataclasses.dataclass(frozen=True)
class PsJob:
    """A job the PS serves: its aggregation tree and each worker bit's machine address."""

    tree: JobTree
    workers: Mapping[int, str]

    def addresses(self) -> list[tuple[str, int]]:
        """Where the job's results go: every worker machine, at the job's worker port."""
        port = worker_port(self.tree.job_id)
        return [(ip, port) for _, ip in sorted(self.workers.items())]

    def to_dict(self) -> dict:
        """JSON form (an entry of the config's ``jobs``)."""
        t = self.tree
        return {"job_id": t.job_id, "root_workers": list(t.root_workers),
                "leaves": [[leaf.bit, list(leaf.workers)] for leaf in t.leaves],
                "workers": {str(b): ip for b, ip in sorted(self.workers.items())}}

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
        except (KeyError, TypeError, ValueError) as e:
            raise InaError(f"PS job entry {d!r}: {e}") from None
        bits = [*tree.root_workers, *(b for leaf in tree.leaves for b in leaf.workers)]
        missing = sorted(set(bits) - set(workers))
        if missing:
            raise InaError(f"PS job {tree.job_id}: worker bits {missing} have no address")
        return cls(tree, workers)


class PsService:
    """The PS behind ``sock`` (bound by the caller); :meth:`serve` until stopped."""

    def __init__(self, sock: socket.socket, jobs: Sequence[PsJob]):
        self.sock = sock
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
        self.engine = ParameterServer()
        self.jobs = {j.tree.job_id: j for j in jobs}
        for j in jobs:
            self.engine.install(j.tree)
        self.sent = 0

    def handle(self, data: bytes, ecn_ce: bool = False) -> None:
        """One datagram: run the PS rules, send what they emit to the job's workers."""
        for out in self.engine.process(data, ecn_ce):
            if out.dest is not Dest.TO_WORKERS:
                continue
            job_id = int.from_bytes(out.data[2:4], "big")
            for addr in self.jobs[job_id].addresses():
                self.sock.sendto(out.data, addr)
                self.sent += 1
            seq = int.from_bytes(out.data[4:8], "big")
            if seq >= KEEP_SEQS and seq % FORGET_EVERY == 0:  # amortised: forget scans the tables
                self.engine.forget(job_id, below_seq=seq - KEEP_SEQS + 1)

    def receive(self) -> None:
        """Handle one datagram waiting on the socket."""
        data, ancdata, _, _ = self.sock.recvmsg(65535, _TOS_SPACE)
        tos = next((c[2][0] for c in ancdata if c[0] == socket.IPPROTO_IP and c[1] == socket.IP_TOS and c[2]), 0)
        self.handle(data, tos & 3 == 3)

    def serve(self, stop: list) -> None:
        """Receive until ``stop`` is non-empty (checked at least every half second)."""
        while not stop:
            try:
                if select.select([self.sock], [], [], 0.5)[0]:
                    self.receive()
            except InterruptedError:
                continue

    def stats(self) -> dict:
        """The engine's counters and the results sent (one per worker per completed seq)."""
        return {**self.engine.stats.to_dict(), "datagrams_sent": self.sent}


def load_jobs(path: str) -> list[PsJob]:
    """The jobs of a PS config file (see the module docstring).

    Raises:
        InaError: unreadable or malformed.
    """
    try:
        with open(path) as f:
            d = json.load(f)
        return [PsJob.from_dict(j) for j in d["jobs"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InaError(f"PS config {path}: {e}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ina.ps``: serve until SIGTERM, then write the counters."""
    ap = argparse.ArgumentParser(description="the INA parameter server")
    ap.add_argument("--config", required=True)
    ap.add_argument("--stats")
    ap.add_argument("--bind", default="0.0.0.0")
    args = ap.parse_args(argv)
    try:
        jobs = load_jobs(args.config)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((args.bind, INA_UDP_PORT))
    except (TestbedError, OSError) as e:
        print(f"ina.ps: {e}", file=sys.stderr)
        return 1
    stop: list = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    service = PsService(sock, jobs)
    service.serve(stop)
    if args.stats:
        with open(args.stats, "w") as f:
            json.dump(service.stats(), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
