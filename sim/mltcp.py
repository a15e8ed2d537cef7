"""MLTCP at the fluid level: training jobs sharing one bottleneck link, each sending faster the further it
is through its iteration's bytes (``docs/resolutions.md`` Cassini §6.1-§6.4, route (a) of §6.4 item 5).

While several jobs send, the link is shared in proportion to ``F(b_k) ** gamma``, ``b_k`` the
fraction of its iteration's bytes job k has sent and ``F(b) = slope * b + intercept``, optionally
capped (:class:`MltcpParams`; fair sharing is ``slope = 0``). :func:`simulate` solves that model
exactly, with no time step; :func:`shift_ms` and :func:`shift_iterations_to_interleave` are the
§6.2 shift equation, a second, independent model. :class:`MltcpFlows` and :class:`MltcpLedger`
give the step-level engine its flows' weights.

The exact solution, the resolutions ([R]) and the cost: ``docs/simulator-engines.md`` (MLTCP's fluid
model on one link). Pure: standard library and ``common`` only; deterministic.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from common.errors import ConfigError
from common.units import BITS_PER_BYTE, MEGA


@dataclasses.dataclass(frozen=True)
class MltcpParams:
    """How MLTCP scales a flow's share with its progress (spec §6.1, §6.2, §6.4 item 4).

    Attributes:
        slope: S of ``F(b) = S * b + I``, >= 0; 0 is fair sharing.
        intercept: I, > 0, so that a flow starting its iteration is never starved.
        gamma: shares are proportional to ``F ** gamma``, > 0 (1: synchronised-loss AIMD).
        cap: upper bound of F, >= ``intercept``; None for no bound.
    """

    slope: float
    intercept: float
    gamma: float = 1.0
    cap: float | None = None

    def __post_init__(self):
        for name in ("slope", "intercept", "gamma"):
            if not math.isfinite(getattr(self, name)):
                raise ConfigError(f"MLTCP {name} must be finite, got {getattr(self, name)!r}")
        if self.intercept <= 0:
            raise ConfigError(f"MLTCP intercept must be > 0 (a flow starting its iteration would starve; "
                              f"spec §6.4 item 4), got {self.intercept!r}")
        if self.slope < 0:
            raise ConfigError(f"MLTCP slope must be >= 0 (F is increasing; 0 is fair sharing), got {self.slope!r}")
        if self.gamma <= 0:
            raise ConfigError(f"MLTCP gamma must be > 0, got {self.gamma!r}")
        if self.cap is not None and not self.intercept <= self.cap < math.inf:
            raise ConfigError(f"MLTCP cap must be finite and >= intercept {self.intercept!r}, got {self.cap!r}")

    @classmethod
    def fair(cls) -> MltcpParams:
        """Fair sharing: every sender weighs the same (slope 0)."""
        return cls(slope=0.0, intercept=1.0)

    def factor(self, bytes_ratio: float) -> float:
        """F(bytes_ratio) of spec §6.1: ``slope * min(1, bytes_ratio) + intercept``, at most ``cap``."""
        f = self.slope * min(1.0, bytes_ratio) + self.intercept
        return f if self.cap is None else min(f, self.cap)

    def weight(self, bytes_ratio: float) -> float:
        """A sender's share weight on the bottleneck, ``F(bytes_ratio) ** gamma``."""
        return self.factor(bytes_ratio) ** self.gamma


@dataclasses.dataclass(frozen=True)
class MltcpFlows:
    """MLTCP as the step-level engine applies it to every flow of a routed fabric (:mod:`sim.flowsim`),
    the emulator's per-flow accounting (``emulator/bpf/mltcp_common.h``) on weighted max-min shares.

    Each directed connection (a job's sender rank to a receiver rank) learns its bytes per iteration
    from its last iteration, whose start is the idle-gap rule's (spec §6.4 items 1-2); a flow's share
    weight is ``params.weight(bytes_ratio)`` (route (a) of §6.4 item 5), re-evaluated whenever the
    rates change and whenever a sharing flow's ratio crosses a multiple of ``step``.

    Attributes:
        params: F and gamma.
        idle_gap_s: a connection that sends again after more than this since its last byte arrived
            starts a new iteration, seconds of the simulation's time base, > 0.
        step: resolution of the ratio between re-evaluations, in (0, 1]: a weight lags the flow's
            progress by at most ``step`` of its iteration's bytes.
    """

    params: MltcpParams
    idle_gap_s: float
    step: float = 0.01

    def __post_init__(self):
        if not (math.isfinite(self.idle_gap_s) and self.idle_gap_s > 0):
            raise ConfigError(f"MLTCP idle gap must be finite and > 0 s, got {self.idle_gap_s!r}")
        if not 0 < self.step <= 1:
            raise ConfigError(f"MLTCP re-evaluation step must be in (0, 1], got {self.step!r}")


