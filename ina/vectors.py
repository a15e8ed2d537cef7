"""Test vectors of the INA switch, generated from :mod:`ina.aggregator` and stored as data (``vectors.json``).

The P4 program and the Python engine must agree byte for byte, so both replay :data:`VECTORS`: named
scenarios of switches, a parameter server, packets in and the packets, counters and sums expected
out. Every vector uses :data:`VECTOR_SLOTS` slots so any power-of-two slot count from there to
65536 sees the same collisions. After a deliberate change of the engine, regenerate with
``.venv/bin/python -m ina.vectors --write`` (the tests fail while the stored data and :func:`generate` disagree).

A vector's fields and how a harness replays one: ``docs/ina-internals.md`` (Test vectors).
"""

from __future__ import annotations

import json
import os
import sys

from ina.aggregator import Aggregator, Dest, JobTree, LeafGroup, ParameterServer
from ina.protocol import (
    INT32_MAX,
    INT32_MIN,
    VALUES_PER_PACKET,
    Flag,
    InaError,
    data_packet,
    decode,
    slot_of,
    to_hex,
)

VECTOR_SLOTS = 64
"""Slots of every vector switch; the vectors hold for any switch with at least this many."""
PS = "ps"


def values_of(worker: int, seq: int, lanes: int = VALUES_PER_PACKET) -> list[int]:
    """A worker's ``lanes`` values for a seq: distinct per worker, seq and lane, odd workers negative."""
    sign = -1 if worker % 2 else 1
    return [sign * ((seq % 7 + 1) * 1000 + worker * 100 + lane) for lane in range(lanes)]


class _Run:
    """Builds one vector of ``lanes`` values per packet: nodes, then steps recorded as they run on the engine."""

    def __init__(self, lanes: int, doc: str):
        self.doc, self.lanes = doc, lanes
        self.switches: dict[str, Aggregator] = {}
        self.setup: dict[str, dict] = {}
        self.trees: list[JobTree] = []
        self.ps = ParameterServer(lanes)
        self.steps: list[list] = []
        self.packets: dict[bytes, str] = {}
        self.slots: dict[int, tuple[int, int]] = {}  # slot mod VECTOR_SLOTS -> (job, seq) using it

    def switch(self, name: str, *jobs: tuple[int, int, str, int]) -> None:
        agg = Aggregator(VECTOR_SLOTS, self.lanes)
        for job in jobs:
            agg.install(*job)
        self.switches[name] = agg
        self.setup[name] = {"n_slots": VECTOR_SLOTS, "jobs": [list(j) for j in jobs]}

    def serve(self, *trees: JobTree) -> None:
        for tree in trees:
            self.ps.install(tree)
            self.trees.append(tree)

    def _use(self, job: int, seq: int) -> bool:
        """Reserve (job, seq)'s slot if no other (job, seq) uses it modulo VECTOR_SLOTS."""
        return self.slots.setdefault(slot_of(job, seq, VECTOR_SLOTS), (job, seq)) == (job, seq)

    def fresh_seq(self, job: int, start: int = 0) -> int:
        """The first seq >= start whose slot no other packet of this vector uses."""
        seq = start
        while not self._use(job, seq):
            seq += 1
        return seq

    def colliding_seq(self, job: int, other: tuple[int, int], start: int = 0) -> int:
        """The first seq >= start of ``job`` whose slot equals ``other``'s in all 16 bits."""
        target = slot_of(*other)
        seq = start
        while slot_of(job, seq) != target or (job, seq) == other:
            seq += 1
        return seq

    def send(self, node: str, packet: bytes, ecn_ce: bool = False) -> bytes:
        """Run one step; return the single packet that left (b"" for a drop)."""
        engine = self.ps if node == PS else self.switches[node]
        outs = engine.process(packet, ecn_ce)
        self.steps.append([node, ecn_ce, self._name(packet),
                           [[o.dest.value, o.reason, "" if o.dest is Dest.DROP else self._name(o.data)] for o in outs]])
        if len(outs) != 1:
            raise AssertionError(f"{self.doc}: {node} gave {len(outs)} outputs")
        return outs[0].data

    def pkt(self, tree: JobTree, worker: int, seq: int, values=None, flags: int = 0, fan_in: int = 0) -> bytes:
        """A worker's packet of ``seq``, its values :func:`values_of` unless given."""
        return data_packet(tree.job_id, seq, 1 << worker,
                           values_of(worker, seq, self.lanes) if values is None else values, flags=flags, fan_in=fan_in)

    def _name(self, packet: bytes) -> str:
        return self.packets.setdefault(packet, f"p{len(self.packets)}")

    def expect(self, data: bytes, dest: Dest, reason: str) -> bytes:
        """Check that the last step's packet went to ``dest`` for ``reason``; return ``data``."""
        last = self.steps[-1][3][0]
        if (last[0], last[1]) != (dest.value, reason):
            raise AssertionError(f"{self.doc}: expected {dest.value}/{reason}, got {last[:2]}")
        return data

    def done(self) -> dict:
        self._check_slots()
        stats = {name: nonzero_stats(agg.stats) for name, agg in self.switches.items()}
        stats[PS] = nonzero_stats(self.ps.stats)
        return {
            "doc": self.doc,
            "switches": self.setup,
            "ps": [tree_to_data(t) for t in self.trees],
            "packets": {name: to_hex(packet) for packet, name in self.packets.items()},
            "steps": self.steps,
            "stats": {k: v for k, v in stats.items() if v},
            "results": [[r.job_id, r.seq, list(r.values)] for r in self.ps.completed()],
        }

    def _check_slots(self) -> None:
        """Packets whose slots agree modulo VECTOR_SLOTS agree in all 16 bits (see ``docs/ina-internals.md``)."""
        seen: dict[int, int] = {}
        for packet in self.packets:
            try:
                h = decode(packet, self.lanes)[0]
            except InaError:
                continue
            if seen.setdefault(h.slot % VECTOR_SLOTS, h.slot) != h.slot:
                raise AssertionError(f"{self.doc}: slot {h.slot:#06x} meets another only modulo {VECTOR_SLOTS}")


