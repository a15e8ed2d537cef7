"""The INA switch state machine and the parameter server, pure and byte-exact.

Statistical in-network aggregation as in ATP (Lao et al., NSDI '21, §3) and NetPack (ASPLOS '24,
``docs/resolutions.md`` NetPack §1.4, §1.6): switches share one pool of aggregator slots between
jobs, a packet whose slot is taken falls back to the parameter server (PS), and aggregation is at
most two levels (leaves, then the PS's ToR as root). :class:`Aggregator` applies the numbered
switch rules a P4 program (``ina/p4/aggregator.p4``) mirrors, :class:`ParameterServer` the PS's
rules; :class:`JobTree` is a job's bit plan.

The bit plan, every switch and PS rule in order, the [R] resolution of when a root frees its slot,
known costs and complexity: ``docs/ina-internals.md``. Standard library; the PS sums as numpy arrays.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import time
from collections.abc import Iterable, Mapping

import numpy as np

from ina.protocol import (
    HEADER_FIELDS,
    INT32_MAX,
    INT32_MIN,
    MALFORMED_REASONS,
    VALUES_PER_PACKET,
    Flag,
    InaError,
    InaHeader,
    MalformedPacket,
    check_slots,
    decode,
    decode_header,
    encode,
    encode_header,
    values_array,
    values_bytes,
)

MAX_BITS = 32
"""Bits in ``bitmap``: a job's workers plus aggregating leaves."""
# The flags as plain ints for the PS's per-packet rules: an IntFlag operation builds an enum member.
_RESULT, _RESEND, _ECN, _OVERFLOW = int(Flag.RESULT), int(Flag.RESEND), int(Flag.ECN), int(Flag.OVERFLOW)
_FIELD_NAMES = [f.name for f in HEADER_FIELDS]
_FLAGS_OFFSET = sum(f.bits for f in HEADER_FIELDS[:_FIELD_NAMES.index("flags")]) // 8
_JOB_OFFSET = sum(f.bits for f in HEADER_FIELDS[:_FIELD_NAMES.index("job_id")]) // 8
_WRAP = 1 << 32
_KEPT_FLAGS = Flag.ECN | Flag.OVERFLOW
_MAC = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")


class Role(str, enum.Enum):
    """What a switch is in a job's aggregation tree."""

    LEAF = "leaf"
    """A workers' ToR: aggregates its rack's workers, sends one partial to the root."""
    ROOT = "root"
    """The PS's ToR: aggregates its rack's workers and the leaves' partials, sends to the PS."""


class Dest(str, enum.Enum):
    """Where a packet leaving :meth:`Aggregator.process` or :meth:`ParameterServer.process` goes."""

    TO_PS = "to_ps"
    """Upwards: towards the job's PS (through the root, for a leaf)."""
    TO_WORKERS = "to_workers"
    """Downwards, multicast to the job's workers (and leaves) below this node."""
    DROP = "drop"
    """Nowhere: absorbed into a slot, a duplicate, or malformed (``reason`` says which)."""


class SlotState(enum.IntEnum):
    """The ``state`` register of a slot."""

    FREE = 0
    AGGREGATING = 1
    COMPLETE = 2
    """A root's slot whose aggregate has gone to the PS, held until the result."""
    BYPASS = 3
    """Refused by the PAT meter (rule 8a): the seq's packets fall back until its result."""