@dataclasses.dataclass(slots=True)
class _Connection:
    """One sender's iteration accounting, as ``struct mltcp`` of the BPF program keeps it."""

    last_ack_s: float
    delivered: float = 0.0  # bytes delivered so far
    iter_start: float = 0.0  # ``delivered`` when its current iteration started
    iter_bytes: float = 0.0  # bytes of its last complete iteration (0: none yet, F = intercept)
    iterations: int = 0


class MltcpLedger:
    """Every directed connection's progress through its iteration's bytes, for :class:`MltcpFlows`.

    The emulator's rules (``emulator/bpf/mltcp_common.h``), at the level of transfers: a connection is
    known from its first transfer on (its last ACK then, as at connection set-up); a transfer entering
    the network more than ``idle_gap_s`` after the connection's last delivery starts a new iteration,
    whose bytes to come are those of the one that ended, if it carried any (learned, §6.4 item 1);
    ``bytes_ratio`` is the bytes delivered since the iteration started, the transfer in flight's
    included, over them, at most 1, and 0 before anything was learned.

    Connections are any hashable keys (the engine's ``(job run, sender, receiver)``).
    """

    def __init__(self, flows: MltcpFlows):
        self.flows = flows
        self.conns: dict = {}

    def send(self, conn, now_s: float) -> None:
        """A transfer of ``conn`` enters the network at ``now_s`` (the idle-gap rule, §6.4 item 2)."""
        c = self.conns.get(conn)
        if c is None:
            self.conns[conn] = _Connection(last_ack_s=now_s)
            return
        if now_s - c.last_ack_s > self.flows.idle_gap_s:
            if c.delivered > c.iter_start:
                c.iter_bytes = c.delivered - c.iter_start
            c.iter_start = c.delivered
            c.iterations += 1

    def deliver(self, conn, nbytes: float, now_s: float) -> None:
        """``nbytes`` of ``conn`` have all arrived at ``now_s`` (its last ACK)."""
        c = self.conns[conn]
        c.delivered += nbytes
        c.last_ack_s = now_s

    def ratio(self, conn, in_flight: float = 0.0) -> float:
        """``bytes_ratio`` of ``conn`` with ``in_flight`` bytes of its current transfer delivered."""
        c = self.conns[conn]
        if not c.iter_bytes:
            return 0.0
        return min(1.0, (c.delivered + in_flight - c.iter_start) / c.iter_bytes)

    def weight(self, conn, in_flight: float = 0.0) -> float:
        """The share weight of ``conn``'s transfer, ``F(bytes_ratio) ** gamma``."""
        return self.flows.params.weight(self.ratio(conn, in_flight))

    def bytes_to_next_step(self, conn, in_flight: float = 0.0) -> float:
        """Bytes ``conn`` delivers before its ratio next crosses a multiple of ``step`` (``math.inf``
        once it is 1, or nothing is learned: its weight changes no more in this iteration)."""
        c = self.conns[conn]
        ratio = self.ratio(conn, in_flight)
        if not c.iter_bytes or ratio >= 1.0:
            return math.inf
        step = self.flows.step
        nxt = min(1.0, (math.floor(ratio / step + 1e-9) + 1) * step)
        return max(0.0, (nxt - ratio) * c.iter_bytes)