def nonzero_stats(stats) -> dict[str, int]:
    """An AggregatorStats or PsStats in the vectors' form: the non-zero counters, malformed ones as
    ``malformed:<reason>``."""
    d = stats.to_dict()
    out = {k: v for k, v in d.items() if k != "malformed" and v}
    out.update({f"malformed:{k}": v for k, v in d["malformed"].items() if v})
    return out


def tree_to_data(tree: JobTree) -> dict:
    """A :class:`JobTree` as the vectors' plain data."""
    return {"job_id": tree.job_id, "root_workers": list(tree.root_workers),
            "leaves": [[leaf.bit, list(leaf.workers)] for leaf in tree.leaves]}


def tree_from_data(data: dict) -> JobTree:
    """The inverse of :func:`tree_to_data`."""
    return JobTree(data["job_id"], tuple(data["root_workers"]),
                   tuple(LeafGroup(bit, tuple(ws)) for bit, ws in data["leaves"]))


def _one_switch(n: int, order, lanes: int) -> dict:
    run = _Run(lanes, f"{n} workers on one switch (the PS's ToR) in the order {order}: the PS gets one aggregate, "
                      f"the exact sum, and its result frees the slot")
    tree = JobTree.two_level(n, n)
    run.switch("tor0", (n, n, "root", 0))
    run.serve(tree)
    seq = run.fresh_seq(n)
    for k, w in enumerate(order):
        out = run.send("tor0", run.pkt(tree, w, seq, fan_in=n))
        run.expect(out, Dest.TO_PS if k == n - 1 else Dest.DROP, "aggregate" if k == n - 1 else "absorbed")
    result = run.expect(run.send(PS, out), Dest.TO_WORKERS, "result")
    run.send("tor0", result)
    return run.done()


