"""Unit and property tests of the aggregator state machine and parameter server, and replay of the shared vectors."""

import random

import pytest

from ina.aggregator import (
    Aggregator,
    AggregatorStats,
    Dest,
    JobTraffic,
    JobTree,
    LeafGroup,
    ParameterServer,
    PatMeter,
    Role,
    SlotState,
)
from ina.protocol import (
    INT32_MAX,
    INT32_MIN,
    VALUES_PER_PACKET,
    Flag,
    InaError,
    data_packet,
    decode,
)
from ina.vectors import PS, VECTORS, generate, nonzero_stats, tree_from_data, values_of

REQUIRED_VECTORS = {
    "sum_2_workers", "sum_3_workers", "sum_4_workers", "sum_8_workers", "two_level", "collision_fallback",
    "release_and_reuse", "duplicate_dropped", "resend_after_loss", "ecn_or", "overflow_exact_at_ps",
    "malformed_dropped",
}


def replay(vector: dict) -> dict:
    """Build a vector's nodes, feed every step and check each output byte for byte; return the nodes."""
    nodes: dict = {}
    for name, setup in vector["switches"].items():
        nodes[name] = Aggregator(setup["n_slots"])
        for job in setup["jobs"]:
            nodes[name].install(*job)
    nodes[PS] = ParameterServer()
    for tree in vector["ps"]:
        nodes[PS].install(tree_from_data(tree))
    packets = {name: bytes.fromhex(text) for name, text in vector["packets"].items()}
    for k, (node, ecn_ce, packet, expected) in enumerate(vector["steps"]):
        got = [(o.dest.value, o.reason, o.data) for o in nodes[node].process(packets[packet], ecn_ce)]
        want = [(dest, reason, packets[p] if p else b"") for dest, reason, p in expected]
        assert got == want, f"step {k} at {node}"
    return nodes


def test_vector_set_covers_every_required_scenario():
    """Every required scenario has a vector, and each vector has steps and a description."""
    assert REQUIRED_VECTORS <= set(VECTORS)
    for name, vector in VECTORS.items():
        assert vector["doc"] and vector["steps"], name


def test_vectors_are_current():
    """The stored vectors are what the engine generates now (regenerate with python -m ina.vectors --write)."""
    assert generate() == VECTORS


@pytest.mark.parametrize("name", list(VECTORS))
def test_replay_vector(name):
    """Replaying a vector on fresh nodes gives its outputs byte for byte, its counters and the PS's exact sums."""
    vector = VECTORS[name]
    nodes = replay(vector)
    for node, engine in nodes.items():
        assert nonzero_stats(engine.stats) == vector["stats"].get(node, {}), node
    got = [[r.job_id, r.seq, list(r.values)] for r in nodes[PS].completed()]
    assert got == vector["results"]
    for node, engine in nodes.items():
        if node != PS:
            assert engine.occupied() == {}, f"{node} left a slot held"


def test_vector_sums_are_exact():
    """The PS's results equal the exact sum of the workers' values (recomputed independently)."""
    (job, seq, sums), = VECTORS["sum_8_workers"]["results"]
    assert sums == [sum(values_of(w, seq)[lane] for w in range(8)) for lane in range(32)]
    (job, seq, sums), = VECTORS["overflow_exact_at_ps"]["results"]
    assert sums[:3] == [INT32_MAX - 9, 2 * INT32_MAX, INT32_MIN + 4]
    assert sums[3:] == [sum(values_of(w, seq)[lane] for w in range(3)) for lane in range(3, 32)]


def test_malformed_vector_counts_every_reason():
    """The malformed vector drops one packet or more for every reason, then still aggregates."""
    stats = VECTORS["malformed_dropped"]["stats"]["tor0"]
    assert {k for k in stats if k.startswith("malformed:")} == {
        "malformed:truncated", "malformed:bad_version", "malformed:reserved_bits", "malformed:bad_count",
        "malformed:trailing_bytes", "malformed:bad_bitmap"}
    assert stats["aggregates"] == 1


def test_vector_slots_hold_for_larger_switches():
    """Replaying every vector on 1024-slot switches gives the same outputs (collisions are full 16-bit ones)."""
    for vector in VECTORS.values():
        bigger = {**vector, "switches": {k: {**v, "n_slots": 1024} for k, v in vector["switches"].items()}}
        replay(bigger)


