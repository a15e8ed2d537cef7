"""The worker side of INA: an allreduce over the aggregation protocol, and a PyTorch DDP hook.

:class:`InaClient` sums a vector of floats with the job's other workers: scaled to int32, cut into
packets of consecutive seqs, sent to the job's parameter server through the switches, with a window
(:class:`AimdWindow`, ATP §3.4: AIMD on ECN), loss detection (RFC 8985's RACK), retransmission
timeouts (RFC 6298) and resends; the result is the PS's exact sum. :func:`ddp_hook` wraps a client
as a DistributedDataParallel communication hook.

The window, losses and resends, and the result's error bound: ``docs/ina-internals.md`` (The worker
client) and ``docs/ina.md`` (The worker's window, losses and ECN).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import select
import socket
import time
from collections.abc import Sequence

import numpy as np

from ina.protocol import (
    HEADER_BYTES,
    INA_UDP_PORT,
    INT32_MAX,
    INT32_MIN,
    TOS_SPACE,
    VALUE_BYTES,
    VALUES_PER_PACKET,
    WIRE_VALUES,
    Flag,
    InaError,
    MalformedPacket,
    ce_of,
    check_values_per_packet,
    data_header,
    decode_header,
    ecn_capable,
    from_fixed,
    to_fixed,
    values_bytes,
    worker_port,
)

MIN_RTO_S = 0.2
"""As Linux TCP's. Losses are mostly found by RACK (:meth:`InaClient._lost`) before the timeout,
and the timer restarts with every result, so seqs that are only queued (an emulated port's queue
holds tens to hundreds of milliseconds at scaled rates) are not resent while results flow."""
MAX_RTO_S = 2.0
REORDER_RESET = 16
"""Loss recoveries without a spurious resend after which RACK's reordering window is back at its
smallest (RFC 8985 6.2)."""
MAX_RESENDS = 50
"""Resends of one seq before the allreduce gives up (the PS or the network is gone)."""


class AimdWindow:
    """Seqs in flight: additive increase per window of results, multiplicative decrease on ECN or loss.

    After an idle time (no allreduce for longer than the retransmission timeout: a job's compute
    phase), the window restarts from ``initial`` and grows by one seq per result (slow start) up
    to the threshold it remembers, three quarters of the window it had (:meth:`restart`, TCP's
    restart after idle, RFC 5681 §4.1 and RFC 2861): a worker does not send a whole grown window
    at once into queues that drained while it computed, which would hold its first results
    longer than its timeout estimate and time them out.

    Args:
        initial: starting window (packets).
        maximum: the window never grows beyond this.
    """

    def __init__(self, initial: int = 16, maximum: int = 256):
        if not 1 <= initial <= maximum:
            raise InaError(f"window {initial}..{maximum}: need 1 <= initial <= maximum")
        self.cwnd = float(initial)
        self.initial, self.maximum = initial, maximum
        self.ssthresh = float(initial)  # below it the window grows by one per result
        self._recover = -1  # no decrease again until results of seqs sent after the last one

    def restart(self) -> None:
        """The worker was idle longer than its timeout: remember 3/4 of the window, start again
        from the initial one (see the class docstring)."""
        self.ssthresh = max(self.ssthresh, 0.75 * self.cwnd)
        self.cwnd = min(self.cwnd, float(self.initial))

    @property
    def size(self) -> int:
        """Seqs that may be in flight now (at least 1)."""
        return max(1, int(self.cwnd))

    def on_result(self, seq: int, ecn: bool, next_seq: int) -> None:
        """A result of ``seq`` arrived; ``next_seq`` is the next seq to be sent."""
        if ecn:
            self._decrease(seq, next_seq)
        else:
            step = 1.0 if self.cwnd < self.ssthresh else 1.0 / self.cwnd
            self.cwnd = min(float(self.maximum), self.cwnd + step)

    def on_loss(self, seq: int, next_seq: int) -> None:
        """``seq`` timed out."""
        self._decrease(seq, next_seq)

    def _decrease(self, seq: int, next_seq: int) -> None:
        if seq > self._recover:
            self.cwnd = self.ssthresh = max(1.0, self.cwnd / 2)
            self._recover = next_seq - 1


class RtoEstimator:
    """RFC 6298's retransmission timeout from round-trip samples, within [MIN_RTO_S, MAX_RTO_S],
    1 s before the first sample (RFC 6298 2.1: a job's workers start a moment apart, and a worker's
    first seqs wait for the last one's).

    One difference, for a datagram protocol whose window already does congestion control
    (:class:`AimdWindow`): the doubling of a timeout (:meth:`backoff`) lasts until the next result
    of any seq (:meth:`progress`), not until the next round-trip sample; otherwise a hole, which
    stops the window from sliding, would be waited on for up to :data:`MAX_RTO_S` per resend.
    """

    def __init__(self, initial_s: float = 1.0):
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.rto = self._computed = initial_s

    def sample(self, rtt_s: float) -> None:
        """One round-trip time of a seq sent once (Karn: never a resent one's)."""
        if self.srtt is None:
            self.srtt, self.rttvar = rtt_s, rtt_s / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt_s)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt_s
        self.rto = self._computed = min(MAX_RTO_S, max(MIN_RTO_S, self.srtt + 4 * self.rttvar))

    def backoff(self) -> None:
        """A timeout: double the timeout (RFC 6298 5.5)."""
        self.rto = min(MAX_RTO_S, self.rto * 2)

    def progress(self) -> None:
        """A result arrived: the path works, so the timeout is the estimator's again."""
        self.rto = self._computed


@dataclasses.dataclass
class ClientStats:
    """What a client did (packets unless said otherwise)."""

    sent: int = 0
    """Data packets sent, resends included."""
    resent: int = 0
    """Of which resends (timeouts and resend requests)."""
    timeouts: int = 0
    fast_resends: int = 0
    """Resends of seqs taken for lost before the timeout (a seq sent later had its result: RACK)."""
    resend_requests: int = 0
    results: int = 0
    """Seqs completed."""
    ecn_results: int = 0
    """Results carrying ECN."""
    overflow_results: int = 0
    """Results whose sum did not fit int32 in some lane."""
    saturated_lanes: int = 0
    """Lanes saturated: by the worker's own scaling or in the PS's sum."""
    ignored: int = 0
    """Datagrams that were not a result of this allreduce (malformed, another job, stale seqs)."""
    foreign: int = 0
    """Datagrams not from the PS's address and port: ignored unread (nobody else may answer)."""
    spurious_timeouts: int = 0
    """Timeouts whose seq's result came sooner after the resend than any round trip measured:
    the result of the first send, which was only late (a lower bound: RFC 4015's detection by
    timing, without timestamps)."""
    spurious_fast_resends: int = 0
    """Resends taken for lost by RACK whose result came sooner after the resend than any round
    trip (a lower bound, as ``spurious_timeouts``); each widens the reordering window."""
    rtt_min_s: float = 0.0
    rtt_max_s: float = 0.0
    """The shortest and longest round trip measured (seqs sent once)."""


class InaClient:
    """One worker's INA endpoint (see ``docs/ina-internals.md``).

    Args:
        job_id: the job.
        bit: this worker's bit in the job's tree (:class:`ina.aggregator.JobTree`).
        ps_address: the PS machine's IP.
        scale: fixed-point scale (int32 = round(float * scale)).
        bind: local IP to receive results on (port :func:`ina.protocol.worker_port`).
        window: the sending window (default: 16 growing to 256).
        ps_port: the PS's UDP port.
        values_per_packet: int32 lanes per packet, as every switch and the PS of the job expect.
    """

    def __init__(self, job_id: int, bit: int, ps_address: str, scale: float, bind: str = "0.0.0.0",
                 window: AimdWindow | None = None, ps_port: int = INA_UDP_PORT,
                 values_per_packet: int = VALUES_PER_PACKET):
        self.job_id, self.bit, self.scale = job_id, bit, scale
        self.lanes = check_values_per_packet(values_per_packet)
        self.ps = (ps_address, ps_port)
        self.window = window or AimdWindow()
        self.rto = RtoEstimator()
        self.stats = ClientStats()
        self.next_seq = 0
        self.last_s = -math.inf  # when the last allreduce ended
        self.reorder_mult = 1  # RACK's reordering window, in quarters of the shortest round trip
        self._recoveries = 0  # loss recoveries since the multiplier last changed
        self.sock = ecn_capable(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind((bind, worker_port(job_id)))

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    def __enter__(self) -> InaClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def allreduce(self, values: Sequence[float]) -> list[float]:
        """The sum over the job's workers of ``values`` (same length at every worker).

        Raises:
            InaError: a NaN value, or a seq resent :data:`MAX_RESENDS` times without a result.
        """
        fixed = to_fixed(values, self.scale)
        self.stats.saturated_lanes += len(fixed.saturated)
        return from_fixed(self.allreduce_ints(fixed.values), self.scale)

    def allreduce_ints(self, ints: Sequence[int]) -> list[int]:
        """The exact int sums (int32 each) of ``ints`` over the job's workers; see :meth:`allreduce`."""
        return self.allreduce_stream([ints])[0][0]

    def allreduce_stream(self, vectors: Sequence[Sequence[int]]) -> list[tuple[list[int], float]]:
        """The exact int sums of several vectors, sent as one stream: the vectors' packets take
        consecutive seqs (each vector's last packet padded), and the window slides over all of
        them, so a vector's packets go while the last results of the one before are still on their
        way (as SwitchML's and ATP's workers stream tensor after tensor through their slots); every
        worker of the job streams the same vectors' lengths in the same order. Returns, per vector,
        its sums and the ``time.monotonic()`` at which its last result arrived.

        Raises:
            InaError: a seq resent :data:`MAX_RESENDS` times without a result.
        """
        if time.monotonic() - self.last_s > self.rto.rto:
            self.window.restart()
        lanes = self.lanes
        counts = [math.ceil(len(v) / lanes) for v in vectors]
        padded = np.zeros(sum(counts) * lanes, np.int64)
        for v, start in zip(vectors, itertools.accumulate([0, *counts]), strict=False):
            arr = np.asarray(v)
            if arr.size and arr.dtype.kind not in "iu":
                raise InaError(f"INA job {self.job_id}: values to sum must be integers, not {arr.dtype}")
            padded[start * lanes:start * lanes + len(v)] = arr
        st = _Stream(self.next_seq, sum(counts), values_bytes(padded), lanes * VALUE_BYTES)
        self.next_seq += st.n
        n = st.n
        ends = list(itertools.accumulate(counts))  # offset one past each vector's last seq
        finished = [0.0] * len(vectors)
        vec = 0  # the first vector not yet complete
        out = st.out
        nxt, done, lo = 0, 0, 0  # lo: the oldest seq (offset) without a result
        while done < n:
            now = time.monotonic()
            while lo < nxt and out[lo] is not None:
                lo += 1
            while vec < len(vectors) and lo >= ends[vec]:
                finished[vec] = now
                vec += 1
            # The window is a range from the oldest unanswered seq, as TCP's: a worker never runs
            # more than a window ahead of a seq it still needs, so the PS, which keeps the last
            # ina.ps.KEEP_SEQS results to answer resends, still holds that seq's result.
            while nxt < n and nxt - lo < self.window.size:
                seq = st.base + nxt
                self._send(seq, st.payload(nxt), 0)
                st.sent_at[seq] = st.flight[seq] = now
                nxt += 1
            st.next_seq = st.base + nxt
            lost, next_loss = self._lost(st, now)
            if lost:
                self.window.on_loss(lost[0], st.next_seq)
                self._recoveries += 1
                if self._recoveries >= REORDER_RESET:
                    self.reorder_mult, self._recoveries = 1, 0
                for seq in lost:
                    self.stats.fast_resends += 1
                    self._resend(st, seq)
                    st.fast_resent[seq] = time.monotonic()
                continue
            timeout = self._timeout_at(st)
            if select.select([self.sock], [], [], max(0.0, min(timeout, next_loss) - now))[0]:
                done += self._drain(st)
                continue
            now = time.monotonic()
            if now < self._timeout_at(st):
                continue
            # Nothing came for a timeout: every seq sent a timeout ago or more goes again, the
            # window halves and the timeout doubles (RFC 6298 5.4-5.6, once per expiry).
            expired = [seq for seq, t in st.flight.items() if t + self.rto.rto <= now]
            self.window.on_loss(expired[0], st.next_seq)
            self.rto.backoff()
            for seq in expired:
                self.stats.timeouts += 1
                self._resend(st, seq)
                st.timed_out[seq] = time.monotonic()
        now = self.last_s = time.monotonic()
        for i in range(vec, len(vectors)):
            finished[i] = now
        results, start = [], 0
        for v, end, t in zip(vectors, ends, finished, strict=True):
            results.append((np.frombuffer(b"".join(out[start:end]), WIRE_VALUES, len(v)).tolist(), t))
            start = end
        return results

    def _lost(self, st: _Stream, now: float) -> tuple[list[int], float]:
        """The seqs in flight taken for lost, and when the next one would be (RFC 8985's RACK):
        a seq is lost once a seq sent after it has its result and a round trip (the latest
        result's) and a reordering window have passed since it was sent. It finds holes while
        results flow, one or many, resends lost again included, without waiting for a timeout.
        The window is RFC 8985's: a quarter of the shortest round trip times
        :attr:`reorder_mult`, at most the smoothed round trip; the multiplier grows by one with
        each resend found spurious (its seq's result came sooner after the resend than any round
        trip: the first send's, only late) and is back at 1 after 16 recoveries without one.

        Only seqs sent once move RACK's clock: a seq's result comes once every worker's packet of
        it has reached the aggregator, and every worker sends its seqs in order, so a result of a
        seq this worker sent once and later than another means that the other's packets arrived
        too (or were lost). A resent seq's result says nothing of the kind: it may answer the
        first send, or complete on another worker's packet sent much later."""
        if not st.flight or st.rack_rtt is None:
            return [], math.inf
        reorder = min(self.reorder_mult * self.stats.rtt_min_s / 4, self.rto.srtt or math.inf)
        horizon = st.rack_rtt + reorder
        lost = []
        for seq, t in st.flight.items():
            if t >= st.rack_sent:
                break
            if now < t + horizon:
                return lost, t + horizon
            lost.append(seq)
        return lost, math.inf

    def _timeout_at(self, st: _Stream) -> float:
        """When the retransmission timer expires: a timeout after the oldest send in flight and
        after the last result of any seq, so that a timer is restarted by every result (RFC 6298
        5.3): while results flow, seqs only queued behind the window are not resent."""
        if not st.flight:
            return math.inf
        return max(next(iter(st.flight.values())), st.last_result) + self.rto.rto

    def _send(self, seq: int, payload: bytes, flags: int) -> None:
        """Send ``seq`` with its values' wire bytes ``payload``."""
        self.sock.sendto(data_header(self.job_id, seq, 1 << self.bit, self.lanes, flags=flags) + payload, self.ps)
        self.stats.sent += 1

    def _resend(self, st: _Stream, seq: int) -> None:
        st.resends[seq] = st.resends.get(seq, 0) + 1
        if st.resends[seq] > MAX_RESENDS:
            raise InaError(f"INA job {self.job_id}: seq {seq} got no result after {MAX_RESENDS} resends "
                           f"(PS {self.ps[0]}:{self.ps[1]})")
        self._send(seq, st.payload(seq - st.base), Flag.RESEND)
        self.stats.resent += 1
        st.sent_at.pop(seq, None)  # Karn: no RTT sample from a resent seq
        st.flight.pop(seq, None)
        st.flight[seq] = time.monotonic()  # last in send order

    def _drain(self, st: _Stream) -> int:
        """Handle every datagram waiting (at least one is: ``select`` said so), a window's worth at
        most, without a ``select`` per datagram; the number of seqs they completed."""
        done = 0
        for i in range(self.window.size):
            try:
                data, ancdata, _, addr = self.sock.recvmsg(65535, TOS_SPACE, socket.MSG_DONTWAIT if i else 0)
            except BlockingIOError:
                break
            done += self._receive(st, data, ancdata, addr) >= 0
        return done

    def _receive(self, st: _Stream, data: bytes, ancdata, addr) -> int:
        """Handle one datagram; the offset of the seq it completed, or -1."""
        if addr != self.ps:
            self.stats.foreign += 1
            return -1
        try:
            h = decode_header(data, self.lanes)
        except MalformedPacket:
            self.stats.ignored += 1
            return -1
        k = h.seq - st.base
        if not h.flags & Flag.RESULT or h.job_id != self.job_id or not 0 <= k < st.n or st.out[k] is not None:
            self.stats.ignored += 1
            return -1
        if h.flags & Flag.RESEND:  # the PS asks for exact values: a switch sum overflowed
            self.stats.resend_requests += 1
            self._resend(st, h.seq)
            return -1
        now = time.monotonic()
        st.flight.pop(h.seq, None)
        if h.seq in st.sent_at:
            sent = st.sent_at.pop(h.seq)
            rtt = now - sent
            self.rto.sample(rtt)
            self.stats.rtt_min_s = min(self.stats.rtt_min_s or rtt, rtt)
            self.stats.rtt_max_s = max(self.stats.rtt_max_s, rtt)
            if sent >= st.rack_sent:
                st.rack_sent, st.rack_rtt = sent, rtt
        elif h.seq in st.timed_out and now - st.timed_out[h.seq] < self.stats.rtt_min_s:
            self.stats.spurious_timeouts += 1
        elif h.seq in st.fast_resent and now - st.fast_resent[h.seq] < self.stats.rtt_min_s:
            self.stats.spurious_fast_resends += 1
            self.reorder_mult, self._recoveries = self.reorder_mult + 1, 0
        self.rto.progress()
        st.last_result = now
        st.out[k] = data[HEADER_BYTES:]
        ecn = bool(h.flags & Flag.ECN) or ce_of(ancdata)  # marked on the way there, or back
        self.stats.results += 1
        self.stats.ecn_results += ecn
        if h.flags & Flag.OVERFLOW:
            self.stats.overflow_results += 1
            values = np.frombuffer(data, WIRE_VALUES, h.count, HEADER_BYTES)
            self.stats.saturated_lanes += int(np.count_nonzero((values == INT32_MIN) | (values == INT32_MAX)))
        self.window.on_result(h.seq, ecn, st.next_seq)
        return k


@dataclasses.dataclass
class _Stream:
    """One :meth:`InaClient.allreduce_stream`'s seqs: ``n`` from ``base``, their values on the wire
    (``wire``: ``packet_bytes`` per seq, encoded once), the results' value bytes so far (``out``, by
    offset), and per seq in flight
    its first send time (``sent_at``, seqs sent once: Karn), its last (``flight``), its resends,
    and when a timeout or RACK last resent it (``timed_out``, ``fast_resent``)."""

    base: int
    n: int
    wire: bytes
    packet_bytes: int
    out: list[bytes | None] = dataclasses.field(init=False)
    sent_at: dict[int, float] = dataclasses.field(default_factory=dict)
    flight: dict[int, float] = dataclasses.field(default_factory=dict)
    """Seqs without a result, by their last send time, in the order sent (a resend goes last)."""
    resends: dict[int, int] = dataclasses.field(default_factory=dict)
    timed_out: dict[int, float] = dataclasses.field(default_factory=dict)
    fast_resent: dict[int, float] = dataclasses.field(default_factory=dict)
    next_seq: int = dataclasses.field(init=False)
    """The next seq to be sent."""
    last_result: float = -math.inf
    """When the last result of this stream arrived."""
    rack_sent: float = -math.inf
    rack_rtt: float | None = None
    """The latest send time of a seq with a result, and its round trip (RFC 8985's RACK.xmit_ts
    and RACK.rtt)."""

    def __post_init__(self):
        self.out = [None] * self.n
        self.next_seq = self.base

    def payload(self, k: int) -> bytes:
        """The values' bytes of the seq at offset ``k``."""
        return self.wire[k * self.packet_bytes:(k + 1) * self.packet_bytes]


def ddp_hook(client: InaClient, world_size: int):
    """A DDP communication hook summing each gradient bucket over INA and averaging it.

    Use: ``model.register_comm_hook(None, ddp_hook(client, world_size))`` (the state argument
    is unused). The bucket's float32 gradients go through :meth:`InaClient.allreduce`.
    """
    import torch

    def hook(_state, bucket):
        grad = bucket.buffer()
        summed = client.allreduce(grad.detach().cpu().flatten().tolist())
        grad.copy_(torch.tensor(summed, dtype=grad.dtype).view_as(grad) / world_size)
        fut = torch.futures.Future()
        fut.set_result(grad)
        return fut

    return hook


def demo_values(seed: int, bit: int, n: int, round_: int) -> list[float]:
    """The values worker ``bit`` sums in round ``round_`` of :func:`main` (uniform in [-10, 10]),
    so that whoever checks the sums can compute them."""
    import random

    rnd = random.Random(f"{seed}/{bit}/{round_}")
    return [rnd.uniform(-10.0, 10.0) for _ in range(n)]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ina.client``: ``--rounds`` allreduces of ``--values`` floats (:func:`demo_values`)
    as worker ``--bit`` of ``--job``; writes the sums and the counters as JSON to ``--out``.
    One line on stderr and exit 1 on failure."""
    import argparse
    import json
    import sys

    ap = argparse.ArgumentParser(description="an INA worker: allreduce demo values through the fabric")
    ap.add_argument("--job", type=int, required=True)
    ap.add_argument("--bit", type=int, required=True)
    ap.add_argument("--ps", required=True, help="the PS machine's IP")
    ap.add_argument("--bind", default="0.0.0.0")
    ap.add_argument("--values", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1e4)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    try:
        with InaClient(args.job, args.bit, args.ps, args.scale, bind=args.bind) as client:
            t0 = time.monotonic()
            sums = [client.allreduce(demo_values(args.seed, args.bit, args.values, r)) for r in range(args.rounds)]
            elapsed = time.monotonic() - t0
    except (InaError, OSError) as e:
        print(f"ina.client: job {args.job} bit {args.bit}: {e}", file=sys.stderr)
        return 1
    with open(args.out, "w") as f:
        json.dump({"sums": sums, "elapsed_s": elapsed, "stats": dataclasses.asdict(client.stats),
                   "window": client.window.cwnd}, f)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
