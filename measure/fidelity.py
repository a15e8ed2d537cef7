"""Fidelity monitor: can a run's timings be trusted as a network measurement?

In the spirit of Mininet-HiFi, a run is checked three ways: the CPU (whole machine and busiest
switch-datapath thread, :mod:`emulator.cpu`), each switch port's rate (``virtual-queue`` where the
BPF ECN marker runs, else ``busy-rate``) and each job that had its links to itself against its
contention-free bound (:func:`job_verdicts`, :func:`jobs.steps.job_bound_s`). A run failing a check
is flagged untrustworthy, with the reasons; a saturated CPU flags it only when no job could be
checked.

Each check, its thresholds (the constants below) and the verdicts: ``docs/fidelity.md`` (The
fidelity monitor).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from common.units import MEGA, TCP_IP_HEADER_BYTES
from ina.protocol import VALUES_PER_PACKET
from jobs.collective import collective_of
from jobs.steps import job_bound_s, job_collisions, job_links, largest_transfer_bytes
from measure.cpu import CpuSummary
from measure.shaping import burst_bytes, frame_bytes
from sim.ina import InaSpec, ina_routes, rate_alone, stream_bytes, streams
from topo.routing import ecmp_path, path_links

MIN_RATE_RATIO = 0.9
MIN_BUSY_S = 1.0
MIN_STRETCH_SAMPLES = 3
MIN_BACKLOG_PACKETS = 4

MAX_LAG_S = 0.1
"""Most a port may fall behind an ideal port of its rate, in seconds of its own transmission
time (wall clock): the deficit of a port running 10% below its rate for a whole second."""
LAG_SLACK_FRAMES = 2
"""Lag allowed for packet granularity: the shaper sends whole frames, the virtual queue drains
as a fluid, and the FIFO under the shaper may hold the frame being dequeued."""
LINK_CHECKS = ("virtual-queue", "busy-rate")

MAX_JOB_RATIO = 1.10
"""An uncontended job measured more than 10% above its contention-free bound was slowed by the
emulator (CPU, shaper timers), not by the network it models."""
LATENCY_BOUND_FRAMES = 10
"""A job none of whose cross-machine transfers fills this many full-size packets (14 480 bytes of
payload at MTU 1500) is latency-bound at its scale: its time is per-message software latency
(about a millisecond of wall time per step through the emulated path) and, after an idle spell,
the shaper's two-frame bucket (:func:`measure.shaping.burst_bytes`) passing a frame or two at
once, more than bytes over link rates. Measured at dilation 3: a 3-rank halving-doubling of the
small CNN's buckets (transfers of 5-530 bytes) took 0.72-0.82 of its bound; at dilation 4 a ring
of 8 of the same took 2.9 times. Such a job is not checked; its times are not a network
measurement."""
MIN_JOB_RATIO = 0.95
"""An uncontended job measured more than 5% below its contention-free bound ran faster than its
links allow: the bound (placement, routing, rates, traffic pattern) or the measurement is wrong."""

JOB_STATUSES = ("ok", "slow", "fast", "contended", "collides", "latency-bound", "local", "incomplete")
"""Every :attr:`JobVerdict.status`; the first three are the jobs checked against their bound."""
CHECKED_STATUSES = frozenset({"ok", "slow", "fast"})
FAILED_STATUSES = frozenset({"slow", "fast"})


def _inside(t: float, windows) -> bool:
    return windows is None or any(a <= t <= b for a, b in windows)


def saturated_stretches(rows: list[dict], min_backlog_bytes: float, windows=None) -> list[tuple[dict, dict]]:
    """``(first, last)`` sample of every run of at least ``MIN_STRETCH_SAMPLES`` consecutive
    samples (inside the windows) with a backlog of at least ``min_backlog_bytes``."""
    out, run = [], []
    for r in [*rows, None]:
        if r is not None and _inside(r["t"], windows) and (r.get("backlog_bytes") or 0) >= min_backlog_bytes:
            run.append(r)
            continue
        if len(run) >= MIN_STRETCH_SAMPLES:
            out.append((run[0], run[-1]))
        run = []
    return out


@dataclass(frozen=True)
class LinkCheck:
    """One port's link-rate check (:func:`link_checks`): which ``check`` ran, whether it passed
    (``ok``), and ``limit_ratio`` (above 1 fails), with the check's own evidence.

    ``virtual-queue`` (:func:`port_lags`) fills ``samples``, ``max_lag_bytes``, ``excess_bytes``,
    ``excess_s`` and ``limit_bytes``; ``busy-rate`` (:func:`busy_rates`) fills ``busy_s``,
    ``achieved_mbps`` and ``ratio``. The other check's fields are None and left out of the JSON.
    """

    link: str
    check: str
    ok: bool
    limit_ratio: float
    rate_mbps: float
    samples: int | None = None
    max_lag_bytes: float | None = None
    excess_bytes: float | None = None
    excess_s: float | None = None
    limit_bytes: float | None = None
    busy_s: float | None = None
    achieved_mbps: float | None = None
    ratio: float | None = None

    def to_dict(self) -> dict:
        """JSON form (``measurements.json``'s ``fidelity.links``): the fields this check fills."""
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict) -> LinkCheck:
        """The check :meth:`to_dict` wrote (fields it left out are None)."""
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})


