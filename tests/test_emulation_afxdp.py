"""Emulation tests: switch ports as AF_XDP sockets behind veth pipes keep every link's shaper and
ECN marker, forward through the PMD thread, and leave nothing behind."""

from __future__ import annotations

import subprocess

import pytest
from conftest import ECN_QUEUE_PACKETS, SCALE, ecn_marking, leftovers, needs
from test_emulation_ecn import RATE_MBPS, _incast

pytestmark = pytest.mark.emulation


def test_afxdp_ports_shape_mark_and_clean_up(emulation_ok, tmp_path):
    """Two senders into h4 over AF_XDP switch ports, through a leaf, the spine and h4's leaf: the
    l2 -> h4 port holds its rate, marks, and the receiver's CE count agrees with the marker within 5%;
    packets were received by the PMD thread; the pipes are gone afterwards."""
    from emulator.capabilities import detect
    from emulator.ecn import bpf_missing, build
    from emulator.net import EmulatedNetwork, NetOptions
    from emulator.ports import afxdp_missing, pipe_names
    from emulator.variants import ecn_marker, switch_ports
    from measure.fidelity import busy_rates
    from measure.linkstats import read_queue_samples
    from topo import leaf_spine

    needs(bpf_missing(), "BPF ECN marker")
    why = afxdp_missing()
    if why:
        pytest.skip(f"AF_XDP switch ports: {why}")
    assert detect().afxdp_missing is None
    build()
    before = _pmd_maxsleep()
    opts = NetOptions(scale=SCALE, queue_packets=ECN_QUEUE_PACKETS, ecn=ecn_marker("bpf"), marking=ecn_marking(30000),
                      switch_ports=switch_ports("afxdp"))
    # Three switches, eight AF_XDP ports (a k = 4 fat-tree has 80): each port type's path is the
    # same on any topology, and h1 and h2 cross both leaves and the spine on their way to h4.
    with EmulatedNetwork(leaf_spine(2, 1, 2), str(tmp_path), opts) as net:
        port = net.switch_intfs[("l2", "h4")]
        ovs_ports = subprocess.run(["ovs-vsctl", "list-ports", "l2"], capture_output=True, text=True).stdout.split()
        assert sorted(ovs_ports) == sorted(pipe_names(i)[0] for (s, _), i in net.switch_intfs.items() if s == "l2")
        subprocess.run(["ovs-appctl", "dpif-netdev/pmd-stats-clear"], capture_output=True)
        r = _incast(net, ["h1", "h2"], "h4")
        pmd = subprocess.run(["ovs-appctl", "dpif-netdev/pmd-stats-show"], capture_output=True, text=True).stdout
    assert r["marks"][port] > 50, r["marks"]
    assert abs(r["ce"] - r["marks"][port]) <= 0.05 * r["marks"][port], (r["ce"], r["marks"][port])
    assert 0.8 * RATE_MBPS < r["goodput_mbps"] <= 1.02 * RATE_MBPS, r["goodput_mbps"]
    checked = {d.link: d for d in busy_rates(read_queue_samples(r["samples"]), net.rates)}
    assert "l2->h4" in checked and checked["l2->h4"].ratio > 0.9, checked
    pmd_packets = [int(line.split(":")[1]) for block in pmd.split("pmd thread")[1:]
                   for line in block.splitlines() if "packets received" in line]
    assert sum(pmd_packets) > 1000, pmd
    assert leftovers() == []
    assert _pmd_maxsleep() == before, "the PMD sleep setting was not restored"


def _pmd_maxsleep() -> str:
    return subprocess.run(["ovs-vsctl", "--if-exists", "get", "Open_vSwitch", ".", "other_config:pmd-maxsleep"],
                          capture_output=True, text=True).stdout.strip()