def _two_level(lanes: int) -> dict:
    run = _Run(lanes, "two leaves (2 workers each) and a root with one local worker: each leaf sends one partial "
                      "(bitmap = its bit), the root sends the full aggregate, the result goes down both levels")
    tree = JobTree.two_level(20, 1, [2, 2])  # root worker 0; leaf bit 1 (workers 2, 3); leaf bit 4 (5, 6)
    (la, lb) = tree.leaves
    run.switch("tor0", (20, tree.root_fan_in, "root", 0))
    run.switch("tor1", (20, la.fan_in, "leaf", la.bit))
    run.switch("tor2", (20, lb.fan_in, "leaf", lb.bit))
    run.serve(tree)
    seq = run.fresh_seq(20, 5)
    run.send("tor1", run.pkt(tree, 2, seq, fan_in=2))
    run.send("tor2", run.pkt(tree, 5, seq, fan_in=2))
    run.send("tor0", run.pkt(tree, 0, seq, fan_in=3))
    part_a = run.expect(run.send("tor1", run.pkt(tree, 3, seq, fan_in=2)), Dest.TO_PS, "aggregate")
    run.send("tor0", part_a)
    part_b = run.expect(run.send("tor2", run.pkt(tree, 6, seq, fan_in=2)), Dest.TO_PS, "aggregate")
    agg = run.expect(run.send("tor0", part_b), Dest.TO_PS, "aggregate")
    result = run.expect(run.send(PS, agg), Dest.TO_WORKERS, "result")
    for node in ("tor0", "tor1", "tor2"):
        run.send(node, result)
    return run.done()


def _collision(lanes: int) -> dict:
    run = _Run(lanes, "jobs 3 and 4 share a switch and their seqs hash to the same slot: job 3 holds it, job 4's "
                      "packets fall back (COLLISION) and the PS sums them; job 4's result does not free job 3's slot")
    a, b = JobTree.two_level(3, 2), JobTree.two_level(4, 2)
    run.switch("tor0", (3, 2, "root", 0), (4, 2, "root", 0))
    run.serve(a, b)
    sa = run.fresh_seq(3, 10)
    sb = run.colliding_seq(4, (3, sa))
    run.send("tor0", run.pkt(a, 0, sa, fan_in=2))
    run.send(PS, run.expect(run.send("tor0", run.pkt(b, 0, sb, fan_in=2)), Dest.TO_PS, "collision"))
    fb = run.expect(run.send("tor0", run.pkt(b, 1, sb, fan_in=2)), Dest.TO_PS, "collision")
    run.send("tor0", run.expect(run.send(PS, fb), Dest.TO_WORKERS, "result"))
    agg = run.expect(run.send("tor0", run.pkt(a, 1, sa, fan_in=2)), Dest.TO_PS, "aggregate")
    run.send("tor0", run.expect(run.send(PS, agg), Dest.TO_WORKERS, "result"))
    return run.done()


def _two_level_fallback(lanes: int) -> dict:
    run = _Run(lanes, "job 5's leaf slot is held by job 6: its rack's packets fall back and pass the root "
                      "(COLLISION), the root's slot waits for a partial that never comes, the workers' resends "
                      "complete the seq at the PS and its result frees the root's slot")
    tree = JobTree.two_level(5, 1, [2])  # root worker 0; leaf bit 1 with workers 2, 3
    other = JobTree.two_level(6, 2)
    run.switch("tor0", (5, tree.root_fan_in, "root", 0))
    run.switch("tor1", (5, 2, "leaf", 1), (6, 2, "root", 0))
    run.serve(tree, other)
    s5 = run.fresh_seq(5, 3)
    s6 = run.colliding_seq(6, (5, s5))
    run.send("tor1", run.pkt(other, 0, s6, fan_in=2))
    for w in (2, 3):
        fb = run.expect(run.send("tor1", run.pkt(tree, w, s5, fan_in=2)), Dest.TO_PS, "collision")
        run.send(PS, run.expect(run.send("tor0", fb), Dest.TO_PS, "passed"))
    run.send("tor0", run.pkt(tree, 0, s5, fan_in=2))
    resend = run.expect(run.send("tor1", run.pkt(tree, 2, s5, flags=Flag.RESEND, fan_in=2)), Dest.TO_PS, "resend")
    run.send(PS, run.send("tor0", resend))
    result = run.send(PS, run.send("tor0", run.pkt(tree, 0, s5, flags=Flag.RESEND, fan_in=2)))
    run.expect(result, Dest.TO_WORKERS, "result")
    run.send("tor0", result)
    run.send("tor1", result)
    agg = run.expect(run.send("tor1", run.pkt(other, 1, s6, fan_in=2)), Dest.TO_PS, "aggregate")
    run.send("tor1", run.send(PS, agg))
    return run.done()