@dataclasses.dataclass(frozen=True)
class FluidJob:
    """A job as the fluid model sees it: compute, then send, every iteration (spec §6.3).

    Attributes:
        compute_ms: computation per iteration, >= 0, during which the job sends nothing.
        comm_bytes: bytes the job sends on the bottleneck per iteration, > 0.
        offset_ms: when its first iteration starts, >= 0.
    """

    compute_ms: float
    comm_bytes: float
    offset_ms: float = 0.0

    def __post_init__(self):
        for name in ("compute_ms", "comm_bytes", "offset_ms"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"fluid job {name} must be finite and >= 0, got {value!r}")
        if self.comm_bytes == 0:
            raise ConfigError("fluid job comm_bytes must be > 0, got 0")

    @classmethod
    def from_fraction(cls, iter_ms: float, comm_fraction: float, capacity_gbps: float,
                      offset_ms: float = 0.0) -> FluidJob:
        """The job of iteration time ``iter_ms`` on a dedicated link of ``capacity_gbps`` that spends
        ``comm_fraction`` (a, in (0, 1]) of it sending at full rate: ``(1 - a) T`` compute, ``a T C`` bits."""
        if not 0 < comm_fraction <= 1:
            raise ConfigError(f"communication fraction must be in (0, 1], got {comm_fraction!r}")
        _check_capacity(capacity_gbps)
        comm_bits = comm_fraction * iter_ms * capacity_gbps * MEGA     # Gbit/s * ms = 10**6 bit
        return cls((1.0 - comm_fraction) * iter_ms, comm_bits / BITS_PER_BYTE, offset_ms)


def simulate(jobs: Sequence[FluidJob], capacity_gbps: float, params: MltcpParams,
             n_iterations: int) -> list[list[float]]:
    """Iteration durations (ms) of jobs sharing one link under MLTCP, exactly (spec §6.3, §10 ``mltcp_fluid``).

    Args:
        jobs: the jobs on the link.
        capacity_gbps: the link's capacity, > 0.
        params: how shares follow progress (:meth:`MltcpParams.fair` for fair sharing).
        n_iterations: durations wanted per job, >= 0.

    Returns:
        Per job, in input order, ``n_iterations`` durations in ms: the intervals between its consecutive
        iteration ends, from the end of its first iteration on ([R], as the reference).

    Raises:
        ConfigError: no job, a capacity <= 0 or a negative ``n_iterations``.
    """
    if not jobs:
        raise ConfigError("simulate needs at least one job")
    _check_capacity(capacity_gbps)
    if n_iterations < 0:
        raise ConfigError(f"n_iterations must be >= 0, got {n_iterations!r}")
    size_ms = [job.comm_bytes * BITS_PER_BYTE / (capacity_gbps * MEGA) for job in jobs]  # link-ms at full rate
    sent_ms: list[float | None] = [None] * len(jobs)                                     # None: computing
    compute_end_ms = [job.offset_ms + job.compute_ms for job in jobs]
    ends_ms: list[list[float]] = [[] for _ in jobs]
    now_ms = 0.0
    while min(map(len, ends_ms)) <= n_iterations:
        senders = [k for k, s in enumerate(sent_ms) if s is not None]
        next_compute_end_ms = min((compute_end_ms[k] for k, s in enumerate(sent_ms) if s is None), default=math.inf)
        if senders:
            finish_tau = [_tau_to(params, size_ms[k], sent_ms[k], size_ms[k]) for k in senders]
            tau = min(finish_tau)
            gains = [_gain(params, size_ms[k], sent_ms[k], tau) for k in senders]
            if now_ms + sum(gains) <= next_compute_end_ms:       # a transfer ends first (or at the same time)
                now_ms += sum(gains)
                for k, k_tau, gain in zip(senders, finish_tau, gains, strict=True):
                    if k_tau == tau:
                        sent_ms[k] = None
                        ends_ms[k].append(now_ms)
                        compute_end_ms[k] = now_ms + jobs[k].compute_ms
                    else:
                        sent_ms[k] = min(size_ms[k], sent_ms[k] + gain)
                continue
            tau = _tau_at(params, [size_ms[k] for k in senders], [sent_ms[k] for k in senders],
                          next_compute_end_ms - now_ms, tau)
            for k in senders:
                sent_ms[k] = min(size_ms[k], sent_ms[k] + _gain(params, size_ms[k], sent_ms[k], tau))
        now_ms = next_compute_end_ms
        for k, s in enumerate(sent_ms):
            if s is None and compute_end_ms[k] == now_ms:
                sent_ms[k] = 0.0
    return [[b - a for a, b in zip(ends[:n_iterations], ends[1:n_iterations + 1], strict=True)] for ends in ends_ms]