class PatMeter:
    """A switch's Peak Aggregation Throughput as a token bucket of claims (rule 8a): ``rate_pps``
    tokens per second up to ``burst``, one taken by each claim; a claim finding less than one is
    refused. The P4 program's ``pat`` meter with equal committed and peak rates and bursts
    (RFC 2698's two-rate three-color marker reduces to this bucket).

    Args:
        rate_pps: claims per second (> 0).
        burst: the bucket's depth in claims (>= 1).
        clock: seconds, monotonic (injected by tests).
    """

    def __init__(self, rate_pps: float, burst: int, clock=None):
        if not rate_pps > 0 or not burst >= 1:
            raise InaError(f"PAT meter: need rate > 0 and burst >= 1, got {rate_pps!r} and {burst!r}")
        self.rate_pps, self.burst = float(rate_pps), int(burst)
        self.clock = clock or time.monotonic
        self._tokens, self._t = float(burst), self.clock()

    def take(self) -> bool:
        """Whether a claim may go now (its token taken)."""
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._t) * self.rate_pps)
        self._t = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


@dataclasses.dataclass(frozen=True)
class Copy:
    """One child a switch copies a job's results to (results multicast, rule 2): the copy leaves
    addressed to it, Ethernet and IPv4 destination rewritten (UDP checksum 0, IPv4 checksum
    recomputed), and is routed on by that address.

    Attributes:
        ip: the child's IPv4 address as an integer: a worker machine of this switch's rack, or one
            machine under a leaf, whose ToR copies the result on to its own rack.
        mac: the child's Ethernet address, ``xx:xx:xx:xx:xx:xx``.
    """

    ip: int
    mac: str

    def __post_init__(self):
        if not isinstance(self.ip, int) or not 0 <= self.ip <= 0xFFFFFFFF:
            raise InaError(f"copy address {self.ip!r} must be an IPv4 address as an integer")
        if not isinstance(self.mac, str) or not _MAC.fullmatch(self.mac):
            raise InaError(f"copy MAC {self.mac!r} must be 'xx:xx:xx:xx:xx:xx'")

    def to_data(self) -> list:
        """JSON form: ``[ip, mac]``."""
        return [self.ip, self.mac]


@dataclasses.dataclass(frozen=True)
class Output:
    """One packet leaving a node, or the record that nothing left.

    Attributes:
        dest: where it goes.
        data: the packet's UDP payload (empty for :attr:`Dest.DROP`).
        reason: why, for people and counters: ``absorbed``, ``duplicate``, ``malformed:<why>``,
            ``aggregate``, ``collision``, ``passed``, ``resend``, ``result``, ``resend_request``,
            ``late``, ``unexpected``, ``unknown_job``, ``unknown_bits``, ``overlap``.
        copies: for a result a switch multicasts, the children it goes to, one copy each (rule 2);
            empty: the packet leaves as it is addressed.
    """

    dest: Dest
    data: bytes = b""
    reason: str = ""
    copies: tuple[Copy, ...] = ()


@dataclasses.dataclass(frozen=True)
class JobEntry:
    """A switch's per-job table entry (the P4 table's action parameters)."""

    fan_in: int
    role: Role
    out_bit: int = 0
    """The leaf's child bit at the root, carried by its partials; unused by a root."""
    members: frozenset[int] = frozenset()
    """IPv4 source addresses (as integers) the job's packets may come from: its machines and its
    PS (rule 1b); empty: not checked."""
    copies: tuple[Copy, ...] = ()
    """Results multicast: the children each result is copied to here (rule 2); empty: results pass
    as they are addressed (the PS sends one to every worker)."""


def _counted(names: Iterable[str]):
    return {name: 0 for name in names}