def _release_and_reuse(lanes: int) -> dict:
    run = _Run(lanes, "a root keeps a completed slot until the result: a later seq hashing to the same slot falls "
                      "back meanwhile; the result frees the slot and the next such seq aggregates in it")
    tree = JobTree.two_level(7, 2)
    run.switch("tor0", (7, 2, "root", 0))
    run.serve(tree)
    s0 = run.fresh_seq(7, 1)
    s1 = run.colliding_seq(7, (7, s0), s0 + 1)
    s2 = run.colliding_seq(7, (7, s0), s1 + 1)
    run.send("tor0", run.pkt(tree, 0, s0, fan_in=2))
    r0 = run.send(PS, run.send("tor0", run.pkt(tree, 1, s0, fan_in=2)))
    run.send(PS, run.expect(run.send("tor0", run.pkt(tree, 0, s1, fan_in=2)), Dest.TO_PS, "collision"))
    r1 = run.send(PS, run.expect(run.send("tor0", run.pkt(tree, 1, s1, fan_in=2)), Dest.TO_PS, "collision"))
    run.send("tor0", r1)
    run.send("tor0", r0)
    run.expect(run.send("tor0", run.pkt(tree, 0, s2, fan_in=2)), Dest.DROP, "absorbed")
    r2 = run.send(PS, run.expect(run.send("tor0", run.pkt(tree, 1, s2, fan_in=2)), Dest.TO_PS, "aggregate"))
    run.send("tor0", r2)
    return run.done()


def _duplicate(lanes: int) -> dict:
    run = _Run(lanes, "duplicates are dropped at the leaf, at the root (also once its slot is complete) and at "
                      "the PS, so nothing is summed twice; a duplicate after the leaf emitted re-claims a leaf slot, "
                      "which the result frees")
    tree = JobTree.two_level(8, 1, [2])  # root worker 0; leaf bit 1 with workers 2, 3
    run.switch("tor0", (8, tree.root_fan_in, "root", 0))
    run.switch("tor1", (8, 2, "leaf", 1))
    run.serve(tree)
    seq = run.fresh_seq(8, 2)
    w2, w3, w0 = (run.pkt(tree, w, seq, fan_in=2) for w in (2, 3, 0))
    run.send("tor1", w2)
    run.expect(run.send("tor1", w2), Dest.DROP, "duplicate")
    part = run.send("tor1", w3)
    run.send("tor0", w0)
    run.expect(run.send("tor0", w0), Dest.DROP, "duplicate")
    agg = run.expect(run.send("tor0", part), Dest.TO_PS, "aggregate")
    run.expect(run.send("tor0", part), Dest.DROP, "duplicate")
    result = run.send(PS, agg)
    run.expect(run.send(PS, agg), Dest.DROP, "late")
    run.expect(run.send("tor1", w3), Dest.DROP, "absorbed")
    run.send("tor0", result)
    run.send("tor1", result)
    return run.done()


def _resend(lanes: int) -> dict:
    run = _Run(lanes, "one worker's packet is lost: the other two sit in the slot until the timeout, the three "
                      "RESENDs pass the switch to the PS, whose result frees the slot; a later resend (its result "
                      "lost) gets the same result again")
    tree = JobTree.two_level(9, 3)
    run.switch("tor0", (9, 3, "root", 0))
    run.serve(tree)
    seq = run.fresh_seq(9, 4)
    run.send("tor0", run.pkt(tree, 0, seq, fan_in=3))
    run.send("tor0", run.pkt(tree, 1, seq, fan_in=3))
    for w in (0, 1, 2):
        out = run.send(PS, run.expect(run.send("tor0", run.pkt(tree, w, seq, flags=Flag.RESEND, fan_in=3)),
                                      Dest.TO_PS, "resend"))
    result = run.expect(out, Dest.TO_WORKERS, "result")
    run.send("tor0", result)
    again = run.send(PS, run.send("tor0", run.pkt(tree, 1, seq, flags=Flag.RESEND, fan_in=3)))
    assert again == result
    run.send("tor0", again)
    return run.done()


