"""Unit tests of the INA wire format: the field table, golden bytes, the codec, the Scapy layer, fuzzing."""

import math
import random
import struct
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT as REPO

from common import errors
from ina.aggregator import Aggregator, JobTree, ParameterServer
from ina.protocol import (
    FIELD_NAMES,
    HEADER_BYTES,
    HEADER_FIELDS,
    INA_UDP_PORT,
    INT32_MAX,
    INT32_MIN,
    MALFORMED_REASONS,
    PACKET_BYTES,
    SLOT_SPACE,
    Flag,
    InaError,
    InaHeader,
    MalformedPacket,
    data_header,
    data_packet,
    decode,
    decode_header,
    encode,
    encode_header,
    from_fixed,
    slot_of,
    to_fixed,
    to_hex,
    values_array,
    values_bytes,
    worker_port,
)

# Written by hand from the field table: version, flags, job_id, seq, bitmap, fan_in, reserved, slot,
# count, pad, then 32 big-endian int32 values.
GOLDEN_DATA = bytes.fromhex(
    "01 00 0007 0000002a 00000004 03 00 1234 0020 0000"
    " 00000001 00000002 00000003 00000004 00000005 00000006 00000007 00000008"
    " 00000009 0000000a 0000000b 0000000c 0000000d 0000000e 0000000f 00000010"
    " 00000011 00000012 00000013 00000014 00000015 00000016 00000017 00000018"
    " 00000019 0000001a 0000001b 0000001c 0000001d 0000001e 0000001f 00000020")
DATA_HEADER = InaHeader(job_id=7, seq=42, bitmap=4, fan_in=3, slot=0x1234)
DATA_VALUES = tuple(range(1, 33))

GOLDEN_RESULT = bytes.fromhex(  # RESULT | ECN | OVERFLOW = 0x01 | 0x08 | 0x10
    "01 19 beef deadbeef 00000000 00 00 0abc 0020 0000"
    " 7fffffff 80000000 ffffffff 00000000 00000001 fffffffe 00010000 ffff0000"
    " 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000"
    " 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000"
    " 00000000 00000000 00000000 00000000 00000000 00000000 00000000 0000002a")
RESULT_HEADER = InaHeader(flags=Flag.RESULT | Flag.ECN | Flag.OVERFLOW, job_id=0xBEEF, seq=0xDEADBEEF, slot=0xABC)
RESULT_VALUES = (INT32_MAX, INT32_MIN, -1, 0, 1, -2, 65536, -65536) + (0,) * 23 + (42,)

GOLDEN_COLLISION = bytes.fromhex(  # COLLISION, bit 31, slot 0xffff, every value -2
    "01 02 0003 00000001 80000000 02 00 ffff 0020 0000" + " fffffffe" * 32)
COLLISION_HEADER = InaHeader(flags=Flag.COLLISION, job_id=3, seq=1, bitmap=1 << 31, fan_in=2, slot=0xFFFF)
COLLISION_VALUES = (-2,) * 32

GOLDEN = [
    pytest.param(GOLDEN_DATA, DATA_HEADER, DATA_VALUES, id="data"),
    pytest.param(GOLDEN_RESULT, RESULT_HEADER, RESULT_VALUES, id="result"),
    pytest.param(GOLDEN_COLLISION, COLLISION_HEADER, COLLISION_VALUES, id="collision"),
]


def test_field_table_is_the_header():
    """The table is 20 bytes in wire order, and InaHeader's attributes are exactly its fields."""
    assert HEADER_BYTES == 20 and PACKET_BYTES == 148
    assert sum(f.bits for f in HEADER_FIELDS) == 160
    assert FIELD_NAMES == ("version", "flags", "job_id", "seq", "bitmap", "fan_in", "reserved", "slot", "count",
                           "pad")
    assert [f.bits for f in HEADER_FIELDS] == [8, 8, 16, 32, 32, 8, 8, 16, 16, 16]
    assert tuple(f.name for f in __import__("dataclasses").fields(InaHeader)) == FIELD_NAMES
    assert [int(f) for f in Flag] == [1, 2, 4, 8, 16, 32]


@pytest.mark.parametrize(("golden", "header", "values"), GOLDEN)
def test_golden_bytes_codec(golden, header, values):
    """Hand-written bytes decode to the header and values, and encode back to the same bytes."""
    assert decode(golden) == (header, values)
    assert encode(header, values) == golden
    assert bytes.fromhex(to_hex(golden)) == golden