@dataclasses.dataclass(frozen=True)
class AggregatorStats:
    """A switch's counters (packets unless said otherwise); see the module's rule numbers."""

    packets: int = 0
    """Every packet given to :meth:`Aggregator.process`."""
    passed: int = 0
    """Forwarded to the PS untouched by the slots: job not installed (3), fell back below (6)."""
    results: int = 0
    """RESULT packets forwarded to the workers (2)."""
    released: int = 0
    """Slots freed by a result (2)."""
    resends: int = 0
    """RESEND packets forwarded to the PS (5)."""
    claims: int = 0
    """Slots claimed (8)."""
    contributions: int = 0
    """Packets summed into a slot, claims included (8, 10)."""
    duplicates: int = 0
    """Dropped: the slot already had the packet's bit (9)."""
    collisions: int = 0
    """Fell back here: the slot was held by another (job, seq) (11)."""
    aggregates: int = 0
    """Aggregates emitted (12)."""
    overflows: int = 0
    """Aggregates emitted with OVERFLOW (12)."""
    foreign: int = 0
    """Dropped: an installed job's packet from a host not among its members (1b)."""
    over_pat: int = 0
    """Claims the PAT meter refused: fell back, counted in ``collisions`` too (8a)."""
    malformed: Mapping[str, int] = dataclasses.field(default_factory=lambda: _counted(MALFORMED_REASONS))
    """Dropped as malformed, per reason of :data:`ina.protocol.MALFORMED_REASONS` (1, 7)."""

    def to_dict(self) -> dict:
        """Plain data: every counter, ``malformed`` as a dict."""
        d = dataclasses.asdict(self)
        d["malformed"] = dict(self.malformed)
        return d


@dataclasses.dataclass(frozen=True)
class JobTraffic:
    """The packets of one job a switch forwarded, by direction (every forwarded packet, whether
    the job has an entry there or not); each is one :data:`ina.protocol.FRAME_BYTES` frame
    (only valid packets are forwarded)."""

    to_ps: int = 0
    """Towards the parameter server: aggregates, fall-backs, resends, packets passed unaggregated."""
    to_workers: int = 0
    """Towards the workers: results and resend requests."""


