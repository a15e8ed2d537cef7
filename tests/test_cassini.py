"""Cassini's pure core (``placement.cassini``) against the spec (``docs/resolutions.md`` (Cassini)): the §3.3
table and §3.2 facts as exact tests, the §4.3 BFS vector and Theorem 1 on random trees, the §10
candidate-selection example, and the per-link optimum against a brute-force reference on random job sets."""

from __future__ import annotations

import itertools
import math
import random
from functools import reduce

import pytest

from placement.cassini.affinity import AffinityLoop, affinity_edges, has_loop, time_shifts
from placement.cassini.compat import link_score
from placement.cassini.profile import Phase, Profile, perimeter_ms, quantised_ms
from placement.cassini.select import choose

C = 50.0
VGG = Profile.of(255, [(141, 114, 45)])
HEAVY100 = Profile.of(100, [(0, 60, 45)])


# -- §3.3: the test vectors (C = 50 Gbps, one Up phase per job, rotation = delay) -----------------

@pytest.mark.parametrize("profiles,step,score,shifts", [
    ({"a": VGG, "b": VGG}, 5.0, 1.0, {"a": 0.0, "b": 113.3}),  # 32 steps of 3.54 ms; feasible [114, 141]
    ({"j1": Profile.of(40, [(0, 10, 40)]), "j2": Profile.of(60, [(0, 10, 40)])}, 1.0, 1.0, {"j1": 0.0, "j2": 10.0}),
    ({"j1": Profile.of(40, [(0, 15, 40)]), "j2": Profile.of(60, [(0, 20, 40)])}, 1.0, 0.925, None),  # 35 > gcd 20
    ({"a": HEAVY100, "b": HEAVY100}, 5.0, 0.844, {"a": 0.0, "b": 40.3}),
    ({"h1": Profile.of(200, [(0, 80, 45)]), "h2": Profile.of(200, [(0, 80, 45)]),
      "l": Profile.of(100, [(0, 40, 5)])}, 5.0, 1.0, {"h1": 0.0, "h2": 80.6}),  # the light job may overlap
    ({"a": HEAVY100, "b": VGG}, 5.0, 0.800, None),  # 5100 ms circle: 70.8 ms bins overstate the score
    ({"a": HEAVY100, "b": VGG}, 1.0, 0.787, None),
    ({"a": HEAVY100, "b": VGG}, 0.1, 0.787, None),
])
def test_the_spec_table_of_scores_and_shifts(profiles, step, score, shifts):
    """§3.3: every row's score to the table's three decimals, and its example shifts (to 0.1 ms)."""
    fit = link_score(profiles, C, step)
    assert round(fit.score, 3) == score
    assert fit.angles == round(360 / step) and fit.exhaustive
    for job, t in (shifts or {}).items():
        assert round(fit.shifts_ms[job], 1) == t, (job, fit.shifts_ms)
    assert fit.perimeter_ms == perimeter_ms([p.iter_ms for p in profiles.values()])


@pytest.mark.parametrize("u1,u2,score", [(10, 10, 1.0), (12, 8, 1.0), (12, 9, 0.995), (15, 6, 0.995)])
def test_two_up_phases_interleave_iff_they_fit_in_the_gcd(u1, u2, score):
    """§3.2: T = 40/60 ms, rates together above C: full interleaving iff u1 + u2 <= gcd(40, 60) = 20."""
    fit = link_score({"a": Profile.of(40, [(0, u1, 40)]), "b": Profile.of(60, [(0, u2, 40)])}, C, 1.0)
    assert round(fit.score, 3) == score
    assert (fit.score == 1.0) == (u1 + u2 <= math.gcd(40, 60))


def test_a_uniform_rotation_leaves_the_score_unchanged_and_the_first_job_is_pinned():
    """§3.2: rotating every job alike changes nothing, so the first job (by name) stays at 0."""
    base = link_score({"a": HEAVY100, "b": HEAVY100}, C, 5.0)
    moved = link_score({"a": Profile.of(100, [(30, 60, 45)]), "b": Profile.of(100, [(30, 60, 45)])}, C, 5.0)
    assert moved.score == pytest.approx(base.score) and moved.rotations["a"] == base.rotations["a"] == 0


def test_the_demand_after_rotation_is_what_was_scored():
    """The reported demand per angle is the rotated sum whose excess gives the score (Eqs. 4.1-4.3)."""
    fit = link_score({"a": HEAVY100, "b": HEAVY100, "l": Profile.of(50, [(5, 10, 20)])}, C, 5.0)
    excess = sum(max(0.0, d - C) for d in fit.demand_gbps)
    assert fit.score == pytest.approx(1 - excess / (fit.angles * C))


