"""Cassini's profiles of a placed job computed from its model (``placement.cassini.profiles``): one Down phase of the
model's compute, one Up phase at the job's contention-free bound carrying each loaded link's bytes,
and the per-link score of two such jobs sharing a link."""

from __future__ import annotations

import pytest

from jobs.models import get_model
from jobs.steps import job_bound_s, job_steps, link_loads
from placement.cassini.compat import link_score
from placement.cassini.profiles import job_profiles, paper_rates_mbps, profiles_from_dict, profiles_to_dict
from topo import build_topology


def leaf_spine():
    return build_topology("leaf_spine", n_leaf=2, n_spine=1, hosts_per_leaf=2)


def test_a_ring_across_racks_loads_every_link_of_its_path_at_its_bytes_over_its_up_phase():
    """vgg16 on h1 and h3: both directions of the four links on the path, T = compute + bound, and each
    link's rate its iteration bytes over the Up phase (a 2-rank ring keeps its 10 Gbit/s links full)."""
    g, m = leaf_spine(), get_model("vgg16")
    profiles = job_profiles(g, ["h1", "h3"], "ring", m.bucket_bytes, m.compute_time_s)
    assert set(profiles) == {("h1", "l1"), ("l1", "s1"), ("s1", "l2"), ("l2", "h3"),
                             ("h3", "l2"), ("l2", "s1"), ("s1", "l1"), ("l1", "h1")}
    up_s = job_bound_s(g, paper_rates_mbps(g), ["h1", "h3"], "ring", m.bucket_bytes)
    loads = {}
    for steps in job_steps("ring", 2, m.bucket_bytes):
        for step in steps:
            for link, n in link_loads(g, ["h1", "h3"], step).items():
                loads[link] = loads.get(link, 0) + n
    for link, p in profiles.items():
        (phase,) = p.phases
        assert p.iter_ms == pytest.approx((m.compute_time_s + up_s) * 1e3)
        assert phase.start_ms == pytest.approx(m.compute_time_s * 1e3) and phase.dur_ms == pytest.approx(up_s * 1e3)
        assert phase.gbps == pytest.approx(loads[link] * 8 / up_s / 1e9)
        assert phase.gbps == pytest.approx(10.0, rel=1e-6)
    assert job_profiles(g, ["h1", "h1"], "ring", m.bucket_bytes, m.compute_time_s) == {}  # one machine


def test_two_jobs_whose_compute_covers_the_others_communication_interleave_on_their_shared_uplink():
    """Two resnet50 rings across the racks share l1->s1: each communicates less than half its iteration,
    so one shift interleaves them fully (score 1.0) and the shift clears the other's Up phase."""
    g, m = build_topology("leaf_spine", n_leaf=2, n_spine=1, hosts_per_leaf=4), get_model("resnet50")
    a = job_profiles(g, ["h1", "h5"], "ring", m.bucket_bytes, m.compute_time_s)
    b = job_profiles(g, ["h2", "h6"], "ring", m.bucket_bytes, m.compute_time_s)
    shared = set(a) & set(b)
    assert ("l1", "s1") in shared and ("h1", "l1") not in shared
    (phase,) = a["l1", "s1"].phases
    assert phase.dur_ms < a["l1", "s1"].iter_ms / 2
    fit = link_score({"a": a["l1", "s1"], "b": b["l1", "s1"]}, 10.0, 5.0, quantum_ms=5)
    assert fit.score == 1.0 and fit.shifts_ms["a"] == 0.0
    assert phase.dur_ms - 5 <= fit.shifts_ms["b"] <= fit.perimeter_ms - phase.dur_ms + 5


def test_profiles_json_round_trips_and_names_a_malformed_link():
    """``profiles.json``: job -> "src->dst" -> profile, read back equal; a link not written src->dst is named."""
    g, m = leaf_spine(), get_model("resnet50")
    profiles = {"a": job_profiles(g, ["h1", "h3"], "hd", m.bucket_bytes, m.compute_time_s)}
    data = profiles_to_dict(profiles)
    assert "h1->l1" in data["a"] and profiles_from_dict(data) == profiles
    with pytest.raises(ValueError, match="'h1-l1' is not written src->dst"):
        profiles_from_dict({"a": {"h1-l1": data["a"]["h1->l1"]}})
