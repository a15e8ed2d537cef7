"""The os-ken application: installs the rule set of :mod:`controller.rules` and polls port counters.

Configuration comes from a JSON file named by the ``TESTBED_CONTROLLER_CONF`` environment
variable (written by the testbed). When a switch connects the app replaces its flows and groups
with its rules and, on the barrier reply, records it as ready in the status file the testbed
waits on; port statistics are appended to a JSON-lines file. Every handler is wrapped by
:func:`fatal_on_error`, so a controller bug ends the process (exit code 2) and fails the run
instead of leaving switches half-programmed.

The configuration file's keys, the files written and why handlers are fatal:
``docs/topologies.md`` (The controller process).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
import traceback

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3

from common.jsonfile import write_json_atomic
from controller.rules import RULE_COOKIE, compute_rules
from topo.io import read_topology_json

CONF_ENV = "TESTBED_CONTROLLER_CONF"
EXIT_HANDLER_ERROR = 2

LOG = logging.getLogger("emulator.controller")


def fatal_on_error(handler):
    """Wrap an os-ken handler so that any exception ends the controller (exit code 2)."""

    @functools.wraps(handler)
    def wrapper(self, ev):
        # Not `except hub.TaskExit: raise` as os-ken's own loop does: under eventlet os-ken
        # defines TaskExit as Exception itself, so that clause re-raises every error and the
        # app's event loop dies silently. Greenlet kills (GreenletExit) are not Exceptions.
        try:
            return handler(self, ev)
        except Exception:  # noqa: BLE001 - every failure must stop the controller
            tb = traceback.format_exc()
            LOG.error("controller handler %s failed:\n%s", handler.__name__, tb)
            self.fail(f"handler {handler.__name__} failed: {tb}")

    return wrapper


class TestbedController(app_manager.OSKenApp):
    """Proactive router and port-statistics poller for one emulated fabric."""

    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with open(os.environ[CONF_ENV]) as f:
            self.conf = json.load(f)
        self.graph = read_topology_json(self.conf["topology"])
        self.rules = compute_rules(self.graph, self.conf.get("mode", "ecmp"), self.conf.get("ina_ports") or {})
        self.expected = {d["dpid"] for _, d in self.graph.nodes(data=True) if d.get("role") == "switch"}
        self.datapaths = {}
        self.ready: dict[int, float] = {}
        self.errors: list[str] = []
        self.stats_file = open(self.conf["stats_path"], "a", buffering=1)
        self.interval_s = float(self.conf.get("stats_interval_s", 0.5))
        self._write_status()
        self.poller = hub.spawn(self._poll_loop)

    def _write_status(self) -> None:
        write_json_atomic(self.conf["status_path"], {
            "pid": os.getpid(),
            "expected_dpids": sorted(self.expected),
            "ready_dpids": sorted(self.ready),
            "rules": self.rules.count(),
            "errors": self.errors,
        })

    def fail(self, message: str) -> None:
        """Record a fatal error and end the process at once."""
        self.errors.append(message)
        try:
            self._write_status()
            self.stats_file.flush()
        finally:
            logging.shutdown()
            os._exit(EXIT_HANDLER_ERROR)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    @fatal_on_error
    def on_switch_features(self, ev):
        """Program a newly connected switch with its complete rule set."""
        dp = ev.msg.datapath
        LOG.info("switch %#x connected", dp.id)
        if dp.id not in self.expected:
            raise RuntimeError(f"unexpected switch dpid {dp.id:#x}; expected {sorted(self.expected)}")
        ofp, parser = dp.ofproto, dp.ofproto_parser
        self.datapaths[dp.id] = dp
        dp.send_msg(parser.OFPFlowMod(datapath=dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))
        dp.send_msg(parser.OFPGroupMod(datapath=dp, command=ofp.OFPGC_DELETE, group_id=ofp.OFPG_ALL))
        for grp in self.rules.groups[dp.id]:
            buckets = [parser.OFPBucket(weight=1, watch_port=ofp.OFPP_ANY, watch_group=ofp.OFPG_ANY,
                                        actions=[parser.OFPActionOutput(p)]) for p in grp.ports]
            dp.send_msg(parser.OFPGroupMod(datapath=dp, command=ofp.OFPGC_ADD, type_=ofp.OFPGT_SELECT,
                                           group_id=grp.group_id, buckets=buckets))
        for rule in self.rules.flows[dp.id]:
            if rule.group_id is not None:
                actions = [parser.OFPActionGroup(rule.group_id)]
            else:
                actions = [parser.OFPActionOutput(rule.output_port)]
            dp.send_msg(parser.OFPFlowMod(
                datapath=dp, cookie=RULE_COOKIE, priority=rule.priority,
                match=parser.OFPMatch(**dict(rule.match)),
                instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]))
        dp.send_msg(parser.OFPBarrierRequest(dp))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    @fatal_on_error
    def on_barrier(self, ev):
        """A switch has processed its rules: record it as ready."""
        self.ready[ev.msg.datapath.id] = time.time()
        LOG.info("switch %#x programmed", ev.msg.datapath.id)
        self._write_status()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    @fatal_on_error
    def on_error(self, ev):
        """A switch rejected a message: that is a controller bug, so fail."""
        msg = ev.msg
        raise RuntimeError(f"switch {msg.datapath.id:#x} returned OpenFlow error type={msg.type} code={msg.code}")

    def _poll_loop(self):
        try:
            while True:
                for dp in list(self.datapaths.values()):
                    parser, ofp = dp.ofproto_parser, dp.ofproto
                    dp.send_msg(parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY))
                hub.sleep(self.interval_s)
        except Exception:  # noqa: BLE001 - a dead poller would silently stop the measurements
            tb = traceback.format_exc()
            LOG.error("port statistics poller failed:\n%s", tb)
            self.fail(f"port statistics poller failed: {tb}")

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    @fatal_on_error
    def on_port_stats(self, ev):
        """Append one line per port to the statistics file."""
        now = time.time()
        dpid = ev.msg.datapath.id
        lines = []
        for st in ev.msg.body:
            if st.port_no > 0xFFFFFF00:  # the LOCAL port
                continue
            lines.append(json.dumps({
                "t": now, "dpid": dpid, "port": st.port_no,
                "rx_bytes": st.rx_bytes, "tx_bytes": st.tx_bytes,
                "rx_packets": st.rx_packets, "tx_packets": st.tx_packets,
                "rx_dropped": st.rx_dropped, "tx_dropped": st.tx_dropped,
            }))
        self.stats_file.write("\n".join(lines) + "\n")