def test_coordinate_descent_is_used_above_the_exhaustive_limit():
    """Above ``max_exhaustive`` jobs the search is coordinate descent (§3.4 [REC]): it finds the heavy +
    heavy + light case's full fit; on random sets of 5 jobs it is never better than the exhaustive
    optimum (checked on 3-job sets) and never worse than no rotation."""
    jobs = {"h1": Profile.of(200, [(0, 80, 45)]), "h2": Profile.of(200, [(0, 80, 45)]),
            "l": Profile.of(100, [(0, 40, 5)])}
    descent = link_score(jobs, C, 5.0, max_exhaustive=2)
    assert not descent.exhaustive and descent.score == 1.0
    rng = random.Random(3)
    for _ in range(10):
        five = {f"j{i}": random_profile(rng, (20, 40)) for i in range(5)}
        d = link_score(five, C, 10.0)
        assert not d.exhaustive and d.score >= _score_of(five, dict.fromkeys(five, 0), 10.0) - 1e-12
        assert d.score == pytest.approx(_score_of(five, d.rotations, 10.0))
        three = {f"j{i}": random_profile(rng, (20, 40)) for i in range(3)}
        assert link_score(three, C, 10.0, max_exhaustive=2).score <= link_score(three, C, 10.0).score + 1e-12


def test_quantised_iteration_times_keep_the_unified_circle_small():
    """§3.2 [R]: 255 and 297 ms (LCM 25,245 ms) on a 5 ms grid are 255 and 295: LCM 15,045; on 10 ms,
    260 and 300: 3,900."""
    assert perimeter_ms([255, 297]) == 25245
    assert perimeter_ms([255, 297], 5) == 15045 and perimeter_ms([255, 297], 10) == 3900
    assert quantised_ms(0.4, 5) == 5 and quantised_ms(297, 10) == 300


def test_profiles_round_trip_through_json_and_reject_what_is_not_one_iteration():
    """A profile's JSON form reads back equal; a phase outside one iteration, a zero period or a
    malformed record is refused with the offending value."""
    p = Profile.of(255, [(141, 114, 45.0), (0, 10, 2.5)])
    assert Profile.from_dict(p.to_dict()) == p
    assert p.demand_gbps(141) == 45 and p.demand_gbps(140.9) == 0 and p.demand_gbps(255 + 5) == 2.5
    wrap = Profile.of(100, [(90, 20, 10)])  # wraps past the iteration's end
    assert wrap.demand_gbps(95) == wrap.demand_gbps(5) == 10 and wrap.demand_gbps(15) == 0
    for bad in ([(100, 10, 1)], [(0, 120, 1)], [(0, 10, -1)]):
        with pytest.raises(ValueError, match="not inside one iteration"):
            Profile.of(100, bad)
    with pytest.raises(ValueError, match="iter_ms must be finite and > 0"):
        Profile(0.0)
    with pytest.raises(ValueError, match="malformed"):
        Profile.from_dict({"phases": []})
    with pytest.raises(ValueError, match="does not divide 360"):
        link_score({"a": p}, C, 7.0)


# -- §4: the affinity graph and Algorithm 1 -------------------------------------------------------

W = {("j1", "l1"): 20.0, ("j2", "l1"): 70.0, ("j2", "l2"): 10.0, ("j3", "l2"): 45.0}
T = {"j1": 100.0, "j2": 150.0, "j3": 60.0}


def test_the_spec_bfs_vector():
    """§4.3: seed j1 at 0 gives j2 = (0 - 20 + 70) mod 150 = 50 and j3 = (50 - 10 + 45) mod 60 = 25."""
    assert time_shifts(W, T) == {"j1": 0.0, "j2": 50.0, "j3": 25.0}


def test_loops_are_found_and_refused():
    """§4.5: the chain has no loop; j1 also on l2 closes one (j1-l1-j2-l2-j1), and the BFS refuses it."""
    assert not has_loop(W)
    assert has_loop([*W, ("j1", "l2")])
    with pytest.raises(AffinityLoop, match="loop"):
        time_shifts({**W, ("j1", "l2"): 0.0}, T)


def test_the_affinity_graph_keeps_only_shared_links():
    """§4.2: a link with one job is no vertex; two jobs sharing two links make a loop."""
    edges = affinity_edges({"a": ["up", "x"], "b": ["up", "y"], "c": ["z"]})
    assert edges == [("a", "up"), ("b", "up")] and not has_loop(edges)
    assert has_loop(affinity_edges({"a": ["up", "down"], "b": ["up", "down"]}))


