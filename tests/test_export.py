"""``experiment.json`` (``experiment.reporting.export``): the description of what a run ran, checked field by field on a
small synthetic run directory (and on a recorded run when one is at hand)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from experiment.config.schema import from_dict, to_dict
from experiment.reporting.export import EXPORT_FILE, FORMAT_VERSION, ResultsError, export_run, write_export
from jobs.models import get_model, scaled_buckets
from jobs.records import IterationRecord, append_record
from topo import build_topology
from topo.io import read_topology_json, write_topology_json
from topo.routing import ecmp_path, equal_cost_paths

SCALE, DILATION = 500.0, 2.0
RECORDED_BUCKETS = (400, 800)  # emulated bytes in rank 0's record of job "a"

# Job -> (model, collective, wave, slots in rank order): "a" spans both racks, "b" one rack, "c" runs in the
# second wave, "loc" on one machine.
JOBS = {
    "a": ("vgg16", "ring", 0, [["h1", 0], ["h3", 0], ["h2", 0], ["h4", 0]]),
    "b": ("resnet50", "hd", 0, [["h1", 1], ["h2", 1]]),
    "loc": ("resnet50", "ring", 0, [["h4", 1], ["h4", 2]]),
    "c": ("bert_base", "ring", 1, [["h2", 2], ["h3", 2]]),
}
MEASURED = {"a": (2.0, 0.3), "b": (0.5, 0.2), "loc": (0.002, 0.2), "c": (1.0, 0.2)}  # comm, compute mean s


def write_json(path, obj) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)


def make_run(base, name: str = "20260101-000000-syn", routing: str = "ecmp", measurements: bool = True) -> str:
    """A run directory with one policy (``spread``) and one that placed nothing (``titan``): the files
    the export reads, as the runner writes them."""
    run = os.path.join(str(base), name)
    pdir = os.path.join(run, "spread")
    os.makedirs(os.path.join(pdir, "jobs", "a"))
    cfg = from_dict({"name": "syn", "scale": SCALE, "dilation": DILATION, "iterations": 3, "warmup_iterations": 1,
                     "routing": routing, "policies": ["spread", "titan"],
                     "topology": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 2,
                                  "oversubscription": 2.0},
                     "jobs": [{"name": j, "model": m, "workers": len(s), "collective": c}
                              for j, (m, c, _, s) in JOBS.items()]})
    write_json(os.path.join(run, "config.json"), to_dict(cfg))
    g = build_topology("leaf_spine", n_leaf=2, n_spine=1, hosts_per_leaf=2, oversubscription=2.0)
    write_topology_json(g, os.path.join(run, "topology.json"))
    write_json(os.path.join(pdir, "placements.json"),
               [{"wave": w, "job": j, "slots": s, "ps_host": None, "ina_switches": []}
                for j, (_, _, w, s) in JOBS.items()])
    if measurements:
        write_json(os.path.join(pdir, "measurements.json"), {"waves": [
            {"index": 0, "jobs": ["a", "b", "loc"], "duration_s": 10.0, "startup_s": 1.0, "window_s": [100.0, 108.0]},
            {"index": 1, "jobs": ["c"], "duration_s": 7.0, "startup_s": 0.5, "window_s": [112.0, 118.0]}]})
    append_record(os.path.join(pdir, "jobs", "a", "a-rank0.jsonl"), IterationRecord(
        job="a", rank=0, world=4, iteration=0, start_time_s=100.0, compute_s=0.6, comm_s=4.0, bytes=1200,
        iteration_s=4.6, mode="replay", collective="ring", bucket_bytes=RECORDED_BUCKETS, bucket_comm_s=(1.0, 3.0)))
    jobs = {j: {"model": m, "workers": len(s), "collective": c, "wave": w, "machines": sorted({x for x, _ in s}),
                "comm_mean_s": MEASURED[j][0], "compute_mean_s": MEASURED[j][1], "comm_p99_s": MEASURED[j][0] * 1.1,
                "iterations_recorded": 3, "complete": True}
            for j, (m, c, w, s) in JOBS.items()}
    write_json(os.path.join(run, "summary.json"), {
        "name": "syn", "scale": SCALE, "dilation": DILATION, "policies": [{"policy": "spread", "jobs": jobs}],
        "unplaced": {"titan": "placed none of the waiting jobs"}, "validation": {}})
    return run


def jobs_of(d: dict, policy: str = "spread") -> dict:
    p = next(p for p in d["policies"] if p["policy"] == policy)
    return {j["name"]: j for j in p["jobs"]}


def test_top_level_fields_and_topology_in_both_scales(tmp_path):
    """Format, run facts, scale and dilation; every node with its role, and both directions of every link
    at paper scale, emulated (/ scale) and shaped (/ scale x dilation) rates."""
    run = make_run(tmp_path)
    d = export_run(run)
    assert d["format"] == "experiment" and d["format_version"] == FORMAT_VERSION
    assert d["run"] == {"name": "syn", "dir": "20260101-000000-syn", "mode": "replay", "runtime": "agent",
                        "mtu": 1500, "seed": 1, "scheduler": "waves"}
    assert (d["scale"], d["dilation"]) == (SCALE, DILATION)
    g = read_topology_json(os.path.join(run, "topology.json"))
    nodes = {n["name"]: n for n in d["topology"]["nodes"]}
    assert list(nodes) == list(g.nodes)
    assert nodes["h1"] == {"name": "h1", "role": "machine", "gpus": 4, "rack": "l1", "tier": None, "pod": "p0"}
    assert nodes["s1"]["role"] == "switch" and nodes["s1"]["tier"] == "spine" and nodes["s1"]["gpus"] is None
    links = {(lk["src"], lk["dst"]): lk for lk in d["topology"]["links"]}
    assert len(links) == 2 * g.number_of_edges()
    for u, v, e in g.edges(data=True):
        for a, b in ((u, v), (v, u)):
            lk = links[(a, b)]
            assert lk["rate_mbps"] == e["bw_mbps"]
            assert lk["emulated_rate_mbps"] == pytest.approx(e["bw_mbps"] / SCALE)
            assert lk["shaped_rate_mbps"] == pytest.approx(e["bw_mbps"] / (SCALE * DILATION))
            assert lk["delay_us"] == 0.0
    assert links[("h1", "l1")]["emulated_rate_mbps"] == pytest.approx(20.0)
    assert d["unplaced"] == {"titan": "placed none of the waiting jobs"}
    assert [p["policy"] for p in d["policies"]] == ["spread"]


def test_routes_are_the_controllers_ecmp_paths_of_every_pair_with_traffic(tmp_path):
    """One route per ordered machine pair some job sends over, each ``topo.routing.ecmp_path``; a ring's
    pairs follow rank order, and a job on one machine has none."""
    run = make_run(tmp_path)
    d = export_run(run)
    g = read_topology_json(os.path.join(run, "topology.json"))
    jobs = jobs_of(d)
    # ring over h1, h3, h2, h4 in rank order: each rank sends to the next
    assert sorted(map(tuple, jobs["a"]["machine_pairs"])) == sorted(
        [("h1", "h3"), ("h3", "h2"), ("h2", "h4"), ("h4", "h1")])
    assert sorted(map(tuple, jobs["b"]["machine_pairs"])) == [("h1", "h2"), ("h2", "h1")]
    assert jobs["loc"]["machine_pairs"] == []
    routing = d["routing"]
    assert routing["mode"] == "ecmp" and routing["exact"] is True and routing["function"] == "topo.routing.ecmp_path"
    pairs = {tuple(p) for j in jobs.values() for p in j["machine_pairs"]}
    assert {(r["src"], r["dst"]) for r in routing["routes"]} == pairs
    assert len(routing["routes"]) == len(pairs)
    for r in routing["routes"]:
        assert tuple(r["path"]) == ecmp_path(g, r["src"], r["dst"])
        assert "equal_cost_paths" not in r
    assert next(r for r in routing["routes"] if (r["src"], r["dst"]) == ("h1", "h3"))["path"] == \
        ["h1", "l1", "s1", "l2", "h3"]


def test_select_routing_is_marked_inexact_and_lists_every_equal_cost_path(tmp_path):
    """Under OVS per-flow hashing the ECMP path is one choice among the listed equal-cost paths."""
    run = make_run(tmp_path, routing="select")
    d = export_run(run)
    g = read_topology_json(os.path.join(run, "topology.json"))
    assert d["routing"]["mode"] == "select" and d["routing"]["exact"] is False
    for r in d["routing"]["routes"]:
        assert r["equal_cost_paths"] == [list(p) for p in equal_cost_paths(g, r["src"], r["dst"])]
        assert r["path"] in r["equal_cost_paths"]


def test_jobs_ranks_buckets_compute_and_measurements(tmp_path):
    """Ranks in slot order; buckets from rank 0's record (paper bytes = emulated x scale) or, without a
    record, the model's scaled buckets; compute from the model profile; measured figures from the summary."""
    d = export_run(make_run(tmp_path))
    jobs = jobs_of(d)
    assert list(jobs) == list(JOBS)
    a = jobs["a"]
    assert a["ranks"] == [{"rank": r, "machine": m, "gpu": gpu} for r, (m, gpu) in enumerate(JOBS["a"][3])]
    assert (a["model"], a["collective"], a["workers"], a["ps_host"], a["ina_switches"]) == ("vgg16", "ring", 4, None,
                                                                                           [])
    assert a["bucket_source"] == "records"
    assert a["emulated_bucket_bytes"] == list(RECORDED_BUCKETS)
    assert a["bucket_bytes"] == [200_000, 400_000]
    assert (a["bytes_per_iteration"], a["emulated_bytes_per_iteration"]) == (600_000, 1200)
    b = jobs["b"]
    assert b["bucket_source"] == "model"
    assert b["emulated_bucket_bytes"] == list(scaled_buckets(get_model("resnet50"), SCALE))
    assert b["bucket_bytes"] == [e * 500 for e in b["emulated_bucket_bytes"]]
    for name, j in jobs.items():
        assert j["compute_s"] == get_model(JOBS[name][0]).compute_time_s
        assert (j["iterations"], j["warmup_iterations"]) == (3, 1)
        comm, compute = MEASURED[name]
        assert j["measured"] == {"comm_mean_s": comm, "comm_p99_s": pytest.approx(comm * 1.1),
                                 "compute_mean_s": compute, "iteration_mean_s": pytest.approx(comm + compute),
                                 "iterations_recorded": 3, "complete": True}


