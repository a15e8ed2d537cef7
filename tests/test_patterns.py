"""Unit tests of jobs.patterns (pure): step counts, partners, volumes and the spec's worked table.

The byte-for-byte match with the torch implementations is checked in test_collectives.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from common.errors import JobError
from jobs.patterns import bytes_sent_per_rank, chunk_elems, hd_fold, hd_segments, pattern, replay_pattern

M = 4 * 8 * 9 * 5 * 7  # bytes divisible by 4 * every p up to 8, so M/p is exact in float32 elements


@pytest.mark.parametrize("p", range(2, 9))
def test_ring_steps_and_volume(p):
    """Ring: 2(p-1) steps, each rank sends once per step to (r+1) mod p, 2(p-1)/p*M in total."""
    steps = pattern("ring", p, M)
    assert len(steps) == 2 * (p - 1)
    for step in steps:
        assert sorted((s, d) for s, d, _ in step) == [(r, (r + 1) % p) for r in range(p)]
        assert {b for _, _, b in step} == {M // p}
    assert bytes_sent_per_rank("ring", p, M) == [2 * (p - 1) * M // p] * p


@pytest.mark.parametrize("p", [2, 4, 8])
def test_hd_power_of_two_is_pairwise_and_optimal(p):
    """HD for p = 2^k: 2k steps of disjoint symmetric pairs r XOR 2^(t-1), M/2^t each, then mirrored."""
    k = p.bit_length() - 1
    steps = pattern("hd", p, M)
    assert len(steps) == 2 * k
    for i, step in enumerate(steps):
        t = i + 1 if i < k else 2 * k - i  # allgather step k+j mirrors reduce-scatter step k+1-j
        assert sorted((s, d) for s, d, _ in step) == [(r, r ^ (1 << (t - 1))) for r in range(p)]
        assert {b for _, _, b in step} == {M // 2 ** t}
    assert bytes_sent_per_rank("hd", p, M) == [2 * (p - 1) * M // p] * p


def test_hd_p4_matches_spec_table_in_gloo_labelling():
    """titan.md §1.3.1, p = 4, relabelled to gloo partners: M/2, M/4 | M/4, M/2 per pair and direction."""
    steps = pattern("hd", 4, M)
    pairs = [sorted({tuple(sorted((s, d))) for s, d, _ in step}) for step in steps]
    assert pairs == [[(0, 1), (2, 3)], [(0, 2), (1, 3)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]
    assert [step[0][2] for step in steps] == [M // 2, M // 4, M // 4, M // 2]


@pytest.mark.parametrize("p", [3, 5, 6, 7])
def test_hd_fold_in_fold_out(p):
    """HD for p not a power of two: whole-vector fold-in step, HD among p' ranks, fold-out step (§1.3.2)."""
    p2, extra = hd_fold(p)
    assert p2 + extra == p and p2 & (p2 - 1) == 0 and 0 < extra < p2
    steps = pattern("hd", p, M)
    assert len(steps) == 2 * (p2.bit_length() - 1) + 2
    assert steps[0] == [(p2 + i, i, M) for i in range(extra)]
    assert steps[-1] == [(i, p2 + i, M) for i in range(extra)]
    assert steps[1:-1] == pattern("hd", p2, M)


@pytest.mark.parametrize("name", ["ring", "hd"])
@pytest.mark.parametrize("p", range(2, 9))
@pytest.mark.parametrize("n", [1, 3, 7, 1001])
def test_uneven_lengths_conserve_bytes(name, p, n):
    """Lengths not divisible by p: no empty or self transfers, at most one send per rank and step,
    and (ring) rank r sends every chunk but (r+1) mod p, then every chunk but (r+2) mod p."""
    steps = pattern(name, p, 4 * n)
    for step in steps:
        assert all(b > 0 and s != d for s, d, b in step)
        assert all(c == 1 for c in Counter(s for s, _, _ in step).values())
    if name == "ring":
        sizes = chunk_elems(n, p)
        assert bytes_sent_per_rank(name, p, 4 * n) == [
            4 * (2 * n - sizes[(r + 1) % p] - sizes[(r + 2) % p]) for r in range(p)]


def test_chunk_elems_matches_tensor_split_rule():
    """chunk_elems gives tensor_split's sizes: the first n % p chunks have one more element."""
    assert chunk_elems(10, 4) == [3, 3, 2, 2]
    assert chunk_elems(2, 5) == [1, 1, 0, 0, 0]
    assert sum(chunk_elems(1001, 7)) == 1001


def test_hd_segments_end_on_bit_reversed_block():
    """After the halvings, rank r owns exactly block bitreverse(r), and the kept ranges are contiguous."""
    p2 = 8
    owned = []
    for r in range(p2):
        segs = hd_segments(r, p2)
        assert segs[0][:2] == (0, p2)
        for (lo, hi, klo, khi), nxt in zip(segs, segs[1:] + [None], strict=True):
            assert (klo, khi) in ((lo, (lo + hi) // 2), ((lo + hi) // 2, hi))
            if nxt:
                assert nxt[:2] == (klo, khi)
        owned.append(segs[-1][2])
        assert segs[-1][3] == segs[-1][2] + 1
    assert owned == [int(f"{r:03b}"[::-1], 2) for r in range(p2)]


def test_single_rank_has_no_steps():
    """p = 1: no traffic."""
    assert pattern("ring", 1, M) == [] and pattern("hd", 1, M) == []
    assert bytes_sent_per_rank("hd", 1, M) == [0]


def test_gloo_pattern_not_modelled():
    """gloo's own allreduce raises a JobError saying its pattern is not modelled."""
    with pytest.raises(JobError, match="not modelled"):
        pattern("gloo", 4, M)


def test_bad_arguments():
    """Unknown names list the valid ones; sizes must be whole float32 elements; p must be >= 1."""
    with pytest.raises(JobError, match=r"unknown collective 'tree'; valid: gloo, hd, ring"):
        pattern("tree", 4, M)
    with pytest.raises(JobError, match="multiple of 4"):
        pattern("ring", 4, 10)
    with pytest.raises(JobError, match="p >= 1"):
        pattern("ring", 0, M)


@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_gloo_replay_model_is_the_mirrored_ring(p):
    """replay_pattern('gloo') is the ring with every transfer reversed: r sends to r-1, same bytes and steps."""
    ring, gloo = pattern("ring", p, M), replay_pattern("gloo", p, M)
    assert len(gloo) == len(ring) == 2 * (p - 1)
    for rs, gs in zip(ring, gloo, strict=True):
        assert sorted((s, (s - 1) % p, b) for s, _, b in rs) == sorted(gs)
    assert replay_pattern("hd", p, M) == pattern("hd", p, M)
    assert replay_pattern("gloo", 1, M) == []
