"""The INA aggregators on the wire: the P4 program (``ina/p4/aggregator.p4``) on bmv2
``simple_switch``, and the software engine's process (:mod:`ina.softswitch`), against the engine.

The program's constants and header must be the protocol's (checked from the source, no bmv2
needed). Each aggregator, on veths (:class:`ina.rig.SwitchRig`), replays every test vector of
:mod:`ina.vectors` byte for byte with the same counters, and crafted packets (mutated, truncated,
extended; a fixed seed) give the same output and counters as :class:`ina.aggregator.Aggregator` while
the switch keeps forwarding. bmv2 comes from P4_PREFIX, /opt/p4 or the PATH; where there is none
its tests are skipped naming why, and the software engine's still run. The tests on veths need root
and add a namespace, veths and switch processes to the host: they are in the emulation tier.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from collections import Counter

import pytest
from conftest import needs

from ina.aggregator import Aggregator, Dest, JobEntry, JobTraffic, Role
from ina.p4 import build
from ina.p4.switch import STAT_NAMES
from ina.protocol import (
    HEADER_BYTES,
    HEADER_FIELDS,
    INA_UDP_PORT,
    PACKET_BYTES,
    VALUES_PER_PACKET,
    Flag,
    data_packet,
    decode,
    slot_of,
)
from ina.rig import ENGINES, SwitchRig
from ina.vectors import VECTORS, nonzero_stats

SOURCE = open(build.PROGRAM).read()
CONST = re.compile(r"const bit<\d+> (\w+) = (0x[0-9A-Fa-f]+|\d+);")


def _consts() -> dict[str, int]:
    return {m.group(1): int(m.group(2), 0) for m in CONST.finditer(SOURCE)}


def test_program_constants_are_the_protocols():
    """The P4 program's port, header size, lanes and flags are ina.protocol's."""
    c = _consts()
    assert c["INA_UDP_PORT"] == INA_UDP_PORT
    assert c["HEADER_BYTES"] == HEADER_BYTES and HEADER_BYTES + VALUES_PER_PACKET * 4 == PACKET_BYTES
    assert "const bit<16> PAYLOAD_BYTES = HEADER_BYTES + LANES * 4;" in SOURCE
    assert re.search(rf"#define LANES {VALUES_PER_PACKET}\b", SOURCE)
    default = re.search(r"#else\n(#define FOR_LANES\(X\).*?)\n#endif", SOURCE, re.S).group(1)
    assert default.replace("\\", " ").split() == build.lanes_macro(VALUES_PER_PACKET).split()
    assert {name: c[f"F_{name}"] for name in Flag.__members__} == {n: int(f) for n, f in Flag.__members__.items()}
    assert c["F_RESERVED"] == 0xC0 and c["F_KEPT"] == Flag.ECN | Flag.OVERFLOW


def test_stats_register_indexes_are_the_engines_counters_in_order():
    """The program's stats register indexes are the engine's counters, in order, and all of them."""
    c = _consts()
    st = sorted(((v, k) for k, v in c.items() if k.startswith("ST_")))
    assert [v for v, _ in st] == list(range(len(STAT_NAMES)))
    names = [k[3:].lower().replace("malformed_", "malformed:") for _, k in st]
    assert names == list(STAT_NAMES)
    assert re.search(rf"#define N_STATS {len(STAT_NAMES)}\b", SOURCE)


def test_header_declaration_is_the_field_table():
    """The program's INA header declares ina.protocol's fields, in order, with their widths."""
    body = re.search(r"header ina_t \{(.*?)\}", SOURCE, re.S).group(1)
    fields = re.findall(r"bit<(\d+)> (\w+);", body)
    assert [(name, int(bits)) for bits, name in fields] == [(f.name, f.bits) for f in HEADER_FIELDS]


def test_flattened_library_links_are_rebuilt(tmp_path):
    """A library directory whose links were flattened into text files gets its links back; real links are left."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libx.so.0.0.0").write_bytes(b"\x7fELF" + bytes(400))
    (lib / "libx.so.0").write_text("libx.so.0.0.0")
    (lib / "notes.txt").write_text("not a link name")
    out = build.relinked_libs(str(lib), str(tmp_path / "rt"))
    assert out == str(tmp_path / "rt")
    assert os.path.realpath(tmp_path / "rt" / "libx.so.0") == str(lib / "libx.so.0.0.0")
    assert os.path.realpath(tmp_path / "rt" / "notes.txt") == str(lib / "notes.txt")
    (lib / "libx.so.0").unlink()
    (lib / "libx.so.0").symlink_to("libx.so.0.0.0")
    assert build.relinked_libs(str(lib), str(tmp_path / "rt2")) is None  # real links: nothing to rebuild