def test_golden_data_packet_fast_path():
    """The worker's one-struct packer builds the golden data packet."""
    assert data_packet(7, 42, 4, DATA_VALUES, fan_in=3, slot=0x1234) == GOLDEN_DATA
    assert data_packet(7, 42, 4, DATA_VALUES) == encode(DATA_HEADER.replace(fan_in=0, slot=slot_of(7, 42)),
                                                        DATA_VALUES)


@pytest.mark.parametrize(("golden", "header", "values"), GOLDEN)
def test_golden_bytes_stream_codec(golden, header, values):
    """A header and its values encoded apart (a stream's values once, a header per packet) are the
    golden bytes; decode_header and values_array read them back."""
    assert encode_header(header, len(values)) + values_bytes(values) == golden
    assert decode_header(golden) == header
    arr = values_array(golden, header.count)
    assert arr.dtype == np.int64 and tuple(arr.tolist()) == values


def test_stream_packets_equal_data_packets():
    """data_header before a slice of one values_bytes of the vector is data_packet of that slice."""
    rng = random.Random(3)
    vector = [rng.randint(INT32_MIN, INT32_MAX) for _ in range(5 * 256)]
    wire = values_bytes(np.array(vector, dtype=np.int64))
    for k in range(5):
        packet = data_header(9, 100 + k, 2, 256) + wire[k * 1024:(k + 1) * 1024]
        assert packet == data_packet(9, 100 + k, 2, vector[k * 256:(k + 1) * 256])
    with pytest.raises(InaError, match="1..363 values"):
        data_header(9, 1, 2, 0)


def test_values_bytes_refuses_what_int32_cannot_carry():
    """values_bytes names a lane outside int32 or not an integer, as encode does."""
    with pytest.raises(InaError, match="lane 2"):
        values_bytes([0, 1, INT32_MAX + 1])
    with pytest.raises(InaError, match="lane 0"):
        values_bytes(np.array([INT32_MIN - 1, 0]))
    with pytest.raises(InaError, match="lane 1"):
        values_bytes([0, 1.5])
    assert values_bytes([]) == b""


@pytest.mark.parametrize(("golden", "header", "values"), GOLDEN)
def test_golden_bytes_scapy(golden, header, values):
    """The Scapy layer dissects the golden bytes inside Ethernet/IPv4/UDP and builds them back."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    from ina.scapy_layer import Ina

    frame = Ether(bytes(Ether() / IP() / UDP(sport=40000, dport=INA_UDP_PORT) / golden))
    ina = frame[Ina]
    for name in FIELD_NAMES:
        assert int(getattr(ina, name)) == getattr(header, name), name
    assert ina.values == list(values)
    assert bytes(ina) == golden
    built = Ina(**{name: getattr(header, name) for name in FIELD_NAMES}, values=list(values))
    assert bytes(built) == golden
    assert bytes(UDP() / built)[2:4] == struct.pack(">H", INA_UDP_PORT)
    result = Ether(bytes(Ether() / IP() / UDP(sport=INA_UDP_PORT, dport=worker_port(3)) / golden))
    assert bytes(result[Ina]) == golden  # a result, from the PS's port to a worker's


def test_worker_ports_are_per_job_and_never_the_ps_port():
    assert worker_port(0) == 20000 and worker_port(45535) == 65535
    for bad in (-1, 45536, INA_UDP_PORT - 20000, 1.0, None):
        with pytest.raises(InaError):
            worker_port(bad)


def test_scapy_layer_is_derived_from_the_table():
    """The Scapy fields are the table's, in order and width, then the values."""
    from ina.scapy_layer import FLAG_NAMES, Ina

    fields = Ina.fields_desc
    assert [f.name for f in fields] == [*FIELD_NAMES, "values"]
    assert [f.sz * 8 if hasattr(f, "sz") else f.size for f in fields[:-1]] == [f.bits for f in HEADER_FIELDS]
    assert FLAG_NAMES[:6] == ["RESULT", "COLLISION", "RESEND", "ECN", "OVERFLOW", "PARTIAL"]


@pytest.mark.parametrize("n", [1, 32, 256, 363])
def test_scapy_layer_carries_any_values_per_packet(n):
    """Built without a count, the layer counts its values; its bytes are the codec's at any values per
    packet, and it dissects them back."""
    from ina.scapy_layer import Ina

    values = [(-1) ** k * k for k in range(n)]
    wire = data_packet(3, 9, 1 << 2, values, slot=5)
    built = Ina(job_id=3, seq=9, bitmap=1 << 2, slot=5, values=values)
    assert bytes(built) == wire
    assert Ina(wire).count == n and Ina(wire).values == values