def _worst_first(rows: list[LinkCheck]) -> list[LinkCheck]:
    return sorted(rows, key=lambda d: -d.limit_ratio)


def busy_rates(samples: dict[tuple[str, str], list[dict]], rates_mbps: dict[tuple[str, str], float],
               windows=None, mtu: int = 1500) -> list[LinkCheck]:
    """The ``busy-rate`` check: achieved rate of every port over the stretches its FIFO held a
    standing queue.

    Returns:
        One :class:`LinkCheck` per directed link with at least ``MIN_BUSY_S`` of saturated time
        (``busy_s``, ``achieved_mbps``, ``ratio``; ``limit_ratio`` is ``MIN_RATE_RATIO / ratio``);
        worst first.
    """
    out = []
    for link, rows in samples.items():
        busy_s, sent = 0.0, 0
        for a, b in saturated_stretches(rows, MIN_BACKLOG_PACKETS * frame_bytes(mtu), windows):
            busy_s += b["t"] - a["t"]
            sent += b["sent_bytes"] - a["sent_bytes"]
        if busy_s < MIN_BUSY_S:
            continue
        rate = _rate(rates_mbps, link)
        achieved = sent * 8 / busy_s / MEGA
        ratio = achieved / rate
        out.append(LinkCheck(_name(link), "busy-rate", ratio >= MIN_RATE_RATIO,
                             MIN_RATE_RATIO / ratio if ratio > 0 else float("inf"), rate,
                             busy_s=round(busy_s, 3), achieved_mbps=achieved, ratio=ratio))
    return _worst_first(out)


def _rate(rates_mbps: dict[tuple[str, str], float], link: tuple[str, str]) -> float:
    return rates_mbps.get(link) or rates_mbps[(link[1], link[0])]


def _name(link: tuple[str, str]) -> str:
    return f"{link[0]}->{link[1]}"


def has_virtual_queue(rows: list[dict]) -> bool:
    """Whether a port's samples carry the marker's virtual backlog beside the real one."""
    return any(r.get("vq_backlog_ns") is not None and r.get("backlog_bytes") is not None for r in rows)


def lag_bytes(row: dict, rate_mbps: float, mtu: int) -> float:
    """Bytes the real port is behind an ideal port of ``rate_mbps`` fed the same packets, at one
    sample: real FIFO backlog minus the virtual queue's FIFO part (its backlog beyond the
    shaper's token bucket, :func:`measure.shaping.burst_bytes`). Negative when the virtual
    backlog was read later than the real one and packets arrived in between."""
    rate_bytes = rate_mbps * MEGA / 8
    ideal = max(0.0, row["vq_backlog_ns"] * 1e-9 * rate_bytes - burst_bytes(rate_mbps, mtu))
    return row["backlog_bytes"] - ideal


def lag_tolerance_bytes(row: dict, rate_mbps: float, mtu: int) -> float:
    """Lag a port serving at its rate can show at one sample: what it sends during the read skew,
    plus ``LAG_SLACK_FRAMES`` frames."""
    return rate_mbps * MEGA / 8 * row.get("vq_read_skew_s", 0.0) + LAG_SLACK_FRAMES * frame_bytes(mtu)


