"""Test vectors of the INA switch, generated from :mod:`ina.engine` and stored here as plain data.

The P4 program and the Python engine must agree byte for byte, so both replay :data:`VECTORS`.
Each vector is a named scenario:

- ``doc``: what it shows.
- ``switches``: ``name -> {"n_slots": int, "jobs": [[job_id, fan_in, role, out_bit], ...]}``,
  the switches to build (empty slots) and their per-job table entries.
- ``ps``: the jobs the parameter server (node ``"ps"``) serves, each
  ``{"job_id": int, "root_workers": [bit, ...], "leaves": [[leaf_bit, [worker_bit, ...]], ...]}``
  (a :class:`ina.engine.JobTree`).
- ``steps``: ``[node, ecn_ce, packet, outputs]`` in order, where ``packet`` is the UDP
  payload in hex (spaces between groups; ``bytes.fromhex`` skips them), ``ecn_ce`` the IP
  header's CE mark, and ``outputs`` the expected ``[dest, reason, packet]`` (``dest`` is
  ``to_ps``, ``to_workers`` or ``drop``; a drop's packet is ``""``).
- ``stats``: per node, the counters that are not zero after the last step
  (``"malformed:<reason>"`` for the malformed ones).
- ``results``: ``[job_id, seq, exact sums]`` of every seq the PS completed.

Replaying: build the nodes, feed every step's packet to its node, and compare what comes out
(a P4 harness wraps the packet in Ethernet/IPv4/UDP to port 18766, sets IP ECN to CE when
``ecn_ce``, maps ``to_ps``/``to_workers`` to its uplink port and multicast group and a drop to
no packet; the PS steps, node ``"ps"``, it skips). Then compare the counters.

Slot counts: every vector uses :data:`VECTOR_SLOTS` slots, and its packets' ``slot`` fields either
agree in all 16 bits (an intended collision) or differ modulo :data:`VECTOR_SLOTS`, so a switch
with any power-of-two slot count from :data:`VECTOR_SLOTS` to 65536 sees the same collisions.

Regenerate after a deliberate change of the engine with ``python -m ina.vectors --write`` (the
tests fail while the stored data and :func:`generate` disagree).
"""

from __future__ import annotations

import json
import sys

