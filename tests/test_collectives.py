"""The allreduce algorithms in real processes over gloo on 127.0.0.1: exact sums, and traffic
equal to ``jobs.patterns``.

One run starts 8 processes (one torch import each) that go through world sizes 1..8 in turn:
for each, ranks below the size join a fresh gloo group (file rendezvous, loopback interface),
run every registered collective on integer-valued float32 vectors of several lengths (not
multiples of the world size, some shorter than it) and record whether the result equals the
exact elementwise sum, plus every ``isend`` (destination, bytes) in order. The module's
tests then check those results. Run this file as a script only as that child.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

MAX_WORLD = 8
LENGTHS = (1, 7, 1001, 10_007)
ALGORITHMS = ("ring", "hd", "gloo")
CHILD_TIMEOUT_S = 120


def _inputs(p: int, n: int, rank: int):
    """Integer-valued float32 input of ``rank`` (sums stay exact in float32)."""
    import torch

    g = torch.Generator().manual_seed(1_000_003 * p + 7919 * n + rank)
    return torch.randint(-1000, 1000, (n,), generator=g).to(torch.float32)


def _child(rank: int, store_dir: str, out_path: str) -> None:
    """Body of one test process: every world size this rank belongs to, every algorithm and length."""
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    import torch
    import torch.distributed as dist

    from workers.collectives import COLLECTIVES

    sends: list[tuple[int, int]] = []
    real_isend = dist.isend

    def counting_isend(tensor, dst, *args, **kwargs):
        sends.append((int(dst), tensor.numel() * tensor.element_size()))
        return real_isend(tensor, dst, *args, **kwargs)

    dist.isend = counting_isend
    results = []
    for p in range(rank + 1, MAX_WORLD + 1):  # world sizes that include this rank
        dist.init_process_group("gloo", init_method=f"file://{store_dir}/world{p}", rank=rank, world_size=p,
                                timeout=datetime.timedelta(seconds=CHILD_TIMEOUT_S))
        for n in LENGTHS:
            expected = sum(_inputs(p, n, r) for r in range(p))
            for name in ALGORITHMS:
                t = _inputs(p, n, rank)
                sends.clear()
                COLLECTIVES[name](t)
                results.append({"p": p, "n": n, "name": name, "rank": rank,
                                "exact": bool(torch.equal(t, expected)), "sends": list(sends)})
        dist.destroy_process_group()
    Path(out_path).write_text(json.dumps(results))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Results of all ranks of the 8-process run, keyed by ``(name, p, n, rank)``."""
    d = tmp_path_factory.mktemp("collectives")
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, __file__, str(r), str(d), str(d / f"rank{r}.json")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(MAX_WORLD)]
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=CHILD_TIMEOUT_S)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for r, (p, out) in enumerate(zip(procs, outputs, strict=True)):
        assert p.returncode == 0, f"rank {r} exited {p.returncode}:\n{out}"
    res = {}
    for r in range(MAX_WORLD):
        for x in json.loads((d / f"rank{r}.json").read_text()):
            res[(x["name"], x["p"], x["n"], x["rank"])] = x
    return res


@pytest.mark.parametrize("name", ALGORITHMS)
@pytest.mark.parametrize("p", range(1, MAX_WORLD + 1))
def test_allreduce_is_exact_sum(runs, name, p):
    """Every rank ends with the exact elementwise sum of all inputs, for every length."""
    for n in LENGTHS:
        for rank in range(p):
            assert runs[(name, p, n, rank)]["exact"], (name, p, n, rank)


@pytest.mark.parametrize("name", ["ring", "hd"])
@pytest.mark.parametrize("p", range(1, MAX_WORLD + 1))
def test_sends_match_pattern(runs, name, p):
    """Each rank's sends (destination and bytes, in order) are exactly its transfers in pattern()."""
    from jobs.patterns import pattern

    for n in LENGTHS:
        steps = pattern(name, p, 4 * n)
        for rank in range(p):
            predicted = [[dst, b] for step in steps for src, dst, b in step if src == rank]
            assert runs[(name, p, n, rank)]["sends"] == predicted, (name, p, n, rank)


def test_registry_names_match_patterns():
    """COLLECTIVES registers exactly the names jobs.patterns knows (modelled or not)."""
    from jobs.patterns import COLLECTIVE_NAMES, PATTERNS
    from workers.collectives import COLLECTIVES

    assert set(COLLECTIVES) == set(COLLECTIVE_NAMES) == set(PATTERNS) | {"gloo"}


def test_unknown_collective_lists_valid_names():
    """get_collective on an unknown name raises JobError naming the valid ones."""
    from common.errors import JobError
    from workers.collectives import get_collective

    assert get_collective("ring") is not None
    with pytest.raises(JobError, match=r"unknown collective 'rnig'.*gloo, hd, ring.*did you mean 'ring'"):
        get_collective("rnig")


if __name__ == "__main__":
    _child(int(sys.argv[1]), sys.argv[2], sys.argv[3])
