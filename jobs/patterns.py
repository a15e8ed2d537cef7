"""The exact point-to-point traffic of each allreduce algorithm in :mod:`workers.collectives`.

:func:`pattern` gives the steps of one allreduce, each a list of concurrent ``(src_rank, dst_rank,
bytes)`` transfers, byte for byte the payloads the torch implementations send (``tests/test_patterns.py``):
``ring`` and ``hd`` (``docs/resolutions.md`` Titan §1.3). gloo's own allreduce is not modelled;
:func:`replay_pattern` stands in for it with a mirrored ring of the same bytes per rank and
neighbour, which the replay runtime runs and the fidelity bounds use.

Each algorithm, and why gloo's is not modelled: ``docs/fidelity.md`` (The collectives' exact
traffic). Pure: standard library only. Cost O(p log p) transfers for ``hd``, O(p²) for ``ring``.
"""

from __future__ import annotations

from common.errors import JobError, unknown_name

FLOAT32_BYTES = 4
NOT_MODELLED = frozenset({"gloo"})
"""Collectives that run but whose traffic pattern is not modelled."""

Transfer = tuple[int, int, int]


def chunk_elems(n: int, parts: int) -> list[int]:
    """Sizes of ``torch.tensor_split(x, parts)`` for ``len(x) == n``: the first ``n % parts`` get one more."""
    q, rem = divmod(n, parts)
    return [q + 1 if i < rem else q for i in range(parts)]


def hd_fold(p: int) -> tuple[int, int]:
    """``(p', e)`` of the fold-in/fold-out model: ``p' = 2^floor(log2 p)`` run HD, ``e = p - p'`` fold in."""
    p2 = 1 << (p.bit_length() - 1)
    return p2, p - p2


def hd_segments(rank: int, p2: int) -> list[tuple[int, int, int, int]]:
    """Block ranges of ``rank``'s reduce-scatter steps in a power-of-two HD over ``p2`` ranks.

    The vector is split into ``p2`` blocks (:func:`chunk_elems`). At step ``t`` (0-based bit
    ``t``) the rank holds blocks ``[lo, hi)``, keeps one half and sends the other to
    ``rank XOR 2^t``: the lower half is kept when bit ``t`` of the rank is 0. Rank ``r``
    ends with block ``bitreverse(r)``, the halves stay contiguous, and the allgather
    replays the steps backwards.

    Returns:
        One ``(lo, hi, keep_lo, keep_hi)`` per step, in block indices.
    """
    out = []
    lo, hi = 0, p2
    for t in range(p2.bit_length() - 1):
        mid = (lo + hi) // 2
        keep = (lo, mid) if not (rank >> t) & 1 else (mid, hi)
        out.append((lo, hi) + keep)
        lo, hi = keep
    return out


def ring_pattern(p: int, size_bytes: int) -> list[list[Transfer]]:
    """Steps of :func:`workers.collectives.ring.allreduce` (``2(p-1)`` steps)."""
    n = _elems(size_bytes)
    sizes = chunk_elems(n, p)
    steps: list[list[Transfer]] = []
    for s in range(p - 1):  # reduce-scatter: rank r sends chunk (r - s) mod p
        steps.append([(r, (r + 1) % p, sizes[(r - s) % p] * FLOAT32_BYTES) for r in range(p)])
    for s in range(p - 1):  # allgather: rank r sends chunk (r + 1 - s) mod p
        steps.append([(r, (r + 1) % p, sizes[(r + 1 - s) % p] * FLOAT32_BYTES) for r in range(p)])
    return [[x for x in step if x[2] > 0] for step in steps]


