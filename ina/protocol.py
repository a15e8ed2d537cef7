"""The INA wire format, declared once: a field table, and the struct codec derived from it.

An INA packet is Ethernet / IPv4 / UDP (port :data:`INA_UDP_PORT` either way) / the 20-byte INA
header / ``count`` signed 32-bit values, in network byte order. :data:`HEADER_FIELDS` is the header
as (name, width in bits, meaning) in wire order; the struct format, :class:`InaHeader`, the range
checks of :func:`encode` and the Scapy layer (:mod:`ina.scapy_layer`) derive from it. :func:`decode`
raises :class:`MalformedPacket` with one of :data:`MALFORMED_REASONS`; :func:`slot_of` is the slot
hash; :func:`to_fixed` / :func:`from_fixed` convert gradients to int32.

The field table, the [R] ``pad`` field, the malformed checks in order, the slot hash and the fast
paths for end hosts: ``docs/ina-internals.md``. Standard library and numpy.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import socket
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from common.errors import TestbedError

INA_UDP_PORT = 18766
"""The PS's UDP port: the destination of every packet towards the PS, the source of every result."""
WORKER_PORT_BASE = 20000
"""A worker of job ``j`` receives its results on UDP port ``WORKER_PORT_BASE + j``
(:func:`worker_port`): one INA endpoint per machine and job."""
VERSION = 1
VALUES_PER_PACKET = 32
"""int32 values per packet of the stored test vectors (:mod:`ina.vectors`) and of every function's
default: one register per value lane in the P4 program. A job's may be any count in
1..:data:`MAX_VALUES_PER_PACKET` (the config's ``ina.values_per_packet``), every node it crosses
built for that count (:func:`check_values_per_packet`)."""
VALUE_BYTES = 4
SLOT_SPACE = 1 << 16
"""The slot numbers a 16-bit ``slot`` field can carry; hosts hash into all of them."""
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


class Flag(enum.IntFlag):
    """The bits of the ``flags`` field (bit 0 is the least significant)."""

    RESULT = 0x01
    """A result (or resend request) travelling from the PS to the workers."""
    COLLISION = 0x02
    """Fell back: its slot was held by another (job, seq), so it travels unaggregated to the PS."""
    RESEND = 0x04
    """A retransmission: never aggregated, answered by the PS. With RESULT: a resend request."""
    ECN = 0x08
    """Congestion seen by some contribution (IP CE or this flag); OR-ed into aggregates."""
    OVERFLOW = 0x10
    """An int32 sum wrapped in some lane: the receiver must not trust the integer sum."""
    PARTIAL = 0x20
    """An aggregate emitted by a switch, the sum of several contributions."""


RESERVED_FLAGS = 0xC0
"""Flag bits 6-7: must be 0."""


@dataclasses.dataclass(frozen=True)
class Field:
    """One header field.

    Attributes:
        name: attribute name in :class:`InaHeader` and the Scapy layer.
        bits: width on the wire (8, 16 or 32).
        meaning: one line for the documentation and the Scapy layer.
        default: value when a header is built without it; ``None`` means required.
        kind: ``"uint"``, or ``"flags"`` for a field whose bits are :class:`Flag`.
    """

    name: str
    bits: int
    meaning: str
    default: int | None = None
    kind: str = "uint"


HEADER_FIELDS: tuple[Field, ...] = (
    Field("version", 8, "protocol version, 1; any other value is malformed", default=VERSION),
    Field("flags", 8, "Flag bits: RESULT COLLISION RESEND ECN OVERFLOW PARTIAL; bits 6-7 are 0",
          default=0, kind="flags"),
    Field("job_id", 16, "the job"),
    Field("seq", 32, "packet sequence number; packet k of every worker is the same gradient slice"),
    Field("bitmap", 32, "contributors carried, one bit per child of the aggregating switch", default=0),
    Field("fan_in", 8, "informational: contributions expected at the current level", default=0),
    Field("reserved", 8, "0", default=0),
    Field("slot", 16, "aggregator index chosen by the end host: slot_of(job_id, seq)"),
    Field("count", 16, "int32 values that follow the header", default=VALUES_PER_PACKET),
    Field("pad", 16, "0; pads the header to 20 bytes so the values are 32-bit aligned", default=0),
)
FIELD_NAMES = tuple(f.name for f in HEADER_FIELDS)

