"""MLTCP on the emulator (``emulator.mltcp``): the map value's layout, and, where the kernel takes BPF
struct_ops, the congestion control registered with its parameters, in the journal, and gone again."""

from __future__ import annotations

import json
import os
import struct
import subprocess

import pytest

from emulator.journal import struct_ops_registered as registered
from emulator.mltcp import MltcpCongestionControl, MltcpUnavailable, cfg_bytes, missing


def test_the_parameters_are_thousandths_and_microseconds():
    assert struct.unpack("<IIII", cfg_bytes(4.0, 1.0, 0.06)) == (4000, 1000, 60000, 0)


def test_an_unknown_variant_is_refused_by_name():
    with pytest.raises(MltcpUnavailable, match="unknown MLTCP variant 'mltcp_vegas'; built: mltcp_reno"):
        MltcpCongestionControl("mltcp_vegas", 1.0, 1.0, 0.02)


@pytest.mark.skipif(os.geteuid() != 0 or missing() is not None, reason="needs root, bpftool, clang and kernel BTF")
def test_registered_with_its_parameters_recorded_and_unregistered(tmp_path):
    """Registered, mltcp_reno is a congestion control of the kernel and its map holds the parameters;
    the journal records it and unwinding it unregisters it."""
    from emulator.journal import RunJournal

    journal = RunJournal("mltcp test", str(tmp_path))
    cc = MltcpCongestionControl("mltcp_reno", 4.0, 1.0, 0.06, record=journal)
    try:
        cc.start()
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            assert "mltcp_reno" in f.read().split()
        assert [c.kind for c in journal.changes] == ["struct_ops"]
        maps = json.loads(subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True).stdout)
        cfg_id = max(m["id"] for m in maps if m.get("name") == "mltcp_cfg")
        dump = json.loads(subprocess.run(["bpftool", "-j", "map", "dump", "id", str(cfg_id)], capture_output=True,
                                         text=True).stdout)
        value = bytes(int(b, 16) for b in dump[0]["value"]) if isinstance(dump[0]["value"], list) else None
        assert value is None or value == cfg_bytes(4.0, 1.0, 0.06)
    finally:
        assert journal.unwind() == []
    assert not registered("mltcp_reno") and journal.changes == []