def lag_limit_bytes(rate_mbps: float, mtu: int, queue_packets: int | None = None) -> float:
    """Lag beyond the tolerance at which a port is flagged: ``MAX_LAG_S`` of its rate, or half its
    FIFO (``queue_packets`` full frames) when that is smaller, since a lagging real FIFO
    overflows before it can show more."""
    limit = MAX_LAG_S * rate_mbps * MEGA / 8
    return min(limit, queue_packets * frame_bytes(mtu) / 2) if queue_packets else limit


def port_lags(samples: dict[tuple[str, str], list[dict]], rates_mbps: dict[tuple[str, str], float],
              windows=None, mtu: int = 1500, queue_packets: int | None = None) -> list[LinkCheck]:
    """The ``virtual-queue`` check of every port whose samples carry the marker's virtual backlog.

    Args:
        samples: the port sampler's rows per directed link (:func:`measure.linkstats.read_queue_samples`).
        rates_mbps: each link's emulated rate (either orientation).
        windows: ``(t0, t1)`` wall-clock intervals to check (None: every sample).
        mtu: the run's MTU.
        queue_packets: FIFO limit of each port, packets (None: no FIFO cap on the limit).

    Returns:
        One :class:`LinkCheck` per port with samples inside the windows: ``samples``,
        ``max_lag_bytes`` (largest raw lag), ``excess_bytes`` (largest lag beyond its sample's
        tolerance, 0 if none), ``excess_s`` (the same in seconds of the port's rate),
        ``limit_bytes``; ``limit_ratio`` is ``excess_bytes / limit_bytes``; worst first.
    """
    out = []
    for link, rows in samples.items():
        if not has_virtual_queue(rows):
            continue
        rate = _rate(rates_mbps, link)
        checked = [r for r in rows if _inside(r["t"], windows) and r.get("vq_backlog_ns") is not None
                   and r.get("backlog_bytes") is not None]
        if not checked:
            continue
        lags = [lag_bytes(r, rate, mtu) for r in checked]
        excess = max(0.0, max(lag - lag_tolerance_bytes(r, rate, mtu) for lag, r in zip(lags, checked, strict=True)))
        limit = lag_limit_bytes(rate, mtu, queue_packets)
        out.append(LinkCheck(_name(link), "virtual-queue", excess <= limit, excess / limit, rate,
                             samples=len(checked), max_lag_bytes=max(lags), excess_bytes=excess,
                             excess_s=excess * 8 / (rate * MEGA), limit_bytes=limit))
    return _worst_first(out)


def link_checks(samples: dict[tuple[str, str], list[dict]], rates_mbps: dict[tuple[str, str], float],
                windows=None, mtu: int = 1500, queue_packets: int | None = None) -> list[LinkCheck]:
    """Every port's link-rate check, by the best method its samples allow: ``virtual-queue``
    (:func:`port_lags`) where the marker's virtual backlog was sampled, else ``busy-rate``
    (:func:`busy_rates`, only ports saturated long enough). Worst first (by ``limit_ratio``)."""
    with_vq = {k: v for k, v in samples.items() if has_virtual_queue(v)}
    without = {k: v for k, v in samples.items() if k not in with_vq}
    return _worst_first(port_lags(with_vq, rates_mbps, windows, mtu, queue_packets)
                        + busy_rates(without, rates_mbps, windows, mtu))


def link_reason(failed: list[LinkCheck]) -> str:
    """One line naming how many ports failed their link-rate check and the worst of them."""
    worst = failed[0]
    if worst.check == "virtual-queue":
        return (f"{len(failed)} link(s) fell behind their rate (worst {worst.link}: "
                f"{worst.excess_bytes / 1000:.0f} kB, {worst.excess_s * 1000:.0f} ms of its "
                f"{worst.rate_mbps:g} Mbit/s, behind an ideal port fed the same packets; limit "
                f"{worst.limit_bytes / 1000:.0f} kB)")
    return (f"{len(failed)} busy link(s) ran below {MIN_RATE_RATIO:.0%} of their rate (worst "
            f"{worst.link}: {worst.achieved_mbps:.2f} of {worst.rate_mbps:g} Mbit/s while backlogged)")