def test_theorem_1_on_random_trees():
    """§4.4: on loop-free graphs every job gets one shift and every link keeps its jobs' relative
    alignment, modulo the jobs' periods (the patterns are compared, not raw numbers, §4.4 [DER])."""
    rng = random.Random(7)
    for _ in range(200):
        jobs = [f"j{i}" for i in range(rng.randint(2, 8))]
        periods = {j: float(rng.choice((40, 60, 100, 120, 150))) for j in jobs}
        links, weights = [], {}
        for i, j in enumerate(jobs[1:], 1):  # each new job joins the tree through a new link
            if links and rng.random() < 0.4:
                link = rng.choice(links)
                if any(k == j for k, ln in weights if ln == link):
                    continue
            else:
                link = f"l{len(links)}"
                links.append(link)
                other = rng.choice(jobs[:i])
                weights[other, link] = rng.uniform(0, periods[other])
            weights[j, link] = rng.uniform(0, periods[j])
        if has_loop(weights):
            continue
        shifts = time_shifts(weights, periods)
        assert set(shifts) == {j for j, _ in weights}
        for (j, link), wj in weights.items():
            for (k, link2), wk in weights.items():
                if link2 == link and k != j:
                    g = math.gcd(int(periods[j]), int(periods[k]))
                    drift = ((shifts[k] - wk) - (shifts[j] - wj)) % g
                    assert min(drift, g - drift) < 1e-6, (j, k, link)


# -- §5 / §10: the candidate-selection example -----------------------------------------------------

def on(job_links: dict, profiles: dict | None = None) -> dict:
    """A candidate as Cassini takes it: job -> link -> the job's profile (HEAVY100 unless given)."""
    return {j: {link: (profiles or {}).get(j, HEAVY100) for link in links} for j, links in job_links.items()}


def test_the_spec_candidate_selection_example():
    """§10, the thesis as written (no link classes): c3 (A and B on u1 and u3: a loop) is discarded; c1
    (mean 0.922) beats c2 (0.800 at 5°); shifts A 0, B 40.3, V1 0, V2 113.3."""
    profiles = {"A": HEAVY100, "B": HEAVY100, "V1": VGG, "V2": VGG}
    c3 = {"A": ["u1", "u3"], "B": ["u1", "u3"]}
    c1 = {"A": ["u1"], "B": ["u1"], "V1": ["u2"], "V2": ["u2"]}
    c2 = {"A": ["u1"], "V1": ["u1"], "B": ["u2"], "V2": ["u2"]}
    d = choose([on(c3, profiles), on(c1, profiles), on(c2, profiles)], {"u1": C, "u2": C, "u3": C}, merge=False)
    assert d.discarded == (0,) and d.chosen == 1 and not d.fallback
    assert [None if c.score is None else round(c.score, 3) for c in d.candidates] == [None, 0.922, 0.8]
    assert {j: round(t, 1) for j, t in d.shifts_ms.items()} == {"A": 0.0, "B": 40.3, "V1": 0.0, "V2": 113.3}
    log = d.to_dict()
    assert log["chosen"] == 1 and log["discarded_loops"] == [0] and log["solver_s"] >= 0
    assert set(log["candidates"][1]["links"]) == {"u1", "u2"}
    # With link classes (§4.5 [REC], the default) u1 and u3 of c3 are one class: no loop, scored 0.844 once.
    merged = choose([on(c3, profiles), on(c1, profiles), on(c2, profiles)], {"u1": C, "u2": C, "u3": C})
    assert merged.discarded == () and round(merged.candidates[0].score, 3) == 0.844 and merged.chosen == 1
    assert merged.candidates[0].classes == {"u1": ("u1", "u3")}


def test_ties_keep_the_base_schedulers_order_and_loops_everywhere_fall_back():
    """§9 #10-#11 [R]: a candidate without shared links scores 1.0; equal scores keep the first; when every
    candidate has a loop the first is kept, unshifted, and the decision says so."""
    alone = {"A": ["u1"], "B": ["u2"]}
    d = choose([on(alone), on(alone)], {"u1": C, "u2": C})
    assert d.chosen == 0 and d.candidates[1].score == 1.0 and d.shifts_ms == {}
    loop = {"A": ["u1", "u2"], "B": ["u1", "u2"]}
    d = choose([on(loop), on(loop)], {"u1": C, "u2": C}, merge=False)
    assert d.fallback and d.chosen == 0 and d.shifts_ms == {} and d.discarded == (0, 1)
    with pytest.raises(ValueError, match="valid: mean, min"):
        choose([on(alone)], {"u1": C, "u2": C}, aggregate="p99")


