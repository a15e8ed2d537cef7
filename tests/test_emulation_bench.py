"""The benchmarks that build emulated networks (``bench/``), each run as documented at its smallest
configuration: the tables it prints have the documented columns and a row per configuration asked,
one figure holds an invariant derived without the benchmark, and the run leaves nothing behind.
The ones that need no root are in ``tests/test_bench.py``."""

from __future__ import annotations

import json
import math
import os

import pytest
from conftest import leftovers, needs, read_table, run_bench

pytestmark = pytest.mark.emulation


def _clean() -> None:
    left = leftovers()
    assert not left, f"the benchmark left behind: {left}"


def test_fidelity_smallest(emulation_ok):
    """bench/fidelity.py on its smallest fabric (2 racks of 2 machines) at D = 1, ring and
    halving-doubling of resnet50's buckets over the 4 machines (a bound of about 0.13 s, which the
    printed milliseconds give to within 1%), 1 iteration, without the default experiment: a row per
    collective, and no job beats its contention-free bound (measured / bound, as printed, at least 0.95)."""
    out = run_bench("fidelity.py", "--fabric", "leaf_spine", "--dilations", "1", "--workers", "4", "--collectives",
                    "ring,hd", "--model", "resnet50", "--iterations", "1", "--no-default")
    rows = read_table(out, "D")
    assert list(rows[0])[:8] == ["D", "collective", "workers", "ECMP collisions", "bound s", "measured s",
                                 "measured/bound", "<= 1.05"]
    assert [(r["D"], r["collective"], r["workers"]) for r in rows] == [("1", "ring", "4"), ("1", "hd", "4")]
    for r in rows:
        bound, measured, ratio = float(r["bound s"]), float(r["measured s"]), float(r["measured/bound"])
        assert math.isclose(ratio, measured / bound, rel_tol=0.01, abs_tol=0.002), r
        assert ratio >= 0.95, f"faster than the contention-free bound: {r}"
    _clean()


def test_ecn_smallest(emulation_ok):
    """bench/ecn.py on its smallest fabric (2 racks of 2 machines), 1 s of traffic, every part once (one
    repeat, K of 3 and 120 kB, 20 Mbit/s links at MTU 9000, the other parts being at 1500): each table
    has its rows, and the BPF marker marks more packets per 1000 at K = 3 kB than at 120 kB."""
    out = run_bench("ecn.py", "--fabric", "leaf_spine", "--seconds", "1", "--repeats", "1", "--thresholds-kb", "3,120",
                    "--rates", "20", "--mtus", "9000")
    overhead = read_table(out, "")
    assert [r[""] for r in overhead] == ["without marker", "with marker"], overhead
    assert math.isclose(float(overhead[1]["ratio"]), float(overhead[1]["mean Mbit/s"])
                        / float(overhead[0]["mean Mbit/s"]), abs_tol=0.02), overhead
    marks = read_table(out, "K kB")
    assert [r["K kB"] for r in marks] == ["3", "120"], marks
    assert float(marks[0]["marks/1000 pkts"]) > float(marks[1]["marks/1000 pkts"]), marks
    capacity = read_table(out, "MTU")
    assert [(r["MTU"], r["link Mbit/s"]) for r in capacity] == [("9000", "20")], capacity
    red = read_table(out, "marker")
    from emulator.capabilities import qdisc_probe

    assert [r["marker"] for r in red] == (["red", "bpf"] if qdisc_probe().get("red") else ["bpf"]), red
    _clean()


def test_emulator_scale_smallest(emulation_ok, tmp_path):
    """bench/emulator_scale.py on the leaf-spines of k = 2 and 4, plain ports, --json: a record per
    network with TCP through it and the switch ports of k leaves of k^2/4 machines under k/2 spines
    (k (k^2/4 + k/2) + (k/2) k: 6 and 32), and the line through both sizes printed."""
    path = tmp_path / "scale.json"
    out = run_bench("emulator_scale.py", "--sizes", "2,4", "--ports", "system", "--fabrics", "leaf_spine",
                    "--idle-s", "0.1", "--json", str(path))
    records = json.loads(path.read_text())
    assert [(r["fabric"], r["k"], r["machines"], r["switches"], r["switch_ports"]) for r in records] == [
        ("leaf_spine", 2, 2, 3, 6), ("leaf_spine", 4, 16, 6, 32)], records
    for r in records:
        assert r["tcp_ok"] and r["port_kind"] == "system" and r["peak"] >= r["rss_up"] > 0, r
    assert "system ports (" in out and "MB per switch port" in out, out
    assert len(read_table(out, "fabric")) == 2
    _clean()