@dataclass(frozen=True)
class JobEvidence:
    """What a run measured of one job in one wave.

    Attributes:
        job: job name.
        wave: index of the wave the job ran in; jobs of one wave ran together.
        machines_by_rank: machine of each rank.
        collective: collective name (``ring``, ``hd``, ``gloo`` or ``ina``).
        bucket_bytes: size of each gradient bucket reduced per iteration, bytes, at the scale of
            the rates passed to :func:`job_verdicts` (emulated bytes with emulated rates).
        comm_mean_s: mean communication time per iteration (all buckets), seconds, in the time
            base of the bound (paper scale when rates and bytes are both scaled down, see
            :func:`jobs.steps.job_bound_s`); None when nothing was measured.
        complete: whether every rank finished every iteration.
        ps_host: an INA job's parameter server machine (None otherwise).
        ina_switches: the switches that aggregated an INA job (its leaves and root; empty: none).
        ina_results: how an INA job's results came back (:data:`sim.ina.RESULTS`).
        ina_values_per_packet: int32 values per packet of an INA job.
        window_s: when its iterations ran, wall-clock seconds from its first start to its last end
            (None: not measured); jobs of different waves whose windows overlap ran together too,
            as jobs arriving one after another do.
    """

    job: str
    wave: int
    machines_by_rank: tuple[str, ...]
    collective: str
    bucket_bytes: tuple[int, ...]
    comm_mean_s: float | None
    complete: bool
    ps_host: str | None = None
    ina_switches: tuple[str, ...] = ()
    ina_results: str = "unicast"
    ina_values_per_packet: int = VALUES_PER_PACKET
    window_s: tuple[float, float] | None = None

    def ran_with(self, other: JobEvidence) -> bool:
        """Whether this job and ``other`` ran at the same time: the same wave, or overlapping windows."""
        if self.wave == other.wave:
            return True
        a, b = self.window_s, other.window_s
        return a is not None and b is not None and a[0] < b[1] and b[0] < a[1]

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {"job": self.job, "wave": self.wave, "machines_by_rank": list(self.machines_by_rank),
                "collective": self.collective, "bucket_bytes": list(self.bucket_bytes),
                "comm_mean_s": self.comm_mean_s, "complete": self.complete,
                "window_s": list(self.window_s) if self.window_s else None}


@dataclass(frozen=True)
class JobVerdict:
    """One job's measured communication time against its contention-free bound.

    Attributes:
        job: job name.
        wave: the job's wave.
        status: one of :data:`JOB_STATUSES`: ``ok``, ``slow`` (ratio above
            :data:`MAX_JOB_RATIO`) or ``fast`` (below :data:`MIN_JOB_RATIO`) for a job checked
            against its bound; ``contended`` (shared a directed link with another job of the
            wave, so the contention-free bound does not apply), ``collides`` (two of its own
            transfers shared a link in some step, an ECMP collision: the bound assumes they share
            it perfectly, which TCP flows do not, measured here at 1.27-1.34 times the bound
            whatever the dilation), ``latency-bound`` (no transfer reaches
            :data:`LATENCY_BOUND_FRAMES` full packets: its time is software latency, not the
            network), ``local`` (no transfer left its
            machine: bound 0) or ``incomplete`` (not measured, or did not finish) otherwise. An
            INA job is judged the same way against :func:`ina_bound_s` (latency-bound when no
            bucket fills :data:`LATENCY_BOUND_FRAMES` of its packets).
        bound_s: contention-free bound of one iteration's communication, seconds.
        measured_s: measured mean communication time per iteration, seconds, if any.
        ratio: ``measured_s / bound_s`` when both exist and the bound is positive (also given,
            for inspection, for jobs not checked).
        contended_with: the other jobs of the wave sharing a directed link with this one, in
            input order (filled whatever the status).
        reason: a one-line explanation for ``slow`` and ``fast``, else None.
    """

    job: str
    wave: int
    status: str
    bound_s: float
    measured_s: float | None
    ratio: float | None
    contended_with: tuple[str, ...] = ()
    reason: str | None = None

    def __post_init__(self):
        if self.status not in JOB_STATUSES:
            raise ValueError(f"job {self.job!r}: unknown verdict status {self.status!r}; "
                             f"valid: {', '.join(JOB_STATUSES)}")

    @property
    def checked(self) -> bool:
        """Whether the job was checked against its bound (status ok, slow or fast)."""
        return self.status in CHECKED_STATUSES

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {"job": self.job, "wave": self.wave, "status": self.status, "bound_s": self.bound_s,
                "measured_s": self.measured_s, "ratio": self.ratio, "contended_with": list(self.contended_with),
                "reason": self.reason}