class Aggregator:
    """One switch's aggregator pool and per-job table; the switch rules of ``docs/ina-internals.md``.

    Args:
        n_slots: aggregator slots, a power of two in 1..65536. A packet uses slot
            ``header.slot & (n_slots - 1)``.
        values_per_packet: value lanes (registers) per slot; packets must carry exactly this many.

    Raises:
        InaError: a bad slot count or lane count.
    """

    def __init__(self, n_slots: int, values_per_packet: int = VALUES_PER_PACKET):
        self.n_slots = check_slots(n_slots)
        if not isinstance(values_per_packet, int) or not 1 <= values_per_packet <= 0xFFFF:
            raise InaError(f"values_per_packet {values_per_packet!r} must be an integer in 1..65535")
        self.values_per_packet = values_per_packet
        self._mask = n_slots - 1
        self._jobs: dict[int, JobEntry] = {}
        self._state = bytearray(n_slots)
        self._key = [0] * n_slots
        self._bitmap = [0] * n_slots
        self._count = [0] * n_slots
        self._flags = [0] * n_slots
        self._values: list[list[int]] = [[] for _ in range(n_slots)]
        self._n = dataclasses.asdict(AggregatorStats())
        self._job_out: dict[int, list[int]] = {}
        self.pat: PatMeter | None = None

    def set_pat(self, meter: PatMeter | None) -> None:
        """Meter claims with ``meter`` (rule 8a); None: never refuse one."""
        self.pat = meter

    def install(self, job_id: int, fan_in: int, role: Role | str, out_bit: int = 0,
                members: Iterable[int] = (), copies: Iterable[Copy] = ()) -> None:
        """Install (or replace) the table entry of ``job_id``.

        Args:
            job_id: 0..65535.
            fan_in: contributions that complete a slot of this job here, 1..32.
            role: ``"leaf"`` or ``"root"``.
            out_bit: for a leaf, its child bit at the root (0..31), the bitmap of its partials.
            members: IPv4 addresses (integers) the job's packets may come from (rule 1b); none:
                any source.
            copies: the children each result is copied to (rule 2, results multicast); none: results
                pass unchanged.

        Raises:
            InaError: any argument out of range, or an unknown role.
        """
        try:
            role = Role(role)
        except ValueError:
            raise InaError(f"unknown INA role {role!r}; valid: {', '.join(r.value for r in Role)}") from None
        for name, value, hi in (("job_id", job_id, 0xFFFF), ("fan_in", fan_in, MAX_BITS),
                                ("out_bit", out_bit, MAX_BITS - 1)):
            if not isinstance(value, int) or not (1 if name == "fan_in" else 0) <= value <= hi:
                raise InaError(f"INA table entry {name}={value!r} out of range (job {job_id!r})")
        members = frozenset(members)
        if any(not isinstance(a, int) or not 0 <= a <= 0xFFFFFFFF for a in members):
            raise InaError(f"INA job {job_id}: members must be IPv4 addresses as integers")
        copies = tuple(copies)
        if any(not isinstance(c, Copy) for c in copies) or len(set(copies)) != len(copies):
            raise InaError(f"INA job {job_id}: copies must be distinct Copy records")
        self._jobs[job_id] = JobEntry(fan_in, role, out_bit, members, copies)

    def install_entry(self, job_id: int, entry: JobEntry) -> None:
        """:meth:`install` with an entry's fields (checked the same way)."""
        self.install(job_id, entry.fan_in, entry.role, entry.out_bit, entry.members, entry.copies)

    def uninstall(self, job_id: int) -> None:
        """Remove ``job_id``'s entry; its held slots are still freed by their results (rule 2)."""
        self._jobs.pop(job_id, None)

    @property
    def jobs(self) -> dict[int, JobEntry]:
        """A copy of the per-job table."""
        return dict(self._jobs)

    @property
    def stats(self) -> AggregatorStats:
        """A snapshot of the counters."""
        return AggregatorStats(**{**self._n, "malformed": dict(self._n["malformed"])})

    def job_traffic(self, job_ids: Iterable[int] | None = None) -> dict[int, JobTraffic]:
        """The packets each job's forwarded here by direction (the P4 program's ``job_to_ps`` and
        ``job_to_workers`` counters), for ``job_ids`` (None: every job that sent any)."""
        ids = self._job_out if job_ids is None else job_ids
        return {j: JobTraffic(*self._job_out.get(j, (0, 0))) for j in ids}

    def occupied(self) -> dict[int, tuple[int, int, SlotState]]:
        """Every slot not FREE: ``slot -> (job_id, seq, state)``. O(n_slots)."""
        return {i: (self._key[i] >> 32, self._key[i] & 0xFFFFFFFF, SlotState(s))
                for i, s in enumerate(self._state) if s != SlotState.FREE}

    def release_slots(self) -> None:
        """Free every slot (as the P4 program's ``register_reset`` of its slot registers); the
        table and the counters stay. O(n_slots)."""
        self._state = bytearray(self.n_slots)

    def _free(self, i: int) -> None:
        self._state[i] = SlotState.FREE

    def _forward(self, packet: bytes, flags: int, reason: str) -> list[Output]:
        out = bytearray(packet)
        out[_FLAGS_OFFSET] = flags
        return [Output(Dest.TO_PS, bytes(out), reason)]

    def process(self, packet: bytes, ecn_ce: bool = False, src: int | None = None) -> list[Output]:
        """Apply the switch rules to one packet (its UDP payload); never raises on its content.
        A forwarded packet is counted for its job and direction (:meth:`job_traffic`).

        Args:
            packet: the INA header and values.
            ecn_ce: whether the packet's IP header carries ECN CE (rule 4).
            src: its IPv4 source address as an integer (rule 1b; None: not checked).

        Returns:
            Exactly one :class:`Output`: the packet to the PS, to the workers, or dropped.
        """
        outs = self._apply(packet, ecn_ce, src)
        for o in outs:
            if o.dest is not Dest.DROP:
                job_id = int.from_bytes(o.data[_JOB_OFFSET:_JOB_OFFSET + 2], "big")
                self._job_out.setdefault(job_id, [0, 0])[o.dest is Dest.TO_WORKERS] += 1
        return outs

    def _apply(self, packet: bytes, ecn_ce: bool, src: int | None) -> list[Output]:
        """:meth:`process` without the per-job counts."""
        n = self._n
        n["packets"] += 1
        try:
            h, values = decode(packet, self.values_per_packet)
        except MalformedPacket as e:
            n["malformed"][e.reason] += 1
            return [Output(Dest.DROP, reason=f"malformed:{e.reason}")]
        entry = self._jobs.get(h.job_id)
        if entry is not None and entry.members and src is not None and src not in entry.members:  # rule 1b
            n["foreign"] += 1
            return [Output(Dest.DROP, reason="foreign")]
        i = h.slot & self._mask
        key = h.job_id << 32 | h.seq
        state = self._state[i]
        holds = state != SlotState.FREE and self._key[i] == key
        if h.flags & Flag.RESULT:  # rule 2
            if holds:
                self._free(i)
                n["released"] += 1
            n["results"] += 1
            return [Output(Dest.TO_WORKERS, bytes(packet), "result", entry.copies if entry is not None else ())]
        if entry is None:  # rule 3
            n["passed"] += 1
            return [Output(Dest.TO_PS, bytes(packet), "passed")]
        flags = h.flags | (Flag.ECN if ecn_ce else 0)  # rule 4
        if flags & Flag.RESEND:  # rule 5
            n["resends"] += 1
            return self._forward(packet, flags, "resend")
        if flags & Flag.COLLISION:  # rule 6
            n["passed"] += 1
            return self._forward(packet, flags, "passed")
        bitmap = h.bitmap
        if bitmap == 0 or bitmap & (bitmap - 1):  # rule 7
            n["malformed"]["bad_bitmap"] += 1
            return [Output(Dest.DROP, reason="malformed:bad_bitmap")]
        if state == SlotState.FREE and self.pat is not None and not self.pat.take():  # rule 8a
            self._state[i] = SlotState.BYPASS
            self._key[i] = key
            self._bitmap[i] = 0  # so that the seq's later packets are no duplicates (rule 9)
            n["over_pat"] += 1
            n["collisions"] += 1
            return self._forward(packet, flags | Flag.COLLISION, "over_pat")
        if state == SlotState.FREE:  # rule 8
            self._state[i] = SlotState.AGGREGATING
            self._key[i] = key
            self._values[i] = list(values)
            self._bitmap[i] = bitmap
            self._count[i] = 1
            self._flags[i] = flags & _KEPT_FLAGS
            n["claims"] += 1
            n["contributions"] += 1
        elif holds and bitmap & self._bitmap[i]:  # rule 9
            n["duplicates"] += 1
            return [Output(Dest.DROP, reason="duplicate")]
        elif holds and state == SlotState.AGGREGATING:  # rule 10
            acc = self._values[i]
            wrapped = False
            for lane, v in enumerate(values):
                s = acc[lane] + v
                if s > INT32_MAX:
                    s -= _WRAP
                    wrapped = True
                elif s < INT32_MIN:
                    s += _WRAP
                    wrapped = True
                acc[lane] = s
            self._bitmap[i] |= bitmap
            self._count[i] += 1
            self._flags[i] |= (flags & _KEPT_FLAGS) | (Flag.OVERFLOW if wrapped else 0)
            n["contributions"] += 1
        else:  # rule 11
            n["collisions"] += 1
            return self._forward(packet, flags | Flag.COLLISION, "collision")
        if self._count[i] < entry.fan_in:  # rule 12
            return [Output(Dest.DROP, reason="absorbed")]
        out_flags = Flag.PARTIAL | self._flags[i]
        leaf = entry.role is Role.LEAF
        header = InaHeader(flags=int(out_flags), job_id=h.job_id, seq=h.seq, fan_in=entry.fan_in, slot=h.slot,
                           bitmap=1 << entry.out_bit if leaf else self._bitmap[i], count=self.values_per_packet)
        data = encode(header, self._values[i], self.values_per_packet)
        n["aggregates"] += 1
        n["overflows"] += bool(out_flags & Flag.OVERFLOW)
        if leaf:
            self._free(i)
        else:
            self._state[i] = SlotState.COMPLETE
        return [Output(Dest.TO_PS, data, "aggregate")]


