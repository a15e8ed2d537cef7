"""Unit tests (no root) of ECN marking parameters, method resolution, flow attribution, port sampling
parsing and the fidelity monitor."""

from __future__ import annotations

import json
import os
import shutil
import struct

import pytest
from conftest import needs

from common.errors import ConfigError
from emulator import ecn, flows
from emulator.queues import parse_tc_qdiscs
from emulator.variants import resolve_ecn
from experiment.config.schema import from_dict, validate
from measure import fidelity, marking
from measure.cpu import CpuSummary

JOBS = [{"name": "a", "model": "resnet50", "workers": 2}]


# -- marking parameters ------------------------------------------------------------------------


def test_threshold_in_bytes_and_in_microseconds():
    p = marking.marking_params(30000, 0, 0, 1.0, 20.0, 100, 1500)
    assert (p.threshold_bytes, p.max_threshold_bytes, p.limit_bytes) == (30000, 30000, 100 * 1514)
    assert p.burst_bytes == 2 * 1514  # the shaper's bucket at 20 Mbit/s: two frames (1 ms is only 2500 bytes)
    assert marking.marking_params(30000, 0, 0, 1.0, 1000.0, 100, 1500).burst_bytes == 125000  # 1 ms at 1 Gbit/s
    # 1000 us at 20 Mbit/s = 2.5 MB/s * 1 ms = 2500 bytes, whatever threshold_bytes says
    q = marking.marking_params(30000, 1000, 0, 1.0, 20.0, 100, 9000)
    assert q.threshold_bytes == pytest.approx(2500) and q.limit_bytes == 100 * 9014


def test_port_config_layout_matches_the_program():
    p = marking.MarkingParams(threshold_bytes=30000, max_threshold_bytes=60000, max_p=0.5, limit_bytes=151400,
                          burst_bytes=15000)
    rate, k, kmax, max_p, limit, burst = struct.unpack("<QQQQQQ", ecn.port_config_bytes(p, 20.0))
    assert rate == 2_500_000
    assert k == 12_000_000 and kmax == 24_000_000  # 30 kB and 60 kB at 2.5 MB/s
    assert max_p == 2 ** 31
    assert limit == 60_560_000 and burst == 6_000_000
    with open(ecn.SOURCE) as f:
        src = f.read()
    body = src[src.index("struct port_cfg {"):src.index("};", src.index("struct port_cfg {"))]
    assert body.count("__u64") == 6  # the packing above follows struct port_cfg field by field


def test_too_long_marking_ramp_is_refused():
    p = marking.MarkingParams(threshold_bytes=0, max_threshold_bytes=50e6, max_p=1.0, limit_bytes=1e9)
    with pytest.raises(ecn.EcnUnavailable, match="ramp"):
        ecn.port_config_bytes(p, 20.0)


def test_red_arguments_keep_min_below_max_below_limit():
    args = ecn.red_qdisc_args(marking.marking_params(30000, 0, 0, 1.0, 20.0, 100, 1500), 20.0, 1500)
    kv = dict(zip(args[1::2], args[2::2], strict=False))
    assert args[0] == "red" and args[-1] == "ecn"
    assert int(kv["min"]) == 30000 < int(kv["max"]) < int(kv["limit"])
    assert kv["probability"] == "1" and kv["bandwidth"].endswith("mbit")


# -- resolving the marking path ----------------------------------------------------------------


CAPS_RED = (True, None)  # the kernel takes RED; why the BPF marker cannot run (None: it can)
CAPS_BPF = (False, None)
CAPS_NONE = (False, "clang is not installed")


@pytest.mark.parametrize("marking,method,caps,expected", [
    ("required", "auto", CAPS_RED, "red"),
    ("required", "auto", CAPS_BPF, "bpf"),
    ("required", "bpf", CAPS_RED, "bpf"),
    ("optional", "auto", CAPS_NONE, "none"),
    ("optional", "red", CAPS_BPF, "none"),
    ("off", "auto", CAPS_RED, "none"),
])
def test_resolve_ecn(marking, method, caps, expected):
    got, why = resolve_ecn(marking, method, *caps)
    assert got == expected and why
    if marking == "optional" and expected == "none":
        assert why.startswith("ECN not measured")