def job_verdict(evidence: JobEvidence, bound_s: float, contended_with: tuple[str, ...] = (),
                collisions: int = 0, latency_bound: bool = False, fast_below_s: float | None = None) -> JobVerdict:
    """The verdict on one job given its bound and the jobs it shared links with.

    Precedence: ``incomplete`` (nothing trustworthy to compare), then ``local`` (a zero bound
    cannot be compared with), then ``latency-bound`` (its time is not a network measurement, shared
    links or not: each transfer crosses in a burst or waits behind another job's queue, and either
    way its software latency dominates), then ``contended`` (the jobs it shared links with are
    kept in both cases), then ``collides``, then the ratio check.

    Args:
        evidence: the job's measurement.
        bound_s: its contention-free bound, seconds (0 when no transfer leaves a machine).
        contended_with: names of the jobs that ran with it and shared a directed link (or an
            aggregator) with it.
        collisions: (step, link) pairs where two of its own transfers met
            (:func:`jobs.steps.job_collisions`).
        latency_bound: no cross-machine transfer of the job reaches :data:`LATENCY_BOUND_FRAMES`
            full packets.
        fast_below_s: measured below this, the job is ``fast`` (None: :data:`MIN_JOB_RATIO` x
            ``bound_s``; an INA job's leaves out the shapers' burst credit, :func:`job_verdicts`).
    """
    e, measured = evidence, evidence.comm_mean_s
    ratio = measured / bound_s if measured is not None and bound_s > 0 else None
    reason = None
    if measured is None or not e.complete:
        status = "incomplete"
    elif bound_s <= 0:
        status = "local"
    elif latency_bound:
        status = "latency-bound"
    elif contended_with:
        status = "contended"
    elif collisions:
        status = "collides"
    elif ratio > MAX_JOB_RATIO:
        status = "slow"
        reason = (f"job {e.job!r} (wave {e.wave}) communicated for {measured:.4g} s per iteration, "
                  f"{ratio:.3f}x its contention-free bound of {bound_s:.4g} s, above the {MAX_JOB_RATIO:.2f} "
                  f"limit: the emulator, not the modelled network, slowed it")
    elif measured < (MIN_JOB_RATIO * bound_s if fast_below_s is None else fast_below_s):
        status = "fast"
        reason = (f"job {e.job!r} (wave {e.wave}) communicated for {measured:.4g} s per iteration, "
                  f"{ratio:.3f}x its contention-free bound of {bound_s:.4g} s, below the {MIN_JOB_RATIO:.2f} "
                  f"limit: the bound or the measurement is wrong")
    else:
        status = "ok"
    return JobVerdict(job=e.job, wave=e.wave, status=status, bound_s=bound_s, measured_s=measured, ratio=ratio,
                      contended_with=contended_with, reason=reason)


def ina_links(g, machines_by_rank: Sequence[str], ps_host: str | None) -> frozenset[tuple[str, str]]:
    """Every directed link an INA job's packets cross: each machine's route to its parameter
    server and back (:func:`topo.routing.ecmp_path`; an aggregator on the way sends on along the
    same route). Empty without a PS host."""
    if ps_host is None:
        return frozenset()
    routes = _ina_routes(g, machines_by_rank, ps_host)
    return frozenset(link for links in (*routes.up.values(), *routes.down.values()) for link in links)