def _ecn(lanes: int) -> dict:
    run = _Run(lanes, "ECN is OR-ed: a CE mark on one worker's packet at the leaf (first seq), or on a leaf's "
                      "partial at the root (second seq), reaches the aggregate and the PS's result")
    tree = JobTree.two_level(10, 1, [2])  # root worker 0; leaf bit 1 with workers 2, 3
    run.switch("tor0", (10, tree.root_fan_in, "root", 0))
    run.switch("tor1", (10, 2, "leaf", 1))
    run.serve(tree)
    for k, seq in enumerate((run.fresh_seq(10, 0), run.fresh_seq(10, 8))):
        run.send("tor1", run.pkt(tree, 2, seq, fan_in=2), ecn_ce=k == 0)
        part = run.send("tor1", run.pkt(tree, 3, seq, fan_in=2))
        run.send("tor0", run.pkt(tree, 0, seq, fan_in=2))
        agg = run.send("tor0", part, ecn_ce=k == 1)
        result = run.send(PS, agg)
        assert decode(result, lanes)[0].has(Flag.ECN)
        run.send("tor0", result)
        run.send("tor1", result)
    return run.done()


def _overflow(lanes: int) -> dict:
    run = _Run(lanes, "lanes 0-2 wrap in the switch's int32 sum: the aggregate carries OVERFLOW, the PS answers "
                      "with a resend request (RESULT|RESEND|OVERFLOW, frees the slot), the workers resend and the "
                      "PS sums exactly: lanes 0 and 2 fit int32, lane 1 (2**32 - 2) is saturated and flagged")
    tree = JobTree.two_level(11, 3)
    run.switch("tor0", (11, 3, "root", 0))
    run.serve(tree)
    seq = run.fresh_seq(11, 6)
    wrap = {0: (INT32_MAX, 1, -10), 1: (INT32_MAX, INT32_MAX, 0), 2: (INT32_MIN, -1, 5)}
    vals = [[wrap[lane][w] if lane in wrap else values_of(w, seq, lanes)[lane] for lane in range(lanes)]
            for w in range(3)]
    for w in range(3):
        out = run.send("tor0", run.pkt(tree, w, seq, vals[w], fan_in=3))
    request = run.expect(run.send(PS, out), Dest.TO_WORKERS, "resend_request")
    run.send("tor0", request)
    for w in range(3):
        out = run.send(PS, run.send("tor0", run.pkt(tree, w, seq, vals[w], flags=Flag.RESEND, fan_in=3)))
    result = run.expect(out, Dest.TO_WORKERS, "result")
    assert decode(result, lanes)[0].has(Flag.OVERFLOW)
    run.send("tor0", result)
    return run.done()


def _malformed(lanes: int) -> dict:
    run = _Run(lanes, "malformed packets are dropped and counted by reason, at the switch and the PS, and the "
                      "switch aggregates normally afterwards")
    tree = JobTree.two_level(12, 2)
    run.switch("tor0", (12, 2, "root", 0))
    run.serve(tree)
    seq = run.fresh_seq(12, 0)
    good = run.pkt(tree, 0, seq, fan_in=2)

    def patched(offset: int, byte: int) -> bytes:
        b = bytearray(good)
        b[offset] = byte
        return bytes(b)

    bad = [
        (b"", "truncated"), (good[:10], "truncated"), (good[:20], "truncated"), (patched(0, 2), "bad_version"),
        (patched(1, 0x40), "reserved_bits"), (patched(1, 0x80), "reserved_bits"),
        (patched(13, 1), "reserved_bits"), (patched(19, 1), "reserved_bits"),
        (patched(17, (lanes - 1) & 0xFF)[:-4], "bad_count"),
        (good[:-4], "truncated"), (good + b"\x00", "trailing_bytes"),
        (data_packet(12, seq, 0, values_of(0, seq, lanes)), "bad_bitmap"),
        (data_packet(12, seq, 0b101, values_of(0, seq, lanes)), "bad_bitmap"),
    ]
    for packet, reason in bad:
        run.expect(run.send("tor0", packet), Dest.DROP, f"malformed:{reason}")
    run.send("tor0", good)
    agg = run.send("tor0", run.pkt(tree, 1, seq, fan_in=2))
    run.expect(run.send(PS, agg[:-1]), Dest.DROP, "malformed:truncated")
    run.send("tor0", run.expect(run.send(PS, agg), Dest.TO_WORKERS, "result"))
    return run.done()