_STRUCT_CODES = {8: "B", 16: "H", 32: "I"}
HEADER = struct.Struct(">" + "".join(_STRUCT_CODES[f.bits] for f in HEADER_FIELDS))
HEADER_BYTES = HEADER.size
assert HEADER_BYTES * 8 == sum(f.bits for f in HEADER_FIELDS) == 160, "the header must be 20 bytes, unpadded"
PACKET_BYTES = HEADER_BYTES + VALUES_PER_PACKET * VALUE_BYTES
"""Bytes of a data or result packet's UDP payload: 20 + 32 * 4 = 148."""
FRAME_BYTES = 14 + 20 + 8 + PACKET_BYTES
"""Bytes of a data or result packet's Ethernet frame, as a port or shaper counts it: Ethernet,
IPv4 (no options) and UDP headers, then :data:`PACKET_BYTES`: 190."""
MAX_VALUES_PER_PACKET = (1500 - 20 - 8 - HEADER_BYTES) // VALUE_BYTES
"""The most values a packet carries in an IPv4 packet of 1,500 bytes (no fragments): 363."""


ECT0 = 0x02
"""The IP ECN field every INA datagram is sent with (ECN-capable transport, RFC 3168): queues that
mark ECN (the emulator's marker, a DCTCP-style switch) mark it CE instead of leaving it to grow,
and the CE reaches the sender's window as the result's ECN flag (ATP §3.4)."""


def ecn_capable(sock: socket.socket) -> socket.socket:
    """``sock`` set to send ECT(0) (:data:`ECT0`) and to receive each datagram's ECN field
    (``IP_RECVTOS``, read by :func:`ce_of`)."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECT0)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    return sock


SO_RCVBUFFORCE = 33
"""Linux's ``SO_RCVBUF`` beyond ``net.core.rmem_max`` (root only): the INA processes' receive buffers."""

TOS_SPACE = socket.CMSG_SPACE(1)
"""``recvmsg``'s ancillary buffer for a datagram's TOS byte."""


def ce_of(ancdata) -> bool:
    """Whether ``recvmsg``'s ancillary data says the datagram arrived marked CE."""
    tos = next((c[2][0] for c in ancdata if c[0] == socket.IPPROTO_IP and c[1] == socket.IP_TOS and c[2]), 0)
    return tos & 3 == 3


def check_values_per_packet(n: int) -> int:
    """Return ``n`` if it is an integer in 1..:data:`MAX_VALUES_PER_PACKET`, else raise InaError."""
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_VALUES_PER_PACKET:
        raise InaError(f"values per packet {n!r} must be an integer in 1..{MAX_VALUES_PER_PACKET} "
                       f"(a packet fits a 1,500-byte IPv4 MTU)")
    return n


def packet_bytes(values_per_packet: int = VALUES_PER_PACKET) -> int:
    """Bytes of a packet's UDP payload: the header and ``values_per_packet`` int32s."""
    return HEADER_BYTES + values_per_packet * VALUE_BYTES


def frame_bytes(values_per_packet: int = VALUES_PER_PACKET) -> int:
    """Bytes of a packet's Ethernet frame (:data:`FRAME_BYTES` at the default)."""
    return 14 + 20 + 8 + packet_bytes(values_per_packet)

_I = {name: i for i, name in enumerate(FIELD_NAMES)}
_FLAGS, _VERSION, _RESERVED, _PAD, _COUNT = _I["flags"], _I["version"], _I["reserved"], _I["pad"], _I["count"]

MALFORMED_REASONS = ("truncated", "bad_version", "reserved_bits", "bad_count", "trailing_bytes", "bad_bitmap")
"""Why a packet is dropped as malformed, in counter-index order. The first five come from
:func:`decode`; ``bad_bitmap`` is the switch's own check (:mod:`ina.aggregator` rule 7)."""


class InaError(TestbedError):
    """An INA value that cannot be encoded or used (a field out of range, a bad slot count)."""


class MalformedPacket(InaError):
    """Bytes that are not a well-formed INA packet.

    Attributes:
        reason: one of :data:`MALFORMED_REASONS`.
    """

    def __init__(self, reason: str, detail: str):
        super().__init__(f"malformed INA packet ({reason}): {detail}")
        self.reason = reason


def _has(self, flag: Flag) -> bool:
    """Whether every bit of ``flag`` is set."""
    return self.flags & flag == flag


def _replace(self, **changes) -> InaHeader:
    """A copy with ``changes`` applied."""
    return dataclasses.replace(self, **changes)


