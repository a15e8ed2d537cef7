"""The controller application (controller/app.py) in its own process, against a scripted OpenFlow 1.3
switch on loopback: the messages it sends a switch, the status and statistics files it writes, and how it
ends on an error. No root: the switch is a TCP client speaking the protocol's wire format."""

from __future__ import annotations

import json
import socket
import struct
from collections import Counter

import pytest
from conftest import wait_until
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from controller.rules import RULE_COOKIE, compute_rules
from emulator.controller_proc import ControllerProcess
from topo import fat_tree
from topo.io import write_topology_json

HEADER = struct.Struct("!BBHI")  # version, type, length, xid
FEATURES = struct.Struct("!QIBB2xII")  # datapath id, buffers, tables, auxiliary id, capabilities, reserved
MULTIPART = struct.Struct("!HH4x")  # multipart type, flags
PORT_STATS = struct.Struct("!I4x12QII")  # port, then 12 counters, duration s and ns
GROUP_MOD = struct.Struct("!HBxI")  # command, type, group id
BUCKET = struct.Struct("!HHII4x")  # length, weight, watch port, watch group
OUTPUT = struct.Struct("!HHIH6x")  # action type, length, port, max length
LOCAL_PORT = 0xFFFFFFFE


class ScriptedSwitch:
    """One OpenFlow 1.3 switch: answers the handshake, echoes, port descriptions (none), barriers and port
    statistics (the counters given), and keeps every other message the controller sends it, in order."""

    def __init__(self, port: int, dpid: int, stats: dict[int, tuple[int, int]] | None = None,
                 hold_barrier: bool = False):
        self.dpid, self.stats = dpid, stats or {}
        self.held: int | None = None  # the xid of a barrier request not yet answered
        self.hold_barrier = hold_barrier
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.received: list[tuple[int, bytes]] = []
        self.barriers = 0
        self.stats_requests = 0
        self.send(ofp.OFPT_HELLO, b"")

    def send(self, msg_type: int, body: bytes, xid: int = 0) -> None:
        self.sock.sendall(HEADER.pack(ofp.OFP_VERSION, msg_type, HEADER.size + len(body), xid) + body)

    def _recv_exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the controller closed the connection")
            data += chunk
        return data

    def step(self) -> int:
        """Read and answer one message; return its type."""
        version, msg_type, length, xid = HEADER.unpack(self._recv_exact(HEADER.size))
        body = self._recv_exact(length - HEADER.size)
        if msg_type == ofp.OFPT_FEATURES_REQUEST:
            self.send(ofp.OFPT_FEATURES_REPLY, FEATURES.pack(self.dpid, 0, 1, 0, 0, 0), xid)
        elif msg_type == ofp.OFPT_ECHO_REQUEST:
            self.send(ofp.OFPT_ECHO_REPLY, body, xid)
        elif msg_type == ofp.OFPT_BARRIER_REQUEST and self.hold_barrier:
            self.held = xid
        elif msg_type == ofp.OFPT_BARRIER_REQUEST:
            self.barriers += 1
            self.send(ofp.OFPT_BARRIER_REPLY, b"", xid)
        elif msg_type == ofp.OFPT_MULTIPART_REQUEST:
            kind, _ = MULTIPART.unpack_from(body)
            if kind == ofp.OFPMP_PORT_DESC:
                self.send(ofp.OFPT_MULTIPART_REPLY, MULTIPART.pack(kind, 0), xid)
            elif kind == ofp.OFPMP_PORT_STATS:
                self.stats_requests += 1
                rows = b"".join(PORT_STATS.pack(p, 3, 4, rx, tx, 1, 2, 0, 0, 0, 0, 0, 0, 1, 0)
                                for p, (rx, tx) in self.stats.items())
                self.send(ofp.OFPT_MULTIPART_REPLY, MULTIPART.pack(kind, 0) + rows, xid)
        elif msg_type != ofp.OFPT_HELLO:
            self.received.append((msg_type, HEADER.pack(version, msg_type, length, xid) + body))
        return msg_type

    def run_until(self, condition, what: str, limit: int = 10_000) -> None:
        """Answer messages until ``condition()`` holds; fail naming ``what`` if the controller stops first."""
        for _ in range(limit):
            if condition():
                return
            self.step()
        pytest.fail(f"{what}: not reached after {limit} messages")

    def close(self) -> None:
        self.sock.close()


def flow_mods(received) -> list:
    """The FLOW_MOD messages received, parsed by os-ken's own parser."""

    class Datapath:
        ofproto, ofproto_parser = ofp, parser

    return [parser.OFPFlowMod.parser(Datapath, ofp.OFP_VERSION, t, len(raw), 0, raw)
            for t, raw in received if t == ofp.OFPT_FLOW_MOD]


def group_mods(received) -> list[tuple[int, int, tuple[int, ...]]]:
    """(command, group id, output ports of its buckets) of every GROUP_MOD received."""
    out = []
    for t, raw in received:
        if t != ofp.OFPT_GROUP_MOD:
            continue
        command, _, group_id = GROUP_MOD.unpack_from(raw, HEADER.size)
        at, ports = HEADER.size + GROUP_MOD.size, []
        while at < len(raw):
            length = BUCKET.unpack_from(raw, at)[0]
            ports.append(OUTPUT.unpack_from(raw, at + BUCKET.size)[2])
            at += length
        out.append((command, group_id, tuple(ports)))
    return out


@pytest.fixture()
def controller(tmp_path, request):
    """The controller process for a k = 4 fat-tree in the routing mode given by the test's parameter."""
    mode = getattr(request, "param", "ecmp")
    g = fat_tree(4)
    topo_path = str(tmp_path / "topology.json")
    write_topology_json(g, topo_path)
    ctrl = ControllerProcess(str(tmp_path), topo_path, mode=mode, stats_interval_s=0.05)
    ctrl.start()
    try:
        yield ctrl, g, mode
    finally:
        ctrl.stop()


