"""Small hand-made clusters shared by the placement policies' tests."""

from __future__ import annotations

from placement import Cluster, MachineInfo


def cluster(free: list[int], gpus: int = 4, racks: list[str] | None = None) -> Cluster:
    """Machines M1.. with ``gpus`` GPUs and the given free GPUs, one rack unless ``racks`` is given."""
    racks = racks or ["r0"] * len(free)
    c = Cluster([MachineInfo(f"M{i + 1}", gpus, rack=racks[i], pod="p0") for i in range(len(free))])
    c.set_background({f"M{i + 1}": gpus - f for i, f in enumerate(free)})
    return c