InaHeader = dataclasses.make_dataclass(
    "InaHeader",
    [(f.name, int) if f.default is None else (f.name, int, dataclasses.field(default=f.default))
     for f in HEADER_FIELDS],
    frozen=True, kw_only=True,
    namespace={"has": _has, "replace": _replace, "__module__": __name__, "__doc__": (
        "The 20-byte INA header, one attribute per :data:`HEADER_FIELDS` entry, in wire order.\n\n"
        "Keyword-only; ``job_id``, ``seq`` and ``slot`` are required, the other fields default to\n"
        "their table defaults (version 1, count 32, everything else 0). Frozen.")},
)


@functools.lru_cache(maxsize=8)
def _values_struct(count: int) -> struct.Struct:
    return struct.Struct(f">{count}i")


@functools.lru_cache(maxsize=8)
def _packet_struct(count: int) -> struct.Struct:
    return struct.Struct(HEADER.format + f"{count}i")


def _check_header(header: InaHeader, n_values: int, values_per_packet: int) -> tuple[int, ...]:
    fields = tuple(getattr(header, name) for name in FIELD_NAMES)  # astuple's deep copies cost a result 10 µs
    for f, v in zip(HEADER_FIELDS, fields, strict=True):
        if not isinstance(v, int) or not 0 <= v < 1 << f.bits:
            raise InaError(f"INA header field {f.name}={v!r} is not an integer in 0..{(1 << f.bits) - 1}")
    if header.version != VERSION:
        raise InaError(f"INA header version={header.version}; only {VERSION} exists")
    if header.flags & RESERVED_FLAGS or header.reserved or header.pad:
        raise InaError(f"INA header has reserved bits set: flags=0x{header.flags:02x}, "
                       f"reserved={header.reserved}, pad={header.pad}")
    if header.count != values_per_packet or n_values != header.count:
        raise InaError(f"INA header count={header.count} with {n_values} values; both must be {values_per_packet}")
    return fields


def _bad_value(values: Sequence[int]) -> str:
    for lane, v in enumerate(values):
        if not isinstance(v, int) or not INT32_MIN <= v <= INT32_MAX:
            return f"value lane {lane} = {v!r} is not an int32 ({INT32_MIN}..{INT32_MAX})"
    return "bad values"


def encode_header(header: InaHeader, n_values: int, values_per_packet: int = VALUES_PER_PACKET) -> bytes:
    """The 20 header bytes of a packet of ``n_values`` values, checked as :func:`encode` checks them:
    ``encode_header(h, len(v)) + values_bytes(v) == encode(h, v)``.

    Raises:
        InaError: as :func:`encode`, the values aside.
    """
    return HEADER.pack(*_check_header(header, n_values, values_per_packet))


def encode(header: InaHeader, values: Sequence[int], values_per_packet: int = VALUES_PER_PACKET) -> bytes:
    """The UDP payload of one INA packet: ``header`` then ``values`` as big-endian int32.

    Encodes only what :func:`decode` accepts: ``decode(encode(h, v)) == (h, tuple(v))``.

    Raises:
        InaError: a field out of its range, version not 1, reserved bits set, ``count`` not
            ``values_per_packet`` or not ``len(values)``, or a value outside int32.
    """
    fields = _check_header(header, len(values), values_per_packet)
    try:
        return _packet_struct(header.count).pack(*fields, *values)
    except struct.error:
        raise InaError(_bad_value(values)) from None


def decode_header(buf: bytes | bytearray | memoryview, values_per_packet: int = VALUES_PER_PACKET) -> InaHeader:
    """The header of an INA packet, checked as :func:`decode` checks the whole packet (the values
    are not read: :func:`values_array` reads them). Raises nothing but :class:`MalformedPacket`
    for any input of a bytes-like type."""
    n = len(buf)
    if n < HEADER_BYTES:
        raise MalformedPacket("truncated", f"{n} bytes; the header alone is {HEADER_BYTES}")
    fields = HEADER.unpack_from(buf)
    if fields[_VERSION] != VERSION:
        raise MalformedPacket("bad_version", f"version {fields[_VERSION]}; expected {VERSION}")
    if fields[_FLAGS] & RESERVED_FLAGS or fields[_RESERVED] or fields[_PAD]:
        raise MalformedPacket("reserved_bits", f"flags=0x{fields[_FLAGS]:02x} reserved={fields[_RESERVED]} "
                                               f"pad={fields[_PAD]}; reserved bits must be 0")
    count = fields[_COUNT]
    if count != values_per_packet:
        raise MalformedPacket("bad_count", f"count {count}; expected {values_per_packet}")
    need = HEADER_BYTES + count * VALUE_BYTES
    if n < need:
        raise MalformedPacket("truncated", f"{n} bytes; {count} values need {need}")
    if n > need:
        raise MalformedPacket("trailing_bytes", f"{n} bytes; {count} values need exactly {need}")
    return InaHeader(**dict(zip(FIELD_NAMES, fields, strict=True)))