def test_no_toolchain_is_reported_not_raised(tmp_path, monkeypatch):
    """Without bmv2 anywhere the finder returns None and why, naming P4_PREFIX and where it looked."""
    monkeypatch.setenv("P4_PREFIX", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(build, "DEFAULT_PREFIX", str(tmp_path / "none"))
    tc, why = build.find_toolchain()
    assert tc is None and "P4_PREFIX" in why and str(tmp_path) in why


# -- on bmv2 ---------------------------------------------------------------------------------------


def needs_root_and_ethtool() -> None:
    """The rigs' veths and namespace need root (a skip without); their offloads, ethtool (the set-up's)."""
    if os.geteuid() != 0:
        pytest.skip("the aggregators' veths and network namespace need root")
    needs(None if shutil.which("ethtool") else "not installed", "ethtool")


def _bmv2_missing() -> str | None:
    tc, why = build.find_toolchain()
    if tc is None:
        return why
    return build.runs(tc)


@pytest.fixture(scope="module", params=ENGINES)
def rig(request, tmp_path_factory):
    """Three aggregators on veths: bmv2 running the P4 program, or the software engine's process."""
    from conftest import leftovers

    needs_root_and_ethtool()
    n = max(len(v["switches"]) for v in VECTORS.values())
    log_dir = str(tmp_path_factory.mktemp(request.param))
    if request.param == "bmv2":
        why = _bmv2_missing()
        if why:
            pytest.skip(f"bmv2: {why}")
        tc, _ = build.find_toolchain()
        rig = SwitchRig(n, log_dir, "bmv2", tc, build.compile_program(tc))
    else:
        rig = SwitchRig(n, log_dir, "software")
    with rig:
        yield rig
    assert not leftovers(), f"left behind: {leftovers()}"


def _entries(jobs) -> dict[int, JobEntry]:
    return {job_id: JobEntry(fan_in, Role(role), out_bit) for job_id, fan_in, role, out_bit in jobs}


@pytest.mark.emulation
@pytest.mark.parametrize("name", sorted(VECTORS))
def test_switch_replays_the_vector(rig, name):
    """Every switch step's packet gives exactly the recorded output (destination and bytes), drops
    included; then every switch's counters equal the engine's."""
    v = VECTORS[name]
    index = {node: k for k, node in enumerate(sorted(v["switches"]))}
    for node, k in index.items():
        rig.configure(k, v["switches"][node]["n_slots"], _entries(v["switches"][node]["jobs"]))
    packets = {n: bytes.fromhex(h) for n, h in v["packets"].items()}
    for i, (node, ecn_ce, packet, outputs) in enumerate(v["steps"]):
        if node not in index:
            continue  # a parameter-server step
        got = rig.step(index[node], packets[packet], ecn_ce)
        want = [(dest, packets[p]) for dest, _, p in outputs if dest != Dest.DROP.value]
        assert got == want, f"{name} step {i} at {node} ({outputs[0][1]}): got {[(d, p.hex()) for d, p in got]}"
    forwarded: dict[str, Counter] = {node: Counter() for node in index}
    for node, _, _, outputs in v["steps"]:
        for dest, _, p in outputs:
            if node in index and dest != Dest.DROP.value:
                forwarded[node][decode(packets[p])[0].job_id, dest] += 1
    for node, k in index.items():
        assert nonzero_stats(rig.stats(k)) == v["stats"].get(node, {}), f"{name}: counters of {node}"
        jobs = {j for j, _ in forwarded[node]} | {j for j, *_ in v["switches"][node]["jobs"]}
        got = rig.job_traffic(k, jobs)
        assert {j: (t.to_ps, t.to_workers) for j, t in got.items()} == {
            j: (forwarded[node][j, Dest.TO_PS.value], forwarded[node][j, Dest.TO_WORKERS.value]) for j in jobs}, \
            f"{name}: per-job packets of {node}"


@pytest.mark.emulation
def test_claims_beyond_the_pat_meter_fall_back(rig):
    """Rule 8a on the engine itself: the PAT meter set to one claim per 10 s, 4 deep; the first
    packets of 12 seqs (fan-in 2, so none completes; each its own slot): 4 claim and are absorbed,
    8 fall back to the PS with COLLISION, counted ``over_pat``; a second packet of a refused seq
    falls back too. Unmetered again, every seq claims."""
    sw = rig.switches[0]
    rig.configure(0, 64, {3: JobEntry(2, Role.LEAF, 1)})
    try:
        sw.set_pat(0.1, 4)
        outs = [rig.step(0, data_packet(3, seq, 1, [seq] * VALUES_PER_PACKET, slot=seq)) for seq in range(12)]
        refused = [seq for seq, out in enumerate(outs) if out]
        assert len(refused) == 8 and refused == list(range(4, 12))
        assert all(d == Dest.TO_PS.value and decode(p)[0].has(Flag.COLLISION) for out in outs for d, p in out)
        ((dest, p),) = rig.step(0, data_packet(3, 11, 2, [1] * VALUES_PER_PACKET, slot=11))
        assert dest == Dest.TO_PS.value and decode(p)[0].has(Flag.COLLISION)
        st = rig.stats(0)
        assert (st.claims, st.over_pat, st.collisions) == (4, 8, 9)
    finally:
        sw.set_pat(None)
    rig.configure(0, 64, {3: JobEntry(2, Role.LEAF, 1)})
    assert not any(rig.step(0, data_packet(3, seq, 1, [seq] * VALUES_PER_PACKET, slot=seq)) for seq in range(12))
    assert (rig.stats(0).claims, rig.stats(0).over_pat) == (12, 0)


LANE_VECTORS = {
    "sum_8_workers": "a claim, then seven packets added lane by lane; the aggregate carries every lane's sum",
    "overflow_exact_at_ps": "the int32 wrap found lane by lane (lanes 0-2) and flagged; resends pass whole",
    "malformed_dropped": "the count and length checks at this payload's size (bad count, truncated, trailing bytes)",
    "release_and_reuse": "a freed slot's next claim replaces every lane; fallbacks pass their values unchanged",
}
"""The vectors whose paths through the program depend on the values per packet, and what each
takes through the lanes. The others differ from these only in what no lane enters: fan-in and
order (the other sums), flags (ECN, collisions, resends) and roles (two levels)."""


@pytest.mark.emulation
@pytest.mark.parametrize("engine", ENGINES)
def test_switch_replays_the_vectors_at_256_values_per_packet(engine, tmp_path):
    """Values per packet is the program's parameter: built for 256 lanes (bmv2 compiled with 256
    value registers per slot, the software process told so), each engine replays the vectors whose
    paths depend on the lanes (:data:`LANE_VECTORS`), generated at 256 lanes
    (:func:`ina.vectors.generate`), byte for byte with the engine's counters, and drops a packet of
    the stored 32 lanes as ``bad_count``. (What it leaves behind is checked with the module's rigs,
    when they stop.)"""
    from ina.vectors import generate

    needs_root_and_ethtool()
    lanes, vectors = 256, {name: v for name, v in generate(256).items() if name in LANE_VECTORS}
    assert sorted(vectors) == sorted(LANE_VECTORS)
    counted = {c for v in vectors.values() for node in v["switches"] for c in v["stats"].get(node, {})}
    assert {"claims", "contributions", "aggregates", "overflows", "released", "collisions", "malformed:bad_count",
            "malformed:truncated", "malformed:trailing_bytes"} <= counted, counted
    n = max(len(v["switches"]) for v in vectors.values())
    if engine == "bmv2":
        why = _bmv2_missing()
        if why:
            pytest.skip(f"bmv2: {why}")
        tc, _ = build.find_toolchain()
        rig = SwitchRig(n, str(tmp_path), "bmv2", tc, build.compile_program(tc, lanes=lanes))
    else:
        rig = SwitchRig(n, str(tmp_path), "software", values_per_packet=lanes)
    with rig:
        for name, v in sorted(vectors.items()):
            index = {node: k for k, node in enumerate(sorted(v["switches"]))}
            for node, k in index.items():
                rig.configure(k, v["switches"][node]["n_slots"], _entries(v["switches"][node]["jobs"]))
            packets = {p: bytes.fromhex(h) for p, h in v["packets"].items()}
            for i, (node, ecn_ce, packet, outputs) in enumerate(v["steps"]):
                if node in index:
                    want = [(dest, packets[p]) for dest, _, p in outputs if dest != Dest.DROP.value]
                    assert rig.step(index[node], packets[packet], ecn_ce) == want, f"{name} step {i} at {node}"
            for node, k in index.items():
                assert nonzero_stats(rig.stats(k)) == v["stats"].get(node, {}), f"{name}: counters of {node}"
        rig.configure(0, 64, {1: JobEntry(2, Role.ROOT)})
        assert rig.step(0, data_packet(1, 0, 1, [1] * VALUES_PER_PACKET)) == []
        assert rig.stats(0).malformed["bad_count"] == 1 and rig.stats(0).claims == 0


def _mutations(rnd: random.Random, valid: list[bytes]) -> list[bytes]:
    """Crafted packets: valid ones, one header byte set to random, truncated, extended, random."""
    out = []
    for _ in range(240):
        p = bytearray(rnd.choice(valid))
        kind = rnd.randrange(5)
        if kind == 1:
            p[rnd.randrange(HEADER_BYTES)] = rnd.randrange(256)
        elif kind == 2:
            p = p[:rnd.randrange(len(p))]
        elif kind == 3:
            p += bytes(rnd.randrange(1, 9))
        elif kind == 4:
            p = bytearray(rnd.randbytes(rnd.randrange(200)))
        out.append(bytes(p))
    return out


@pytest.mark.emulation
def test_switch_and_engine_agree_on_crafted_packets_and_the_switch_keeps_working(rig):
    """240 crafted packets (fixed seed) into the switch and the engine: the same outputs byte for byte
    and the same counters, with two jobs on a 4-slot pool so that collisions happen too."""
    rnd = random.Random(12)
    jobs = {1: JobEntry(3, Role.ROOT), 2: JobEntry(2, Role.LEAF, out_bit=5)}
    valid = [data_packet(job, seq, 1 << w, [rnd.randrange(-2**31, 2**31) for _ in range(VALUES_PER_PACKET)],
                         slot=slot_of(job, seq))
             for job in (1, 2, 3) for seq in range(6) for w in range(3)]
    engine = Aggregator(4)
    for job_id, e in jobs.items():
        engine.install(job_id, e.fan_in, e.role, e.out_bit)
    rig.configure(0, 4, jobs)
    crafted = _mutations(rnd, valid)
    for i, p in enumerate(crafted):
        ce = rnd.random() < 0.2
        want = [(o.dest.value, o.data) for o in engine.process(p, ce) if o.dest is not Dest.DROP]
        assert rig.step(0, p, ce) == want, f"crafted packet {i}: {p.hex()}"
    assert nonzero_stats(rig.stats(0)) == nonzero_stats(engine.stats)
    by_job = engine.job_traffic()  # mutated job ids included
    assert rig.job_traffic(0, [*by_job, 4]) == {**by_job, 4: JobTraffic()}
    assert all(by_job[j].to_ps > 0 for j in (1, 2, 3))
    assert sum(engine.stats.malformed.values()) > 50 and engine.stats.collisions > 0 and engine.stats.aggregates > 0


@pytest.mark.emulation
def test_other_udp_is_not_ina_and_is_counted_not_aggregated(rig):
    """UDP with neither port the INA port is not parsed as INA: no plain entry, so dropped and
    counted as ``other``; the same bytes to the INA port are an INA packet."""
    from ina.rig import ina_frame

    rig.configure(0, 64, {1: JobEntry(2, Role.ROOT)})
    p = data_packet(1, 0, 1, [1] * VALUES_PER_PACKET)
    assert rig.step_frame(0, ina_frame(p, dst_port=INA_UDP_PORT + 1)) == []
    assert rig.switches[0].counters()["other"] == 1 and rig.stats(0).packets == 0
    assert rig.step_frame(0, ina_frame(p)) == [] and rig.stats(0).claims == 1  # absorbed: fan-in 2


@pytest.mark.emulation
def test_a_jobs_packets_from_a_host_outside_it_are_dropped_and_counted(rig):
    """Job 1 installed with its members (10.0.0.1 and 10.0.0.3): a packet claiming worker 0's bit
    from 10.0.0.9 is dropped as ``foreign`` before it can take the slot; the members' packets then
    aggregate to their own sum; a job installed without members takes any source."""
    import ipaddress

    from ina.rig import ina_frame

    members = frozenset(int(ipaddress.IPv4Address(a)) for a in ("10.0.0.1", "10.0.0.3"))
    rig.configure(0, 64, {1: JobEntry(2, Role.ROOT, 0, members), 2: JobEntry(2, Role.ROOT)})
    assert rig.step_frame(0, ina_frame(data_packet(1, 0, 1 << 0, [100] * VALUES_PER_PACKET), src_ip="10.0.0.9")) == []
    stats = rig.stats(0)
    assert stats.foreign == 1 and stats.claims == 0
    assert rig.step_frame(0, ina_frame(data_packet(1, 0, 1 << 0, [1] * VALUES_PER_PACKET))) == []
    out = rig.step_frame(0, ina_frame(data_packet(1, 0, 1 << 1, [2] * VALUES_PER_PACKET), src_ip="10.0.0.3"))
    assert [decode(f)[1] for _, f in out] == [(3,) * VALUES_PER_PACKET]
    assert rig.step_frame(0, ina_frame(data_packet(2, 0, 1 << 0, [1] * VALUES_PER_PACKET), src_ip="10.0.0.9")) == []
    assert rig.stats(0).foreign == 1 and rig.stats(0).claims == 2


def _ip(a: str) -> int:
    import ipaddress

    return int(ipaddress.IPv4Address(a))


@pytest.mark.emulation
def test_a_result_is_copied_to_each_child_of_its_job_addressed_to_it(rig):
    """Results multicast: job 1's entry lists three children; the result that frees its slot leaves
    once per child, the Ethernet and IPv4 destination the child's, the IPv4 checksum valid, UDP
    checksum 0, everything else (sources, ports, payload) as it came; job 2, without copies, gets
    its result through unchanged. Replaced by an entry with two children the job's results go to
    those two; removed, they pass unchanged (each engine's groups and copies undone)."""
    import dataclasses

    from ina.aggregator import Copy
    from ina.protocol import WORKER_PORT_BASE, encode
    from ina.rig import ina_frame
    from ina.softswitch import ipv4_checksum

    children = tuple(Copy(_ip(f"10.0.0.{i}"), f"00:00:00:00:00:{i:02x}") for i in (5, 6, 7))
    rig.configure(0, 64, {1: JobEntry(2, Role.ROOT, copies=children), 2: JobEntry(2, Role.ROOT)})

    def result_of(job_id: int, seq: int) -> bytes:
        h, _ = decode(data_packet(job_id, seq, 1, [0] * VALUES_PER_PACKET))
        return encode(dataclasses.replace(h, flags=int(Flag.RESULT), bitmap=0), [7] * VALUES_PER_PACKET)

    def results_out(job_id: int, seq: int) -> list[bytes]:
        frame = ina_frame(result_of(job_id, seq), src_port=INA_UDP_PORT, dst_port=WORKER_PORT_BASE + job_id)
        out = rig.step_frame(0, frame, whole=True)
        assert {d for d, _ in out} <= {"to_workers"}, out
        for f in (f for _, f in out):
            assert f[6:14] == frame[6:14] and f[26:30] == frame[26:30] and f[34:38] == frame[34:38]
            assert f[42:] == frame[42:] and ipv4_checksum(f[14:34]) == 0, f.hex()
            assert f[40:42] == (b"\0\0" if f[30:34] != frame[30:34] else frame[40:42])
        return sorted(f for _, f in out)

    assert rig.step(0, data_packet(1, 0, 1, [1] * VALUES_PER_PACKET)) == []  # claims the slot
    out = results_out(1, 0)
    assert [(f[0:6].hex(":"), int.from_bytes(f[30:34], "big")) for f in out] == [(c.mac, c.ip) for c in children]
    assert rig.stats(0).released == 1 and rig.stats(0).results == 1
    assert rig.job_traffic(0, [1])[1] == JobTraffic(0, 1)
    assert [f[30:34] for f in results_out(2, 0)] == [bytes([10, 0, 0, 2])]

    rig.switches[0].add_jobs({1: JobEntry(2, Role.ROOT, copies=children[1:])})
    assert [int.from_bytes(f[30:34], "big") for f in results_out(1, 1)] == [c.ip for c in children[1:]]
    rig.switches[0].remove_jobs([1])
    assert [f[30:34] for f in results_out(1, 2)] == [bytes([10, 0, 0, 2])]


@pytest.mark.emulation
@pytest.mark.parametrize("rig", ["bmv2"], indirect=True)  # the runtime CLI is bmv2's
def test_the_switchs_cli_refuses_aloud_and_is_started_again_once_it_exits(rig):
    """bmv2's runtime CLI is one process per switch, kept between batches of commands: a command it
    refuses raises naming it and the next batch is answered; a CLI that exits mid-batch (its ``EOF``
    command) fails that batch, and the next one starts a new CLI and is answered."""
    from ina.p4.build import P4Error

    sw = rig.switches[0]
    with pytest.raises(P4Error, match="refused.*no_such_table"):
        sw.cli(["table_add no_such_table NoAction 1 =>"])
    assert set(sw.counters()) == set(STAT_NAMES)
    with pytest.raises(P4Error, match="refused"):
        sw.cli(["EOF", "register_read stats"])
    assert set(sw.counters()) == set(STAT_NAMES)
    rig.configure(0, 16, _entries([(1, 2, Role.ROOT.value, 0)]))  # a new session records handles as before