def pkt(job, seq, bit, values=None, flags=0):
    """A worker's data packet with default values."""
    return data_packet(job, seq, 1 << bit, values if values is not None else [bit + 1] * VALUES_PER_PACKET,
                       flags=flags)


def test_leaf_frees_at_once_root_holds_until_result():
    """A leaf's slot is free as soon as its partial leaves; a root's stays COMPLETE until the result passes."""
    leaf, root = Aggregator(16), Aggregator(16)
    leaf.install(1, 2, "leaf", out_bit=5)
    root.install(1, 2, "root")
    for sw in (leaf, root):
        sw.process(pkt(1, 9, 0))
        (out,) = sw.process(pkt(1, 9, 1))
        assert out.dest is Dest.TO_PS and out.reason == "aggregate"
        h, values = decode(out.data)
        assert h.has(Flag.PARTIAL) and values == (3,) * 32
        assert h.bitmap == (1 << 5 if sw is leaf else 0b11)
    assert leaf.occupied() == {}
    (slot, (job, seq, state)), = root.occupied().items()
    assert (job, seq, state) == (1, 9, SlotState.COMPLETE)
    assert root.process(pkt(1, 9, 0))[0].reason == "duplicate"
    result = ParameterServer()
    result.install(JobTree(1, (0, 1)))
    result.process(pkt(1, 9, 0))
    (res,) = result.process(pkt(1, 9, 1))
    assert root.process(res.data)[0].dest is Dest.TO_WORKERS
    assert root.occupied() == {} and root.stats.released == 1


def test_the_pat_meter_is_a_token_bucket_of_claims():
    """Ten claims a second, two deep: two at once, the third refused; half a token later still refused;
    a whole one later one more; after a long idle time never more than the depth."""
    t = [0.0]
    meter = PatMeter(10.0, 2, clock=lambda: t[0])
    assert [meter.take() for _ in range(3)] == [True, True, False]
    t[0] = 0.05
    assert not meter.take()
    t[0] = 0.1
    assert [meter.take(), meter.take()] == [True, False]
    t[0] = 100.0
    assert [meter.take() for _ in range(3)] == [True, True, False]
    with pytest.raises(InaError):
        PatMeter(0.0, 1)


def test_a_seq_beyond_the_pat_passes_unaggregated_until_its_result():
    """Rule 8a. With one claim's token, seq 1 aggregates; seq 2's first packet finds none: it falls
    back (COLLISION, to the PS) and holds its slot BYPASS, so seq 2's second packet falls back too,
    though the meter has refilled by then; seq 2's result frees the slot, and seq 3 claims it."""
    t = [0.0]
    leaf = Aggregator(1)
    leaf.install(1, 2, "leaf", out_bit=5)
    leaf.set_pat(PatMeter(1.0, 1, clock=lambda: t[0]))
    leaf.process(pkt(1, 1, 0))
    assert leaf.process(pkt(1, 1, 1))[0].reason == "aggregate"
    (out,) = leaf.process(pkt(1, 2, 0))
    assert (out.dest, out.reason) == (Dest.TO_PS, "over_pat") and decode(out.data)[0].has(Flag.COLLISION)
    assert leaf.occupied() == {0: (1, 2, SlotState.BYPASS)}
    t[0] = 5.0
    assert leaf.process(pkt(1, 2, 1))[0].reason == "collision"
    ps = ParameterServer()
    ps.install(JobTree(1, (0, 1)))
    ps.process(out.data)
    (res,) = ps.process(pkt(1, 2, 1, flags=Flag.COLLISION))
    assert leaf.process(res.data)[0].dest is Dest.TO_WORKERS and leaf.occupied() == {}
    leaf.process(pkt(1, 3, 0))
    assert leaf.process(pkt(1, 3, 1))[0].reason == "aggregate"
    st = leaf.stats
    assert (st.claims, st.over_pat, st.collisions, st.aggregates, st.released) == (2, 1, 2, 2, 1)


def test_result_of_uninstalled_job_goes_to_workers():
    """A RESULT is forwarded down whatever the table says; data of an uninstalled job passes up unchanged."""
    sw = Aggregator(1)
    data = pkt(4, 1, 0b11)
    assert sw.process(data, ecn_ce=True)[0].data == data
    res = data_packet(4, 1, 0, [0] * 32, flags=Flag.RESULT)
    assert sw.process(res)[0].dest is Dest.TO_WORKERS
    assert sw.stats == AggregatorStats(packets=2, passed=1, results=1)