def decode(buf: bytes | bytearray | memoryview,
           values_per_packet: int = VALUES_PER_PACKET) -> tuple[InaHeader, tuple[int, ...]]:
    """Parse the UDP payload of an INA packet into its header and values.

    Checks in the order ``docs/ina-internals.md`` lists and raises nothing but :class:`MalformedPacket`
    for any input of a bytes-like type.
    """
    header = decode_header(buf, values_per_packet)
    return header, _values_struct(header.count).unpack_from(buf, HEADER_BYTES)


WIRE_VALUES = np.dtype(">i4")
"""The values' type on the wire: big-endian int32."""


def values_array(buf: bytes | bytearray | memoryview, count: int) -> np.ndarray:
    """The ``count`` values of a packet whose header :func:`decode_header` accepted, as int64
    (sums of int32s never overflow it)."""
    return np.frombuffer(buf, WIRE_VALUES, count, HEADER_BYTES).astype(np.int64)


def values_bytes(values) -> bytes:
    """``values`` (integers, any array-like) as the wire's int32s: the payload after headers.

    Raises:
        InaError: a value outside int32, or one that is not an integer.
    """
    arr = np.asarray(values)
    if arr.size and (arr.dtype.kind not in "iu" or arr.min() < INT32_MIN or arr.max() > INT32_MAX):
        raise InaError(_bad_value(values if isinstance(values, Sequence) else arr.ravel().tolist()))
    return arr.astype(WIRE_VALUES).tobytes()


def worker_port(job_id: int) -> int:
    """The UDP port a worker of ``job_id`` receives results on.

    Raises:
        InaError: a job id whose port would not be a valid UDP port other than the PS's.
    """
    port = WORKER_PORT_BASE + job_id if isinstance(job_id, int) and job_id >= 0 else -1
    if not WORKER_PORT_BASE <= port <= 0xFFFF or port == INA_UDP_PORT:
        raise InaError(f"job id {job_id!r} has no worker port (valid: 0..{0xFFFF - WORKER_PORT_BASE}, "
                       f"not {INA_UDP_PORT - WORKER_PORT_BASE})")
    return port


def check_slots(n_slots: int) -> int:
    """Return ``n_slots`` if it is a power of two in 1..:data:`SLOT_SPACE`, else raise InaError."""
    if not isinstance(n_slots, int) or not 1 <= n_slots <= SLOT_SPACE or n_slots & (n_slots - 1):
        raise InaError(f"slot count {n_slots!r} must be a power of two in 1..{SLOT_SPACE}")
    return n_slots


_SLOT_KEY = struct.Struct(">HI")


def slot_of(job_id: int, seq: int, n_slots: int = SLOT_SPACE) -> int:
    """The aggregator index of packet ``seq`` of job ``job_id``: CRC-32 of ``job_id|seq`` mod ``n_slots``.

    CRC-32 is IEEE 802.3 (``zlib.crc32``: reflected polynomial 0xEDB88320, initial value and
    final XOR 0xFFFFFFFF) over the 6 big-endian bytes of ``job_id`` (16 bits) and ``seq`` (32
    bits). ``n_slots`` must be a power of two, so the modulo is a mask and
    ``slot_of(j, s) & (m - 1) == slot_of(j, s, m)``. O(1).
    """
    mask = check_slots(n_slots) - 1
    try:
        return zlib.crc32(_SLOT_KEY.pack(job_id, seq)) & mask
    except struct.error:
        raise InaError(f"job_id={job_id!r} must be in 0..65535 and seq={seq!r} in 0..{(1 << 32) - 1}") from None