@pytest.mark.parametrize("method,caps,missing", [("auto", CAPS_NONE, "clang"), ("red", CAPS_BPF, "sch_red")])
def test_required_marking_that_cannot_run_names_what_is_missing(method, caps, missing):
    with pytest.raises(ecn.EcnUnavailable, match=missing):
        resolve_ecn("required", method, *caps)


def test_marker_source_compiles(tmp_path, monkeypatch):
    needs(None if shutil.which("clang") else "clang is not installed (Debian package clang)", "BPF ECN marker")
    monkeypatch.setattr(ecn, "OBJECT", str(tmp_path / "m.o"))
    needs(ecn.bpf_missing(), "BPF ECN marker")
    path = ecn.build(force=True)
    with open(path, "rb") as f:
        assert f.read(4) == b"\x7fELF"


# -- configuration -----------------------------------------------------------------------------


def test_ecn_section_parses_and_round_trips():
    from experiment.config.schema import to_dict

    cfg = from_dict({"jobs": JOBS, "ecn": {"marking": "optional", "threshold_us": 500}})
    validate(cfg)
    assert cfg.ecn.marking == "optional" and cfg.ecn.threshold_us == 500 and cfg.ecn.method == "auto"
    assert from_dict(json.loads(json.dumps(to_dict(cfg)))) == cfg


@pytest.mark.parametrize("extra,pattern", [
    ({"ecn": {"treshold_bytes": 1}}, "did you mean 'threshold_bytes'"),
    ({"ecn": {"marking": "maybe"}}, "ecn.marking"),
    ({"ecn": {"method": "wred"}}, "ecn.method"),
    ({"ecn": {"max_probability": 0}}, "max_probability"),
    ({"ecn": {"threshold_bytes": 5000, "max_threshold_bytes": 1000}}, "max_threshold_bytes"),
    ({"congestion_control": "bbr"}, "ignores ECN"),
])
def test_bad_ecn_config_is_one_clear_error(extra, pattern):
    with pytest.raises(ConfigError, match=pattern):
        validate(from_dict({"jobs": JOBS, **extra}))


def test_bbr_is_accepted_when_marking_is_off():
    """BBR ignores ECN: refused while marking is on, accepted with marking off."""
    with pytest.raises(ConfigError, match="ignores ECN"):
        validate(from_dict({"jobs": JOBS, "congestion_control": "bbr"}))
    g = validate(from_dict({"jobs": JOBS, "congestion_control": "bbr", "ecn": {"marking": "off"}}))
    assert g.number_of_nodes() > 0


# -- flows and attribution ---------------------------------------------------------------------


PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100000A:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1
   1: 0100000A:9C40 0400000A:7530 01 00000000:00000000 00:00000000 00000000     0        0 2222 1
   2: 0100000A:9C41 0500000A:7531 01 00000000:00000000 00:00000000 00000000     0        0 3333 1
