"""Unit tests: choosing the switch port type, and the names of a port's pipe."""

from __future__ import annotations

import pytest

from common.errors import ConfigError, EmulationError
from emulator.ports import pipe_names, resolve_port_type
from measure.ports import AFXDP_MAX_MTU


def test_pipe_names_fit_linux_interface_names():
    """A switch port's pipe is named after the port, and every name fits in 15 characters."""
    assert pipe_names("e1-eth3") == ("e1-x3", "e1-y3", "e1-b3")
    assert all(len(n) <= 15 for n in pipe_names("spine12-eth48"))


@pytest.mark.parametrize("requested, mtu, datapath, missing, expected", [
    ("auto", 1500, "user", None, "afxdp"),
    ("afxdp", 1500, "user", None, "afxdp"),
    ("system", 1500, "user", None, "system"),
    ("auto", 9000, "user", None, "system"),
    ("auto", 1500, "kernel", None, "system"),
    ("auto", 1500, "user", "this Open vSwitch build has no afxdp interface type", "system"),
])
def test_resolve_port_type(requested, mtu, datapath, missing, expected):
    """auto takes AF_XDP ports where they can run and the MTU fits a 4 kB frame, else plain veths."""
    kind, why = resolve_port_type(requested, mtu, datapath, missing)
    assert kind == expected
    if requested == "auto" and kind == "system":
        assert "AF_XDP not used" in why


@pytest.mark.parametrize("mtu, datapath, missing, words", [
    (9000, "user", None, f"above AF_XDP's {AFXDP_MAX_MTU}"),
    (1500, "kernel", None, "kernel datapath"),
    (1500, "user", "an AF_XDP port does not open: boom", "does not open: boom"),
])
def test_afxdp_that_cannot_run_is_one_clear_error(mtu, datapath, missing, words):
    """Asking for afxdp where it cannot run names the reason and the alternatives."""
    with pytest.raises(EmulationError, match="switch_ports: afxdp cannot be used") as e:
        resolve_port_type("afxdp", mtu, datapath, missing)
    assert words in str(e.value) and "system" in str(e.value)


def test_unknown_port_type_in_config_is_rejected():
    """An unknown switch_ports value is a config error listing the valid ones."""
    from experiment.config import schema as config

    cfg = config.from_dict({"jobs": [{"name": "a", "model": "resnet50", "workers": 2}], "switch_ports": "dpdk"})
    with pytest.raises(ConfigError, match="switch_ports.*auto, afxdp, system"):
        config.validate(cfg)


def test_probe_scratch_names_are_per_process_and_only_dead_probers_are_stale():
    """A capability probe's throw-away devices carry its PID, fit Linux's 15 characters, and only those of a
    process that is gone count as stale (another live prober's, or a name of another shape, are left)."""
    import os
    import subprocess
    import sys

    from emulator.scratch import scratch_names, stale

    names = scratch_names("x", "a", "b", "br", "j")
    assert len(set(names)) == 4 and all(str(os.getpid()) in n and len(n) <= 15 for n in names)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    live = str(os.getppid())
    assert stale([f"tbx{dead}a", f"tbx{dead}br", f"tbx{live}a", f"tbq{dead}a", "tbxfoo", "e1-eth1",
                  *names], "x") == [f"tbx{dead}a", f"tbx{dead}br"]