@dataclasses.dataclass(frozen=True)
class LeafGroup:
    """An aggregating leaf of a job: its bit at the root and its workers' bits."""

    bit: int
    workers: tuple[int, ...]

    @property
    def fan_in(self) -> int:
        """The leaf's table fan-in: its workers."""
        return len(self.workers)


@dataclasses.dataclass(frozen=True)
class JobTree:
    """A job's aggregation tree in bits, shared by the controller (what to install) and the PS.

    Attributes:
        job_id: 0..65535.
        root_workers: bits of the workers whose packets reach the root unaggregated (the PS's
            rack, and racks whose ToR does not aggregate the job).
        leaves: the aggregating leaves.

    Raises:
        InaError: a bit outside 0..31, a bit used twice, no worker, or an empty leaf.
    """

    job_id: int
    root_workers: tuple[int, ...] = ()
    leaves: tuple[LeafGroup, ...] = ()
    workers_mask: int = dataclasses.field(init=False, repr=False, compare=False)
    _leaf_masks: tuple[tuple[int, int], ...] = dataclasses.field(init=False, repr=False, compare=False)
    _known: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.job_id, int) or not 0 <= self.job_id <= 0xFFFF:
            raise InaError(f"job_id {self.job_id!r} must be in 0..65535")
        bits = list(self.root_workers) + [b for leaf in self.leaves for b in (leaf.bit, *leaf.workers)]
        bad = [b for b in bits if not isinstance(b, int) or not 0 <= b < MAX_BITS]
        if bad or len(set(bits)) != len(bits):
            raise InaError(f"job {self.job_id}: bits {bits} must be distinct integers in 0..{MAX_BITS - 1}")
        if any(not leaf.workers for leaf in self.leaves) or not bits:
            raise InaError(f"job {self.job_id}: every leaf needs a worker, and the job at least one")
        masks = tuple((1 << leaf.bit, _mask(leaf.workers)) for leaf in self.leaves)
        workers = _mask(self.root_workers) | _mask(b for leaf in self.leaves for b in leaf.workers)
        object.__setattr__(self, "workers_mask", workers)
        object.__setattr__(self, "_leaf_masks", masks)
        object.__setattr__(self, "_known", workers | _mask(leaf.bit for leaf in self.leaves))

    @classmethod
    def two_level(cls, job_id: int, root_workers: int, leaf_workers: Iterable[int] = ()) -> JobTree:
        """The bit plan for ``root_workers`` workers at the root and leaves of ``leaf_workers``.

        Bits in order: the root's workers from 0, then per leaf its own bit and its workers'.
        """
        root = tuple(range(root_workers))
        leaves, nxt = [], root_workers
        for size in leaf_workers:
            leaves.append(LeafGroup(nxt, tuple(range(nxt + 1, nxt + 1 + size))))
            nxt += 1 + size
        return cls(job_id, root, tuple(leaves))

    @property
    def root_fan_in(self) -> int:
        """The root's table fan-in: its workers plus its leaves."""
        return len(self.root_workers) + len(self.leaves)

    @property
    def worker_bits(self) -> tuple[int, ...]:
        """Every worker's bit, ascending."""
        return tuple(b for b in range(MAX_BITS) if self.workers_mask >> b & 1)

    def expand(self, bitmap: int) -> int | None:
        """The workers ``bitmap`` covers, as a mask (a leaf bit stands for its workers), or None
        if ``bitmap`` is 0 or has a bit the tree does not use."""
        if not bitmap or bitmap & ~self._known:
            return None
        covered = bitmap & self.workers_mask
        for leaf_bit, workers in self._leaf_masks:
            if bitmap & leaf_bit:
                covered |= workers
        return covered


