"""Cassini (network-aware placement with time-shifts; ``docs/resolutions.md`` Cassini): the pure core.

* :mod:`placement.cassini.profile`: a job's per-iteration Up/Down demand on a link, on the circle
  of its iteration time and on the unified circle of several jobs (§2.2-2.4);
* :mod:`placement.cassini.compat`: the per-link compatibility score and rotations (Table 4.1,
  Eqs. 4.1-4.5, §3), the public function any reference can be compared with;
* :mod:`placement.cassini.affinity`: the affinity graph, its loop test and the BFS to one time-shift
  per job (Algorithm 1, §4);
* :mod:`placement.cassini.select`: ranking candidate placements by their links' scores and the
  winner's shifts (Algorithm 2, §5).

Standard library and numpy only: no topology, simulator or emulator here; the per-link profiles
of a placed job are derived by routing (:mod:`placement.cassini.profiles`).
"""