from ina.engine import Aggregator, Dest, JobTree, LeafGroup, ParameterServer
from ina.protocol import (
    HEADER_BYTES,
    HEADER_FIELDS,
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
        """Packets whose slots agree modulo VECTOR_SLOTS agree in all 16 bits (see the module docstring)."""
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


MARKER = "# ---- generated by `python -m ina.vectors --write`; do not edit below ----"


def write(path: str = __file__) -> None:
    """Replace the stored :data:`VECTORS` in this module's source with :func:`generate`'s."""
    with open(path) as f:
        head = f.read().split("\n" + MARKER + "\n")[0]
    with open(path, "w") as f:
        f.write(f"{head}\n{MARKER}\n\nVECTORS = {format_vectors(generate())}\n")


def _q(value) -> str:
    """A Python literal of ``value`` (no booleans in it) with double-quoted strings, as the code quotes."""
    return json.dumps(value)


def _wrapped(text: str, indent: str, width: int = 100) -> str:
    """A long string as implicitly concatenated pieces, broken at spaces."""
    pieces, line = [], ""
    for word in text.split(" "):
        if line and len(line) + len(word) + 1 > width:
            pieces.append(line + " ")
            line = word
        else:
            line = f"{line} {word}" if line else word
    pieces.append(line)
    return ("\n" + indent).join(_q(p) for p in pieces)


def _filled(parts: list[str], indent: str, width: int = 116) -> list[str]:
    """``parts`` on as few lines of at most ``width`` characters as they fit."""
    lines = [indent]
    for part in parts:
        if len(lines[-1]) + len(part) + 1 > width and lines[-1] != indent:
            lines.append(indent)
        lines[-1] += part if lines[-1] == indent else " " + part
    return lines


def format_vectors(vectors: dict[str, dict]) -> str:
    """The source text of :data:`VECTORS`: one step per line, packets broken after every 8 values."""
    out = ["{"]
    for name, v in vectors.items():
        out.append(f"    {_q(name)}: {{")
        out.append(f"        \"doc\": ({_wrapped(v['doc'], ' ' * 16)}),")
        out.append("        \"switches\": {")
        out += [f"            {_q(node)}: {_q(setup)}," for node, setup in v["switches"].items()]
        out.append("        },")
        out.append("        \"ps\": [")
        out += [f"            {_q(tree)}," for tree in v["ps"]]
        out.append("        ],")
        out.append("        \"packets\": {")
        for pname, text in v["packets"].items():
            words = text.split()
            n_head = len(HEADER_FIELDS) if len(bytes.fromhex(text)) >= HEADER_BYTES else len(words)
            values = words[n_head:]
            lines = [" ".join(words[:n_head])] + [" ".join(values[i:i + 8]) for i in range(0, len(values), 8)]
            joined = ("\n" + " " * (16 + len(pname))).join(_q(ln if k == 0 else " " + ln) for k, ln in enumerate(lines))
            out.append(f"            {_q(pname)}: {joined},")
        out.append("        },")
        out.append("        \"steps\": [")
        out += [f"            [{_q(node)}, {ecn_ce!r}, {_q(packet)}, {_q(outs)}],"
                for node, ecn_ce, packet, outs in v["steps"]]
        out.append("        ],")
        out.append("        \"stats\": {")
        for node, counters in v["stats"].items():
            out.append(f"            {_q(node)}: {{")
            out += _filled([f"{_q(k)}: {c}," for k, c in counters.items()], " " * 16)
            out.append("            },")
        out.append("        },")
        out.append("        \"results\": [")
        for job, seq, sums in v["results"]:
            out.append(f"            [{job}, {seq}, [")
            out += ["                " + ", ".join(map(str, sums[i:i + 8])) + "," for i in range(0, len(sums), 8)]
            out.append("            ]],")
        out.append("        ],")
        out.append("    },")
    out.append("}")
    return "\n".join(out)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m ina.vectors --write")
    write()


# ---- generated by `python -m ina.vectors --write`; do not edit below ----

VECTORS = {
    "sum_2_workers": {
        "doc": ("2 workers on one switch (the PS's ToR) in the order (0, 1): the PS gets one aggregate, the exact "
                "sum, and its result frees the slot"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[2, 2, "root", 0]]},
        },
        "ps": [
            {"job_id": 2, "root_workers": [0, 1], "leaves": []},
        ],
        "packets": {
            "p0": "01 00 0002 00000000 00000001 02 00 f2c3 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p1": "01 00 0002 00000000 00000002 02 00 f2c3 0020 0000"
                  " fffffbb4 fffffbb3 fffffbb2 fffffbb1 fffffbb0 fffffbaf fffffbae fffffbad"
                  " fffffbac fffffbab fffffbaa fffffba9 fffffba8 fffffba7 fffffba6 fffffba5"
                  " fffffba4 fffffba3 fffffba2 fffffba1 fffffba0 fffffb9f fffffb9e fffffb9d"
                  " fffffb9c fffffb9b fffffb9a fffffb99 fffffb98 fffffb97 fffffb96 fffffb95",
            "p2": "01 20 0002 00000000 00000003 02 00 f2c3 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p3": "01 01 0002 00000000 00000000 00 00 f2c3 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
        },
        "steps": [
            ["tor0", False, "p0", [["drop", "absorbed", ""]]],
            ["tor0", False, "p1", [["to_ps", "aggregate", "p2"]]],
            ["ps", False, "p2", [["to_workers", "result", "p3"]]],
            ["tor0", False, "p3", [["to_workers", "result", "p3"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 3, "results": 1, "released": 1, "claims": 1, "contributions": 2, "aggregates": 1,
            },
            "ps": {
                "packets": 1, "contributions": 1, "results": 1,
            },
        },
        "results": [
            [2, 0, [
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
            ]],
        ],
    },
    "sum_3_workers": {
        "doc": ("3 workers on one switch (the PS's ToR) in the order (2, 0, 1): the PS gets one aggregate, the exact "
                "sum, and its result frees the slot"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[3, 3, "root", 0]]},
        },
        "ps": [
            {"job_id": 3, "root_workers": [0, 1, 2], "leaves": []},
        ],
        "packets": {
            "p0": "01 00 0003 00000000 00000004 03 00 db73 0020 0000"
                  " 000004b0 000004b1 000004b2 000004b3 000004b4 000004b5 000004b6 000004b7"
                  " 000004b8 000004b9 000004ba 000004bb 000004bc 000004bd 000004be 000004bf"
                  " 000004c0 000004c1 000004c2 000004c3 000004c4 000004c5 000004c6 000004c7"
                  " 000004c8 000004c9 000004ca 000004cb 000004cc 000004cd 000004ce 000004cf",
            "p1": "01 00 0003 00000000 00000001 03 00 db73 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p2": "01 00 0003 00000000 00000002 03 00 db73 0020 0000"
                  " fffffbb4 fffffbb3 fffffbb2 fffffbb1 fffffbb0 fffffbaf fffffbae fffffbad"
                  " fffffbac fffffbab fffffbaa fffffba9 fffffba8 fffffba7 fffffba6 fffffba5"
                  " fffffba4 fffffba3 fffffba2 fffffba1 fffffba0 fffffb9f fffffb9e fffffb9d"
                  " fffffb9c fffffb9b fffffb9a fffffb99 fffffb98 fffffb97 fffffb96 fffffb95",
            "p3": "01 20 0003 00000000 00000007 03 00 db73 0020 0000"
                  " 0000044c 0000044d 0000044e 0000044f 00000450 00000451 00000452 00000453"
                  " 00000454 00000455 00000456 00000457 00000458 00000459 0000045a 0000045b"
                  " 0000045c 0000045d 0000045e 0000045f 00000460 00000461 00000462 00000463"
                  " 00000464 00000465 00000466 00000467 00000468 00000469 0000046a 0000046b",
            "p4": "01 01 0003 00000000 00000000 00 00 db73 0020 0000"
                  " 0000044c 0000044d 0000044e 0000044f 00000450 00000451 00000452 00000453"
                  " 00000454 00000455 00000456 00000457 00000458 00000459 0000045a 0000045b"
                  " 0000045c 0000045d 0000045e 0000045f 00000460 00000461 00000462 00000463"
                  " 00000464 00000465 00000466 00000467 00000468 00000469 0000046a 0000046b",
        },
        "steps": [
            ["tor0", False, "p0", [["drop", "absorbed", ""]]],
            ["tor0", False, "p1", [["drop", "absorbed", ""]]],
            ["tor0", False, "p2", [["to_ps", "aggregate", "p3"]]],
            ["ps", False, "p3", [["to_workers", "result", "p4"]]],
            ["tor0", False, "p4", [["to_workers", "result", "p4"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 4, "results": 1, "released": 1, "claims": 1, "contributions": 3, "aggregates": 1,
            },
            "ps": {
                "packets": 1, "contributions": 1, "results": 1,
            },
        },
        "results": [
            [3, 0, [
                1100, 1101, 1102, 1103, 1104, 1105, 1106, 1107,
                1108, 1109, 1110, 1111, 1112, 1113, 1114, 1115,
                1116, 1117, 1118, 1119, 1120, 1121, 1122, 1123,
                1124, 1125, 1126, 1127, 1128, 1129, 1130, 1131,
            ]],
        ],
    },
    "sum_4_workers": {
        "doc": ("4 workers on one switch (the PS's ToR) in the order (3, 2, 1, 0): the PS gets one aggregate, the "
                "exact sum, and its result frees the slot"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[4, 4, "root", 0]]},
        },
        "ps": [
            {"job_id": 4, "root_workers": [0, 1, 2, 3], "leaves": []},
        ],
        "packets": {
            "p0": "01 00 0004 00000000 00000008 04 00 0763 0020 0000"
                  " fffffaec fffffaeb fffffaea fffffae9 fffffae8 fffffae7 fffffae6 fffffae5"
                  " fffffae4 fffffae3 fffffae2 fffffae1 fffffae0 fffffadf fffffade fffffadd"
                  " fffffadc fffffadb fffffada fffffad9 fffffad8 fffffad7 fffffad6 fffffad5"
                  " fffffad4 fffffad3 fffffad2 fffffad1 fffffad0 fffffacf ffffface fffffacd",
            "p1": "01 00 0004 00000000 00000004 04 00 0763 0020 0000"
                  " 000004b0 000004b1 000004b2 000004b3 000004b4 000004b5 000004b6 000004b7"
                  " 000004b8 000004b9 000004ba 000004bb 000004bc 000004bd 000004be 000004bf"
                  " 000004c0 000004c1 000004c2 000004c3 000004c4 000004c5 000004c6 000004c7"
                  " 000004c8 000004c9 000004ca 000004cb 000004cc 000004cd 000004ce 000004cf",
            "p2": "01 00 0004 00000000 00000002 04 00 0763 0020 0000"
                  " fffffbb4 fffffbb3 fffffbb2 fffffbb1 fffffbb0 fffffbaf fffffbae fffffbad"
                  " fffffbac fffffbab fffffbaa fffffba9 fffffba8 fffffba7 fffffba6 fffffba5"
                  " fffffba4 fffffba3 fffffba2 fffffba1 fffffba0 fffffb9f fffffb9e fffffb9d"
                  " fffffb9c fffffb9b fffffb9a fffffb99 fffffb98 fffffb97 fffffb96 fffffb95",
            "p3": "01 00 0004 00000000 00000001 04 00 0763 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p4": "01 20 0004 00000000 0000000f 04 00 0763 0020 0000"
                  " ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38"
                  " ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38"
                  " ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38"
                  " ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38",
            "p5": "01 01 0004 00000000 00000000 00 00 0763 0020 0000"
                  " ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38"
                  " ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38"
                  " ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38"
                  " ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38 ffffff38",
        },
        "steps": [
            ["tor0", False, "p0", [["drop", "absorbed", ""]]],
            ["tor0", False, "p1", [["drop", "absorbed", ""]]],
            ["tor0", False, "p2", [["drop", "absorbed", ""]]],
            ["tor0", False, "p3", [["to_ps", "aggregate", "p4"]]],
            ["ps", False, "p4", [["to_workers", "result", "p5"]]],
            ["tor0", False, "p5", [["to_workers", "result", "p5"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 5, "results": 1, "released": 1, "claims": 1, "contributions": 4, "aggregates": 1,
            },
            "ps": {
                "packets": 1, "contributions": 1, "results": 1,
            },
        },
        "results": [
            [4, 0, [
                -200, -200, -200, -200, -200, -200, -200, -200,
                -200, -200, -200, -200, -200, -200, -200, -200,
                -200, -200, -200, -200, -200, -200, -200, -200,
                -200, -200, -200, -200, -200, -200, -200, -200,
            ]],
        ],
    },
    "sum_8_workers": {
        "doc": ("8 workers on one switch (the PS's ToR) in the order (5, 0, 7, 2, 6, 1, 4, 3): the PS gets one "
                "aggregate, the exact sum, and its result frees the slot"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[8, 8, "root", 0]]},
        },
        "ps": [
            {"job_id": 8, "root_workers": [0, 1, 2, 3, 4, 5, 6, 7], "leaves": []},
        ],
        "packets": {
            "p0": "01 00 0008 00000000 00000020 08 00 ea62 0020 0000"
                  " fffffa24 fffffa23 fffffa22 fffffa21 fffffa20 fffffa1f fffffa1e fffffa1d"
                  " fffffa1c fffffa1b fffffa1a fffffa19 fffffa18 fffffa17 fffffa16 fffffa15"
                  " fffffa14 fffffa13 fffffa12 fffffa11 fffffa10 fffffa0f fffffa0e fffffa0d"
                  " fffffa0c fffffa0b fffffa0a fffffa09 fffffa08 fffffa07 fffffa06 fffffa05",
            "p1": "01 00 0008 00000000 00000001 08 00 ea62 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p2": "01 00 0008 00000000 00000080 08 00 ea62 0020 0000"
                  " fffff95c fffff95b fffff95a fffff959 fffff958 fffff957 fffff956 fffff955"
                  " fffff954 fffff953 fffff952 fffff951 fffff950 fffff94f fffff94e fffff94d"
                  " fffff94c fffff94b fffff94a fffff949 fffff948 fffff947 fffff946 fffff945"
                  " fffff944 fffff943 fffff942 fffff941 fffff940 fffff93f fffff93e fffff93d",
            "p3": "01 00 0008 00000000 00000004 08 00 ea62 0020 0000"
                  " 000004b0 000004b1 000004b2 000004b3 000004b4 000004b5 000004b6 000004b7"
                  " 000004b8 000004b9 000004ba 000004bb 000004bc 000004bd 000004be 000004bf"
                  " 000004c0 000004c1 000004c2 000004c3 000004c4 000004c5 000004c6 000004c7"
                  " 000004c8 000004c9 000004ca 000004cb 000004cc 000004cd 000004ce 000004cf",
            "p4": "01 00 0008 00000000 00000040 08 00 ea62 0020 0000"
                  " 00000640 00000641 00000642 00000643 00000644 00000645 00000646 00000647"
                  " 00000648 00000649 0000064a 0000064b 0000064c 0000064d 0000064e 0000064f"
                  " 00000650 00000651 00000652 00000653 00000654 00000655 00000656 00000657"
                  " 00000658 00000659 0000065a 0000065b 0000065c 0000065d 0000065e 0000065f",
            "p5": "01 00 0008 00000000 00000002 08 00 ea62 0020 0000"
                  " fffffbb4 fffffbb3 fffffbb2 fffffbb1 fffffbb0 fffffbaf fffffbae fffffbad"
                  " fffffbac fffffbab fffffbaa fffffba9 fffffba8 fffffba7 fffffba6 fffffba5"
                  " fffffba4 fffffba3 fffffba2 fffffba1 fffffba0 fffffb9f fffffb9e fffffb9d"
                  " fffffb9c fffffb9b fffffb9a fffffb99 fffffb98 fffffb97 fffffb96 fffffb95",
            "p6": "01 00 0008 00000000 00000010 08 00 ea62 0020 0000"
                  " 00000578 00000579 0000057a 0000057b 0000057c 0000057d 0000057e 0000057f"
                  " 00000580 00000581 00000582 00000583 00000584 00000585 00000586 00000587"
                  " 00000588 00000589 0000058a 0000058b 0000058c 0000058d 0000058e 0000058f"
                  " 00000590 00000591 00000592 00000593 00000594 00000595 00000596 00000597",
            "p7": "01 00 0008 00000000 00000008 08 00 ea62 0020 0000"
                  " fffffaec fffffaeb fffffaea fffffae9 fffffae8 fffffae7 fffffae6 fffffae5"
                  " fffffae4 fffffae3 fffffae2 fffffae1 fffffae0 fffffadf fffffade fffffadd"
                  " fffffadc fffffadb fffffada fffffad9 fffffad8 fffffad7 fffffad6 fffffad5"
                  " fffffad4 fffffad3 fffffad2 fffffad1 fffffad0 fffffacf ffffface fffffacd",
            "p8": "01 20 0008 00000000 000000ff 08 00 ea62 0020 0000"
                  " fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70"
                  " fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70"
                  " fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70"
                  " fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70",
            "p9": "01 01 0008 00000000 00000000 00 00 ea62 0020 0000"
                  " fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70"
                  " fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70"
                  " fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70"
                  " fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70 fffffe70",
        },
        "steps": [
            ["tor0", False, "p0", [["drop", "absorbed", ""]]],
            ["tor0", False, "p1", [["drop", "absorbed", ""]]],
            ["tor0", False, "p2", [["drop", "absorbed", ""]]],
            ["tor0", False, "p3", [["drop", "absorbed", ""]]],
            ["tor0", False, "p4", [["drop", "absorbed", ""]]],
            ["tor0", False, "p5", [["drop", "absorbed", ""]]],
            ["tor0", False, "p6", [["drop", "absorbed", ""]]],
            ["tor0", False, "p7", [["to_ps", "aggregate", "p8"]]],
            ["ps", False, "p8", [["to_workers", "result", "p9"]]],
            ["tor0", False, "p9", [["to_workers", "result", "p9"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 9, "results": 1, "released": 1, "claims": 1, "contributions": 8, "aggregates": 1,
            },
            "ps": {
                "packets": 1, "contributions": 1, "results": 1,
            },
        },
        "results": [
            [8, 0, [
                -400, -400, -400, -400, -400, -400, -400, -400,
                -400, -400, -400, -400, -400, -400, -400, -400,
                -400, -400, -400, -400, -400, -400, -400, -400,
                -400, -400, -400, -400, -400, -400, -400, -400,
            ]],
        ],
    },
    "two_level": {
        "doc": ("two leaves (2 workers each) and a root with one local worker: each leaf sends one partial (bitmap = "
                "its bit), the root sends the full aggregate, the result goes down both levels"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[20, 3, "root", 0]]},
            "tor1": {"n_slots": 64, "jobs": [[20, 2, "leaf", 1]]},
            "tor2": {"n_slots": 64, "jobs": [[20, 2, "leaf", 4]]},
        },
        "ps": [
            {"job_id": 20, "root_workers": [0], "leaves": [[1, [2, 3]], [4, [5, 6]]]},
        ],
        "packets": {
            "p0": "01 00 0014 00000005 00000004 02 00 646e 0020 0000"
                  " 00001838 00001839 0000183a 0000183b 0000183c 0000183d 0000183e 0000183f"
                  " 00001840 00001841 00001842 00001843 00001844 00001845 00001846 00001847"
                  " 00001848 00001849 0000184a 0000184b 0000184c 0000184d 0000184e 0000184f"
                  " 00001850 00001851 00001852 00001853 00001854 00001855 00001856 00001857",
            "p1": "01 00 0014 00000005 00000020 02 00 646e 0020 0000"
                  " ffffe69c ffffe69b ffffe69a ffffe699 ffffe698 ffffe697 ffffe696 ffffe695"
                  " ffffe694 ffffe693 ffffe692 ffffe691 ffffe690 ffffe68f ffffe68e ffffe68d"
                  " ffffe68c ffffe68b ffffe68a ffffe689 ffffe688 ffffe687 ffffe686 ffffe685"
                  " ffffe684 ffffe683 ffffe682 ffffe681 ffffe680 ffffe67f ffffe67e ffffe67d",
            "p2": "01 00 0014 00000005 00000001 03 00 646e 0020 0000"
                  " 00001770 00001771 00001772 00001773 00001774 00001775 00001776 00001777"
                  " 00001778 00001779 0000177a 0000177b 0000177c 0000177d 0000177e 0000177f"
                  " 00001780 00001781 00001782 00001783 00001784 00001785 00001786 00001787"
                  " 00001788 00001789 0000178a 0000178b 0000178c 0000178d 0000178e 0000178f",
            "p3": "01 00 0014 00000005 00000008 02 00 646e 0020 0000"
                  " ffffe764 ffffe763 ffffe762 ffffe761 ffffe760 ffffe75f ffffe75e ffffe75d"
                  " ffffe75c ffffe75b ffffe75a ffffe759 ffffe758 ffffe757 ffffe756 ffffe755"
                  " ffffe754 ffffe753 ffffe752 ffffe751 ffffe750 ffffe74f ffffe74e ffffe74d"
                  " ffffe74c ffffe74b ffffe74a ffffe749 ffffe748 ffffe747 ffffe746 ffffe745",
            "p4": "01 20 0014 00000005 00000002 02 00 646e 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p5": "01 00 0014 00000005 00000040 02 00 646e 0020 0000"
                  " 000019c8 000019c9 000019ca 000019cb 000019cc 000019cd 000019ce 000019cf"
                  " 000019d0 000019d1 000019d2 000019d3 000019d4 000019d5 000019d6 000019d7"
                  " 000019d8 000019d9 000019da 000019db 000019dc 000019dd 000019de 000019df"
                  " 000019e0 000019e1 000019e2 000019e3 000019e4 000019e5 000019e6 000019e7",
            "p6": "01 20 0014 00000005 00000010 02 00 646e 0020 0000"
                  " 00000064 00000064 00000064 00000064 00000064 00000064 00000064 00000064"
                  " 00000064 00000064 00000064 00000064 00000064 00000064 00000064 00000064"
                  " 00000064 00000064 00000064 00000064 00000064 00000064 00000064 00000064"
                  " 00000064 00000064 00000064 00000064 00000064 00000064 00000064 00000064",
            "p7": "01 20 0014 00000005 00000013 03 00 646e 0020 0000"
                  " 00001770 00001771 00001772 00001773 00001774 00001775 00001776 00001777"
                  " 00001778 00001779 0000177a 0000177b 0000177c 0000177d 0000177e 0000177f"
                  " 00001780 00001781 00001782 00001783 00001784 00001785 00001786 00001787"
                  " 00001788 00001789 0000178a 0000178b 0000178c 0000178d 0000178e 0000178f",
            "p8": "01 01 0014 00000005 00000000 00 00 646e 0020 0000"
                  " 00001770 00001771 00001772 00001773 00001774 00001775 00001776 00001777"
                  " 00001778 00001779 0000177a 0000177b 0000177c 0000177d 0000177e 0000177f"
                  " 00001780 00001781 00001782 00001783 00001784 00001785 00001786 00001787"
                  " 00001788 00001789 0000178a 0000178b 0000178c 0000178d 0000178e 0000178f",
        },
        "steps": [
            ["tor1", False, "p0", [["drop", "absorbed", ""]]],
            ["tor2", False, "p1", [["drop", "absorbed", ""]]],
            ["tor0", False, "p2", [["drop", "absorbed", ""]]],
            ["tor1", False, "p3", [["to_ps", "aggregate", "p4"]]],
            ["tor0", False, "p4", [["drop", "absorbed", ""]]],
            ["tor2", False, "p5", [["to_ps", "aggregate", "p6"]]],
            ["tor0", False, "p6", [["to_ps", "aggregate", "p7"]]],
            ["ps", False, "p7", [["to_workers", "result", "p8"]]],
            ["tor0", False, "p8", [["to_workers", "result", "p8"]]],
            ["tor1", False, "p8", [["to_workers", "result", "p8"]]],
            ["tor2", False, "p8", [["to_workers", "result", "p8"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 4, "results": 1, "released": 1, "claims": 1, "contributions": 3, "aggregates": 1,
            },
            "tor1": {
                "packets": 3, "results": 1, "claims": 1, "contributions": 2, "aggregates": 1,
            },
            "tor2": {
                "packets": 3, "results": 1, "claims": 1, "contributions": 2, "aggregates": 1,
            },
            "ps": {
                "packets": 1, "contributions": 1, "results": 1,
            },
        },
        "results": [
            [20, 5, [
                6000, 6001, 6002, 6003, 6004, 6005, 6006, 6007,
                6008, 6009, 6010, 6011, 6012, 6013, 6014, 6015,
                6016, 6017, 6018, 6019, 6020, 6021, 6022, 6023,
                6024, 6025, 6026, 6027, 6028, 6029, 6030, 6031,
            ]],
        ],
    },
    "collision_fallback": {
        "doc": ("jobs 3 and 4 share a switch and their seqs hash to the same slot: job 3 holds it, job 4's packets "
                "fall back (COLLISION) and the PS sums them; job 4's result does not free job 3's slot"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[3, 2, "root", 0], [4, 2, "root", 0]]},
        },
        "ps": [
            {"job_id": 3, "root_workers": [0, 1], "leaves": []},
            {"job_id": 4, "root_workers": [0, 1], "leaves": []},
        ],
        "packets": {
            "p0": "01 00 0003 0000000a 00000001 02 00 326d 0020 0000"
                  " 00000fa0 00000fa1 00000fa2 00000fa3 00000fa4 00000fa5 00000fa6 00000fa7"
                  " 00000fa8 00000fa9 00000faa 00000fab 00000fac 00000fad 00000fae 00000faf"
                  " 00000fb0 00000fb1 00000fb2 00000fb3 00000fb4 00000fb5 00000fb6 00000fb7"
                  " 00000fb8 00000fb9 00000fba 00000fbb 00000fbc 00000fbd 00000fbe 00000fbf",
            "p1": "01 00 0004 0000b249 00000001 02 00 326d 0020 0000"
                  " 000007d0 000007d1 000007d2 000007d3 000007d4 000007d5 000007d6 000007d7"
                  " 000007d8 000007d9 000007da 000007db 000007dc 000007dd 000007de 000007df"
                  " 000007e0 000007e1 000007e2 000007e3 000007e4 000007e5 000007e6 000007e7"
                  " 000007e8 000007e9 000007ea 000007eb 000007ec 000007ed 000007ee 000007ef",
            "p2": "01 02 0004 0000b249 00000001 02 00 326d 0020 0000"
                  " 000007d0 000007d1 000007d2 000007d3 000007d4 000007d5 000007d6 000007d7"
                  " 000007d8 000007d9 000007da 000007db 000007dc 000007dd 000007de 000007df"
                  " 000007e0 000007e1 000007e2 000007e3 000007e4 000007e5 000007e6 000007e7"
                  " 000007e8 000007e9 000007ea 000007eb 000007ec 000007ed 000007ee 000007ef",
            "p3": "01 00 0004 0000b249 00000002 02 00 326d 0020 0000"
                  " fffff7cc fffff7cb fffff7ca fffff7c9 fffff7c8 fffff7c7 fffff7c6 fffff7c5"
                  " fffff7c4 fffff7c3 fffff7c2 fffff7c1 fffff7c0 fffff7bf fffff7be fffff7bd"
                  " fffff7bc fffff7bb fffff7ba fffff7b9 fffff7b8 fffff7b7 fffff7b6 fffff7b5"
                  " fffff7b4 fffff7b3 fffff7b2 fffff7b1 fffff7b0 fffff7af fffff7ae fffff7ad",
            "p4": "01 02 0004 0000b249 00000002 02 00 326d 0020 0000"
                  " fffff7cc fffff7cb fffff7ca fffff7c9 fffff7c8 fffff7c7 fffff7c6 fffff7c5"
                  " fffff7c4 fffff7c3 fffff7c2 fffff7c1 fffff7c0 fffff7bf fffff7be fffff7bd"
                  " fffff7bc fffff7bb fffff7ba fffff7b9 fffff7b8 fffff7b7 fffff7b6 fffff7b5"
                  " fffff7b4 fffff7b3 fffff7b2 fffff7b1 fffff7b0 fffff7af fffff7ae fffff7ad",
            "p5": "01 01 0004 0000b249 00000000 00 00 326d 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p6": "01 00 0003 0000000a 00000002 02 00 326d 0020 0000"
                  " ffffeffc ffffeffb ffffeffa ffffeff9 ffffeff8 ffffeff7 ffffeff6 ffffeff5"
                  " ffffeff4 ffffeff3 ffffeff2 ffffeff1 ffffeff0 ffffefef ffffefee ffffefed"
                  " ffffefec ffffefeb ffffefea ffffefe9 ffffefe8 ffffefe7 ffffefe6 ffffefe5"
                  " ffffefe4 ffffefe3 ffffefe2 ffffefe1 ffffefe0 ffffefdf ffffefde ffffefdd",
            "p7": "01 20 0003 0000000a 00000003 02 00 326d 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p8": "01 01 0003 0000000a 00000000 00 00 326d 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
        },
        "steps": [
            ["tor0", False, "p0", [["drop", "absorbed", ""]]],
            ["tor0", False, "p1", [["to_ps", "collision", "p2"]]],
            ["ps", False, "p2", [["drop", "absorbed", ""]]],
            ["tor0", False, "p3", [["to_ps", "collision", "p4"]]],
            ["ps", False, "p4", [["to_workers", "result", "p5"]]],
            ["tor0", False, "p5", [["to_workers", "result", "p5"]]],
            ["tor0", False, "p6", [["to_ps", "aggregate", "p7"]]],
            ["ps", False, "p7", [["to_workers", "result", "p8"]]],
            ["tor0", False, "p8", [["to_workers", "result", "p8"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 6, "results": 2, "released": 1, "claims": 1, "contributions": 2, "collisions": 2,
                "aggregates": 1,
            },
            "ps": {
                "packets": 3, "contributions": 3, "results": 2,
            },
        },
        "results": [
            [3, 10, [
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
            ]],
            [4, 45641, [
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
            ]],
        ],
    },
    "two_level_fallback": {
        "doc": ("job 5's leaf slot is held by job 6: its rack's packets fall back and pass the root (COLLISION), the "
                "root's slot waits for a partial that never comes, the workers' resends complete the seq at the PS "
                "and its result frees the root's slot"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[5, 2, "root", 0]]},
            "tor1": {"n_slots": 64, "jobs": [[5, 2, "leaf", 1], [6, 2, "root", 0]]},
        },
        "ps": [
            {"job_id": 5, "root_workers": [0], "leaves": [[1, [2, 3]]]},
            {"job_id": 6, "root_workers": [0, 1], "leaves": []},
        ],
        "packets": {
            "p0": "01 00 0006 000285c3 00000001 02 00 7f69 0020 0000"
                  " 00000fa0 00000fa1 00000fa2 00000fa3 00000fa4 00000fa5 00000fa6 00000fa7"
                  " 00000fa8 00000fa9 00000faa 00000fab 00000fac 00000fad 00000fae 00000faf"
                  " 00000fb0 00000fb1 00000fb2 00000fb3 00000fb4 00000fb5 00000fb6 00000fb7"
                  " 00000fb8 00000fb9 00000fba 00000fbb 00000fbc 00000fbd 00000fbe 00000fbf",
            "p1": "01 00 0005 00000003 00000004 02 00 7f69 0020 0000"
                  " 00001068 00001069 0000106a 0000106b 0000106c 0000106d 0000106e 0000106f"
                  " 00001070 00001071 00001072 00001073 00001074 00001075 00001076 00001077"
                  " 00001078 00001079 0000107a 0000107b 0000107c 0000107d 0000107e 0000107f"
                  " 00001080 00001081 00001082 00001083 00001084 00001085 00001086 00001087",
            "p2": "01 02 0005 00000003 00000004 02 00 7f69 0020 0000"
                  " 00001068 00001069 0000106a 0000106b 0000106c 0000106d 0000106e 0000106f"
                  " 00001070 00001071 00001072 00001073 00001074 00001075 00001076 00001077"
                  " 00001078 00001079 0000107a 0000107b 0000107c 0000107d 0000107e 0000107f"
                  " 00001080 00001081 00001082 00001083 00001084 00001085 00001086 00001087",
            "p3": "01 00 0005 00000003 00000008 02 00 7f69 0020 0000"
                  " ffffef34 ffffef33 ffffef32 ffffef31 ffffef30 ffffef2f ffffef2e ffffef2d"
                  " ffffef2c ffffef2b ffffef2a ffffef29 ffffef28 ffffef27 ffffef26 ffffef25"
                  " ffffef24 ffffef23 ffffef22 ffffef21 ffffef20 ffffef1f ffffef1e ffffef1d"
                  " ffffef1c ffffef1b ffffef1a ffffef19 ffffef18 ffffef17 ffffef16 ffffef15",
            "p4": "01 02 0005 00000003 00000008 02 00 7f69 0020 0000"
                  " ffffef34 ffffef33 ffffef32 ffffef31 ffffef30 ffffef2f ffffef2e ffffef2d"
                  " ffffef2c ffffef2b ffffef2a ffffef29 ffffef28 ffffef27 ffffef26 ffffef25"
                  " ffffef24 ffffef23 ffffef22 ffffef21 ffffef20 ffffef1f ffffef1e ffffef1d"
                  " ffffef1c ffffef1b ffffef1a ffffef19 ffffef18 ffffef17 ffffef16 ffffef15",
            "p5": "01 00 0005 00000003 00000001 02 00 7f69 0020 0000"
                  " 00000fa0 00000fa1 00000fa2 00000fa3 00000fa4 00000fa5 00000fa6 00000fa7"
                  " 00000fa8 00000fa9 00000faa 00000fab 00000fac 00000fad 00000fae 00000faf"
                  " 00000fb0 00000fb1 00000fb2 00000fb3 00000fb4 00000fb5 00000fb6 00000fb7"
                  " 00000fb8 00000fb9 00000fba 00000fbb 00000fbc 00000fbd 00000fbe 00000fbf",
            "p6": "01 04 0005 00000003 00000004 02 00 7f69 0020 0000"
                  " 00001068 00001069 0000106a 0000106b 0000106c 0000106d 0000106e 0000106f"
                  " 00001070 00001071 00001072 00001073 00001074 00001075 00001076 00001077"
                  " 00001078 00001079 0000107a 0000107b 0000107c 0000107d 0000107e 0000107f"
                  " 00001080 00001081 00001082 00001083 00001084 00001085 00001086 00001087",
            "p7": "01 04 0005 00000003 00000001 02 00 7f69 0020 0000"
                  " 00000fa0 00000fa1 00000fa2 00000fa3 00000fa4 00000fa5 00000fa6 00000fa7"
                  " 00000fa8 00000fa9 00000faa 00000fab 00000fac 00000fad 00000fae 00000faf"
                  " 00000fb0 00000fb1 00000fb2 00000fb3 00000fb4 00000fb5 00000fb6 00000fb7"
                  " 00000fb8 00000fb9 00000fba 00000fbb 00000fbc 00000fbd 00000fbe 00000fbf",
            "p8": "01 01 0005 00000003 00000000 00 00 7f69 0020 0000"
                  " 00000f3c 00000f3d 00000f3e 00000f3f 00000f40 00000f41 00000f42 00000f43"
                  " 00000f44 00000f45 00000f46 00000f47 00000f48 00000f49 00000f4a 00000f4b"
                  " 00000f4c 00000f4d 00000f4e 00000f4f 00000f50 00000f51 00000f52 00000f53"
                  " 00000f54 00000f55 00000f56 00000f57 00000f58 00000f59 00000f5a 00000f5b",
            "p9": "01 00 0006 000285c3 00000002 02 00 7f69 0020 0000"
                  " ffffeffc ffffeffb ffffeffa ffffeff9 ffffeff8 ffffeff7 ffffeff6 ffffeff5"
                  " ffffeff4 ffffeff3 ffffeff2 ffffeff1 ffffeff0 ffffefef ffffefee ffffefed"
                  " ffffefec ffffefeb ffffefea ffffefe9 ffffefe8 ffffefe7 ffffefe6 ffffefe5"
                  " ffffefe4 ffffefe3 ffffefe2 ffffefe1 ffffefe0 ffffefdf ffffefde ffffefdd",
            "p10": "01 20 0006 000285c3 00000003 02 00 7f69 0020 0000"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p11": "01 01 0006 000285c3 00000000 00 00 7f69 0020 0000"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
        },
        "steps": [
            ["tor1", False, "p0", [["drop", "absorbed", ""]]],
            ["tor1", False, "p1", [["to_ps", "collision", "p2"]]],
            ["tor0", False, "p2", [["to_ps", "passed", "p2"]]],
            ["ps", False, "p2", [["drop", "absorbed", ""]]],
            ["tor1", False, "p3", [["to_ps", "collision", "p4"]]],
            ["tor0", False, "p4", [["to_ps", "passed", "p4"]]],
            ["ps", False, "p4", [["drop", "absorbed", ""]]],
            ["tor0", False, "p5", [["drop", "absorbed", ""]]],
            ["tor1", False, "p6", [["to_ps", "resend", "p6"]]],
            ["tor0", False, "p6", [["to_ps", "resend", "p6"]]],
            ["ps", False, "p6", [["drop", "duplicate", ""]]],
            ["tor0", False, "p7", [["to_ps", "resend", "p7"]]],
            ["ps", False, "p7", [["to_workers", "result", "p8"]]],
            ["tor0", False, "p8", [["to_workers", "result", "p8"]]],
            ["tor1", False, "p8", [["to_workers", "result", "p8"]]],
            ["tor1", False, "p9", [["to_ps", "aggregate", "p10"]]],
            ["ps", False, "p10", [["to_workers", "result", "p11"]]],
            ["tor1", False, "p11", [["to_workers", "result", "p11"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 6, "passed": 2, "results": 1, "released": 1, "resends": 2, "claims": 1,
                "contributions": 1,
            },
            "tor1": {
                "packets": 7, "results": 2, "released": 1, "resends": 1, "claims": 1, "contributions": 2,
                "collisions": 2, "aggregates": 1,
            },
            "ps": {
                "packets": 5, "contributions": 4, "duplicates": 1, "results": 2,
            },
        },
        "results": [
            [5, 3, [
                3900, 3901, 3902, 3903, 3904, 3905, 3906, 3907,
                3908, 3909, 3910, 3911, 3912, 3913, 3914, 3915,
                3916, 3917, 3918, 3919, 3920, 3921, 3922, 3923,
                3924, 3925, 3926, 3927, 3928, 3929, 3930, 3931,
            ]],
            [6, 165315, [
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
            ]],
        ],
    },
    "release_and_reuse": {
        "doc": ("a root keeps a completed slot until the result: a later seq hashing to the same slot falls back "
                "meanwhile; the result frees the slot and the next such seq aggregates in it"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[7, 2, "root", 0]]},
        },
        "ps": [
            {"job_id": 7, "root_workers": [0, 1], "leaves": []},
        ],
        "packets": {
            "p0": "01 00 0007 00000001 00000001 02 00 4d25 0020 0000"
                  " 000007d0 000007d1 000007d2 000007d3 000007d4 000007d5 000007d6 000007d7"
                  " 000007d8 000007d9 000007da 000007db 000007dc 000007dd 000007de 000007df"
                  " 000007e0 000007e1 000007e2 000007e3 000007e4 000007e5 000007e6 000007e7"
                  " 000007e8 000007e9 000007ea 000007eb 000007ec 000007ed 000007ee 000007ef",
            "p1": "01 00 0007 00000001 00000002 02 00 4d25 0020 0000"
                  " fffff7cc fffff7cb fffff7ca fffff7c9 fffff7c8 fffff7c7 fffff7c6 fffff7c5"
                  " fffff7c4 fffff7c3 fffff7c2 fffff7c1 fffff7c0 fffff7bf fffff7be fffff7bd"
                  " fffff7bc fffff7bb fffff7ba fffff7b9 fffff7b8 fffff7b7 fffff7b6 fffff7b5"
                  " fffff7b4 fffff7b3 fffff7b2 fffff7b1 fffff7b0 fffff7af fffff7ae fffff7ad",
            "p2": "01 20 0007 00000001 00000003 02 00 4d25 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p3": "01 01 0007 00000001 00000000 00 00 4d25 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p4": "01 00 0007 000061d9 00000001 02 00 4d25 0020 0000"
                  " 00000fa0 00000fa1 00000fa2 00000fa3 00000fa4 00000fa5 00000fa6 00000fa7"
                  " 00000fa8 00000fa9 00000faa 00000fab 00000fac 00000fad 00000fae 00000faf"
                  " 00000fb0 00000fb1 00000fb2 00000fb3 00000fb4 00000fb5 00000fb6 00000fb7"
                  " 00000fb8 00000fb9 00000fba 00000fbb 00000fbc 00000fbd 00000fbe 00000fbf",
            "p5": "01 02 0007 000061d9 00000001 02 00 4d25 0020 0000"
                  " 00000fa0 00000fa1 00000fa2 00000fa3 00000fa4 00000fa5 00000fa6 00000fa7"
                  " 00000fa8 00000fa9 00000faa 00000fab 00000fac 00000fad 00000fae 00000faf"
                  " 00000fb0 00000fb1 00000fb2 00000fb3 00000fb4 00000fb5 00000fb6 00000fb7"
                  " 00000fb8 00000fb9 00000fba 00000fbb 00000fbc 00000fbd 00000fbe 00000fbf",
            "p6": "01 00 0007 000061d9 00000002 02 00 4d25 0020 0000"
                  " ffffeffc ffffeffb ffffeffa ffffeff9 ffffeff8 ffffeff7 ffffeff6 ffffeff5"
                  " ffffeff4 ffffeff3 ffffeff2 ffffeff1 ffffeff0 ffffefef ffffefee ffffefed"
                  " ffffefec ffffefeb ffffefea ffffefe9 ffffefe8 ffffefe7 ffffefe6 ffffefe5"
                  " ffffefe4 ffffefe3 ffffefe2 ffffefe1 ffffefe0 ffffefdf ffffefde ffffefdd",
            "p7": "01 02 0007 000061d9 00000002 02 00 4d25 0020 0000"
                  " ffffeffc ffffeffb ffffeffa ffffeff9 ffffeff8 ffffeff7 ffffeff6 ffffeff5"
                  " ffffeff4 ffffeff3 ffffeff2 ffffeff1 ffffeff0 ffffefef ffffefee ffffefed"
                  " ffffefec ffffefeb ffffefea ffffefe9 ffffefe8 ffffefe7 ffffefe6 ffffefe5"
                  " ffffefe4 ffffefe3 ffffefe2 ffffefe1 ffffefe0 ffffefdf ffffefde ffffefdd",
            "p8": "01 01 0007 000061d9 00000000 00 00 4d25 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p9": "01 00 0007 00012d53 00000001 02 00 4d25 0020 0000"
                  " 00001b58 00001b59 00001b5a 00001b5b 00001b5c 00001b5d 00001b5e 00001b5f"
                  " 00001b60 00001b61 00001b62 00001b63 00001b64 00001b65 00001b66 00001b67"
                  " 00001b68 00001b69 00001b6a 00001b6b 00001b6c 00001b6d 00001b6e 00001b6f"
                  " 00001b70 00001b71 00001b72 00001b73 00001b74 00001b75 00001b76 00001b77",
            "p10": "01 00 0007 00012d53 00000002 02 00 4d25 0020 0000"
                   " ffffe444 ffffe443 ffffe442 ffffe441 ffffe440 ffffe43f ffffe43e ffffe43d"
                   " ffffe43c ffffe43b ffffe43a ffffe439 ffffe438 ffffe437 ffffe436 ffffe435"
                   " ffffe434 ffffe433 ffffe432 ffffe431 ffffe430 ffffe42f ffffe42e ffffe42d"
                   " ffffe42c ffffe42b ffffe42a ffffe429 ffffe428 ffffe427 ffffe426 ffffe425",
            "p11": "01 20 0007 00012d53 00000003 02 00 4d25 0020 0000"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p12": "01 01 0007 00012d53 00000000 00 00 4d25 0020 0000"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
        },
        "steps": [
            ["tor0", False, "p0", [["drop", "absorbed", ""]]],
            ["tor0", False, "p1", [["to_ps", "aggregate", "p2"]]],
            ["ps", False, "p2", [["to_workers", "result", "p3"]]],
            ["tor0", False, "p4", [["to_ps", "collision", "p5"]]],
            ["ps", False, "p5", [["drop", "absorbed", ""]]],
            ["tor0", False, "p6", [["to_ps", "collision", "p7"]]],
            ["ps", False, "p7", [["to_workers", "result", "p8"]]],
            ["tor0", False, "p8", [["to_workers", "result", "p8"]]],
            ["tor0", False, "p3", [["to_workers", "result", "p3"]]],
            ["tor0", False, "p9", [["drop", "absorbed", ""]]],
            ["tor0", False, "p10", [["to_ps", "aggregate", "p11"]]],
            ["ps", False, "p11", [["to_workers", "result", "p12"]]],
            ["tor0", False, "p12", [["to_workers", "result", "p12"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 9, "results": 3, "released": 2, "claims": 2, "contributions": 4, "collisions": 2,
                "aggregates": 2,
            },
            "ps": {
                "packets": 4, "contributions": 4, "results": 3,
            },
        },
        "results": [
            [7, 1, [
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
            ]],
            [7, 25049, [
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
            ]],
            [7, 77139, [
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
            ]],
        ],
    },
    "duplicate_dropped": {
        "doc": ("duplicates are dropped at the leaf, at the root (also once its slot is complete) and at the PS, so "
                "nothing is summed twice; a duplicate after the leaf emitted re-claims a leaf slot, which the result "
                "frees"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[8, 2, "root", 0]]},
            "tor1": {"n_slots": 64, "jobs": [[8, 2, "leaf", 1]]},
        },
        "ps": [
            {"job_id": 8, "root_workers": [0], "leaves": [[1, [2, 3]]]},
        ],
        "packets": {
            "p0": "01 00 0008 00000002 00000004 02 00 8b4e 0020 0000"
                  " 00000c80 00000c81 00000c82 00000c83 00000c84 00000c85 00000c86 00000c87"
                  " 00000c88 00000c89 00000c8a 00000c8b 00000c8c 00000c8d 00000c8e 00000c8f"
                  " 00000c90 00000c91 00000c92 00000c93 00000c94 00000c95 00000c96 00000c97"
                  " 00000c98 00000c99 00000c9a 00000c9b 00000c9c 00000c9d 00000c9e 00000c9f",
            "p1": "01 00 0008 00000002 00000008 02 00 8b4e 0020 0000"
                  " fffff31c fffff31b fffff31a fffff319 fffff318 fffff317 fffff316 fffff315"
                  " fffff314 fffff313 fffff312 fffff311 fffff310 fffff30f fffff30e fffff30d"
                  " fffff30c fffff30b fffff30a fffff309 fffff308 fffff307 fffff306 fffff305"
                  " fffff304 fffff303 fffff302 fffff301 fffff300 fffff2ff fffff2fe fffff2fd",
            "p2": "01 20 0008 00000002 00000002 02 00 8b4e 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p3": "01 00 0008 00000002 00000001 02 00 8b4e 0020 0000"
                  " 00000bb8 00000bb9 00000bba 00000bbb 00000bbc 00000bbd 00000bbe 00000bbf"
                  " 00000bc0 00000bc1 00000bc2 00000bc3 00000bc4 00000bc5 00000bc6 00000bc7"
                  " 00000bc8 00000bc9 00000bca 00000bcb 00000bcc 00000bcd 00000bce 00000bcf"
                  " 00000bd0 00000bd1 00000bd2 00000bd3 00000bd4 00000bd5 00000bd6 00000bd7",
            "p4": "01 20 0008 00000002 00000003 02 00 8b4e 0020 0000"
                  " 00000b54 00000b55 00000b56 00000b57 00000b58 00000b59 00000b5a 00000b5b"
                  " 00000b5c 00000b5d 00000b5e 00000b5f 00000b60 00000b61 00000b62 00000b63"
                  " 00000b64 00000b65 00000b66 00000b67 00000b68 00000b69 00000b6a 00000b6b"
                  " 00000b6c 00000b6d 00000b6e 00000b6f 00000b70 00000b71 00000b72 00000b73",
            "p5": "01 01 0008 00000002 00000000 00 00 8b4e 0020 0000"
                  " 00000b54 00000b55 00000b56 00000b57 00000b58 00000b59 00000b5a 00000b5b"
                  " 00000b5c 00000b5d 00000b5e 00000b5f 00000b60 00000b61 00000b62 00000b63"
                  " 00000b64 00000b65 00000b66 00000b67 00000b68 00000b69 00000b6a 00000b6b"
                  " 00000b6c 00000b6d 00000b6e 00000b6f 00000b70 00000b71 00000b72 00000b73",
        },
        "steps": [
            ["tor1", False, "p0", [["drop", "absorbed", ""]]],
            ["tor1", False, "p0", [["drop", "duplicate", ""]]],
            ["tor1", False, "p1", [["to_ps", "aggregate", "p2"]]],
            ["tor0", False, "p3", [["drop", "absorbed", ""]]],
            ["tor0", False, "p3", [["drop", "duplicate", ""]]],
            ["tor0", False, "p2", [["to_ps", "aggregate", "p4"]]],
            ["tor0", False, "p2", [["drop", "duplicate", ""]]],
            ["ps", False, "p4", [["to_workers", "result", "p5"]]],
            ["ps", False, "p4", [["drop", "late", ""]]],
            ["tor1", False, "p1", [["drop", "absorbed", ""]]],
            ["tor0", False, "p5", [["to_workers", "result", "p5"]]],
            ["tor1", False, "p5", [["to_workers", "result", "p5"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 5, "results": 1, "released": 1, "claims": 1, "contributions": 2, "duplicates": 2,
                "aggregates": 1,
            },
            "tor1": {
                "packets": 5, "results": 1, "released": 1, "claims": 2, "contributions": 3, "duplicates": 1,
                "aggregates": 1,
            },
            "ps": {
                "packets": 2, "contributions": 1, "late": 1, "results": 1,
            },
        },
        "results": [
            [8, 2, [
                2900, 2901, 2902, 2903, 2904, 2905, 2906, 2907,
                2908, 2909, 2910, 2911, 2912, 2913, 2914, 2915,
                2916, 2917, 2918, 2919, 2920, 2921, 2922, 2923,
                2924, 2925, 2926, 2927, 2928, 2929, 2930, 2931,
            ]],
        ],
    },
    "resend_after_loss": {
        "doc": ("one worker's packet is lost: the other two sit in the slot until the timeout, the three RESENDs pass "
                "the switch to the PS, whose result frees the slot; a later resend (its result lost) gets the same "
                "result again"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[9, 3, "root", 0]]},
        },
        "ps": [
            {"job_id": 9, "root_workers": [0, 1, 2], "leaves": []},
        ],
        "packets": {
            "p0": "01 00 0009 00000004 00000001 03 00 07cb 0020 0000"
                  " 00001388 00001389 0000138a 0000138b 0000138c 0000138d 0000138e 0000138f"
                  " 00001390 00001391 00001392 00001393 00001394 00001395 00001396 00001397"
                  " 00001398 00001399 0000139a 0000139b 0000139c 0000139d 0000139e 0000139f"
                  " 000013a0 000013a1 000013a2 000013a3 000013a4 000013a5 000013a6 000013a7",
            "p1": "01 00 0009 00000004 00000002 03 00 07cb 0020 0000"
                  " ffffec14 ffffec13 ffffec12 ffffec11 ffffec10 ffffec0f ffffec0e ffffec0d"
                  " ffffec0c ffffec0b ffffec0a ffffec09 ffffec08 ffffec07 ffffec06 ffffec05"
                  " ffffec04 ffffec03 ffffec02 ffffec01 ffffec00 ffffebff ffffebfe ffffebfd"
                  " ffffebfc ffffebfb ffffebfa ffffebf9 ffffebf8 ffffebf7 ffffebf6 ffffebf5",
            "p2": "01 04 0009 00000004 00000001 03 00 07cb 0020 0000"
                  " 00001388 00001389 0000138a 0000138b 0000138c 0000138d 0000138e 0000138f"
                  " 00001390 00001391 00001392 00001393 00001394 00001395 00001396 00001397"
                  " 00001398 00001399 0000139a 0000139b 0000139c 0000139d 0000139e 0000139f"
                  " 000013a0 000013a1 000013a2 000013a3 000013a4 000013a5 000013a6 000013a7",
            "p3": "01 04 0009 00000004 00000002 03 00 07cb 0020 0000"
                  " ffffec14 ffffec13 ffffec12 ffffec11 ffffec10 ffffec0f ffffec0e ffffec0d"
                  " ffffec0c ffffec0b ffffec0a ffffec09 ffffec08 ffffec07 ffffec06 ffffec05"
                  " ffffec04 ffffec03 ffffec02 ffffec01 ffffec00 ffffebff ffffebfe ffffebfd"
                  " ffffebfc ffffebfb ffffebfa ffffebf9 ffffebf8 ffffebf7 ffffebf6 ffffebf5",
            "p4": "01 04 0009 00000004 00000004 03 00 07cb 0020 0000"
                  " 00001450 00001451 00001452 00001453 00001454 00001455 00001456 00001457"
                  " 00001458 00001459 0000145a 0000145b 0000145c 0000145d 0000145e 0000145f"
                  " 00001460 00001461 00001462 00001463 00001464 00001465 00001466 00001467"
                  " 00001468 00001469 0000146a 0000146b 0000146c 0000146d 0000146e 0000146f",
            "p5": "01 01 0009 00000004 00000000 00 00 07cb 0020 0000"
                  " 000013ec 000013ed 000013ee 000013ef 000013f0 000013f1 000013f2 000013f3"
                  " 000013f4 000013f5 000013f6 000013f7 000013f8 000013f9 000013fa 000013fb"
                  " 000013fc 000013fd 000013fe 000013ff 00001400 00001401 00001402 00001403"
                  " 00001404 00001405 00001406 00001407 00001408 00001409 0000140a 0000140b",
        },
        "steps": [
            ["tor0", False, "p0", [["drop", "absorbed", ""]]],
            ["tor0", False, "p1", [["drop", "absorbed", ""]]],
            ["tor0", False, "p2", [["to_ps", "resend", "p2"]]],
            ["ps", False, "p2", [["drop", "absorbed", ""]]],
            ["tor0", False, "p3", [["to_ps", "resend", "p3"]]],
            ["ps", False, "p3", [["drop", "absorbed", ""]]],
            ["tor0", False, "p4", [["to_ps", "resend", "p4"]]],
            ["ps", False, "p4", [["to_workers", "result", "p5"]]],
            ["tor0", False, "p5", [["to_workers", "result", "p5"]]],
            ["tor0", False, "p3", [["to_ps", "resend", "p3"]]],
            ["ps", False, "p3", [["to_workers", "result", "p5"]]],
            ["tor0", False, "p5", [["to_workers", "result", "p5"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 8, "results": 2, "released": 1, "resends": 4, "claims": 1, "contributions": 2,
            },
            "ps": {
                "packets": 4, "contributions": 3, "resends_answered": 1, "results": 1,
            },
        },
        "results": [
            [9, 4, [
                5100, 5101, 5102, 5103, 5104, 5105, 5106, 5107,
                5108, 5109, 5110, 5111, 5112, 5113, 5114, 5115,
                5116, 5117, 5118, 5119, 5120, 5121, 5122, 5123,
                5124, 5125, 5126, 5127, 5128, 5129, 5130, 5131,
            ]],
        ],
    },
    "ecn_or": {
        "doc": ("ECN is OR-ed: a CE mark on one worker's packet at the leaf (first seq), or on a leaf's partial at "
                "the root (second seq), reaches the aggregate and the PS's result"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[10, 2, "root", 0]]},
            "tor1": {"n_slots": 64, "jobs": [[10, 2, "leaf", 1]]},
        },
        "ps": [
            {"job_id": 10, "root_workers": [0], "leaves": [[1, [2, 3]]]},
        ],
        "packets": {
            "p0": "01 00 000a 00000000 00000004 02 00 b902 0020 0000"
                  " 000004b0 000004b1 000004b2 000004b3 000004b4 000004b5 000004b6 000004b7"
                  " 000004b8 000004b9 000004ba 000004bb 000004bc 000004bd 000004be 000004bf"
                  " 000004c0 000004c1 000004c2 000004c3 000004c4 000004c5 000004c6 000004c7"
                  " 000004c8 000004c9 000004ca 000004cb 000004cc 000004cd 000004ce 000004cf",
            "p1": "01 00 000a 00000000 00000008 02 00 b902 0020 0000"
                  " fffffaec fffffaeb fffffaea fffffae9 fffffae8 fffffae7 fffffae6 fffffae5"
                  " fffffae4 fffffae3 fffffae2 fffffae1 fffffae0 fffffadf fffffade fffffadd"
                  " fffffadc fffffadb fffffada fffffad9 fffffad8 fffffad7 fffffad6 fffffad5"
                  " fffffad4 fffffad3 fffffad2 fffffad1 fffffad0 fffffacf ffffface fffffacd",
            "p2": "01 28 000a 00000000 00000002 02 00 b902 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p3": "01 00 000a 00000000 00000001 02 00 b902 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p4": "01 28 000a 00000000 00000003 02 00 b902 0020 0000"
                  " 00000384 00000385 00000386 00000387 00000388 00000389 0000038a 0000038b"
                  " 0000038c 0000038d 0000038e 0000038f 00000390 00000391 00000392 00000393"
                  " 00000394 00000395 00000396 00000397 00000398 00000399 0000039a 0000039b"
                  " 0000039c 0000039d 0000039e 0000039f 000003a0 000003a1 000003a2 000003a3",
            "p5": "01 09 000a 00000000 00000000 00 00 b902 0020 0000"
                  " 00000384 00000385 00000386 00000387 00000388 00000389 0000038a 0000038b"
                  " 0000038c 0000038d 0000038e 0000038f 00000390 00000391 00000392 00000393"
                  " 00000394 00000395 00000396 00000397 00000398 00000399 0000039a 0000039b"
                  " 0000039c 0000039d 0000039e 0000039f 000003a0 000003a1 000003a2 000003a3",
            "p6": "01 00 000a 00000008 00000004 02 00 3130 0020 0000"
                  " 00000898 00000899 0000089a 0000089b 0000089c 0000089d 0000089e 0000089f"
                  " 000008a0 000008a1 000008a2 000008a3 000008a4 000008a5 000008a6 000008a7"
                  " 000008a8 000008a9 000008aa 000008ab 000008ac 000008ad 000008ae 000008af"
                  " 000008b0 000008b1 000008b2 000008b3 000008b4 000008b5 000008b6 000008b7",
            "p7": "01 00 000a 00000008 00000008 02 00 3130 0020 0000"
                  " fffff704 fffff703 fffff702 fffff701 fffff700 fffff6ff fffff6fe fffff6fd"
                  " fffff6fc fffff6fb fffff6fa fffff6f9 fffff6f8 fffff6f7 fffff6f6 fffff6f5"
                  " fffff6f4 fffff6f3 fffff6f2 fffff6f1 fffff6f0 fffff6ef fffff6ee fffff6ed"
                  " fffff6ec fffff6eb fffff6ea fffff6e9 fffff6e8 fffff6e7 fffff6e6 fffff6e5",
            "p8": "01 20 000a 00000008 00000002 02 00 3130 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p9": "01 00 000a 00000008 00000001 02 00 3130 0020 0000"
                  " 000007d0 000007d1 000007d2 000007d3 000007d4 000007d5 000007d6 000007d7"
                  " 000007d8 000007d9 000007da 000007db 000007dc 000007dd 000007de 000007df"
                  " 000007e0 000007e1 000007e2 000007e3 000007e4 000007e5 000007e6 000007e7"
                  " 000007e8 000007e9 000007ea 000007eb 000007ec 000007ed 000007ee 000007ef",
            "p10": "01 28 000a 00000008 00000003 02 00 3130 0020 0000"
                   " 0000076c 0000076d 0000076e 0000076f 00000770 00000771 00000772 00000773"
                   " 00000774 00000775 00000776 00000777 00000778 00000779 0000077a 0000077b"
                   " 0000077c 0000077d 0000077e 0000077f 00000780 00000781 00000782 00000783"
                   " 00000784 00000785 00000786 00000787 00000788 00000789 0000078a 0000078b",
            "p11": "01 09 000a 00000008 00000000 00 00 3130 0020 0000"
                   " 0000076c 0000076d 0000076e 0000076f 00000770 00000771 00000772 00000773"
                   " 00000774 00000775 00000776 00000777 00000778 00000779 0000077a 0000077b"
                   " 0000077c 0000077d 0000077e 0000077f 00000780 00000781 00000782 00000783"
                   " 00000784 00000785 00000786 00000787 00000788 00000789 0000078a 0000078b",
        },
        "steps": [
            ["tor1", True, "p0", [["drop", "absorbed", ""]]],
            ["tor1", False, "p1", [["to_ps", "aggregate", "p2"]]],
            ["tor0", False, "p3", [["drop", "absorbed", ""]]],
            ["tor0", False, "p2", [["to_ps", "aggregate", "p4"]]],
            ["ps", False, "p4", [["to_workers", "result", "p5"]]],
            ["tor0", False, "p5", [["to_workers", "result", "p5"]]],
            ["tor1", False, "p5", [["to_workers", "result", "p5"]]],
            ["tor1", False, "p6", [["drop", "absorbed", ""]]],
            ["tor1", False, "p7", [["to_ps", "aggregate", "p8"]]],
            ["tor0", False, "p9", [["drop", "absorbed", ""]]],
            ["tor0", True, "p8", [["to_ps", "aggregate", "p10"]]],
            ["ps", False, "p10", [["to_workers", "result", "p11"]]],
            ["tor0", False, "p11", [["to_workers", "result", "p11"]]],
            ["tor1", False, "p11", [["to_workers", "result", "p11"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 6, "results": 2, "released": 2, "claims": 2, "contributions": 4, "aggregates": 2,
            },
            "tor1": {
                "packets": 6, "results": 2, "claims": 2, "contributions": 4, "aggregates": 2,
            },
            "ps": {
                "packets": 2, "contributions": 2, "results": 2,
            },
        },
        "results": [
            [10, 0, [
                900, 901, 902, 903, 904, 905, 906, 907,
                908, 909, 910, 911, 912, 913, 914, 915,
                916, 917, 918, 919, 920, 921, 922, 923,
                924, 925, 926, 927, 928, 929, 930, 931,
            ]],
            [10, 8, [
                1900, 1901, 1902, 1903, 1904, 1905, 1906, 1907,
                1908, 1909, 1910, 1911, 1912, 1913, 1914, 1915,
                1916, 1917, 1918, 1919, 1920, 1921, 1922, 1923,
                1924, 1925, 1926, 1927, 1928, 1929, 1930, 1931,
            ]],
        ],
    },
    "overflow_exact_at_ps": {
        "doc": ("lanes 0-2 wrap in the switch's int32 sum: the aggregate carries OVERFLOW, the PS answers with a "
                "resend request (RESULT|RESEND|OVERFLOW, frees the slot), the workers resend and the PS sums exactly: "
                "lanes 0 and 2 fit int32, lane 1 (2**32 - 2) is saturated and flagged"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[11, 3, "root", 0]]},
        },
        "ps": [
            {"job_id": 11, "root_workers": [0, 1, 2], "leaves": []},
        ],
        "packets": {
            "p0": "01 00 000b 00000006 00000001 03 00 3587 0020 0000"
                  " 7fffffff 7fffffff 80000000 00001b5b 00001b5c 00001b5d 00001b5e 00001b5f"
                  " 00001b60 00001b61 00001b62 00001b63 00001b64 00001b65 00001b66 00001b67"
                  " 00001b68 00001b69 00001b6a 00001b6b 00001b6c 00001b6d 00001b6e 00001b6f"
                  " 00001b70 00001b71 00001b72 00001b73 00001b74 00001b75 00001b76 00001b77",
            "p1": "01 00 000b 00000006 00000002 03 00 3587 0020 0000"
                  " 00000001 7fffffff ffffffff ffffe441 ffffe440 ffffe43f ffffe43e ffffe43d"
                  " ffffe43c ffffe43b ffffe43a ffffe439 ffffe438 ffffe437 ffffe436 ffffe435"
                  " ffffe434 ffffe433 ffffe432 ffffe431 ffffe430 ffffe42f ffffe42e ffffe42d"
                  " ffffe42c ffffe42b ffffe42a ffffe429 ffffe428 ffffe427 ffffe426 ffffe425",
            "p2": "01 00 000b 00000006 00000004 03 00 3587 0020 0000"
                  " fffffff6 00000000 00000005 00001c23 00001c24 00001c25 00001c26 00001c27"
                  " 00001c28 00001c29 00001c2a 00001c2b 00001c2c 00001c2d 00001c2e 00001c2f"
                  " 00001c30 00001c31 00001c32 00001c33 00001c34 00001c35 00001c36 00001c37"
                  " 00001c38 00001c39 00001c3a 00001c3b 00001c3c 00001c3d 00001c3e 00001c3f",
            "p3": "01 30 000b 00000006 00000007 03 00 3587 0020 0000"
                  " 7ffffff6 fffffffe 80000004 00001bbf 00001bc0 00001bc1 00001bc2 00001bc3"
                  " 00001bc4 00001bc5 00001bc6 00001bc7 00001bc8 00001bc9 00001bca 00001bcb"
                  " 00001bcc 00001bcd 00001bce 00001bcf 00001bd0 00001bd1 00001bd2 00001bd3"
                  " 00001bd4 00001bd5 00001bd6 00001bd7 00001bd8 00001bd9 00001bda 00001bdb",
            "p4": "01 15 000b 00000006 00000000 00 00 3587 0020 0000"
                  " 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000"
                  " 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000"
                  " 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000"
                  " 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000",
            "p5": "01 04 000b 00000006 00000001 03 00 3587 0020 0000"
                  " 7fffffff 7fffffff 80000000 00001b5b 00001b5c 00001b5d 00001b5e 00001b5f"
                  " 00001b60 00001b61 00001b62 00001b63 00001b64 00001b65 00001b66 00001b67"
                  " 00001b68 00001b69 00001b6a 00001b6b 00001b6c 00001b6d 00001b6e 00001b6f"
                  " 00001b70 00001b71 00001b72 00001b73 00001b74 00001b75 00001b76 00001b77",
            "p6": "01 04 000b 00000006 00000002 03 00 3587 0020 0000"
                  " 00000001 7fffffff ffffffff ffffe441 ffffe440 ffffe43f ffffe43e ffffe43d"
                  " ffffe43c ffffe43b ffffe43a ffffe439 ffffe438 ffffe437 ffffe436 ffffe435"
                  " ffffe434 ffffe433 ffffe432 ffffe431 ffffe430 ffffe42f ffffe42e ffffe42d"
                  " ffffe42c ffffe42b ffffe42a ffffe429 ffffe428 ffffe427 ffffe426 ffffe425",
            "p7": "01 04 000b 00000006 00000004 03 00 3587 0020 0000"
                  " fffffff6 00000000 00000005 00001c23 00001c24 00001c25 00001c26 00001c27"
                  " 00001c28 00001c29 00001c2a 00001c2b 00001c2c 00001c2d 00001c2e 00001c2f"
                  " 00001c30 00001c31 00001c32 00001c33 00001c34 00001c35 00001c36 00001c37"
                  " 00001c38 00001c39 00001c3a 00001c3b 00001c3c 00001c3d 00001c3e 00001c3f",
            "p8": "01 11 000b 00000006 00000000 00 00 3587 0020 0000"
                  " 7ffffff6 7fffffff 80000004 00001bbf 00001bc0 00001bc1 00001bc2 00001bc3"
                  " 00001bc4 00001bc5 00001bc6 00001bc7 00001bc8 00001bc9 00001bca 00001bcb"
                  " 00001bcc 00001bcd 00001bce 00001bcf 00001bd0 00001bd1 00001bd2 00001bd3"
                  " 00001bd4 00001bd5 00001bd6 00001bd7 00001bd8 00001bd9 00001bda 00001bdb",
        },
        "steps": [
            ["tor0", False, "p0", [["drop", "absorbed", ""]]],
            ["tor0", False, "p1", [["drop", "absorbed", ""]]],
            ["tor0", False, "p2", [["to_ps", "aggregate", "p3"]]],
            ["ps", False, "p3", [["to_workers", "resend_request", "p4"]]],
            ["tor0", False, "p4", [["to_workers", "result", "p4"]]],
            ["tor0", False, "p5", [["to_ps", "resend", "p5"]]],
            ["ps", False, "p5", [["drop", "absorbed", ""]]],
            ["tor0", False, "p6", [["to_ps", "resend", "p6"]]],
            ["ps", False, "p6", [["drop", "absorbed", ""]]],
            ["tor0", False, "p7", [["to_ps", "resend", "p7"]]],
            ["ps", False, "p7", [["to_workers", "result", "p8"]]],
            ["tor0", False, "p8", [["to_workers", "result", "p8"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 8, "results": 2, "released": 1, "resends": 3, "claims": 1, "contributions": 3,
                "aggregates": 1, "overflows": 1,
            },
            "ps": {
                "packets": 4, "contributions": 3, "resend_requests": 1, "results": 1,
            },
        },
        "results": [
            [11, 6, [
                2147483638, 4294967294, -2147483644, 7103, 7104, 7105, 7106, 7107,
                7108, 7109, 7110, 7111, 7112, 7113, 7114, 7115,
                7116, 7117, 7118, 7119, 7120, 7121, 7122, 7123,
                7124, 7125, 7126, 7127, 7128, 7129, 7130, 7131,
            ]],
        ],
    },
    "malformed_dropped": {
        "doc": ("malformed packets are dropped and counted by reason, at the switch and the PS, and the switch "
                "aggregates normally afterwards"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[12, 2, "root", 0]]},
        },
        "ps": [
            {"job_id": 12, "root_workers": [0, 1], "leaves": []},
        ],
        "packets": {
            "p0": "",
            "p1": "01 00 00 0c 00 00 00 00 00 00",
            "p2": "01 00 000c 00000000 00000001 02 00 4ca2 0020 0000",
            "p3": "02 00 000c 00000000 00000001 02 00 4ca2 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p4": "01 40 000c 00000000 00000001 02 00 4ca2 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p5": "01 80 000c 00000000 00000001 02 00 4ca2 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p6": "01 00 000c 00000000 00000001 02 01 4ca2 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p7": "01 00 000c 00000000 00000001 02 00 4ca2 0020 0001"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p8": "01 00 000c 00000000 00000001 02 00 4ca2 001f 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406",
            "p9": "01 00 000c 00000000 00000001 02 00 4ca2 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406",
            "p10": "01 00 000c 00000000 00000001 02 00 4ca2 0020 0000"
                   " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                   " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                   " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                   " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407"
                   " 00",
            "p11": "01 00 000c 00000000 00000000 00 00 4ca2 0020 0000"
                   " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                   " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                   " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                   " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p12": "01 00 000c 00000000 00000005 00 00 4ca2 0020 0000"
                   " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                   " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                   " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                   " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p13": "01 00 000c 00000000 00000001 02 00 4ca2 0020 0000"
                   " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                   " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                   " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                   " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p14": "01 00 000c 00000000 00000002 02 00 4ca2 0020 0000"
                   " fffffbb4 fffffbb3 fffffbb2 fffffbb1 fffffbb0 fffffbaf fffffbae fffffbad"
                   " fffffbac fffffbab fffffbaa fffffba9 fffffba8 fffffba7 fffffba6 fffffba5"
                   " fffffba4 fffffba3 fffffba2 fffffba1 fffffba0 fffffb9f fffffb9e fffffb9d"
                   " fffffb9c fffffb9b fffffb9a fffffb99 fffffb98 fffffb97 fffffb96 fffffb95",
            "p15": "01 20 000c 00000000 00000003 02 00 4ca2 0020 0000"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
            "p16": "01 20 000c 00000000 00000003 02 00 4ca2 0020 0000"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff",
            "p17": "01 01 000c 00000000 00000000 00 00 4ca2 0020 0000"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                   " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
        },
        "steps": [
            ["tor0", False, "p0", [["drop", "malformed:truncated", ""]]],
            ["tor0", False, "p1", [["drop", "malformed:truncated", ""]]],
            ["tor0", False, "p2", [["drop", "malformed:truncated", ""]]],
            ["tor0", False, "p3", [["drop", "malformed:bad_version", ""]]],
            ["tor0", False, "p4", [["drop", "malformed:reserved_bits", ""]]],
            ["tor0", False, "p5", [["drop", "malformed:reserved_bits", ""]]],
            ["tor0", False, "p6", [["drop", "malformed:reserved_bits", ""]]],
            ["tor0", False, "p7", [["drop", "malformed:reserved_bits", ""]]],
            ["tor0", False, "p8", [["drop", "malformed:bad_count", ""]]],
            ["tor0", False, "p9", [["drop", "malformed:truncated", ""]]],
            ["tor0", False, "p10", [["drop", "malformed:trailing_bytes", ""]]],
            ["tor0", False, "p11", [["drop", "malformed:bad_bitmap", ""]]],
            ["tor0", False, "p12", [["drop", "malformed:bad_bitmap", ""]]],
            ["tor0", False, "p13", [["drop", "absorbed", ""]]],
            ["tor0", False, "p14", [["to_ps", "aggregate", "p15"]]],
            ["ps", False, "p16", [["drop", "malformed:truncated", ""]]],
            ["ps", False, "p15", [["to_workers", "result", "p17"]]],
            ["tor0", False, "p17", [["to_workers", "result", "p17"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 16, "results": 1, "released": 1, "claims": 1, "contributions": 2, "aggregates": 1,
                "malformed:truncated": 4, "malformed:bad_version": 1, "malformed:reserved_bits": 4,
                "malformed:bad_count": 1, "malformed:trailing_bytes": 1, "malformed:bad_bitmap": 2,
            },
            "ps": {
                "packets": 2, "contributions": 1, "results": 1, "malformed:truncated": 1,
            },
        },
        "results": [
            [12, 0, [
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
            ]],
        ],
    },
    "not_installed_passes": {
        "doc": ("a job the switch does not aggregate passes it unchanged (even with CE: the IP header carries the "
                "mark); the PS sums it; its result passes down unchanged"),
        "switches": {
            "tor0": {"n_slots": 64, "jobs": [[14, 2, "root", 0]]},
        },
        "ps": [
            {"job_id": 13, "root_workers": [0, 1], "leaves": []},
        ],
        "packets": {
            "p0": "01 00 000d 00000000 00000001 00 00 6512 0020 0000"
                  " 000003e8 000003e9 000003ea 000003eb 000003ec 000003ed 000003ee 000003ef"
                  " 000003f0 000003f1 000003f2 000003f3 000003f4 000003f5 000003f6 000003f7"
                  " 000003f8 000003f9 000003fa 000003fb 000003fc 000003fd 000003fe 000003ff"
                  " 00000400 00000401 00000402 00000403 00000404 00000405 00000406 00000407",
            "p1": "01 00 000d 00000000 00000002 00 00 6512 0020 0000"
                  " fffffbb4 fffffbb3 fffffbb2 fffffbb1 fffffbb0 fffffbaf fffffbae fffffbad"
                  " fffffbac fffffbab fffffbaa fffffba9 fffffba8 fffffba7 fffffba6 fffffba5"
                  " fffffba4 fffffba3 fffffba2 fffffba1 fffffba0 fffffb9f fffffb9e fffffb9d"
                  " fffffb9c fffffb9b fffffb9a fffffb99 fffffb98 fffffb97 fffffb96 fffffb95",
            "p2": "01 01 000d 00000000 00000000 00 00 6512 0020 0000"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c"
                  " ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c ffffff9c",
        },
        "steps": [
            ["tor0", True, "p0", [["to_ps", "passed", "p0"]]],
            ["ps", False, "p0", [["drop", "absorbed", ""]]],
            ["tor0", False, "p1", [["to_ps", "passed", "p1"]]],
            ["ps", False, "p1", [["to_workers", "result", "p2"]]],
            ["tor0", False, "p2", [["to_workers", "result", "p2"]]],
        ],
        "stats": {
            "tor0": {
                "packets": 3, "passed": 2, "results": 1,
            },
            "ps": {
                "packets": 2, "contributions": 2, "results": 1,
            },
        },
        "results": [
            [13, 0, [
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
                -100, -100, -100, -100, -100, -100, -100, -100,
            ]],
        ],
    },
}