def test_arrival_times_from_the_measured_waves(tmp_path):
    """Wave 0 arrives at 0; wave 1 after wave 0's (duration - start-up) / dilation = (10 - 1) / 2 s, and
    depends on wave 0; without measurements.json later waves' arrival is unknown (null), never guessed."""
    d = export_run(make_run(tmp_path))
    waves = next(p for p in d["policies"] if p["policy"] == "spread")["waves"]
    assert waves == [
        {"index": 0, "jobs": ["a", "b", "loc"], "starts_after_wave": None, "arrival_s": 0.0,
         "measured_run_s": 4.5, "measured_startup_s": 0.5},
        {"index": 1, "jobs": ["c"], "starts_after_wave": 0, "arrival_s": 4.5, "measured_run_s": 3.25,
         "measured_startup_s": 0.25}]
    jobs = jobs_of(d)
    assert (jobs["a"]["wave"], jobs["a"]["arrival_s"], jobs["a"]["starts_after_wave"]) == (0, 0.0, None)
    assert (jobs["c"]["wave"], jobs["c"]["arrival_s"], jobs["c"]["starts_after_wave"]) == (1, 4.5, 0)
    assert jobs["a"]["submitted_s"] == jobs["c"]["submitted_s"] == 0.0  # the config submits every job at 0
    bare = export_run(make_run(tmp_path, name="bare", measurements=False))
    assert [(w["arrival_s"], w["measured_run_s"]) for w in bare["policies"][0]["waves"]] == [(0.0, None),
                                                                                            (None, None)]


