"""Cassini's communication profiles of a placed job, computed from its model (spec §2.4, §8.3).

Cassini scores jobs on a link from each job's per-iteration demand on it, profiled in isolation
(:class:`placement.cassini.profile.Profile`). Here that demand is computed from the job's model on
its placement (costed at the run's scale, headers and latency; rates reported at paper scale), as
the replay runtime runs an iteration (:mod:`workers.agent`): a Down phase of the model's compute
time, then an Up phase in which the job allreduces its gradient buckets one after another at its
contention-free bound (:func:`jobs.steps.job_bound_s`). A directed link the job loads carries its
bytes of the iteration over that Up phase, so its rate there is ``bytes × 8 / up time`` (§2.4
[REC]: the per-worker demand routed onto each link).

[R] §9 #9 and #13: links are directed (a ring's two directions are two links); one Up phase per
iteration at the link's mean rate over it (the replay runtime's buckets go back to back, so the
link is loaded from the first bucket to the last); angle 0 is the iteration's start. A job on one
machine loads no link. Cost: the bound's, O(steps x transfers x path length).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from common.units import BITS_PER_BYTE
from jobs.steps import job_bound_s, job_steps, link_loads
from placement.cassini.profile import Phase, Profile
from topo.routing import EcmpRoutes

Link = tuple[str, str]


def paper_rates_mbps(g) -> dict[Link, float]:
    """Every link's paper-scale rate, Mbit/s (the topology's ``bw_mbps``)."""
    return {(u, v): float(d["bw_mbps"]) for u, v, d in g.edges(data=True)}


def job_profiles(g, machines_by_rank: Sequence[str], collective: str, bucket_bytes: Sequence[int],
                 compute_s: float, mtu: int | None = None, routes: EcmpRoutes | None = None,
                 latency_s: float = 0.0, scale: float = 1.0) -> dict[Link, Profile]:
    """The job's profile on every directed link it loads (see the module docstring).

    Args:
        g: the topology (paper-scale rates).
        machines_by_rank: the machine of each rank.
        collective: ``ring``, ``hd`` or ``gloo``.
        bucket_bytes: the gradient buckets of one iteration, bytes at ``scale``.
        compute_s: compute time of one iteration, seconds (the model profile's).
        mtu: count bytes on the wire at this MTU (None: payload only).
        routes: the graph's kept routes, to profile many jobs with one BFS per destination
            (default: a new one).
        latency_s: a message's software latency, added once per step with a cross-machine
            transfer (as the simulators cost it), seconds.
        scale: the run's scale factor: ``bucket_bytes`` are at it (``jobs.models.scaled_buckets``)
            and the links run at their rates over it, so times are a scaled run's to the byte (its
            headers rounded per segment); rates are reported at paper scale.

    Returns:
        ``(u, v) -> Profile`` (times in ms, rates in Gbit/s); empty for a job that sends nothing
        over the network.
    """
    path = (routes or EcmpRoutes(g)).path
    loads: dict[Link, int] = defaultdict(int)
    crossing = 0
    for steps in job_steps(collective, len(machines_by_rank), bucket_bytes):
        for step in steps:
            step_loads = link_loads(g, machines_by_rank, step, mtu, path)
            crossing += bool(step_loads)
            for link, nbytes in step_loads.items():
                loads[link] += nbytes
    if not loads:
        return {}
    rates = {link: r / scale for link, r in paper_rates_mbps(g).items()}
    up_s = job_bound_s(g, rates, machines_by_rank, collective, bucket_bytes, mtu, path) + crossing * latency_s
    iter_ms = (compute_s + up_s) * 1e3
    return {link: Profile(iter_ms, (Phase(compute_s * 1e3, up_s * 1e3, nbytes * scale * BITS_PER_BYTE / up_s / 1e9),))
            for link, nbytes in sorted(loads.items())}


def profiles_to_dict(profiles: Mapping[str, Mapping[Link, Profile]]) -> dict:
    """``profiles.json``: job -> ``"src->dst"`` -> the profile's JSON form."""
    return {job: {f"{u}->{v}": p.to_dict() for (u, v), p in links.items()} for job, links in profiles.items()}


def profiles_from_dict(data: Mapping) -> dict[str, dict[Link, Profile]]:
    """Inverse of :func:`profiles_to_dict`.

    Raises:
        ValueError: a link not written ``src->dst``, or a malformed profile.
    """
    out: dict[str, dict[Link, Profile]] = {}
    for job, links in data.items():
        out[job] = {}
        for name, record in links.items():
            u, sep, v = name.partition("->")
            if not sep or not u or not v:
                raise ValueError(f"profiles: job {job!r}: link {name!r} is not written src->dst")
            out[job][(u, v)] = Profile.from_dict(record)
    return out


def measured(profiles: Mapping[Link, Profile], iter_ms: float, up_ms: float) -> dict[Link, Profile]:
    """A job's per-link profiles with its iteration and Up phase timed as measured (§2.4: profiled
    in isolation): the same bytes on each link, carried over ``up_ms`` at the end of an iteration
    of ``iter_ms``.

    Raises:
        ValueError: an Up phase that is not positive or longer than the iteration.
    """
    if not 0 < up_ms <= iter_ms:
        raise ValueError(f"profiles: a measured Up phase must be in (0, iter_ms], got {up_ms} of {iter_ms} ms")
    out = {}
    for link, prof in profiles.items():
        gbit = sum(ph.gbps * ph.dur_ms for ph in prof.phases)  # Gbit/s x ms: the link's bytes, scaled
        out[link] = Profile(iter_ms, (Phase(iter_ms - up_ms, up_ms, gbit / up_ms),))
    return out


def read_timings(path: str) -> dict[str, tuple[float, float]]:
    """A ``profiles.json`` of measured timings (:mod:`experiment.reporting.profiles`): job -> ``(iter_ms, up_ms)``.

    Raises:
        ValueError: unreadable, not JSON, or an entry without positive ``iter_ms`` and ``up_ms``.
    """
    import json

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        jobs = data["jobs"]
        out = {str(job): (float(t["iter_ms"]), float(t["up_ms"])) for job, t in jobs.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"profiles {path}: not a profiles.json of measured timings "
                         f"({type(e).__name__}: {e})") from None
    bad = [job for job, (it, up) in out.items() if not 0 < up <= it]
    if bad:
        raise ValueError(f"profiles {path}: jobs {bad} need 0 < up_ms <= iter_ms")
    return out