def _mask(bits: Iterable[int]) -> int:
    m = 0
    for b in bits:
        m |= 1 << b
    return m


@dataclasses.dataclass(frozen=True)
class PsResult:
    """A completed seq at the PS.

    Attributes:
        job_id, seq: which.
        values: the exact sums (Python integers, never wrapped or saturated).
        packet: the RESULT packet sent (values saturated to int32, OVERFLOW if any was).
    """

    job_id: int
    seq: int
    values: tuple[int, ...]
    packet: bytes


@dataclasses.dataclass(frozen=True)
class PsStats:
    """The PS's counters (packets); see the module's PS rule numbers."""

    packets: int = 0
    contributions: int = 0
    """Stored (6)."""
    subsumed: int = 0
    """Stored contributions replaced by a wider one (6)."""
    duplicates: int = 0
    """Covered nothing new (4)."""
    overlaps: int = 0
    """Crossed a stored contribution (6)."""
    late: int = 0
    """Non-resend packets of a completed seq (2)."""
    resends_answered: int = 0
    """Resends of a completed seq answered with its result (2)."""
    resend_requests: int = 0
    """Sent because a switch sum overflowed (5)."""
    results: int = 0
    """Seqs completed (7)."""
    unexpected: int = 0
    """RESULT packets received (1)."""
    unknown_job: int = 0
    unknown_bits: int = 0
    malformed: Mapping[str, int] = dataclasses.field(default_factory=lambda: _counted(MALFORMED_REASONS))

    def to_dict(self) -> dict:
        """Plain data: every counter, ``malformed`` as a dict."""
        d = dataclasses.asdict(self)
        d["malformed"] = dict(self.malformed)
        return d