def _patched(offset: int, byte: int) -> bytes:
    b = bytearray(GOLDEN_DATA)
    b[offset] = byte
    return bytes(b)


@pytest.mark.parametrize(("buf", "reason"), [
    (b"", "truncated"),
    (GOLDEN_DATA[:19], "truncated"),
    (GOLDEN_DATA[:20], "truncated"),
    (GOLDEN_DATA[:-1], "truncated"),
    (_patched(0, 0), "bad_version"),
    (_patched(0, 2), "bad_version"),
    (_patched(1, 0x40), "reserved_bits"),
    (_patched(1, 0x80), "reserved_bits"),
    (_patched(13, 1), "reserved_bits"),
    (_patched(18, 1), "reserved_bits"),
    (_patched(17, 31)[:-4], "bad_count"),
    (_patched(17, 33) + b"\0" * 4, "bad_count"),
    (GOLDEN_DATA + b"\0", "trailing_bytes"),
])
def test_decode_rejects_malformed(buf, reason):
    """Each malformation raises MalformedPacket with its reason, a TestbedError."""
    with pytest.raises(MalformedPacket) as err:
        decode(buf)
    assert err.value.reason == reason and reason in MALFORMED_REASONS
    assert isinstance(err.value, errors.TestbedError)
    assert reason in str(err.value)


@pytest.mark.parametrize(("header", "values", "match"), [
    (DATA_HEADER.replace(job_id=1 << 16), DATA_VALUES, "job_id=65536"),
    (DATA_HEADER.replace(seq=-1), DATA_VALUES, "seq=-1"),
    (DATA_HEADER.replace(version=2), DATA_VALUES, "version=2"),
    (DATA_HEADER.replace(flags=0x40), DATA_VALUES, "reserved bits"),
    (DATA_HEADER.replace(pad=1), DATA_VALUES, "reserved bits"),
    (DATA_HEADER, DATA_VALUES[:-1], "count=32 with 31 values"),
    (DATA_HEADER.replace(count=31), DATA_VALUES[:-1], "count=31"),
    (DATA_HEADER, (INT32_MAX + 1,) + DATA_VALUES[1:], "lane 0"),
    (DATA_HEADER, DATA_VALUES[:-1] + (1.5,), "lane 31"),
])
def test_encode_rejects_what_decode_would(header, values, match):
    """encode refuses a header or values that would not decode back, naming the field or lane."""
    with pytest.raises(InaError, match=match):
        encode(header, values)


def test_data_packet_rejects_bad_input():
    """The fast path checks the value count (1 to 363, a 1,500-byte MTU), reserved flags and ranges
    too; any count in range is the packet's ``count``."""
    for n in (0, 364):
        with pytest.raises(InaError, match="1..363 values"):
            data_packet(1, 1, 1, [0] * n)
    for n in (1, 31, 256, 363):
        h, values = decode(data_packet(1, 1, 1, list(range(n))), n)
        assert h.count == n and values == tuple(range(n))
    assert len(data_packet(1, 1, 1, [0] * 363)) + 20 + 8 == 1500
    with pytest.raises(InaError, match="flags=0x80"):
        data_packet(1, 1, 1, [0] * 32, flags=0x80)
    with pytest.raises(InaError, match="lane 3"):
        data_packet(1, 1, 1, [0, 0, 0, INT32_MIN - 1] + [0] * 28)
    with pytest.raises(InaError, match="job_id=70000"):
        data_packet(70000, 1, 1, [0] * 32)


def test_round_trip_random_headers():
    """decode(encode(h, v)) == (h, v) for random valid headers and values."""
    rng = random.Random(7)
    for _ in range(300):
        fields = {f.name: rng.randrange(1 << f.bits) for f in HEADER_FIELDS}
        fields.update(version=1, flags=rng.randrange(64), reserved=0, pad=0, count=32)
        header = InaHeader(**fields)
        values = tuple(rng.randint(INT32_MIN, INT32_MAX) for _ in range(32))
        assert decode(encode(header, values)) == (header, values)