def test_forwarded_packets_are_counted_per_job_and_direction():
    """Job 1 aggregated (two contributions, one aggregate up), job 2 passing unaggregated (no entry),
    a result down for each, a drop counted nowhere; jobs never seen read as zero."""
    sw = Aggregator(16)
    sw.install(1, 2, "leaf", out_bit=5)
    sw.process(pkt(1, 3, 0))
    sw.process(pkt(1, 3, 1))
    sw.process(pkt(1, 3, 1))  # a duplicate: dropped
    sw.process(pkt(2, 3, 0))
    sw.process(pkt(2, 4, 1))
    for job in (1, 2):
        sw.process(data_packet(job, 3, 0, [0] * VALUES_PER_PACKET, flags=Flag.RESULT))
    assert sw.job_traffic() == {1: JobTraffic(to_ps=1, to_workers=1), 2: JobTraffic(to_ps=2, to_workers=1)}
    assert sw.job_traffic([2, 7]) == {2: JobTraffic(2, 1), 7: JobTraffic()}


def test_fan_in_one_emits_immediately():
    """A switch with fan-in 1 claims and emits in the same packet; its counters say so."""
    sw = Aggregator(2)
    sw.install(2, 1, Role.LEAF, out_bit=3)
    (out,) = sw.process(pkt(2, 0, 7))
    assert out.reason == "aggregate" and decode(out.data)[0].bitmap == 1 << 3
    assert sw.stats.claims == sw.stats.aggregates == 1 and sw.occupied() == {}


def test_ecn_ce_marks_fallbacks_and_resends():
    """An installed job's packets that the switch forwards carry ECN when the IP header had CE."""
    sw = Aggregator(1)
    sw.install(1, 2, "root")
    sw.install(2, 2, "root")
    sw.process(pkt(1, 0, 0))
    (fb,) = sw.process(pkt(2, 0, 0), ecn_ce=True)
    assert fb.reason == "collision" and decode(fb.data)[0].flags == Flag.COLLISION | Flag.ECN
    (rs,) = sw.process(pkt(2, 0, 0, flags=Flag.RESEND), ecn_ce=True)
    assert decode(rs.data)[0].flags == Flag.RESEND | Flag.ECN


@pytest.mark.parametrize(("args", "match"), [
    ((70000, 2, "root"), "job_id"),
    ((1, 0, "root"), "fan_in"),
    ((1, 33, "root"), "fan_in"),
    ((1, 2, "leaf", 32), "out_bit"),
    ((1, 2, "spine"), "unknown INA role 'spine'; valid: leaf, root"),
])
def test_install_validates(args, match):
    """Table entries out of range, or an unknown role, are refused with the value."""
    with pytest.raises(InaError, match=match):
        Aggregator(8).install(*args)


def test_aggregator_rejects_bad_sizes():
    """Slot counts must be powers of two; lane counts positive."""
    with pytest.raises(InaError, match="power of two"):
        Aggregator(12)
    with pytest.raises(InaError, match="values_per_packet"):
        Aggregator(8, values_per_packet=0)


def test_job_tree_bit_plan():
    """two_level numbers the root's workers, then each leaf's bit and its workers; expand maps leaf bits."""
    tree = JobTree.two_level(9, 2, [3, 1])
    assert tree.root_workers == (0, 1)
    assert tree.leaves == (LeafGroup(2, (3, 4, 5)), LeafGroup(6, (7,)))
    assert tree.root_fan_in == 4 and tree.worker_bits == (0, 1, 3, 4, 5, 7)
    assert tree.expand(1 << 2) == 0b111000
    assert tree.expand(0b1000101) == 0b10111001
    assert tree.expand(0) is None and tree.expand(1 << 8) is None


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"job_id": 1, "root_workers": (0, 0)}, "distinct"),
    ({"job_id": 1, "root_workers": (32,)}, "distinct"),
    ({"job_id": 1, "root_workers": (0,), "leaves": (LeafGroup(0, (1,)),)}, "distinct"),
    ({"job_id": 1, "root_workers": (0,), "leaves": (LeafGroup(1, ()),)}, "every leaf"),
    ({"job_id": 1}, "at least one"),
    ({"job_id": -1, "root_workers": (0,)}, "job_id"),
])
def test_job_tree_validates(kwargs, match):
    """Bits must be distinct and in 0..31, leaves non-empty, the job non-empty."""
    with pytest.raises(InaError, match=match):
        JobTree(**kwargs)