def iterations_to_converge(durations_ms: Sequence[Sequence[float]], ideal_ms: float | Sequence[float],
                           tol: float = 0.01, hold: int = 5) -> int | None:
    """The first index from which every job's next ``hold`` durations are within ``tol`` of ideal (spec §10).

    Args:
        durations_ms: per job, iteration durations in ms (as :func:`simulate` returns them).
        ideal_ms: iteration time on a dedicated link, one for all jobs or one per job.
        tol: relative tolerance (0.01: within 1%).
        hold: how many consecutive durations must be within tolerance, >= 1.

    Returns:
        That index, or None if no window of the shortest list qualifies ([R] its last window counts).
    """
    if hold < 1:
        raise ConfigError(f"hold must be >= 1, got {hold!r}")
    ideals = [float(ideal_ms)] * len(durations_ms) if isinstance(ideal_ms, (int, float)) else list(ideal_ms)
    if len(ideals) != len(durations_ms):
        raise ConfigError(f"{len(ideals)} ideal times for {len(durations_ms)} jobs")
    n = min(map(len, durations_ms), default=0)
    for k in range(n - hold + 1):
        if all(abs(d[m] - t) <= tol * t for d, t in zip(durations_ms, ideals, strict=True) for m in range(k, k + hold)):
            return k
    return None


def shift_ms(offset_ms: float, comm_ms: float, params: MltcpParams) -> float:
    """How much one iteration widens the offset of two identical jobs (spec §6.2's shift equation).

    Args:
        offset_ms: D, the lead of one job's communication start over the other's, >= 0.
        comm_ms: aT, the time to send one iteration's bytes at full rate, > 0.
        params: F and gamma; the share ratio is frozen at the start of the overlap.

    Returns:
        ``(aT - D) * (1 - w(0) / w(D / aT))`` ms ([R]; ``S D (aT - D) / (aT I + D S)`` for gamma = 1 and no
        cap), 0 once the transfers no longer overlap (``D >= aT``).
    """
    if not (math.isfinite(offset_ms) and offset_ms >= 0):
        raise ConfigError(f"offset_ms must be finite and >= 0, got {offset_ms!r}")
    if not (math.isfinite(comm_ms) and comm_ms > 0):
        raise ConfigError(f"comm_ms must be finite and > 0, got {comm_ms!r}")
    if offset_ms >= comm_ms:
        return 0.0
    return (comm_ms - offset_ms) * (1.0 - params.weight(0.0) / params.weight(offset_ms / comm_ms))


def shift_iterations_to_interleave(offset_ms: float, comm_ms: float, params: MltcpParams, fraction: float = 0.99,
                                   max_iterations: int = 10_000) -> int | None:
    """Iterations of the shift equation until the offset reaches ``fraction`` of aT (spec §6.3 table).

    Args:
        offset_ms: the initial offset D_0, >= 0.
        comm_ms: aT, > 0.
        params: F and gamma.
        fraction: target share of aT (0.99 in §6.3).
        max_iterations: give up after this many.

    Returns:
        The least i with ``D_i >= fraction * aT`` (0 if ``D_0`` already is), None if not within
        ``max_iterations`` (fair sharing and ``D_0 = 0`` never move).
    """
    offset = offset_ms
    for i in range(max_iterations + 1):
        if offset >= fraction * comm_ms:
            return i
        offset += shift_ms(offset, comm_ms, params)
    return None


def _check_capacity(capacity_gbps: float) -> None:
    if not (math.isfinite(capacity_gbps) and capacity_gbps > 0):
        raise ConfigError(f"link capacity must be finite and > 0 Gbps, got {capacity_gbps!r}")


# One sender's progress in virtual time tau (ds/dtau = weight(s / size)); sizes and progress in link-ms.
# F is capped from s_cap = size (cap - I) / S on, where the weight is constant.