@pytest.mark.parametrize("controller", ["ecmp", "select"], indirect=True)
def test_a_connecting_switch_gets_its_whole_rule_set_then_is_recorded_ready(controller):
    """On connect the controller clears the switch's flows and groups, adds exactly the groups and flows
    :func:`controller.rules.compute_rules` gives that switch (priorities, matches, outputs, the rule cookie),
    then a barrier; the status file lists the switch as ready only after the barrier's reply."""
    ctrl, g, mode = controller
    name = "e1"
    dpid = g.nodes[name]["dpid"]
    want = compute_rules(g, mode, {})
    switch = ScriptedSwitch(ctrl.port, dpid, hold_barrier=True)
    try:
        switch.run_until(lambda: switch.held is not None, "the barrier after the rules")
        assert dpid not in ctrl.status()["ready_dpids"]
        switch.send(ofp.OFPT_BARRIER_REPLY, b"", switch.held)
        wait_until(lambda: dpid in ctrl.status().get("ready_dpids", []), 30, f"switch {dpid:#x} recorded ready")
    finally:
        switch.close()
    flows = flow_mods(switch.received)
    assert flows[0].command == ofp.OFPFC_DELETE and flows[0].table_id == ofp.OFPTT_ALL
    groups = group_mods(switch.received)
    assert groups[0][:2] == (ofp.OFPGC_DELETE, ofp.OFPG_ALL)
    added = flows[1:]
    assert all(f.command == ofp.OFPFC_ADD and f.cookie == RULE_COOKIE for f in added)
    expected = Counter((r.priority, tuple(sorted(dict(r.match).items())), r.output_port, r.group_id)
                       for r in want.flows[dpid])
    got = Counter()
    for f in added:
        (action,) = f.instructions[0].actions
        port = getattr(action, "port", None) if action.type == ofp.OFPAT_OUTPUT else None
        group = action.group_id if action.type == ofp.OFPAT_GROUP else None
        got[(f.priority, tuple(sorted(f.match.items())), port, group)] += 1
    assert got == expected and sum(got.values()) == len(want.flows[dpid]) > 0
    assert [(gid, ports) for _, gid, ports in groups[1:]] == [(r.group_id, tuple(r.ports)) for r in want.groups[dpid]]
    assert (len(groups) > 1) == (mode == "select")  # an edge switch has several uplinks to hash over
    st = ctrl.status()
    assert st["errors"] == [] and st["rules"] == want.count()


def test_port_counters_are_polled_into_the_statistics_file(controller):
    """The poller asks every connected switch for its port counters; each reply becomes one JSON line per
    port (the LOCAL port left out) with the counters the switch reported."""
    ctrl, g, _ = controller
    dpid = g.nodes["e1"]["dpid"]
    switch = ScriptedSwitch(ctrl.port, dpid, stats={1: (1000, 2000), 3: (5, 7), LOCAL_PORT: (9, 9)})
    try:
        switch.run_until(lambda: switch.barriers, "the barrier after the rules")
        switch.run_until(lambda: switch.stats_requests >= 2, "two port statistics requests")

        def lines():
            with open(ctrl.stats_path) as f:
                return [json.loads(x) for x in f if x.strip()]

        rows = wait_until(lambda: [r for r in lines() if r["dpid"] == dpid], 30, "statistics lines for the switch")
    finally:
        switch.close()
    assert {r["port"] for r in rows} == {1, 3}
    first = {r["port"]: r for r in rows}
    assert (first[1]["rx_bytes"], first[1]["tx_bytes"], first[3]["rx_bytes"], first[3]["tx_bytes"]) == (
        1000, 2000, 5, 7)
    assert (first[1]["rx_packets"], first[1]["tx_packets"], first[1]["rx_dropped"], first[1]["tx_dropped"]) == (
        3, 4, 1, 2)


def test_an_openflow_error_from_a_switch_ends_the_controller_with_code_2(controller):
    """A switch that rejects a message makes the controller record the error and exit with code 2, so a run
    stops instead of carrying on with a half-programmed fabric."""
    from common.errors import EmulationError

    ctrl, g, _ = controller
    switch = ScriptedSwitch(ctrl.port, g.nodes["e1"]["dpid"])
    try:
        switch.run_until(lambda: switch.barriers, "the barrier after the rules")
        switch.send(ofp.OFPT_ERROR, struct.pack("!HH", ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_FIELD))
        assert wait_until(lambda: ctrl.proc.poll() is not None, 30, "the controller to exit") is not None
    finally:
        switch.close()
    assert ctrl.proc.returncode == 2
    assert f"type={ofp.OFPET_BAD_MATCH} code={ofp.OFPBMC_BAD_FIELD}" in ctrl.status()["errors"][0]
    with pytest.raises(EmulationError, match="controller error"):
        ctrl.check_alive()


def test_a_switch_the_topology_does_not_know_ends_the_controller_with_code_2(controller):
    """A datapath id outside the topology is a wiring error: the controller exits with code 2 naming it."""
    ctrl, _, _ = controller
    switch = ScriptedSwitch(ctrl.port, 0x999)
    try:
        switch.run_until(lambda: ctrl.proc.poll() is not None, "the controller to exit")
    except ConnectionError:
        pass  # it closed the connection as it ended
    finally:
        switch.close()
    wait_until(lambda: ctrl.proc.poll() is not None, 30, "the controller to exit")
    assert ctrl.proc.returncode == 2
    assert "unexpected switch dpid 0x999" in ctrl.status()["errors"][0]
