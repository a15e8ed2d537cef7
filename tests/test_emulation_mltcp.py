"""Emulation test: a run with ``congestion_control: mltcp_reno`` registers MLTCP for its hosts, whose
TCP uses it, and unregisters it at the end (``experiments/cassini_mltcp.yaml``, shortened)."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from conftest import leftovers

pytestmark = pytest.mark.emulation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_hosts_run_mltcp_and_the_run_unregisters_it(emulation_ok, tmp_path):
    from emulator.journal import struct_ops_registered as registered
    from emulator.mltcp import missing
    from emulator.runner import Progress, run_experiment
    from experiment import config

    if missing() is not None:
        pytest.skip(f"MLTCP cannot be built here: {missing()}")
    cfg = config.load(os.path.join(ROOT, "experiments", "cassini_mltcp.yaml"))
    cfg = dataclasses.replace(cfg, iterations=3, warmup_iterations=1, results_dir=str(tmp_path))
    with open(os.devnull, "w") as quiet:
        run_dir = run_experiment(cfg, Progress(quiet))
    with open(os.path.join(run_dir, "spread", "summary.json")) as f:
        summary = json.load(f)
    assert summary["host_tcp"] == {"mltcp_reno, tcp_ecn=1": 4}, summary["host_tcp"]
    assert all(j["complete"] for j in summary["jobs"].values())
    assert not registered("mltcp_reno")
    assert not leftovers(), leftovers()