def _bytes_per_link(line: str) -> tuple[float, float]:
    """The range ``a-b`` after "bytes per link" in a ratios line."""
    lo, hi = line.split("bytes per link ")[1].split(" ")[0].split("-")
    return float(lo), float(hi)


def test_cluster_smallest(emulation_ok):
    """bench/cluster.py, a 2-rack ring of resnet50's buckets for 1 iteration at D = 1 on one machine
    and on it plus a loopback server: a row per network, and every link carries the same bytes in
    both (within 1%): a job spread over two servers moves what it moves on one
    (tests/test_emulation_cluster.py checks such a job's placement and time against its bound)."""
    from emulator.loopback_server import SSHD

    needs(None if os.path.exists(SSHD) else f"{SSHD} is not installed (openssh-server)", "cluster mode")
    out = run_bench("cluster.py", "--iterations", "1", "--dilation", "1", "--model", "resnet50")
    rows = read_table(out, "network")
    assert [(r["network"], r["tunnels"]) for r in rows] == [("one machine", "0"), ("2 servers", "1")], rows
    line = next(x for x in out.splitlines() if x.startswith("cluster / one machine:"))
    lo, hi = _bytes_per_link(line)
    assert 0.99 <= lo <= hi <= 1.01, line
    _clean()


def test_containers_smallest(emulation_ok):
    """bench/containers.py, a 2-rack ring of resnet50's buckets for 1 iteration once as processes, once
    in containers: a row per way, and every link carries the same bytes both ways (within 1%)."""
    from emulator.containers import docker_missing

    needs(docker_missing(), "docker")
    out = run_bench("containers.py", "--iterations", "1", "--repeat", "1", "--model", "resnet50")
    rows = read_table(out, "run")
    assert [(r["run"], r["workers"]) for r in rows] == [("1", "process"), ("1", "container")], rows
    line = next(x for x in out.splitlines() if x.startswith("containers / processes:"))
    lo, hi = _bytes_per_link(line)
    assert 0.99 <= lo <= hi <= 1.01, line
    _clean()


def test_ring_spread_smallest(emulation_ok):
    """bench/ring_spread.py, 1 rack, AF_XDP ports, host queues of 1000, the ring of resnet50's buckets
    over 2 machines at D = 1, 1 iteration: one row, no faster than its bound, with the PMD loop read
    idle and with the job."""
    out = run_bench("ring_spread.py", "--racks", "1", "--ports", "afxdp", "--host-queues", "1000", "--spreads", "2",
                    "--model", "resnet50", "--dilation", "1", "--iterations", "1", "--idle-s", "0.5")
    (row,) = read_table(out, "racks")
    assert (row["racks"], row["ports"], row["host queue"], row["ranks per machine"]) == ("1", "afxdp", "1000", "4+4")
    assert float(row["measured/bound"]) >= 0.95, row
    assert row["PMD loop idle us"] != "-" and row["PMD loop with the job us"] != "-", row
    _clean()


def test_ina_smallest(emulation_ok):
    """bench/ina.py, 20 seqs of 32 values from 2 workers, then the fabric job over two racks for 1
    iteration with the software engine at the leaves (bmv2 in the fabric is tests/test_emulation_ina.py's):
    every aggregator emits the in-process engine's aggregates, the end hosts' sums are exact, a row per
    way of running the job, and INA at the leaves sends fewer bytes up the workers' uplinks than the ring."""
    from ina.p4 import build

    out = run_bench("ina.py", "--seqs", "20", "--fan-in", "2", "--window", "8", "--values-per-packet", "32",
                    "--fabric", "--placements", "two-racks", "--fabric-engine", "software", "--model", "small_cnn",
                    "--iterations", "1")
    rates = read_table(out, "values/packet")
    names = [r["aggregator"] for r in rates]
    tc, why = build.find_toolchain()
    bmv2 = tc is not None and build.runs(tc) is None
    assert len(names) == 2 + bmv2 and names[1].startswith("software aggregator process"), names
    assert all(r["same aggregates"] == "yes" for r in rates), rates
    hosts = read_table(out, "values/packet", nth=1)
    assert [(r["seqs x workers"], r["sums exact"]) for r in hosts] == [("20 x 2", "yes")], hosts
    fabric = read_table(out, "4 workers in")
    assert [r["run"] for r in fabric] == ["ring allreduce (TCP)", "INA, results unicast", "INA, results multicast",
                                          "INA protocol, unaggregated (PS only)"], fabric
    assert float(fabric[1]["MB up the workers' uplinks"]) < float(fabric[0]["MB up the workers' uplinks"]), fabric
    assert "(INA engine: software)" in out, out
    _clean()