def _crc32_reference(data: bytes) -> int:
    """Bitwise CRC-32 (IEEE 802.3, reflected), independent of zlib."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_slot_hash_is_documented_crc32():
    """slot_of is CRC-32 of job_id|seq (6 bytes, big-endian), masked; masking a 16-bit slot equals hashing smaller."""
    assert _crc32_reference(b"123456789") == 0xCBF43926  # the standard check value
    rng = random.Random(3)
    for _ in range(200):
        job, seq = rng.randrange(1 << 16), rng.randrange(1 << 32)
        expected = _crc32_reference(job.to_bytes(2, "big") + seq.to_bytes(4, "big")) & 0xFFFF
        assert slot_of(job, seq) == expected
        for n in (1, 2, 64, 1024):
            assert slot_of(job, seq, n) == expected & (n - 1)
    assert slot_of(7, 42) == _crc32_reference(bytes.fromhex("00070000002a")) & 0xFFFF


@pytest.mark.parametrize("n_slots", [0, 3, 100, SLOT_SPACE * 2, 2.0])
def test_slot_count_must_be_power_of_two(n_slots):
    """Slot counts that are not powers of two in 1..65536 are refused with the value."""
    with pytest.raises(InaError, match="power of two"):
        slot_of(1, 1, n_slots)


def test_to_fixed_rounds_saturates_and_reports():
    """Round to nearest (ties to even), clamp to int32 and report clamped lanes; from_fixed divides."""
    fixed = to_fixed([0.5, 1.5, -2.5, 0.26, 1e12, -math.inf, 2147483647.4, -2147483648.6], 1.0)
    assert fixed.values == [0, 2, -2, 0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN]
    assert fixed.saturated == (4, 5, 7)
    scaled = to_fixed([0.001, -0.25], 1000.0)
    assert scaled == ([1, -250], ())
    assert from_fixed(scaled.values, 1000.0) == [0.001, -0.25]


def test_to_fixed_matches_python_rounding():
    """The vectorised scaling equals round(x * scale) lane by lane (ties to even) on random floats."""
    rng = random.Random(5)
    floats = [rng.uniform(-3000.0, 3000.0) for _ in range(2000)] + [k + 0.5 for k in range(-20, 20)]
    for scale in (1.0, 1000.0, float(2 ** 20)):
        want = [min(max(round(x * scale), INT32_MIN), INT32_MAX) for x in floats]
        fixed = to_fixed(floats, scale)
        assert fixed.values == want
        clamped = tuple(i for i, x in enumerate(floats) if not INT32_MIN <= round(x * scale) <= INT32_MAX)
        assert fixed.saturated == clamped


def test_to_fixed_refuses_nan_and_bad_scale():
    """NaN has no int32 value; a scale must be finite and positive."""
    with pytest.raises(InaError, match="lane 1 is NaN"):
        to_fixed([0.0, math.nan], 10.0)
    for scale in (0, -1.0, math.inf, math.nan):
        with pytest.raises(InaError, match="scale"):
            to_fixed([1.0], scale)
        with pytest.raises(InaError, match="scale"):
            from_fixed([1], scale)


def _mutations(rng: random.Random, n: int):
    """Random bytes, and valid packets with random bytes changed, cut or extended."""
    valid = [GOLDEN_DATA, GOLDEN_RESULT, GOLDEN_COLLISION,
             data_packet(1, 5, 2, [0] * 32), data_packet(1, 5, 1, [INT32_MAX] * 32)]
    for k in range(n):
        if k % 3 == 0:
            yield rng.randbytes(rng.choice([rng.randrange(40), rng.randrange(300), PACKET_BYTES]))
            continue
        buf = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(HEADER_BYTES if rng.random() < 0.8 else len(buf))] = rng.randrange(256)
        if rng.random() < 0.2:
            buf = buf[:rng.randrange(len(buf) + 1)] if rng.random() < 0.5 else buf + rng.randbytes(rng.randint(1, 8))
        yield bytes(buf)


def test_fuzz_only_malformed_packet_escapes():
    """Random and mutated bytes: decode raises only MalformedPacket; the switch and PS never raise."""
    rng = random.Random(11)
    switch, ps = Aggregator(4), ParameterServer()
    for job in (1, 3, 7):
        switch.install(job, 2, "root")
        ps.install(JobTree.two_level(job, 2, [1]))
    for buf in _mutations(rng, 3000):
        try:
            decode(buf)
        except MalformedPacket:
            pass
        for out in switch.process(buf, ecn_ce=rng.random() < 0.5) + ps.process(buf):
            assert out.dest.value in ("to_ps", "to_workers", "drop")
    assert switch.stats.packets == ps.stats.packets == 3000
    assert sum(switch.stats.malformed.values()) > 500


def test_pure_import():
    """Importing the protocol, engine and vectors loads no Scapy, torch, Mininet or os-ken."""
    code = ("import sys, ina, ina.aggregator, ina.protocol, ina.vectors; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scapy', 'torch', 'mininet', 'os_ken')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