def data_header(job_id: int, seq: int, bitmap: int, count: int, *, flags: int = 0, fan_in: int = 0,
                slot: int | None = None, n_slots: int = SLOT_SPACE) -> bytes:
    """The header of a worker's packet of ``count`` values: ``data_header(j, s, b, len(v)) +
    values_bytes(v) == data_packet(j, s, b, v)``, for a stream whose values are encoded once.

    Raises:
        InaError: a field out of range, reserved flag bits, or ``count`` not in 1..:data:`MAX_VALUES_PER_PACKET`.
    """
    if slot is None:
        slot = slot_of(job_id, seq, n_slots)
    if not 1 <= count <= MAX_VALUES_PER_PACKET or flags & RESERVED_FLAGS:
        raise InaError(f"a data packet carries 1..{MAX_VALUES_PER_PACKET} values and no reserved flags; "
                       f"got {count} values, flags=0x{flags:02x}")
    try:
        return HEADER.pack(VERSION, flags, job_id, seq, bitmap, fan_in, 0, slot, count, 0)
    except struct.error as e:
        raise InaError(f"cannot pack INA packet job_id={job_id!r} seq={seq!r} bitmap={bitmap!r} "
                       f"fan_in={fan_in!r} slot={slot!r}: {e}") from None


def data_packet(job_id: int, seq: int, bitmap: int, values: Sequence[int], *, flags: int = 0,
                fan_in: int = 0, slot: int | None = None, n_slots: int = SLOT_SPACE) -> bytes:
    """A worker's packet, packed in one struct call: :func:`data_header` and its values.

    ``slot`` defaults to :func:`slot_of` ``(job_id, seq, n_slots)``; ``values`` are 1 to
    :data:`MAX_VALUES_PER_PACKET` int32s (``count`` is their number).

    Raises:
        InaError: a field or value out of range, reserved flag bits, or the wrong number of values.
    """
    header = data_header(job_id, seq, bitmap, len(values), flags=flags, fan_in=fan_in, slot=slot, n_slots=n_slots)
    try:
        return header + _values_struct(len(values)).pack(*values)
    except struct.error:
        raise InaError(_bad_value(values)) from None


def to_hex(buf: bytes) -> str:
    """``buf`` as hex, grouped for reading: header fields, then one group per 4-byte value.

    ``bytes.fromhex`` reads it back (it skips the spaces). Shorter input than a header is
    grouped by byte.
    """
    h = buf.hex()
    if len(buf) < HEADER_BYTES:
        return " ".join(h[i:i + 2] for i in range(0, len(h), 2))
    groups, pos = [], 0
    for f in HEADER_FIELDS:
        groups.append(h[pos:pos + f.bits // 4])
        pos += f.bits // 4
    groups += [h[i:i + 8] for i in range(pos, len(h), 8)]
    return " ".join(groups)


class Fixed(NamedTuple):
    """Result of :func:`to_fixed`."""

    values: list[int]
    """The int32 values, one per lane."""
    saturated: tuple[int, ...]
    """Lanes whose scaled value fell outside int32 and were clamped to its range."""


def _check_scale(scale: float) -> None:
    if not isinstance(scale, int | float) or not math.isfinite(scale) or scale <= 0:
        raise InaError(f"fixed-point scale {scale!r} must be a finite number > 0")


def to_fixed(floats: Sequence[float], scale: float) -> Fixed:
    """Scale gradients to int32: ``round(x * scale)`` per lane, clamped to the int32 range.

    Rounding is to nearest, ties to even (as ``numpy.rint`` and ``torch.round``). Lanes that
    were clamped (including +-inf) are reported in :attr:`Fixed.saturated`. O(len(floats)),
    vectorised.

    Raises:
        InaError: a NaN lane (it has no integer value), or a scale that is not finite and > 0.
    """
    _check_scale(scale)
    x = np.asarray(floats, dtype=np.float64).ravel() * scale
    nan = np.isnan(x)
    if nan.any():
        lane = int(np.argmax(nan))
        raise InaError(f"gradient lane {lane} is NaN ({floats[lane]!r} * scale {scale}); it has no int32 value")
    r = np.rint(x)
    saturated = np.flatnonzero((r < INT32_MIN) | (r > INT32_MAX))
    return Fixed(np.clip(r, INT32_MIN, INT32_MAX).astype(np.int64).tolist(), tuple(saturated.tolist()))


def from_fixed(ints: Sequence[int], scale: float) -> list[float]:
    """The floats that int32 values at fixed-point ``scale`` stand for: ``v / scale`` per lane."""
    _check_scale(scale)
    return (np.asarray(ints, dtype=np.float64) / scale).tolist()