def hd_pattern(p: int, size_bytes: int) -> list[list[Transfer]]:
    """Steps of :func:`workers.collectives.hd.allreduce` (``2·log2 p`` steps, ``+2`` when folding)."""
    n = _elems(size_bytes)
    if p == 1:
        return []
    p2, extra = hd_fold(p)
    k = p2.bit_length() - 1
    blocks = chunk_elems(n, p2)

    def span_bytes(a: int, b: int) -> int:
        return sum(blocks[a:b]) * FLOAT32_BYTES

    segs = [hd_segments(r, p2) for r in range(p2)]
    rs, ag = [], []
    for t in range(k):
        step = []
        for r in range(p2):
            lo, hi, klo, khi = segs[r][t]
            send = (khi, hi) if klo == lo else (lo, klo)
            step.append((r, r ^ (1 << t), span_bytes(*send)))
        rs.append(step)
    for t in reversed(range(k)):
        step = []
        for r in range(p2):
            _, _, klo, khi = segs[r][t]
            step.append((r, r ^ (1 << t), span_bytes(klo, khi)))
        ag.append(step)
    steps = rs + ag
    if extra:
        whole = n * FLOAT32_BYTES
        steps = ([[(p2 + i, i, whole) for i in range(extra)]] + steps
                 + [[(i, p2 + i, whole) for i in range(extra)]])
    return [[x for x in step if x[2] > 0] for step in steps]


PATTERNS = {
    "ring": ring_pattern,
    "hd": hd_pattern,
}

COLLECTIVE_NAMES = frozenset(PATTERNS) | NOT_MODELLED
"""Every collective name ``workers.collectives.COLLECTIVES`` registers (checked by a test), for
code that must validate a name without importing torch."""


def pattern(name: str, p: int, size_bytes: int) -> list[list[Transfer]]:
    """The steps of one allreduce of ``size_bytes`` over ``p`` ranks with collective ``name``.

    Args:
        name: collective name (a key of :data:`PATTERNS`).
        p: number of ranks (>= 1).
        size_bytes: payload in bytes, a multiple of 4 (float32 elements).

    Returns:
        One list per step of ``(src_rank, dst_rank, bytes)`` transfers; zero-byte transfers
        are omitted (the implementations skip them too). ``p == 1`` gives no steps.

    Raises:
        JobError: unknown name, a collective whose pattern is not modelled (``gloo``), or
            bad ``p`` / ``size_bytes``.
    """
    if name in NOT_MODELLED:
        raise JobError(f"the traffic pattern of collective {name!r} is not modelled (gloo's internal "
                       f"segmenting is not under our control); modelled: {', '.join(sorted(PATTERNS))}")
    if name not in PATTERNS:
        raise JobError(unknown_name("collective", name, COLLECTIVE_NAMES))
    if p < 1:
        raise JobError(f"collective {name!r}: need p >= 1 ranks, got {p}")
    return PATTERNS[name](p, size_bytes)


def mirrored_ring_pattern(p: int, size_bytes: int) -> list[list[Transfer]]:
    """The ring of :func:`ring_pattern` run the other way round: rank ``r`` sends to ``(r-1) mod p``.

    The model of gloo's own allreduce (see ``docs/fidelity.md``): the same chunks, steps and
    volume as ``ring``, with every transfer's direction reversed.
    """
    return [[(s, (s - 1) % p, b) for s, _, b in step] for step in ring_pattern(p, size_bytes)]


REPLAY_MODELS = {"gloo": mirrored_ring_pattern}
"""Collectives whose traffic is not modelled exactly, with the model the replay runtime and the
fidelity bounds use for them."""


def replay_pattern(name: str, p: int, size_bytes: int) -> list[list[Transfer]]:
    """The steps a replay of collective ``name`` sends: :func:`pattern`, or the model of
    :data:`REPLAY_MODELS` for a collective whose exact pattern is not modelled (``gloo``)."""
    if name in REPLAY_MODELS:
        if p < 1:
            raise JobError(f"collective {name!r}: need p >= 1 ranks, got {p}")
        return REPLAY_MODELS[name](p, size_bytes) if p > 1 else []
    return pattern(name, p, size_bytes)


def barrier_bytes(world: int) -> int:
    """Payload of the barrier allreduce a replay runs before its first measured iteration and after
    its last: one float32 per rank."""
    return FLOAT32_BYTES * world


def bytes_sent_per_rank(name: str, p: int, size_bytes: int) -> list[int]:
    """Total payload bytes each rank sends in one allreduce (index = rank)."""
    out = [0] * p
    for step in pattern(name, p, size_bytes):
        for src, _, b in step:
            out[src] += b
    return out


def _elems(size_bytes: int) -> int:
    if size_bytes < 0 or size_bytes % FLOAT32_BYTES:
        raise JobError(f"size_bytes must be a non-negative multiple of {FLOAT32_BYTES} (float32), "
                       f"got {size_bytes}")
    return size_bytes // FLOAT32_BYTES