def test_json_round_trip_and_deterministic_file(tmp_path):
    """The dict equals its JSON round trip; experiment.json holds it, byte-identical when written again."""
    run = make_run(tmp_path)
    d = export_run(run)
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    path = write_export(run)
    assert path == os.path.join(run, EXPORT_FILE)
    with open(path, "rb") as f:
        first = f.read()
    assert json.loads(first) == d
    write_export(run)
    with open(path, "rb") as f:
        assert f.read() == first
    other = export_run(make_run(tmp_path, name="again"))
    assert other["run"].pop("dir") == "again" and d["run"].pop("dir") == "20260101-000000-syn"
    assert other == d


def test_not_a_run_directory_is_one_clear_error(tmp_path):
    """A directory without the run's files, or a run without summary.json, fails with one line naming the file."""
    with pytest.raises(ResultsError) as info:
        export_run(str(tmp_path))
    assert "config.json" in str(info.value) and len(str(info.value).splitlines()) == 1
    run = make_run(tmp_path)
    os.unlink(os.path.join(run, "summary.json"))
    with pytest.raises(ResultsError, match="summary.json does not exist"):
        export_run(run)


def test_import_loads_no_heavy_modules():
    """Importing the export and the estimates modules loads no torch, mininet, os_ken or matplotlib."""
    code = ("import sys, experiment.reporting.export, experiment.validate.estimates\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'mininet', 'os_ken', 'matplotlib'})\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == ""
