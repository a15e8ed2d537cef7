"""MLTCP on the emulator (``emulator.mltcp``): the variants and the config agree, the map value's
layout, rebuilding, and, where the kernel takes BPF struct_ops, each variant compiled, registered
with its parameters, in the journal, and gone again."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess

import pytest
from conftest import needs

from emulator import mltcp
from emulator.mltcp import VARIANTS, MltcpCongestionControl, MltcpUnavailable, cfg_bytes
from emulator.mltcp import struct_ops_registered as registered

NAMES = list(VARIANTS)


@pytest.fixture
def buildable():
    """The set-up's tools (bpftool, clang, libbpf's headers), which must be there under `make test`,
    and the kernel's BTF, which a kernel may lack by design (a skip naming it)."""
    needs(mltcp.tools_missing(), "MLTCP's build tools")
    if mltcp.kernel_missing():
        pytest.skip(f"MLTCP: {mltcp.kernel_missing()}")


@pytest.fixture
def loadable(buildable):
    """Root as well: registering a struct_ops changes the running kernel."""
    if os.geteuid() != 0:
        pytest.skip("MLTCP: registering a struct_ops needs root")


def test_the_config_offers_exactly_the_built_variants():
    """The registry's MLTCP congestion controls are emulator.mltcp's variants, and valid in a config."""
    from congestion import CONGESTION_CONTROLS
    from experiment.config import schema as config

    mltcp_names = tuple(name for name, cc in CONGESTION_CONTROLS.items() if cc.is_mltcp)
    assert mltcp_names == tuple(VARIANTS) == ("mltcp_reno", "mltcp_cubic")
    assert set(mltcp_names) <= set(config.CONGESTION_CONTROLS)


@pytest.mark.parametrize("name", NAMES)
def test_each_variant_names_its_program_and_shares_the_common_logic(name):
    """A variant's source registers a struct_ops of its struct_ops name under its congestion-control
    name and takes bytes_ratio and the idle-gap rule from mltcp_common.h, not a copy."""
    v = VARIANTS[name]
    with open(v.source_path) as f:
        source = f.read()
    assert f"struct tcp_congestion_ops {v.struct_ops} = {{" in source
    assert f'.name = "{v.name}",' in source
    assert '#include "mltcp_common.h"' in source
    assert "mltcp_flow_tx_start(" in source and "mltcp_factor_milli(" in source
    assert "bpf_map_lookup_elem" not in source  # the maps are the common header's
    assert v.object_path == v.source_path[:-2] + ".o"


def test_the_parameters_are_thousandths_and_microseconds():
    """slope and intercept go to the map in thousandths, the idle gap in microseconds."""
    assert struct.unpack("<IIII", cfg_bytes(4.0, 1.0, 0.06)) == (4000, 1000, 60000, 0)


def test_an_unknown_variant_is_refused_by_name():
    """An unknown congestion control fails at construction, listing the variants."""
    with pytest.raises(MltcpUnavailable, match="unknown MLTCP variant 'mltcp_vegas'; built: mltcp_reno, mltcp_cubic"):
        MltcpCongestionControl("mltcp_vegas", 1.0, 1.0, 0.02)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("touched", ["source", "header"])
def test_a_changed_source_or_common_header_rebuilds(name, touched, tmp_path, monkeypatch):
    """An object newer than its source and the common header is kept; touching either rebuilds it."""
    monkeypatch.setattr(mltcp, "BPF_DIR", str(tmp_path))
    monkeypatch.setattr(mltcp, "COMMON_HEADER", str(tmp_path / "mltcp_common.h"))
    monkeypatch.setattr(mltcp, "missing", lambda: "clang is not installed")
    v = VARIANTS[name]
    for path in (v.source_path, mltcp.COMMON_HEADER, v.object_path):
        with open(path, "w"):
            pass
    os.utime(v.source_path, (1000, 1000))
    os.utime(mltcp.COMMON_HEADER, (1000, 1000))
    os.utime(v.object_path, (2000, 2000))
    assert mltcp.build(v) == v.object_path
    os.utime(v.source_path if touched == "source" else mltcp.COMMON_HEADER, (3000, 3000))
    with pytest.raises(MltcpUnavailable, match=f"^{name} cannot be built: clang is not installed"):
        mltcp.build(v)


