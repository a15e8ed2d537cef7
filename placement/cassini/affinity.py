"""Cassini's affinity graph and the BFS to one time-shift per job (spec §4, Algorithm 1).

A job crossing several shared links gets a per-link shift on each (:mod:`placement.cassini.compat`),
but its workers can apply only one. The *affinity graph* is bipartite: jobs that share a link with
another job, the links carrying more than one job, and an edge ``(j, l)`` of weight ``t_j^l``
whenever job ``j`` crosses link ``l`` (§4.2). On a loop-free graph a BFS from a reference job
(shift 0) gives every job of its component one shift that keeps every link's relative alignment
(Theorem 1, §4.4): stepping from job ``j`` over link ``l`` to job ``k``,

    t_k = (t_j − w(j, l) + w(k, l)) mod T_k                        (Algorithm 1, line 17)

Resolutions ([R]): the reference of each component is its first job by name (the thesis picks one
at random; any choice gives equivalent relative shifts, §5.3); a graph with a loop is refused
(:class:`AffinityLoop`) and its candidate discarded (§4.5 [T]); Eq. 4.6 holds modulo each job's own
period (§4.4 [DER], §9 #7). Loop test: union-find over the edges, O(|E| α); BFS O(|U| + |V| + |E|).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Hashable, Iterable, Mapping

from common.errors import PlacementError


class AffinityLoop(PlacementError):
    """The affinity graph has a loop: no unique time-shifts (the thesis discards the candidate)."""


def affinity_edges(job_links: Mapping[str, Iterable[Hashable]]) -> list[tuple[str, Hashable]]:
    """The edges ``(job, link)`` of the affinity graph of a placement: every link carrying more than
    one job, with each job on it (§4.2), in job then link order of ``job_links``."""
    on_link: dict[Hashable, list[str]] = defaultdict(list)
    for job, links in job_links.items():
        for link in dict.fromkeys(links):
            on_link[link].append(job)
    return [(job, link) for link, jobs in on_link.items() if len(jobs) > 1 for job in jobs]


def has_loop(edges: Iterable[tuple[str, Hashable]]) -> bool:
    """True when the bipartite graph of ``edges`` has a cycle (union-find: an edge joining two
    vertices already connected), e.g. two jobs sharing two links (§4.5)."""
    parent: dict = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for job, link in edges:
        a, b = find(("job", job)), find(("link", link))
        if a == b:
            return True
        parent[a] = b
    return False


def time_shifts(weights: Mapping[tuple[str, Hashable], float], iter_ms: Mapping[str, float]) -> dict[str, float]:
    """One time-shift per job of the affinity graph of ``weights`` (Algorithm 1).

    Args:
        weights: ``(job, link) -> t_job^link`` (Eq. 4.5), for every edge of the graph.
        iter_ms: each job's iteration time (the shifts are reduced modulo it).

    Returns:
        Every job's shift in ms, the reference of each component (its first job by name) at 0.

    Raises:
        AffinityLoop: the graph has a loop.
    """
    if has_loop(weights):
        raise AffinityLoop("the affinity graph has a loop: jobs share links in a cycle, so no one shift per job "
                           "keeps every link's alignment")
    links_of: dict[str, list] = defaultdict(list)
    jobs_of: dict[Hashable, list[str]] = defaultdict(list)
    for job, link in weights:
        links_of[job].append(link)
        jobs_of[link].append(job)
    shifts: dict[str, float] = {}
    for start in sorted(links_of):
        if start in shifts:
            continue
        shifts[start] = 0.0
        queue = deque([start])
        while queue:
            j = queue.popleft()
            for link in links_of[j]:
                for k in jobs_of[link]:
                    if k not in shifts:
                        shifts[k] = (shifts[j] - weights[j, link] + weights[k, link]) % iter_ms[k]
                        queue.append(k)
    return shifts