def test_job_tree_fits_32_bits():
    """Workers plus aggregating leaves may use all 32 bits, not one more."""
    assert JobTree.two_level(1, 20, [5, 5]).worker_bits[-1] == 31
    with pytest.raises(InaError, match="distinct integers in 0..31"):
        JobTree.two_level(1, 20, [5, 6])


def test_ps_partial_subsumes_earlier_resend():
    """A leaf's partial arriving after one of its workers' resends replaces it: nothing counted twice."""
    tree = JobTree.two_level(3, 1, [2])  # root worker 0; leaf bit 1 with workers 2, 3
    ps = ParameterServer()
    ps.install(tree)
    vals = {w: [w * 10 + lane for lane in range(32)] for w in (0, 2, 3)}
    assert ps.process(pkt(3, 5, 2, vals[2], Flag.RESEND))[0].reason == "absorbed"
    partial = data_packet(3, 5, 1 << 1, [a + b for a, b in zip(vals[2], vals[3], strict=True)], flags=Flag.PARTIAL)
    assert ps.process(partial)[0].reason == "absorbed"
    (out,) = ps.process(pkt(3, 5, 0, vals[0]))
    assert out.reason == "result"
    assert ps.result(3, 5).values == tuple(sum(v[lane] for v in vals.values()) for lane in range(32))
    assert ps.stats.subsumed == 1 and ps.stats.results == 1
    assert ps.process(pkt(3, 5, 2, vals[2], Flag.RESEND))[0].data == out.data
    assert ps.process(pkt(3, 5, 2, vals[2]))[0].reason == "late"


def test_ps_drops_what_it_cannot_use():
    """Unknown jobs and bits, results, crossing contributions and duplicates are dropped and counted."""
    tree = JobTree(1, (0,), (LeafGroup(1, (2, 3)),))
    ps = ParameterServer()
    ps.install(tree)
    assert ps.process(pkt(9, 0, 0))[0].reason == "unknown_job"
    assert ps.process(pkt(1, 0, 5))[0].reason == "unknown_bits"
    assert ps.process(data_packet(1, 0, 0, [0] * 32, flags=Flag.RESULT))[0].reason == "unexpected"
    assert ps.process(data_packet(1, 0, 0b1001, [0] * 32))[0].reason == "absorbed"  # workers 0 and 3
    assert ps.process(pkt(1, 0, 3))[0].reason == "duplicate"
    assert ps.process(data_packet(1, 0, 0b10, [0] * 32))[0].reason == "overlap"  # leaf 1 = {2, 3} crosses {0, 3}
    assert ps.pending() == [(1, 0)]
    ps.forget(1)
    assert ps.pending() == []
    s = ps.stats
    assert (s.unknown_job, s.unknown_bits, s.unexpected, s.duplicates, s.overlaps) == (1, 1, 1, 1, 1)


# --- property tests: random jobs, trees, slot counts, delivery orders and losses -------------------------