def _ina_routes(g, machines_by_rank: Sequence[str], ps_host: str, switches: Sequence[str] = ()):
    """An INA job's routes to and from its PS (:func:`sim.ina.ina_routes` on the controller's paths)."""
    return ina_routes(g, machines_by_rank, InaSpec(ps_host, tuple(switches)),
                      lambda a, b: path_links(ecmp_path(g, a, b)))


def ina_bound_s(g, rate_mbps: dict[tuple[str, str], float], machines_by_rank: Sequence[str], ps_host: str,
                bucket_bytes: Sequence[int], switches: Sequence[str] = (), results: str = "unicast",
                values_per_packet: int = VALUES_PER_PACKET, pat_mbps: float | None = None) -> float:
    """A lower bound on an INA job's communication time per iteration from its links, seconds: each
    directed link carries some streams of the job (:func:`sim.ina.streams`, the simulator's INA model,
    with full aggregation at ``switches`` and the results as they came back: ``unicast`` from the
    PS to every machine, or ``multicast``, copied by the switches), each stream one INA frame per
    ``values_per_packet`` int32 lanes of each bucket (one lane per 4 bytes); the
    slowest link sets the bound (0: every rank on the PS's machine). With results unicast the PS's
    own link carries one result per machine and seq out, and one packet per child of the root in,
    so on a fabric of equal links it is the bottleneck of a job of more than one machine,
    aggregated or not; multicast, one per child of the root each way.

    The aggregators and the PS are taken to keep up with the links, as ATP's and NetPack's switches
    (of a Peak Aggregation Throughput far above a port's) and servers do: an INA job is judged
    against this bound as a ring job is against its own, and one above :data:`MAX_JOB_RATIO` of it
    was slowed by the emulated end hosts or aggregators (their packets per second), not by its
    links. Where the run declares a PAT below the job's per-worker rate on its links (``pat_mbps``),
    the aggregators sum no more than it, alone as with others, and the rest of its packets pass them
    unaggregated, loading the links above with more streams: the bound is then the job's rate alone
    under that PAT (:func:`sim.ina.rate_alone`, the simulator's water-filling), which the network
    modelled imposes, not the emulator.

    Args:
        g: the topology (routes: :func:`topo.routing.ecmp_path`).
        rate_mbps: each link's rate, keyed by either orientation.
        machines_by_rank: the machine of each rank.
        ps_host: the PS's machine.
        bucket_bytes: the buckets allreduced per iteration, at the rates' scale.
        switches: the switches that aggregate it (its leaves and root).
        results: ``unicast`` or ``multicast`` (:data:`sim.ina.RESULTS`).
        values_per_packet: int32 values per packet (each frame's headers counted).
        pat_mbps: every aggregator's declared PAT, Mbit/s of frames per worker at the rates' scale
            (None: none declared, the aggregators keep up).
    """
    return _ina_busiest(g, rate_mbps, machines_by_rank, ps_host, bucket_bytes, switches, results,
                        values_per_packet, pat_mbps)[0]


def _ina_busiest(g, rate_mbps, machines_by_rank, ps_host, bucket_bytes, switches, results,
                 values_per_packet, pat_mbps: float | None = None) -> tuple[float, float | None]:
    """:func:`ina_bound_s` and the rate of the busiest link with full aggregation (None: no link)."""
    if all(m == ps_host for m in machines_by_rank):
        return 0.0, None
    routes = _ina_routes(g, machines_by_rank, ps_host, switches)
    stream_bits = stream_bytes(bucket_bytes, wire=True, values_per_packet=values_per_packet) * 8
    worst, worst_rate = 0.0, None
    for (u, v), k in streams(routes, frozenset(), results).items():
        rate = rate_mbps.get((u, v), rate_mbps.get((v, u)))
        if rate and k * stream_bits / (rate * MEGA) > worst:
            worst, worst_rate = k * stream_bits / (rate * MEGA), rate
    if pat_mbps is not None and worst > 0:
        both_ways = {**{(v, u): r for (u, v), r in rate_mbps.items()}, **rate_mbps}
        worst = max(worst, stream_bits / (rate_alone(routes, both_ways, pat_mbps, results) * MEGA))
    return worst, worst_rate


