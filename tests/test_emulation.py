"""Emulation tests on a real k=4 fat-tree: Mininet + Open vSwitch (userspace) + os-ken controller."""

from __future__ import annotations

import json

import pytest
from conftest import SCALE, wait_listening, wait_until

pytestmark = pytest.mark.emulation

LINK_MBPS = 10000 / SCALE


def test_tcp_between_every_pair_of_machines(fabric):
    """Every ordered pair of the 16 machines has working TCP over the controller's proactive routes."""
    hosts = sorted(fabric.hosts, key=lambda m: fabric.g.nodes[m]["index"])
    assert len(hosts) == 16
    assert fabric.tcp_check(hosts, hosts) == {}


def test_shaped_link_delivers_configured_rate(fabric):
    """A TCP flow between two machines under one edge switch gets within 10% of the 20 Mbit/s link rate."""
    server = fabric.popen("h4", ["iperf3", "-s", "-1", "-p", "5301"])
    try:
        wait_listening(fabric, "h4", 5301)
        out = fabric.host_exec("h3", f"iperf3 -c {fabric.g.nodes['h4']['ip']} -p 5301 -t 4 -O 1 -J", timeout_s=30)
    finally:
        from emulator.procs import stop_process
        stop_process(server)
        fabric.forget(server)
    end = json.loads(out)["end"]
    mbps = end["sum_received"]["bits_per_second"] / 1e6
    assert abs(mbps / LINK_MBPS - 1) <= 0.10, f"measured {mbps:.2f} Mbit/s on a {LINK_MBPS} Mbit/s link"
    # the sender's own shaper is the bottleneck; its queue holds the flow's window, as a real host's
    # NIC queue does (host_queue_packets), so nothing is lost and retransmitted
    assert end["sum_sent"]["retransmits"] == 0, end["sum_sent"]


def test_machines_queues_are_deep_and_switch_ports_keep_the_switch_buffer(fabric):
    """Each machine's own FIFO holds host_queue_packets (1000: Linux's txqueuelen) and each switch
    port's the switch buffer, queue_packets (100)."""
    from emulator.procs import run

    def fifo_limit(qdiscs):
        return next(q["options"]["limit"] for q in qdiscs if q["kind"] == "pfifo")

    host = json.loads(fabric.host_exec("h1", "tc -j qdisc show dev h1-eth0"))
    switch = json.loads(run(["tc", "-j", "qdisc", "show", "dev", fabric.switch_intfs[("e1", "h1")]]).stdout)
    assert (fabric.options.host_queue_packets, fabric.options.queue_packets) == (1000, 100)
    assert (fifo_limit(host), fifo_limit(switch)) == (1000, 100)


def test_port_counters_see_a_transfer_on_its_routed_path(fabric):
    """Bytes of a TCP transfer appear on every link of the ECMP path the routing function predicts, and not on
    the other core switches."""
    from topo.routing import ecmp_path, path_links

    src, dst = "h2", "h15"
    path = ecmp_path(fabric.g, src, dst)
    before = fabric.counters.switch_counters()
    server = fabric.popen(dst, ["iperf3", "-s", "-1", "-p", "5302"])
    try:
        wait_listening(fabric, dst, 5302)
        out = fabric.host_exec(src, f"iperf3 -c {fabric.g.nodes[dst]['ip']} -p 5302 -t 2 -J", timeout_s=30)
    finally:
        from emulator.procs import stop_process
        stop_process(server)
        fabric.forget(server)
    received = json.loads(out)["end"]["sum_received"]["bytes"]
    links = path_links(path)

    def counted():  # the switches' counters have caught up with the transfer on every link of its path
        moved = fabric.counters.link_bytes(before, fabric.counters.switch_counters())
        return moved if all(moved[link] >= received for link in links) else None

    moved = wait_until(counted, what=f"counters of {received} bytes on every link of {path}")
    for u, v in path_links(path):
        # payload plus Ethernet/IP/TCP headers (~5% at MTU 1500), plus data the receiver had not yet read
        assert received <= moved[(u, v)] <= 1.10 * received + 200_000, f"{u}->{v}: {moved[(u, v)]} vs {received}"
    core = [n for n in path if fabric.g.nodes[n].get("tier") == "core"][0]
    for c in (n for n, d in fabric.g.nodes(data=True) if d.get("tier") == "core" and n != core):
        assert all(moved[(c, x)] < 200_000 for x in fabric.g.neighbors(c)), f"traffic leaked through {c}"


def test_machines_connect_from_ports_no_listener_is_given(fabric):
    """Every machine's outgoing connections take local ports below the range listening ports are
    picked from (free_tcp_port: this machine's ephemeral range), so one job's connection never
    holds the port another job's agent on the same machine is told to listen on."""
    from common.sockets import free_tcp_port
    from emulator.net import HOST_PORT_RANGE

    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    host_low, host_high = map(int, HOST_PORT_RANGE.split())
    assert host_high < low <= free_tcp_port() <= high
    for m in ("h1", "h16"):
        assert fabric.host_exec(m, "sysctl -n net.ipv4.ip_local_port_range").split() == HOST_PORT_RANGE.split()