def _not_installed(lanes: int) -> dict:
    run = _Run(lanes, "a job the switch does not aggregate passes it unchanged (even with CE: the IP header "
                      "carries the mark); the PS sums it; its result passes down unchanged")
    tree = JobTree(13, (0, 1))
    run.switch("tor0", (14, 2, "root", 0))
    run.serve(tree)
    seq = run.fresh_seq(13, 0)
    run.send(PS, run.expect(run.send("tor0", run.pkt(tree, 0, seq), ecn_ce=True), Dest.TO_PS, "passed"))
    result = run.send(PS, run.send("tor0", run.pkt(tree, 1, seq)))
    run.expect(result, Dest.TO_WORKERS, "result")
    run.send("tor0", result)
    return run.done()


SCENARIOS = {
    "sum_2_workers": lambda lanes: _one_switch(2, (0, 1), lanes),
    "sum_3_workers": lambda lanes: _one_switch(3, (2, 0, 1), lanes),
    "sum_4_workers": lambda lanes: _one_switch(4, (3, 2, 1, 0), lanes),
    "sum_8_workers": lambda lanes: _one_switch(8, (5, 0, 7, 2, 6, 1, 4, 3), lanes),
    "two_level": _two_level,
    "collision_fallback": _collision,
    "two_level_fallback": _two_level_fallback,
    "release_and_reuse": _release_and_reuse,
    "duplicate_dropped": _duplicate,
    "resend_after_loss": _resend,
    "ecn_or": _ecn,
    "overflow_exact_at_ps": _overflow,
    "malformed_dropped": _malformed,
    "not_installed_passes": _not_installed,
}
"""How each vector is made, by name, for a number of values per packet."""


def generate(values_per_packet: int = VALUES_PER_PACKET) -> dict[str, dict]:
    """Every vector, freshly run on the engine, its packets of ``values_per_packet`` values, at
    least 3 (the overflow vector wraps lanes 0-2); the stored :data:`VECTORS` are those of
    :data:`~ina.protocol.VALUES_PER_PACKET`."""
    return {name: make(values_per_packet) for name, make in SCENARIOS.items()}


DATA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors.json")
"""Where the vectors are stored: a data file shipped with the package (``setup.py``'s ``package_data``)."""


def load(path: str = DATA_PATH) -> dict[str, dict]:
    """The stored vectors, by name, in the order :data:`SCENARIOS` makes them."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write(path: str = DATA_PATH) -> None:
    """Replace the stored vectors with :func:`generate`'s."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(format_vectors(generate()) + "\n")


def format_vectors(value, indent: str = "") -> str:
    """JSON text of the vectors for reading and diffing: objects one member per line, lists of lists or
    objects one element per line, anything else (a step, a packet, a row of sums) on one line."""
    inner = indent + " "
    if isinstance(value, dict) and value:
        members = [f"{inner}{json.dumps(k)}: {format_vectors(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + indent + "}"
    if isinstance(value, list) and value and all(isinstance(x, (list, dict)) for x in value):
        return "[\n" + ",\n".join(inner + format_vectors(x, inner) for x in value) + "\n" + indent + "]"
    return json.dumps(value)


VECTORS = load()
"""Every stored vector by name (see ``docs/ina-internals.md`` for its fields)."""


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: .venv/bin/python -m ina.vectors --write")
    write()