def job_verdicts(g, rate_mbps: dict[tuple[str, str], float], evidence: list[JobEvidence],
                 mtu: int | None = None, pat_mbps: float | None = None) -> list[JobVerdict]:
    """Check every job of a run against its contention-free bound.

    Two jobs that ran together (:meth:`JobEvidence.ran_with`: the same wave, or overlapping
    windows) contend when their sets of directed links (:func:`jobs.steps.job_links`) intersect,
    or, where the run declares a Peak Aggregation Throughput, when both are INA jobs aggregated by
    one switch (they share its PAT, which each one's bound takes to be its own; without one, as in
    the simulator's model, a switch aggregates every job fully). Incomplete jobs count for
    contention too, since they may have sent traffic before they stopped. Cost: O(n^2) link-set
    intersections for n jobs, plus the bounds (:func:`jobs.steps.job_bound_s`).

    Args:
        g: topology graph.
        rate_mbps: rate of each link in Mbit/s, keyed by either orientation, at the scale of
            the evidence's bucket bytes.
        evidence: one record per job and wave.
        mtu: the run's MTU: bounds count the bytes on the wire (None: payload only).
        pat_mbps: the switches' declared Peak Aggregation Throughput (``ina.pat_gbps``), Mbit/s at the
            rates' scale (None: none declared): INA jobs aggregated by one switch contend for it, and
            an INA job's bound is its rate alone under it (:func:`ina_bound_s`).

    Returns:
        One verdict per evidence record, in the same order.

    Raises:
        JobError: a job with an unknown collective or a bad bucket size.
    """
    in_fabric = [collective_of(e.collective).aggregates_in_fabric for e in evidence]
    pat_shared = pat_mbps is not None
    links = [ina_links(g, e.machines_by_rank, e.ps_host) | {("aggregator", s) for s in e.ina_switches if pat_shared}
             if fabric
             else job_links(g, e.machines_by_rank, e.collective, e.bucket_bytes)
             for e, fabric in zip(evidence, in_fabric, strict=True)]
    out = []
    for i, e in enumerate(evidence):
        others = dict.fromkeys(o.job for j, o in enumerate(evidence)
                               if j != i and links[i] & links[j] and e.ran_with(o))
        if in_fabric[i]:
            bound_s, rate = (_ina_busiest(g, rate_mbps, e.machines_by_rank, e.ps_host, e.bucket_bytes, e.ina_switches,
                                          e.ina_results, e.ina_values_per_packet, pat_mbps)
                             if e.ps_host else (0.0, None))
            # Its UDP packets leave in a burst whenever the busiest link's token bucket has refilled
            # (between buckets; TCP restarts slowly after idle): up to one bucket's depth per bucket early.
            credit_s = len(e.bucket_bytes) * burst_bytes(rate, mtu or 1500) * 8 / (rate * MEGA) if rate else 0.0
            packet_bytes = e.ina_values_per_packet * 4
            out.append(job_verdict(e, bound_s, tuple(others),
                                   latency_bound=max(e.bucket_bytes, default=0) < LATENCY_BOUND_FRAMES * packet_bytes,
                                   fast_below_s=MIN_JOB_RATIO * max(0.0, bound_s - credit_s)))
            continue
        bound_s = job_bound_s(g, rate_mbps, e.machines_by_rank, e.collective, e.bucket_bytes, mtu)
        collisions = job_collisions(g, rate_mbps, e.machines_by_rank, e.collective, e.bucket_bytes, mtu)
        out.append(job_verdict(e, bound_s, tuple(others), collisions,
                               few_packets(e.machines_by_rank, e.collective, e.bucket_bytes, mtu)))
    return out


def few_packets(machines_by_rank: Sequence[str], collective: str, bucket_bytes: Sequence[int], mtu: int | None) -> bool:
    """No transfer between machines of these buckets fills :data:`LATENCY_BOUND_FRAMES` full packets
    (of ``mtu``'s payload; 1,500 bytes when None): their times are software latency, not bytes over
    rates (a job all of whose buckets are so is ``latency-bound``)."""
    largest = largest_transfer_bytes(machines_by_rank, collective, bucket_bytes)
    return largest < LATENCY_BOUND_FRAMES * ((mtu or 1500) - TCP_IP_HEADER_BYTES)