def _cap_ms(params: MltcpParams, size_ms: float) -> float:
    if params.cap is None or params.slope == 0:
        return math.inf
    return size_ms * (params.cap - params.intercept) / params.slope


def _uncapped_gain(params: MltcpParams, size_ms: float, sent_ms: float, tau: float) -> float:
    slope, gamma = params.slope, params.gamma
    if slope == 0:
        return params.intercept ** gamma * tau
    f0 = slope * sent_ms / size_ms + params.intercept
    if gamma == 1:
        return size_ms * f0 / slope * math.expm1(slope * tau / size_ms)
    e = 1.0 - gamma
    base = f0 ** e + e * slope * tau / size_ms
    if base <= 0:                                   # gamma > 1 blows up in finite tau, beyond any transfer's end
        return math.inf
    return size_ms / slope * (base ** (1.0 / e) - f0)


def _uncapped_tau(params: MltcpParams, size_ms: float, sent_ms: float, target_ms: float) -> float:
    slope, gamma = params.slope, params.gamma
    if slope == 0:
        return (target_ms - sent_ms) / params.intercept ** gamma
    f0 = slope * sent_ms / size_ms + params.intercept
    if gamma == 1:
        return size_ms / slope * math.log1p(slope * (target_ms - sent_ms) / (size_ms * f0))
    e = 1.0 - gamma
    f1 = slope * target_ms / size_ms + params.intercept
    return size_ms * (f1 ** e - f0 ** e) / (e * slope)


def _gain(params: MltcpParams, size_ms: float, sent_ms: float, tau: float) -> float:
    """Link-ms a sender at ``sent_ms`` sends in virtual time ``tau``."""
    cap_ms = _cap_ms(params, size_ms)
    if sent_ms >= cap_ms:
        return params.cap ** params.gamma * tau
    tau_cap = _uncapped_tau(params, size_ms, sent_ms, cap_ms) if cap_ms < math.inf else math.inf
    if tau <= tau_cap:
        return _uncapped_gain(params, size_ms, sent_ms, tau)
    return cap_ms - sent_ms + params.cap ** params.gamma * (tau - tau_cap)


def _tau_to(params: MltcpParams, size_ms: float, sent_ms: float, target_ms: float) -> float:
    """Virtual time a sender at ``sent_ms`` takes to reach ``target_ms``."""
    cap_ms = _cap_ms(params, size_ms)
    if sent_ms >= cap_ms:
        return (target_ms - sent_ms) / params.cap ** params.gamma
    if target_ms <= cap_ms:
        return _uncapped_tau(params, size_ms, sent_ms, target_ms)
    return (_uncapped_tau(params, size_ms, sent_ms, cap_ms)
            + (target_ms - cap_ms) / params.cap ** params.gamma)


def _tau_at(params: MltcpParams, sizes_ms: list[float], sent_ms: list[float], busy_ms: float,
            tau_hi: float) -> float:
    """The virtual time at which the senders together have sent ``busy_ms`` (<= what they send by ``tau_hi``).

    Their total is convex and increasing in tau, so Newton from ``tau_hi`` descends monotonically onto the
    root; the bracket guards against rounding.
    """
    if busy_ms <= 0:
        return 0.0
    lo, hi, tau = 0.0, tau_hi, tau_hi
    for _ in range(200):
        gains = [_gain(params, size, s, tau) for size, s in zip(sizes_ms, sent_ms, strict=True)]
        excess = sum(gains) - busy_ms
        if excess == 0:
            return tau
        if excess > 0:
            hi = tau
        else:
            lo = tau
        rate = sum(params.weight((s + g) / size) for size, s, g in zip(sizes_ms, sent_ms, gains, strict=True))
        nxt = tau - excess / rate
        if abs(nxt - tau) <= 1e-14 * tau_hi:        # at the resolution of the sum's rounding
            return min(max(nxt, lo), hi)
        tau = nxt if lo < nxt < hi else 0.5 * (lo + hi)
    raise ArithmeticError(f"virtual time for {busy_ms!r} ms of sending did not converge in [{lo!r}, {hi!r}]")