def test_a_kernel_without_btf_is_named_and_nothing_is_built(tmp_path, monkeypatch, capsys):
    """A kernel exposing no BTF (its file pointed at a path that does not exist): kernel_missing names
    it, a run's MLTCP stops with that reason, and the set-up's build says so and still succeeds."""
    monkeypatch.setattr(mltcp, "BTF", str(tmp_path / "btf" / "vmlinux"))
    monkeypatch.setattr(mltcp, "BPF_DIR", str(tmp_path))  # no object here: each variant must be built
    why = mltcp.kernel_missing()
    assert why == f"the kernel exposes no BTF ({tmp_path}/btf/vmlinux): struct_ops programs cannot be loaded"
    assert mltcp.missing() == (mltcp.tools_missing() or why)
    with pytest.raises(MltcpUnavailable, match=f"^mltcp_reno cannot be built: {re.escape(mltcp.missing())}$"):
        MltcpCongestionControl("mltcp_reno", 4.0, 1.0, 0.06).start()
    assert mltcp.main(["build"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"mltcp: not built: {n} cannot be built: {mltcp.missing()}"
                                                    for n in NAMES]
    assert os.listdir(tmp_path) == []


def _completed(stdout: str) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess([], 0, stdout, "")


def test_an_unregistered_struct_ops_a_socket_still_holds_is_not_registered(monkeypatch):
    """A struct_ops map waiting to be freed (TOBEFREE) is not registered: nothing to unregister, no leftover."""
    answers = {
        "show": '[{"id": 7, "name": "mltcp_cubic", "kernel_struct_ops": "tcp_congestion_ops"}]',
        "dump": '[{"bpf_map_info": {"id": 7, "name": "mltcp_cubic"}}, {"bpf_struct_ops_tcp_congestion_ops": '
                '{"common": {"refcnt": {"refs": {"counter": 1}}, "state": "BPF_STRUCT_OPS_STATE_TOBEFREE"}, '
                '"data": {"init": "void (struct sock *) mcubic_init/prog_id:70"}}}]',
    }
    calls = []

    def fake_run(argv, timeout_s=None):
        calls.append(argv)
        return _completed(answers.get(argv[3], "")) if argv[:3] == ["bpftool", "-j", "struct_ops"] else None

    monkeypatch.setattr(mltcp, "run_in_session", fake_run)
    assert mltcp.struct_ops_in_use("mltcp_cubic") == [] and not registered("mltcp_cubic")
    assert mltcp.unregister_struct_ops("mltcp_cubic") is None
    assert not any("unregister" in argv for argv in calls)
    answers["dump"] = answers["dump"].replace("TOBEFREE", "INUSE")
    assert [map_id for map_id, _ in mltcp.struct_ops_in_use("mltcp_cubic")] == [7]
    # Linux before 6.9 (the VM's 6.1): refcnt and state at the value's top level, no ``common``
    answers["dump"] = ('[{"bpf_map_info": {"id": 9, "name": "mltcp_cubic"}}, {"bpf_struct_ops_tcp_congestion_ops": '
                       '{"refcnt": {"refs": {"counter": 1}}, "state": "BPF_STRUCT_OPS_STATE_INUSE", '
                       '"data": {"init": "void (struct sock *) mcubic_init/prog_id:70"}}}]')
    assert [map_id for map_id, _ in mltcp.struct_ops_in_use("mltcp_cubic")] == [9]
    assert registered("mltcp_cubic")


@pytest.mark.parametrize("name", NAMES)
def test_each_variant_compiles_within_the_private_area(name, buildable, tmp_path, monkeypatch):
    """Each variant compiles from its source and the common header (its state fits ICSK_CA_PRIV_SIZE:
    a static assertion) into an object defining its struct_ops."""
    v = VARIANTS[name]
    for path in (v.source_path, mltcp.COMMON_HEADER):
        shutil.copy(path, tmp_path)
    monkeypatch.setattr(mltcp, "BPF_DIR", str(tmp_path))
    monkeypatch.setattr(mltcp, "COMMON_HEADER", str(tmp_path / "mltcp_common.h"))
    monkeypatch.setattr(mltcp, "VMLINUX_H", str(tmp_path / "vmlinux.h"))
    obj = mltcp.build(v)
    assert obj == str(tmp_path / (v.source[:-2] + ".o"))
    btf = subprocess.run(["bpftool", "btf", "dump", "file", obj], capture_output=True, text=True, timeout=60).stdout
    assert f"VAR '{v.struct_ops}'" in btf


@pytest.mark.emulation
@pytest.mark.parametrize("name", NAMES)
def test_registered_with_its_parameters_recorded_and_unregistered(name, loadable, tmp_path):
    """Registered, the variant is a congestion control of the kernel, its own mltcp_cfg map holds the
    parameters and its counters read zero; the journal records it and unwinding it unregisters it."""
    from emulator.journal import RunJournal

    run_journal = RunJournal("mltcp test", str(tmp_path))
    cc = MltcpCongestionControl(name, 4.0, 1.0, 0.06, record=run_journal)
    try:
        cc.start()
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            assert name in f.read().split()
        assert [(c.kind, c.name) for c in run_journal.changes] == [("struct_ops", VARIANTS[name].struct_ops)]
        maps = mltcp.struct_ops_maps(VARIANTS[name].struct_ops)
        assert set(maps) == {mltcp.CFG_MAP, mltcp.STATS_MAP}
        dump = mltcp._bpftool("map", "dump", "id", str(maps[mltcp.CFG_MAP]), json_out=True)
        assert bytes(int(b, 16) for b in dump[0]["value"]) == cfg_bytes(4.0, 1.0, 0.06)
        assert mltcp.stats(name) == mltcp.MltcpStats(0, 0, 0, 0)
    finally:
        assert run_journal.unwind() == []
    assert not registered(name) and run_journal.changes == []


@pytest.mark.emulation
def test_two_variants_registered_at_once_keep_their_own_maps(loadable, tmp_path):
    """Both variants registered together: each one's parameters go to its own map, found through its programs."""
    from emulator.journal import RunJournal

    run_journal = RunJournal("mltcp test", str(tmp_path))
    try:
        for i, name in enumerate(NAMES):
            MltcpCongestionControl(name, float(i + 2), 1.0, 0.06, record=run_journal).start()
        cfg_ids = [mltcp.struct_ops_maps(VARIANTS[n].struct_ops)[mltcp.CFG_MAP] for n in NAMES]
        assert len(set(cfg_ids)) == len(NAMES)
        for i, map_id in enumerate(cfg_ids):
            dump = mltcp._bpftool("map", "dump", "id", str(map_id), json_out=True)
            assert bytes(int(b, 16) for b in dump[0]["value"]) == cfg_bytes(float(i + 2), 1.0, 0.06)
    finally:
        assert run_journal.unwind() == []
    assert not any(registered(n) for n in NAMES)