class Cluster:
    """Racks of one INA ToR each, jobs with a PS in one rack, and a bag of packets in flight."""

    def __init__(self, rng: random.Random, racks: int = 4):
        self.rng = rng
        self.switches = [Aggregator(rng.choice([1, 2, 4, 64])) for _ in range(racks)]
        self.jobs = {}
        for job_id in rng.sample(range(1, 1 << 16), rng.randint(1, 3)):
            self._add_job(job_id, racks)
        self.inflight: list[tuple[str, object, bytes]] = []

    def _add_job(self, job_id: int, racks: int) -> None:
        rng = self.rng
        ps_rack = rng.randrange(racks)
        counts = [rng.randint(0, 3) for _ in range(racks)]
        if not sum(counts):
            counts[ps_rack] = 1
        bit = 0
        root_workers, leaves, workers = [], [], []  # workers: (rack, bit)
        for rack, n in enumerate(counts):
            if rack != ps_rack and n and rng.random() < 0.7:
                leaves.append((rack, LeafGroup(bit, tuple(range(bit + 1, bit + 1 + n)))))
                workers += [(rack, b) for b in range(bit + 1, bit + 1 + n)]
                bit += 1 + n
            else:
                root_workers += range(bit, bit + n)
                workers += [(rack, b) for b in range(bit, bit + n)]
                bit += n
        tree = JobTree(job_id, tuple(root_workers), tuple(leaf for _, leaf in leaves))
        if rng.random() < 0.8:
            self.switches[ps_rack].install(job_id, tree.root_fan_in, "root")
        for rack, leaf in leaves:
            self.switches[rack].install(job_id, leaf.fan_in, "leaf", leaf.bit)
        ps = ParameterServer()
        ps.install(tree)
        base = rng.randrange(1 << 32 - 8)
        seqs = list(range(base, base + rng.randint(1, 5)))
        big = rng.random() < 0.3
        values = {(w, s): [rng.randint(INT32_MIN, INT32_MAX) if big else rng.randint(-999, 999)
                           for _ in range(VALUES_PER_PACKET)] for _, w in workers for s in seqs}
        self.jobs[job_id] = {"tree": tree, "ps": ps, "ps_rack": ps_rack, "workers": workers, "seqs": seqs,
                             "values": values, "got": {w: {} for _, w in workers}}

    def send_data(self, job_id: int, worker: int, seq: int, flags: int = 0) -> None:
        job = self.jobs[job_id]
        rack = next(r for r, w in job["workers"] if w == worker)
        self.inflight.append(("switch", rack, data_packet(job_id, seq, 1 << worker, job["values"][worker, seq],
                                                          flags=flags)))

    def deliver(self, loss: float) -> None:
        kind, where, packet = self.inflight.pop(self.rng.randrange(len(self.inflight)))
        if self.rng.random() < loss:
            return
        h, _ = decode(packet)
        job = self.jobs[h.job_id]
        if kind == "worker":
            if h.has(Flag.RESULT | Flag.RESEND):
                if h.seq not in job["got"][where]:
                    self.send_data(h.job_id, where, h.seq, Flag.RESEND)
            else:
                job["got"][where].setdefault(h.seq, []).append(packet)
            return
        engine = job["ps"] if kind == "ps" else self.switches[where]
        (out,) = engine.process(packet, ecn_ce=self.rng.random() < 0.1)
        if out.dest is Dest.TO_PS:
            if kind == "switch" and where != job["ps_rack"]:
                self.inflight.append(("switch", job["ps_rack"], out.data))
            else:
                self.inflight.append(("ps", h.job_id, out.data))
        elif out.dest is Dest.TO_WORKERS:
            if kind == "ps":
                self.inflight.append(("switch", job["ps_rack"], out.data))
                return
            for rack, w in job["workers"]:
                if rack == where:
                    self.inflight.append(("worker", w, out.data))
            if where == job["ps_rack"]:
                racks = {r for r, _ in job["workers"] if r != where}
                self.inflight += [("switch", r, out.data) for r in sorted(racks)]

    def missing(self):
        return [(j, w, s) for j, job in self.jobs.items() for w in job["got"] for s in job["seqs"]
                if s not in job["got"][w]]

    def run(self, loss: float, max_timeouts: int = 60) -> int:
        for job_id, job in self.jobs.items():
            for _, w in job["workers"]:
                for s in job["seqs"]:
                    self.send_data(job_id, w, s)
        timeouts = 0
        while True:
            while self.inflight:
                self.deliver(loss)
            missing = self.missing()
            if not missing:
                return timeouts
            timeouts += 1
            assert timeouts <= max_timeouts, f"no progress: {missing[:3]}"
            for j, w, s in missing:
                self.send_data(j, w, s, Flag.RESEND)


def check_results(cluster: Cluster, seed: int) -> bool:
    """Every worker got the exact sum (saturated, OVERFLOW iff saturated) and the PS kept it exactly."""
    overflowed = False
    for job_id, job in cluster.jobs.items():
        for s in job["seqs"]:
            exact = [sum(job["values"][w, s][lane] for _, w in job["workers"]) for lane in range(VALUES_PER_PACKET)]
            assert list(job["ps"].result(job_id, s).values) == exact, seed
            wire = [min(max(v, INT32_MIN), INT32_MAX) for v in exact]
            for w, got in job["got"].items():
                for packet in got[s]:
                    h, values = decode(packet)
                    assert list(values) == wire, (seed, job_id, s, w)
                    assert h.has(Flag.OVERFLOW) == (wire != exact), seed
            overflowed |= job["ps"].stats.resend_requests > 0
    return overflowed