@dataclasses.dataclass
class _Pending:
    slot: int
    covered: int = 0
    ecn: bool = False
    parts: list[tuple[int, np.ndarray]] = dataclasses.field(default_factory=list)
    """The stored contributions: the workers each covers, and its values (int64)."""


class ParameterServer:
    """The PS end of INA: finishes every seq from whatever reaches it; the module's PS rules.

    Args:
        values_per_packet: value lanes per packet.
    """

    def __init__(self, values_per_packet: int = VALUES_PER_PACKET):
        self.values_per_packet = values_per_packet
        self._trees: dict[int, JobTree] = {}
        self._pending: dict[tuple[int, int], _Pending] = {}
        self._done: dict[tuple[int, int], PsResult] = {}
        self._horizon: dict[int, int] = {}  # job -> seqs below it were forgotten
        self._n = dataclasses.asdict(PsStats())

    def install(self, tree: JobTree) -> None:
        """Serve ``tree.job_id`` (replacing an earlier tree)."""
        self._trees[tree.job_id] = tree

    def uninstall(self, job_id: int) -> None:
        """Stop serving ``job_id`` and drop its state."""
        self._trees.pop(job_id, None)
        self.forget(job_id)

    def forget(self, job_id: int, below_seq: int | None = None) -> None:
        """Drop ``job_id``'s pending and completed seqs (those below ``below_seq``, if given); a
        packet of a seq below ``below_seq`` is dropped as ``late`` from then on (its result is gone,
        and a new contribution could never complete)."""
        if below_seq is None:
            self._horizon.pop(job_id, None)
        else:
            self._horizon[job_id] = max(below_seq, self._horizon.get(job_id, 0))
        for table in (self._pending, self._done):
            for key in [k for k in table if k[0] == job_id and (below_seq is None or k[1] < below_seq)]:
                del table[key]

    def result(self, job_id: int, seq: int) -> PsResult | None:
        """The completed seq, or None."""
        return self._done.get((job_id, seq))

    def completed(self) -> list[PsResult]:
        """Every completed seq still remembered, by (job_id, seq)."""
        return [self._done[k] for k in sorted(self._done)]

    def pending(self) -> list[tuple[int, int]]:
        """``(job_id, seq)`` of every seq with contributions but no result yet, sorted."""
        return sorted(self._pending)

    @property
    def stats(self) -> PsStats:
        """A snapshot of the counters."""
        return PsStats(**{**self._n, "malformed": dict(self._n["malformed"])})

    def _drop(self, counter: str, reason: str | None = None) -> list[Output]:
        self._n[counter] += 1
        return [Output(Dest.DROP, reason=reason or counter)]

    def _packet(self, flags: int, job_id: int, seq: int, slot: int, values: np.ndarray) -> bytes:
        header = InaHeader(flags=int(flags), job_id=job_id, seq=seq, slot=slot, count=self.values_per_packet)
        return encode_header(header, len(values), self.values_per_packet) + values_bytes(values)

    def process(self, packet: bytes, ecn_ce: bool = False) -> list[Output]:
        """Apply the PS rules to one packet; never raises on its content.

        Returns:
            Exactly one :class:`Output`: a RESULT or resend request to the workers, or a drop.
        """
        n = self._n
        n["packets"] += 1
        try:
            h = decode_header(packet, self.values_per_packet)
        except MalformedPacket as e:
            n["malformed"][e.reason] += 1
            return [Output(Dest.DROP, reason=f"malformed:{e.reason}")]
        if h.flags & _RESULT:  # rule 1
            return self._drop("unexpected")
        tree = self._trees.get(h.job_id)
        if tree is None:
            return self._drop("unknown_job")
        key = (h.job_id, h.seq)
        done = self._done.get(key)
        if done is None and h.seq < self._horizon.get(h.job_id, 0):  # rule 2: forgotten, so late
            return self._drop("late")
        if done is not None:  # rule 2
            if h.flags & _RESEND:
                n["resends_answered"] += 1
                return [Output(Dest.TO_WORKERS, done.packet, "result")]
            return self._drop("late")
        covers = tree.expand(h.bitmap)  # rule 3
        if covers is None:
            return self._drop("unknown_bits")
        pend = self._pending.setdefault(key, _Pending(h.slot))
        pend.ecn |= ecn_ce or bool(h.flags & _ECN)
        if not covers & ~pend.covered:  # rule 4
            return self._drop("duplicates", "duplicate")
        if h.flags & _OVERFLOW:  # rule 5
            n["resend_requests"] += 1
            flags = _RESULT | _RESEND | _OVERFLOW
            data = self._packet(flags, h.job_id, h.seq, pend.slot, np.zeros(self.values_per_packet, np.int64))
            return [Output(Dest.TO_WORKERS, data, "resend_request")]
        kept = [(m, v) for m, v in pend.parts if m & ~covers]  # rule 6
        if any(m & covers for m, _ in kept):
            return self._drop("overlaps", "overlap")
        n["subsumed"] += len(pend.parts) - len(kept)
        pend.parts = [*kept, (covers, values_array(packet, h.count))]
        pend.covered |= covers
        n["contributions"] += 1
        if pend.covered != tree.workers_mask:
            return [Output(Dest.DROP, reason="absorbed")]
        sums = np.add.reduce([v for _, v in pend.parts])  # rule 7, exact in int64 (at most 32 int32s)
        wire = np.clip(sums, INT32_MIN, INT32_MAX)
        flags = _RESULT | (_ECN if pend.ecn else 0) | (_OVERFLOW if not np.array_equal(sums, wire) else 0)
        result = PsResult(h.job_id, h.seq, tuple(sums.tolist()), self._packet(flags, h.job_id, h.seq, pend.slot, wire))
        self._done[key] = result
        del self._pending[key]
        n["results"] += 1
        return [Output(Dest.TO_WORKERS, result.packet, "result")]