@dataclass(frozen=True)
class FidelityVerdict:
    """Whether a policy's run can be trusted, and the evidence (:func:`assess`).

    Attributes:
        trustworthy: no reason to doubt the run.
        reasons: one line per reason to doubt it.
        cpu_p95: the machine's CPU busy fraction, 95th percentile over the measured windows.
        cpu_saturated: whether the CPU was saturated (evidence even when checked jobs outweigh it).
        link_checks: how many ports each link check (:data:`LINK_CHECKS`) covered.
        links: every port's check row (:func:`link_checks`), worst first.
        slow_links: the rows that failed, worst first.
        jobs: every job's verdict.
        jobs_checked: jobs checked against their bound (ok, slow or fast).
        jobs_failed: checked jobs found slow or fast.
    """

    trustworthy: bool
    reasons: tuple[str, ...]
    cpu_p95: float | None
    cpu_saturated: bool
    link_checks: dict
    links: tuple[LinkCheck, ...]
    slow_links: tuple[LinkCheck, ...]
    jobs: tuple[JobVerdict, ...]
    jobs_checked: int
    jobs_failed: int

    @property
    def links_checked(self) -> int:
        """How many ports were checked."""
        return len(self.links)

    @property
    def worst_link(self) -> LinkCheck | None:
        """The worst port's row, failed or not (None without any)."""
        return self.links[0] if self.links else None

    def to_dict(self) -> dict:
        """JSON form (``measurements.json``'s ``fidelity``)."""
        return {"trustworthy": self.trustworthy, "reasons": list(self.reasons), "cpu_p95": self.cpu_p95,
                "cpu_saturated": self.cpu_saturated, "link_checks": dict(self.link_checks),
                "links": [d.to_dict() for d in self.links], "links_checked": self.links_checked,
                "slow_links": [d.to_dict() for d in self.slow_links],
                "worst_link": self.worst_link.to_dict() if self.worst_link else None,
                "jobs": [v.to_dict() for v in self.jobs],
                "jobs_checked": self.jobs_checked, "jobs_failed": self.jobs_failed}


def assess(cpu: CpuSummary, links: list[LinkCheck], jobs: list[JobVerdict] | None = None) -> FidelityVerdict:
    """The verdict from a CPU summary (:meth:`emulator.cpu.CpuSampler.summary`), :func:`link_checks`
    and :func:`job_verdicts`.

    A link that failed its check or a slow or fast job always flags the run. A saturated CPU
    flags it only when no job was checked against its bound (``jobs`` None, empty, or all
    contended, local or incomplete); otherwise the checked jobs are the measurement of whether
    the emulator kept up, and the CPU figure stays in ``cpu_saturated`` as evidence. Contended
    jobs are never checked, so with a saturated CPU they may still have been distorted: read
    ``cpu_saturated`` and the link checks beside the per-job verdicts.

    Returns:
        The verdict with its evidence (:class:`FidelityVerdict`).
    """
    jobs = list(jobs or [])
    links = _worst_first(links)
    checked = [v for v in jobs if v.checked]
    failed = [v for v in checked if v.status in FAILED_STATUSES]
    cpu_saturated = bool(cpu.saturated)
    reasons = []
    if cpu_saturated and not checked:
        sw = cpu.switch_thread_p95
        reasons.append(f"CPU saturated (p95 machine {cpu.p95:.0%}"
                       + (f", busiest switch thread {sw:.0%}" if sw is not None else "")
                       + " >= 95%): timings may reflect the emulator, not the network")
    slow = [d for d in links if not d.ok]
    if slow:
        reasons.append(link_reason(slow))
    reasons.extend(v.reason for v in failed)
    return FidelityVerdict(trustworthy=not reasons, reasons=tuple(reasons), cpu_p95=cpu.p95,
                           cpu_saturated=cpu_saturated,
                           link_checks={m: sum(1 for d in links if d.check == m) for m in LINK_CHECKS},
                           links=tuple(links), slow_links=tuple(slow), jobs=tuple(jobs), jobs_checked=len(checked),
                           jobs_failed=len(failed))