def test_property_lossless_random_orders():
    """Lossless, any delivery order and collisions: every result is the exact sum, and no slot stays held
    unless an overflow's resend request raced a worker's first packet."""
    for seed in range(120):
        cluster = Cluster(random.Random(seed))
        cluster.run(loss=0.0)
        overflowed = check_results(cluster, seed)
        if not overflowed:
            assert all(not sw.occupied() for sw in cluster.switches), seed


def test_property_lossy():
    """With 10% of packets lost anywhere (data, partials, results), resends still give every worker the exact sum."""
    collisions = 0
    for seed in range(1000, 1100):
        cluster = Cluster(random.Random(seed))
        cluster.run(loss=0.1)
        check_results(cluster, seed)
        collisions += sum(sw.stats.collisions for sw in cluster.switches)
    assert collisions > 50, "the random clusters must exercise fall-back"


def test_a_forgotten_seq_is_late_and_never_pending_again():
    """After forget(job, below_seq=10), a resend of seq 3 is dropped as late instead of starting a
    seq that could never complete; seq 10 is served as before; uninstall clears the horizon."""
    from ina.aggregator import JobTree, ParameterServer
    from ina.protocol import Flag, data_packet

    ps = ParameterServer()
    ps.install(JobTree(5, (0, 1)))
    for seq in (3, 10):
        for b in (0, 1):
            ps.process(data_packet(5, seq, 1 << b, [1] * 32))
    ps.forget(5, below_seq=10)
    assert ps.process(data_packet(5, 3, 1, [1] * 32, flags=Flag.RESEND))[0].reason == "late"
    assert ps.pending() == [] and ps.stats.late == 1
    assert ps.process(data_packet(5, 10, 1, [1] * 32, flags=Flag.RESEND))[0].reason == "result"
    ps.uninstall(5)
    ps.install(JobTree(5, (0, 1)))
    assert ps.process(data_packet(5, 3, 1, [1] * 32))[0].reason == "absorbed"


def test_a_packet_from_outside_the_jobs_members_is_dropped_before_it_claims():
    """Rule 1b: job 1's entry lists its members; a packet from another source is dropped and
    counted ``foreign`` (it would otherwise take worker 0's bit, and worker 0's own packet would
    be dropped as a duplicate: a wrong sum). No source given, or a job without members: no check."""
    agg = Aggregator(8)
    agg.install(1, 2, Role.ROOT, members=[0x0A000001, 0x0A000003])
    agg.install(2, 2, Role.ROOT)
    [out] = agg.process(data_packet(1, 0, 1 << 0, [100] * VALUES_PER_PACKET), src=0x0A000009)
    assert out.dest is Dest.DROP and out.reason == "foreign" and agg.stats.foreign == 1 and not agg.occupied()
    assert agg.process(data_packet(1, 0, 1 << 0, [1] * VALUES_PER_PACKET), src=0x0A000001)[0].dest is Dest.DROP
    [out] = agg.process(data_packet(1, 0, 1 << 1, [2] * VALUES_PER_PACKET), src=0x0A000003)
    assert out.dest is Dest.TO_PS and decode(out.data)[1] == (3,) * VALUES_PER_PACKET
    [out] = agg.process(data_packet(1, 0, 0, [3] * VALUES_PER_PACKET, flags=Flag.RESULT), src=0x0A000009)
    assert out.reason == "foreign" and len(agg.occupied()) == 1  # a forged result frees nothing
    assert agg.process(data_packet(2, 0, 1, [1] * VALUES_PER_PACKET), src=0x0A000009)[0].reason != "foreign"
    assert agg.process(data_packet(1, 1, 1, [1] * VALUES_PER_PACKET))[0].reason != "foreign"
    assert agg.stats.foreign == 2
    with pytest.raises(InaError, match="members must be IPv4 addresses"):
        agg.install(3, 2, Role.ROOT, members=["10.0.0.1"])