def test_the_min_aggregate_ranks_by_the_worst_link():
    """§5.1 footnote: with ``min`` a candidate is as good as its worst shared link."""
    profiles = {"A": HEAVY100, "B": HEAVY100, "V1": VGG, "V2": VGG}
    c1 = {"A": ["u1"], "B": ["u1"], "V1": ["u2"], "V2": ["u2"]}
    d = choose([on(c1, profiles)], {"u1": C, "u2": C}, aggregate="min")
    assert round(d.candidates[0].score, 3) == 0.844


# -- against a brute-force reference ----------------------------------------------------------------

def lcm_all(xs):
    return reduce(lambda a, b: a * b // math.gcd(a, b), xs)


def reference_link_compat(profiles: dict, cap_gbps: float, step_deg: float = 5.0):
    """The spec's §10 ``link_compat`` (exhaustive search, first best kept), sampling each bin at its
    centre ([R] of :meth:`placement.cassini.profile.Profile.on_circle`; the printed code samples left edges)."""
    jobs = sorted(profiles)
    P = lcm_all([int(profiles[j].iter_ms) for j in jobs])
    nA = round(360 / step_deg)
    r = {j: P // int(profiles[j].iter_ms) for j in jobs}
    choices = [[0]] + [list(range(max(1, math.ceil(nA / r[j])))) for j in jobs[1:]]
    bw = {j: [profiles[j].demand_gbps((a + 0.5) * P / nA) for a in range(nA)] for j in jobs}
    best = (-math.inf, None)
    for ks in itertools.product(*choices):
        excess = sum(max(0.0, sum(bw[j][(a - k) % nA] for j, k in zip(jobs, ks, strict=True)) - cap_gbps)
                     for a in range(nA))
        score = 1.0 - excess / (nA * cap_gbps)
        if score > best[0] + 1e-12:
            best = (score, ks)
    score, ks = best
    return score, {j: (k / nA * P) % profiles[j].iter_ms for j, k in zip(jobs, ks, strict=True)}


def random_profile(rng: random.Random, periods=(20, 30, 40, 60)) -> Profile:
    t = rng.choice(periods)
    phases = []
    for _ in range(rng.randint(1, 2)):
        phases.append(Phase(float(rng.randrange(t)), float(rng.randint(1, t // 2)), float(rng.choice((5, 20, 40, 45)))))
    return Profile(float(t), tuple(phases))


def _score_of(profiles, rotations, step_deg):
    """The score of given rotations (grid steps), straight from Eqs. 4.1-4.3."""
    jobs = sorted(profiles)
    P = lcm_all([int(profiles[j].iter_ms) for j in jobs])
    nA = round(360 / step_deg)
    bw = {j: profiles[j].on_circle(P, nA) for j in jobs}
    excess = sum(max(0.0, sum(bw[j][(a - rotations[j]) % nA] for j in jobs) - C) for a in range(nA))
    return 1 - excess / (nA * C)


def test_the_optimum_equals_the_brute_force_reference_on_random_job_sets():
    """On 60 random sets of 2-3 jobs (1-2 phases each, periods 20-60 ms, 10° and 5° grids) the score and
    every shift equal the reference's."""
    rng = random.Random(11)
    for case in range(60):
        profiles = {f"j{i}": random_profile(rng) for i in range(rng.randint(2, 3))}
        step = 10.0 if case % 2 else 5.0
        fit = link_score(profiles, C, step)
        score, shifts = reference_link_compat(profiles, C, step)
        assert fit.score == pytest.approx(score, abs=1e-12), case
        assert fit.shifts_ms == pytest.approx(shifts, abs=1e-9), case


def test_link_classes_break_the_loops_of_jobs_sharing_every_link_of_their_paths():
    """§4.5 [REC]: two rings across the same racks share their links with the same profiles: one class, no
    loop, one shift; a third job on one of those links splits the class, so a and b meet on two links
    that are solved apart (a real loop: discarded), and so does a cycle through three jobs."""
    two = {"a": ["h1-l1", "l1-s1", "s1-l2", "l2-h3"], "b": ["h2-l1", "l1-s1", "s1-l2", "l2-h4"]}
    caps = {link: C for links in two.values() for link in links} | {"x": C, "y": C}
    d = choose([on(two)], caps)
    assert not d.fallback and d.candidates[0].classes == {"l1-s1": ("l1-s1", "s1-l2")}
    assert round(d.shifts_ms["b"], 1) == 40.3
    three = {**two, "c": ["l1-s1", "x"]}
    d3 = choose([on(three)], caps)
    assert d3.candidates[0].loop and d3.fallback
    ring = {"a": ["x", "y"], "b": ["x", "l1-s1"], "c": ["y", "l1-s1"]}  # a-x-b-l1s1-c-y-a
    assert choose([on(ring)], caps).fallback
