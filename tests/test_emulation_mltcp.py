"""Emulation test: a run with an MLTCP ``congestion_control`` (``mltcp_reno``, ``mltcp_cubic``) registers
it for its hosts, whose flows use it, and unregisters it at the end (``experiments/cassini_mltcp.yaml``,
shortened)."""

from __future__ import annotations

import dataclasses
import json
import os
import threading

import pytest
from conftest import ROOT, leftovers, needs

pytestmark = pytest.mark.emulation



class StatsWatch:
    """The last ``mltcp_stats`` counters of the variant ``name`` while it is registered, read every
    ``period_s`` in a thread (the run unregisters it, and its maps go, before it returns)."""

    def __init__(self, name: str, period_s: float = 1.0):
        self.name, self.period_s, self.last = name, period_s, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> StatsWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _watch(self) -> None:
        from emulator.mltcp import (
            STATS_MAP,
            VARIANTS,
            MltcpUnavailable,
            map_stats,
            struct_ops_maps,
            struct_ops_registered,
        )

        struct_ops, map_id = VARIANTS[self.name].struct_ops, None
        while not self._stop.wait(self.period_s):
            try:
                if map_id is None and struct_ops_registered(struct_ops):
                    map_id = struct_ops_maps(struct_ops)[STATS_MAP]
                if map_id is not None:
                    self.last = map_stats(map_id)
            except MltcpUnavailable:
                map_id = None  # unregistered and freed: self.last is its final reading


@pytest.mark.parametrize("variant", ["mltcp_reno", "mltcp_cubic"])
def test_the_hosts_run_mltcp_and_the_run_unregisters_it(variant, emulation_ok, tmp_path):
    """Every host's TCP is the variant, its flows' windows grow scaled by F over learned iterations
    (its counters move), and the run leaves it unregistered."""
    from emulator.mltcp import kernel_missing, tools_missing
    from emulator.mltcp import struct_ops_registered as registered
    from emulator.runner import Progress, run_experiment
    from experiment.config import schema as config

    needs(tools_missing(), "MLTCP's build tools")
    if kernel_missing():
        pytest.skip(f"MLTCP: {kernel_missing()}")
    cfg = config.load(os.path.join(ROOT, "experiments", "cassini_mltcp.yaml"))
    cfg = dataclasses.replace(cfg, iterations=3, warmup_iterations=1, results_dir=str(tmp_path), plots=False,
                              congestion_control=variant)
    with open(os.devnull, "w") as quiet, StatsWatch(variant) as watch:
        run_dir = run_experiment(cfg, Progress(quiet))
    with open(os.path.join(run_dir, "spread", "summary.json")) as f:
        summary = json.load(f)
    assert summary["host_tcp"] == {f"{variant}, tcp_ecn=1": 4}, summary["host_tcp"]
    assert all(j["complete"] for j in summary["jobs"].values())
    stats = watch.last
    assert stats is not None and stats.iterations >= 4 and stats.ca_acks_above_intercept > 0, stats
    assert not registered(variant)
    assert not leftovers(), leftovers()
