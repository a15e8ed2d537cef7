"""NetPack (Zhao et al., ASPLOS '24; ``docs/resolutions.md`` NetPack): placement for clusters with statistical
in-network aggregation, and the paper's baselines.

* :mod:`placement.netpack.network`: the one-big-switch network and a job's flows (§1.6, §2.2).
* :mod:`placement.netpack.waterfill`: the INA-aware steady-state estimation (§2.3).
"""
