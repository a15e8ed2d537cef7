"""Communication patterns ``C^t`` and the placement-dependent traffic quantities of Titan.

Implements ``docs/resolutions.md`` Titan §1.3 (the ``C^t`` tensor: ``hd``, ``ring``, ``tree``, and
``gloo`` as ``ring`` [R]), §1.4 (cross-machine traffic, per-step machine-pair volume, NIC egress
and the NIC-time model) and §2.4.2 (the block tree of "communication-closed" worker groups that
Titan-R packs onto machines). A symmetric exchange counts the bytes each side sends, once per
unordered pair and step (§1.3, [D]), which gives the paper's Fig. 1 numbers.

The accounting convention and each pattern: ``docs/algorithms.md`` (Titan's communication
patterns). Pure. Building a pattern is O(total transfers); the traffic measures are linear in them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence

from common.errors import JobError, unknown_name
from common.units import mbps_to_bytes_per_s
from jobs.patterns import hd_fold

Pair = tuple[int, int]
LABELLINGS = ("gloo", "paper")
COLLECTIVES = ("hd", "ring", "tree", "gloo")
AGGLOMERATIVE_MAX_P = 128
"""Above this size the generic block tree falls back to contiguous rank ranges (its O(p³) cost)."""


@dataclasses.dataclass(frozen=True)
class CommPattern:
    """One allreduce as ``T`` steps of unordered worker-pair volumes (§1.3).

    Attributes:
        name: pattern name (``hd``, ``ring``, ``tree``).
        p: number of workers (ranks ``0..p-1``).
        size_bytes: the synchronised tensor size ``M``.
        steps: one mapping per step from a pair ``(n, n')``, ``n < n'``, to the bytes each side
            sends to the other in that step.
        labelling: the HD partner order (``gloo`` or ``paper``); ``""`` for other patterns.
    """

    name: str
    p: int
    size_bytes: float
    steps: tuple[Mapping[Pair, float], ...]
    labelling: str = ""

    def weights(self) -> dict[Pair, float]:
        """The pair affinity ``w(n, n') = Σ_t C^t[(n, n')]`` (§1.3.1), pairs with ``w > 0`` only."""
        out: dict[Pair, float] = {}
        for step in self.steps:
            for pair, vol in step.items():
                out[pair] = out.get(pair, 0.0) + vol
        return out

    def neighbours(self) -> list[dict[int, float]]:
        """``w`` as adjacency: ``neighbours()[n][n'] = w(n, n')`` for every partner ``n'`` of ``n``."""
        adj: list[dict[int, float]] = [{} for _ in range(self.p)]
        for (a, b), w in self.weights().items():
            adj[a][b] = w
            adj[b][a] = w
        return adj


def _add(step: dict[Pair, float], a: int, b: int, vol: float) -> None:
    pair = (a, b) if a < b else (b, a)
    step[pair] = step.get(pair, 0.0) + vol


def _hd_partner_bit(t: int, k: int, labelling: str) -> int:
    """The XOR mask of reduce-scatter step ``t`` (1-based) of a ``2^k``-rank HD."""
    return 1 << (t - 1) if labelling == "gloo" else 1 << (k - t)


def hd_steps(p: int, size_bytes: float, labelling: str = "gloo") -> list[dict[Pair, float]]:
    """Halving-doubling steps (§1.3.1), with fold-in/fold-out when ``p`` is not a power of two (§1.3.2 [R]).

    Reduce-scatter step ``t = 1..k`` exchanges ``M/2^t`` with the step's partner; allgather step
    ``k + j`` mirrors reduce-scatter step ``k + 1 - j``. Folding (``p' = 2^floor(log2 p)``,
    ``e = p - p'``): a first step where rank ``p'+i`` sends ``M`` to rank ``i`` (``i < e``) and a
    last step where rank ``i`` returns ``M``.
    """
    if labelling not in LABELLINGS:
        raise JobError(unknown_name("halving-doubling labelling", labelling, LABELLINGS))
    if p < 2:
        return []
    p2, extra = hd_fold(p)
    k = p2.bit_length() - 1
    rs = []
    for t in range(1, k + 1):
        mask = _hd_partner_bit(t, k, labelling)
        step: dict[Pair, float] = {}
        for r in range(p2):
            if r < r ^ mask:
                _add(step, r, r ^ mask, size_bytes / 2 ** t)
        rs.append(step)
    steps = rs + [dict(s) for s in reversed(rs)]
    if extra:
        fold = {(i, p2 + i): float(size_bytes) for i in range(extra)}
        steps = [fold] + steps + [dict(fold)]
    return steps


