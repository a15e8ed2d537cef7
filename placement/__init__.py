"""Placement policies: the registry, spec strings and the shared interface.

A policy is chosen by a spec string, the registry key optionally followed by keyword
arguments for its constructor::

    make_policy("consolidate")
    make_policy("random,strict_order=true", seed=3)

Values are parsed as ``bool`` (``true``/``false``, any case), ``int``, ``float``, else kept
as ``str``. The keywords a policy accepts are the parameters of its ``__init__`` other than
``seed``, which always comes from the experiment's seed (the ``seed`` argument of
:func:`make_policy`), never from the spec.

Adding a policy is one module with a :class:`PlacementPolicy` subclass plus one line in
:data:`POLICIES`; ``tests/test_placement_contract.py`` then checks it automatically. There is
no import-time auto-registration.
"""

from __future__ import annotations

from common import specs
from common.errors import PlacementError
from placement.base import (
    BACKGROUND_JOB,
    Cluster,
    ClusterView,
    GpuSlot,
    JobRequest,
    MachineInfo,
    Placement,
    PlacementContext,
    PlacementDecision,
    PlacementPolicy,
    Tentative,
    TimeShift,
    jobs_by_name,
)
from placement.cassini.policy import CassiniPolicy
from placement.consolidate import ConsolidatePolicy
from placement.elasticflow import ElasticFlowPolicy
from placement.hived import HivedPolicy
from placement.netpack.baselines import (
    CombPolicy,
    FlowBalancePolicy,
    GpuBalancePolicy,
    LeastFragmentationPolicy,
    OptimusPolicy,
    TetrisPolicy,
)
from placement.netpack.policy import NetPackPolicy
from placement.pinned import PinnedPolicy
from placement.random_policy import RandomPolicy
from placement.spread import SpreadPolicy
from placement.themis import ThemisPolicy
from placement.tiresias_placement import TiresiasPolicy
from placement.titan import TitanPolicy

__all__ = [
    "BACKGROUND_JOB",
    "POLICIES",
    "CassiniPolicy",
    "Cluster",
    "ClusterView",
    "CombPolicy",
    "ConsolidatePolicy",
    "PinnedPolicy",
    "FlowBalancePolicy",
    "GpuBalancePolicy",
    "GpuSlot",
    "JobRequest",
    "LeastFragmentationPolicy",
    "MachineInfo",
    "NetPackPolicy",
    "OptimusPolicy",
    "Placement",
    "PlacementContext",
    "PlacementDecision",
    "PlacementPolicy",
    "RandomPolicy",
    "SpreadPolicy",
    "Tentative",
    "TetrisPolicy",
    "ThemisPolicy",
    "TimeShift",
    "jobs_by_name",
    "make_policy",
    "parse_spec",
]

POLICIES: dict[str, type[PlacementPolicy]] = {
    "random": RandomPolicy,
    "consolidate": ConsolidatePolicy,
    "spread": SpreadPolicy,
    "elasticflow": ElasticFlowPolicy,
    "hived": HivedPolicy,
    "tiresias": TiresiasPolicy,
    "titan": TitanPolicy,
    "netpack": NetPackPolicy,
    "gpu_balance": GpuBalancePolicy,
    "flow_balance": FlowBalancePolicy,
    "least_fragmentation": LeastFragmentationPolicy,
    "optimus": OptimusPolicy,
    "tetris": TetrisPolicy,
    "comb": CombPolicy,
    "themis": ThemisPolicy,
    "cassini": CassiniPolicy,
    "pinned": PinnedPolicy,
}


def parse_spec(spec: str) -> tuple[str, dict[str, bool | int | float | str]]:
    """Split a spec string ``"name,key=value,..."`` into the name and parsed keyword values.

    Raises:
        PlacementError: empty name, an item without ``=``, an empty key or a repeated key.
    """
    return specs.parse_spec(spec, "policy", PlacementError)


GIVEN_BY_THE_RUN = ("context", "make_policy")
"""Constructor parameters :func:`make_policy` fills itself, never spec keywords: the run's
:class:`PlacementContext` and, for a policy over another, :func:`make_policy`."""


def make_policy(spec: str, seed: int = 0, context: PlacementContext | None = None) -> PlacementPolicy:
    """Build a policy from its spec string (``"name"`` or ``"name,key=value,..."``, see ``common.specs``).

    Args:
        spec: ``name`` is a key of :data:`POLICIES`; keys are its constructor's keyword parameters.
        seed: the policy's seed (derive it from the experiment's seed).
        context: what the run tells policies whose constructor takes ``context`` (default: payload
            bytes, no latency). A policy over another (``cassini,inner=...``) takes ``make_policy``: this
            function, for its inner policy.

    Raises:
        PlacementError: unknown policy name, unknown keyword (the message lists the valid
            ones), a missing required keyword, a value of the wrong type, or a malformed spec.
    """
    return specs.build_from_spec(POLICIES, spec, seed, "placement policy", "policy", PlacementError,
                                 {"context": context or PlacementContext(), "make_policy": make_policy})