"""


def test_proc_net_tcp_parsing_skips_listeners():
    conns = flows.parse_proc_net_tcp(PROC_NET_TCP)
    assert conns == {2222: ("10.0.0.1", 40000, "10.0.0.4", 30000), 3333: ("10.0.0.1", 40001, "10.0.0.5", 30001)}


def test_own_sockets_are_found():
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    cli = socket.create_connection(srv.getsockname())
    acc, _ = srv.accept()
    try:
        mine = flows.sockets_of(os.getpid())
        assert ("127.0.0.1", cli.getsockname()[1], "127.0.0.1", srv.getsockname()[1]) in mine
    finally:
        for s in (cli, acc, srv):
            s.close()


def test_marks_are_attributed_by_either_end_of_a_connection():
    owner = flows.owners({"a": {("10.0.0.1", 40000, "10.0.0.4", 30000)}, "b": {("10.0.0.5", 50000, "10.0.0.4", 30001)}})
    before = [{"intf": "e2-eth2", "src": "10.0.0.1", "sport": 40000, "dst": "10.0.0.4", "dport": 30000,
               "pkts": 10, "bytes": 15000, "marks": 1}]
    after = [dict(before[0], pkts=110, bytes=165000, marks=21),
             {"intf": "e2-eth2", "src": "10.0.0.5", "sport": 50000, "dst": "10.0.0.4", "dport": 30001,
              "pkts": 50, "bytes": 75000, "marks": 7},
             {"intf": "e1-eth1", "src": "10.0.0.4", "sport": 30000, "dst": "10.0.0.1", "dport": 40000,
              "pkts": 100, "bytes": 6600, "marks": 0},
             {"intf": "e2-eth2", "src": "10.0.0.9", "sport": 1, "dst": "10.0.0.4", "dport": 2,
              "pkts": 3, "bytes": 300, "marks": 2}]
    got = flows.attribute(flows.flow_deltas(before, after), owner)
    assert got["a"] == {"pkts": 200, "bytes": 156600, "marks": 20}
    assert got["b"] == {"pkts": 50, "bytes": 75000, "marks": 7}
    assert got[None] == {"pkts": 3, "bytes": 300, "marks": 2}


def test_netstat_counters_of_this_namespace():
    c = flows.netstat_counters(os.getpid())
    assert "IpExtInCEPkts" in c and "TcpExtTCPDeliveredCE" in c


# -- port sampling and fidelity ------------------------------------------------------------------


def test_tc_json_leaf_counters():
    text = json.dumps([
        {"kind": "tbf", "handle": "5:", "dev": "e1-eth1", "root": True, "bytes": 9, "packets": 1, "drops": 0,
         "backlog": 0, "qlen": 0},
        {"kind": "pfifo", "handle": "10:", "dev": "e1-eth1", "parent": "5:1", "bytes": 3000, "packets": 2,
         "drops": 1, "backlog": 1514, "qlen": 1},
        {"kind": "red", "handle": "10:", "dev": "e1-eth2", "parent": "5:1", "bytes": 0, "packets": 0, "drops": 0,
         "backlog": 0, "qlen": 0, "marked": 7},
        {"kind": "clsact", "handle": "ffff:", "dev": "e1-eth1", "parent": "ffff:fff1"}])
    q = parse_tc_qdiscs(text)
    assert q["e1-eth1"] == {"sent_bytes": 3000, "sent_pkts": 2, "drops": 1, "backlog_bytes": 1514,
                            "backlog_pkts": 1, "red_marked": None}
    assert q["e1-eth2"]["red_marked"] == 7


CPU_OK = CpuSummary(10, 0.4, 0.5, 0.6, None, False)


def _rows(rate_mbps: float, backlogs: list[int], dt: float = 0.25) -> list[dict]:
    sent, out = 0, []
    for i, b in enumerate(backlogs):
        out.append({"t": 100 + i * dt, "backlog_bytes": b, "sent_bytes": int(sent)})
        sent += rate_mbps * 1e6 / 8 * dt
    return out


def test_a_saturated_link_at_its_rate_passes_and_a_slow_one_is_flagged():
    samples = {("e1", "h1"): _rows(20.0, [30000] * 12), ("e1", "h2"): _rows(15.0, [30000] * 12),
               ("e2", "h3"): _rows(20.0, [30000, 0] * 6)}  # never a stretch: not checked
    rates = {("e1", "h1"): 20.0, ("h2", "e1"): 20.0, ("e2", "h3"): 20.0}
    checked = fidelity.busy_rates(samples, rates)
    assert [d.link for d in checked] == ["e1->h2", "e1->h1"]
    assert checked[0].ratio == pytest.approx(0.75) and checked[1].ratio == pytest.approx(1.0)
    verdict = fidelity.assess(CPU_OK, checked)
    assert not verdict.trustworthy and "e1->h2" in verdict.reasons[0]
    assert fidelity.assess(CPU_OK, checked[1:]).trustworthy


def test_short_or_shallow_queues_are_not_checked():
    samples = {("e1", "h1"): _rows(5.0, [30000, 30000, 0, 30000, 30000, 0]),  # stretches of 2 samples
               ("e1", "h2"): _rows(5.0, [1514] * 12)}  # one packet: may drain between samples
    assert fidelity.busy_rates(samples, {("e1", "h1"): 20.0, ("e1", "h2"): 20.0}) == []


def test_windows_limit_the_check():
    samples = {("e1", "h1"): _rows(10.0, [30000] * 12)}
    assert fidelity.busy_rates(samples, {("e1", "h1"): 20.0}, windows=[(0, 50)]) == []


def test_cpu_saturation_flags_and_names_the_switch_thread():
    verdict = fidelity.assess(CpuSummary(10, 0.5, 0.6, 0.7, 1.0, True), [])
    assert not verdict.trustworthy and "switch thread 100%" in verdict.reasons[0]


# -- report ------------------------------------------------------------------------------------


def _result(method: str, marks):
    from experiment.reporting.measurements import (
        ClusterState,
        EcnSetup,
        PolicyResult,
        PortSamplerStats,
        StartRecord,
        WaveLinks,
    )
    from placement.base import GpuSlot, Placement

    start = StartRecord(0, 0.0, Placement("a", (GpuSlot("h1", 0), GpuSlot("h2", 0))))
    wave = WaveLinks(0, ("a",), 10.0, None, (0.0, 5.0), {("e1", "h1"): 1000, ("h1", "e1"): 900},
                     {("e1", "h1"): 800, ("h1", "e1"): 700}, marks,
                     None if marks is None else {"jobs": {"a": {"pkts": 9, "bytes": 9, "marks": 4}}})
    cpu = CpuSummary(10, 0.5, 0.6, 0.7, None, False)
    return PolicyResult(
        policy="p", scheduler="waves", placements=(start,), starts=(start,), cluster_states=(ClusterState(0, 2, 2),),
        waves=(wave,), jct_s={}, preemptions=0, link_bytes={("e1", "h1"): 1000, ("h1", "e1"): 900},
        link_rate_mbps={("e1", "h1"): 20.0}, cpu=cpu, cpu_measured=cpu, ecn=EcnSetup(method, ""),
        fidelity=fidelity.assess(cpu, []), estimates={}, scale=500.0, dilation=1.0,
        port_sampler=PortSamplerStats(0, 0.25, 0.0), dir="", queue_stats="", wall_time_s=1.0)


def test_report_never_shows_zero_marks_when_ecn_was_not_measured():
    from experiment.reporting.report import summarise_policy, summary_tables
    from topo import fat_tree

    cfg = from_dict({"jobs": JOBS})
    g = fat_tree(4)
    off = summarise_policy(cfg, g, _result("none", None), [], "emu")
    assert off.measured.cross_machine_bytes == 900  # machine -> switch bytes of the whole policy, counted once
    assert off.ecn_marks is None and off.measured.ecn_marks_busiest_port is None and off.job("a").ecn_marks is None
    lines = summary_tables([off]).splitlines()
    assert "ECN marks" not in lines[1] and "marks busiest port" not in lines[1]  # the two ECN columns: left out
    assert "ECN marks, marks busiest port" in lines[4] and lines[4].startswith("  not measured here:")
    on = summarise_policy(cfg, g, _result("bpf", {("e1", "h1"): 5}), [], "emu")
    assert on.ecn_marks == 5 and on.measured.ecn_marks_busiest_port == 5 and on.job("a").ecn_marks == 4
    assert on.measured.ecn_most_marked_link == "e1->h1"