def ring_steps(p: int, size_bytes: float) -> list[dict[Pair, float]]:
    """Ring allreduce steps (§1.3.3): ``2(p-1)`` steps, rank ``r`` sends ``M/p`` to ``(r+1) mod p``.

    For ``p = 2`` both ranks send to each other: the pair carries ``M/2`` each way per step.
    """
    if p < 2:
        return []
    steps = []
    for _ in range(2 * (p - 1)):
        step: dict[Pair, float] = {}
        for r in range(p):
            a, b = sorted((r, (r + 1) % p))
            step[(a, b)] = size_bytes / p  # p == 2: both directions of one pair, each M/2
        steps.append(step)
    return steps


def tree_steps(p: int, size_bytes: float) -> list[dict[Pair, float]]:
    """Binary-tree reduce then broadcast, not pipelined (§1.3.4 [R]): ``2·floor(log2 p)`` steps.

    Reduce: one step per tree level, deepest first, every child at that level sends ``M`` to its
    parent ``(r-1)//2``. Broadcast: the same steps in reverse order, parent to child.
    """
    if p < 2:
        return []
    depth = (p).bit_length() - 1  # depth of rank r is floor(log2(r + 1))
    reduce_steps = []
    for level in range(depth, 0, -1):
        step: dict[Pair, float] = {}
        for r in range(2 ** level - 1, min(p, 2 ** (level + 1) - 1)):
            _add(step, (r - 1) // 2, r, float(size_bytes))
        reduce_steps.append(step)
    return reduce_steps + [dict(s) for s in reversed(reduce_steps)]


_BUILDERS = {
    "hd": lambda p, size_bytes, labelling: (hd_steps(p, size_bytes, labelling), labelling),
    "ring": lambda p, size_bytes, labelling: (ring_steps(p, size_bytes), ""),
    "tree": lambda p, size_bytes, labelling: (tree_steps(p, size_bytes), ""),
}
"""Each pattern's steps and the labelling they follow (HD's alone has one)."""
_MODELLED_AS = {"gloo": "ring"}
"""Collectives whose pattern is another's: gloo's own allreduce is modelled as the ring (``docs/algorithms.md``)."""


def comm_pattern(collective: str, p: int, size_bytes: float, labelling: str = "gloo") -> CommPattern:
    """The ``C^t`` tensor of one allreduce of ``size_bytes`` over ``p`` workers.

    Args:
        collective: ``hd``, ``ring``, ``tree`` or ``gloo`` (modelled as ``ring``, see the module
            docstring).
        p: number of workers (>= 1; ``p = 1`` has no steps).
        size_bytes: synchronised tensor size ``M`` in bytes.
        labelling: HD partner order, ``gloo`` or ``paper`` (ignored by the other patterns).

    Raises:
        JobError: unknown collective or labelling, or ``p < 1``.
    """
    if collective not in COLLECTIVES:
        raise JobError(unknown_name("collective pattern", collective, COLLECTIVES))
    if p < 1:
        raise JobError(f"collective {collective!r}: need p >= 1 workers, got {p}")
    name = _MODELLED_AS.get(collective, collective)
    steps, followed = _BUILDERS[name](p, size_bytes, labelling)
    return CommPattern(name, p, size_bytes, tuple(steps), followed)


def pair_steps_from_transfers(transfers: Sequence[Sequence[tuple[int, int, int]]]) -> list[dict[Pair, float]]:
    """Convert directed ``(src, dst, bytes)`` steps (as :func:`jobs.patterns.pattern`) to pair volumes.

    A pair's volume in a step is the larger of its two directions (equal for a symmetric
    exchange; the bytes sent for a one-way transfer), per the §1.3 convention.
    """
    out = []
    for step in transfers:
        directed: dict[tuple[int, int], float] = {}
        for src, dst, nbytes in step:
            directed[(src, dst)] = directed.get((src, dst), 0.0) + nbytes
        pairs: dict[Pair, float] = {}
        for (src, dst), vol in directed.items():
            key = (min(src, dst), max(src, dst))
            pairs[key] = max(pairs.get(key, 0.0), vol)
        out.append(pairs)
    return out


# ----------------------------------------------------------------------------------------------
# §1.4: quantities of a placement. ``assign[n]`` is the machine (any hashable) of worker ``n``.


def machine_pair_volumes(pattern: CommPattern, assign: Sequence[Hashable]) -> list[dict[tuple, float]]:
    """``V^t_{s,s'}``: per step, bytes on each unordered machine pair (keys sorted by ``repr``) (§1.4)."""
    out = []
    for step in pattern.steps:
        vols: dict[tuple, float] = {}
        for (a, b), vol in step.items():
            sa, sb = assign[a], assign[b]
            if sa != sb:
                key = (sa, sb) if repr(sa) <= repr(sb) else (sb, sa)
                vols[key] = vols.get(key, 0.0) + vol
        out.append(vols)
    return out


def cross_traffic_bytes(pattern: CommPattern, assign: Sequence[Hashable]) -> float:
    """``X(x) = Σ_t Σ_{s<s'} V^t_{s,s'}``: cross-machine bytes of one allreduce (§1.4)."""
    return sum(vol for step in pattern.steps for (a, b), vol in step.items() if assign[a] != assign[b])


def pair_totals(pattern: CommPattern) -> dict[Pair, float]:
    """Each worker pair's bytes over every step: ``X(x)`` is the sum of those of the pairs on
    different machines (:func:`cross_traffic_bytes`), so one pattern's totals cost each placement
    only its pairs."""
    totals: dict[Pair, float] = {}
    for step in pattern.steps:
        for pair, vol in step.items():
            totals[pair] = totals.get(pair, 0.0) + vol
    return totals


def nic_egress_bytes(pattern: CommPattern, assign: Sequence[Hashable]) -> list[dict[Hashable, float]]:
    """``E^t_s = Σ_{s'≠s} V^t_{s,s'}``: per step, bytes leaving each machine's NIC (§1.4 [R])."""
    out = []
    for step in pattern.steps:
        egress: dict[Hashable, float] = {}
        for (a, b), vol in step.items():
            sa, sb = assign[a], assign[b]
            if sa != sb:
                egress[sa] = egress.get(sa, 0.0) + vol
                egress[sb] = egress.get(sb, 0.0) + vol
        out.append(egress)
    return out


def allreduce_time_s(pattern: CommPattern, assign: Sequence[Hashable],
                     nic_bw_mbps: float | Mapping[Hashable, float], alpha_s: float = 0.0) -> float:
    """The NIC-time model ``T_ar = Σ_t (α·[step t crosses machines] + max_s E^t_s / B_s)`` (§1.4 [R]).

    Intra-machine transfers are free.

    Args:
        pattern: the job's ``C^t``.
        assign: machine of each worker.
        nic_bw_mbps: NIC bandwidth ``B_s``, one value for every machine or a mapping per machine.
        alpha_s: per-step latency of a step with cross-machine traffic.
    """
    total_s = 0.0
    for egress in nic_egress_bytes(pattern, assign):
        if not egress:
            continue
        uniform = isinstance(nic_bw_mbps, (int, float))
        worst_s = max(vol / mbps_to_bytes_per_s(nic_bw_mbps if uniform else nic_bw_mbps[s])
                      for s, vol in egress.items())
        total_s += alpha_s + worst_s
    return total_s


# ----------------------------------------------------------------------------------------------
# §2.4.2: the block tree.


@dataclasses.dataclass(frozen=True)
class Block:
    """A group of workers to keep on one machine if possible, and its split into two sub-groups.

    Attributes:
        ranks: the workers of the group, ascending.
        children: sub-blocks ordered by smallest rank; empty for a single worker.
    """

    ranks: tuple[int, ...]
    children: tuple["Block", ...] = ()


def _leaf(r: int) -> Block:
    return Block((r,))


def _join(*children: Block) -> Block:
    kids = tuple(sorted(children, key=lambda b: b.ranks[0]))
    return Block(tuple(sorted(r for b in kids for r in b.ranks)), kids)


def _hd_tree(p: int, labelling: str) -> Block:
    """Closed form for HD: aligned rank ranges (gloo) or residue classes (paper) of the ``p'`` core.

    A folded rank ``p'+i`` is glued to rank ``i`` (their ``2M`` fold weight is the heaviest).
    """
    p2, extra = hd_fold(p)

    def leaf(r: int) -> Block:
        return _join(_leaf(r), _leaf(p2 + r)) if r < extra else _leaf(r)

    def gloo(lo: int, size: int) -> Block:
        if size == 1:
            return leaf(lo)
        return _join(gloo(lo, size // 2), gloo(lo + size // 2, size // 2))

    def paper(c: int, stride: int) -> Block:
        if stride == p2:
            return leaf(c)
        return _join(paper(c, 2 * stride), paper(c + stride, 2 * stride))

    return gloo(0, p2) if labelling == "gloo" else paper(0, 1)


def _contiguous_tree(lo: int, hi: int) -> Block:
    """Balanced binary tree of contiguous rank ranges ``[lo, hi)`` (the ring closed form)."""
    if hi - lo == 1:
        return _leaf(lo)
    mid = (lo + hi + 1) // 2
    return _join(_contiguous_tree(lo, mid), _contiguous_tree(mid, hi))


def chain_tree(p: int) -> Block:
    """Left-deep chain of contiguous prefixes: ``(((0 1) 2) ... p-1)`` (§2.4.2 [R], see :func:`ring_trees`).

    This is what :func:`agglomerative_tree` builds for a ring (every pair weight equal, ties to the
    smallest ranks, so the cluster holding rank 0 absorbs rank ``k`` at step ``k``), in O(p²)
    (the prefixes' rank tuples) instead of O(p³), and for any ``p``.
    """
    tree = _leaf(0)
    for r in range(1, p):
        tree = _join(tree, _leaf(r))
    return tree


def agglomerative_tree(pattern: CommPattern) -> Block:
    """Generic block tree: merge the two clusters with the largest total inter-cluster weight (§2.4.2 [R]).

    Ties go to the pair with the smallest minimum ranks. O(p³); above
    :data:`AGGLOMERATIVE_MAX_P` workers it falls back to contiguous ranges.
    """
    p = pattern.p
    if p > AGGLOMERATIVE_MAX_P:
        return _contiguous_tree(0, p)
    clusters: dict[int, Block] = {r: _leaf(r) for r in range(p)}  # keyed by smallest rank
    between: dict[tuple[int, int], float] = {}
    for (a, b), w in pattern.weights().items():
        between[(a, b)] = between.get((a, b), 0.0) + w
    while len(clusters) > 1:
        keys = sorted(clusters)
        best = None
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                cand = (-between.get((a, b), 0.0), a, b)
                if best is None or cand < best:
                    best = cand
        _, a, b = best
        merged = _join(clusters.pop(a), clusters.pop(b))
        new_between: dict[tuple[int, int], float] = {}
        for (x, y), w in between.items():
            x2, y2 = (a if x == b else x), (a if y == b else y)
            if x2 == y2:
                continue
            key = (min(x2, y2), max(x2, y2))
            new_between[key] = new_between.get(key, 0.0) + w
        between = new_between
        clusters[a] = merged
    return next(iter(clusters.values()))


def block_tree(pattern: CommPattern) -> Block:
    """BLOCK_TREE of §2.4.2: closed forms for HD and ring, agglomerative clustering otherwise.

    For a ring this is the spec's balanced tree; Titan also packs the clustered chain
    (:func:`ring_trees`).
    """
    if pattern.p == 1:
        return _leaf(0)
    if pattern.name == "hd":
        return _hd_tree(pattern.p, pattern.labelling or "gloo")
    if pattern.name == "ring":
        return _contiguous_tree(0, pattern.p)
    return agglomerative_tree(pattern)


RING_GROUPINGS = ("both", "balanced", "chain")
"""Block trees Titan packs a ring with (:func:`ring_trees`); ``both`` is the default."""


def ring_trees(pattern: CommPattern, grouping: str = "both") -> tuple[Block, ...]:
    """The block trees to pack ``pattern`` with: one tree, except for a ring under ``both``.

    Deviation from our resolution, settling an ambiguity of it (``docs/resolutions.md`` Titan §2.4.2
    gives a ring the balanced binary tree of contiguous rank ranges as its closed form, while the
    same section's generic agglomerative clustering, checked on HD only, builds the chain for a
    ring). PACK of the balanced tree can cut more ring edges than needed: on free GPUs
    ``(4, 4, 3)`` a 10-worker ring packs as ``{0,1,2} {3,4,8,9} {5,6,7}`` (4 cut edges, X = 7.2M)
    and REFINE's single moves and swaps cannot join the two arcs on the middle machine, while 3
    cuts (5.4M) suffice; the consolidated plan ``X_cons`` of the guard is inflated the same way.
    The clustered chain (:func:`chain_tree`) packs the longest prefix that fits on one machine,
    then fills the machines in order, so each machine holds one contiguous arc. Neither tree wins
    everywhere: on capacities ``(2, 3, 3)`` a 6-worker ring packs balanced as ``{0,1,2} {3,4,5}``
    (2 cuts) but chained as ``{3,4} {0,1,2} {5}`` (3 cuts). So ``both`` (the default) packs both,
    refines both and keeps the one with less traffic (ties: the balanced tree): every mapping
    Titan evaluates, and ``X_cons``, then costs at most what either tree alone gives, and on the
    seeded ring family of ``tests/test_titan.py`` Titan's plan never needs more traffic or a
    larger guard than Titan-R with the clustered chain. ``balanced`` (the spec read literally)
    and ``chain`` (the clustered variant) keep one tree each.

    Args:
        pattern: the job's ``C^t``.
        grouping: ``both``, ``balanced`` or ``chain`` (only read for rings).

    Raises:
        JobError: an unknown grouping.
    """
    if grouping not in RING_GROUPINGS:
        raise JobError(unknown_name("ring grouping", grouping, RING_GROUPINGS))
    if pattern.name != "ring" or pattern.p < 4:  # below 4 ranks both trees are the same
        return (block_tree(pattern),)
    if grouping == "balanced":
        return (block_tree(pattern),)
    if grouping == "chain":
        return (chain_tree(pattern.p),)
    return (block_tree(pattern), chain_tree(pattern.p))
