"""A TCP congestion control a config may name, as one object: what it reacts to, how the emulator gives
it to the hosts, and how each simulator engine shares a link under it (docs/architecture.md, "Adding a
congestion control"). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

CONFIGURED = "configured"
"""A link-sharing model: the config's ``simulator.sharing`` (max-min, or TCP's share of a shared link),
the step-level engine's model of every kernel TCP."""
MAXMIN = "maxmin"
"""A link-sharing model: max-min fair rates, whatever the hosts' congestion control does."""
MLTCP_WEIGHTS = "mltcp"
"""A link-sharing model: weighted max-min, each flow weighted by MLTCP's F (:class:`sim.sharing.MltcpSharing`)."""


@dataclasses.dataclass(frozen=True)
class Sharing:
    """How a simulator engine shares a link among flows under a congestion control.

    Attributes:
        model: the engine's sharing model (:data:`CONFIGURED`, :data:`MAXMIN` or :data:`MLTCP_WEIGHTS`).
        modelled: the model is the congestion control's; False: the engine does not model it (its
            links are shared max-min) and the simulator says so when a run starts.
    """

    model: str
    modelled: bool = True


@dataclasses.dataclass(frozen=True)
class CongestionControl:
    """A Linux TCP congestion-control module (``tcp_<name>.ko``): the kernel loads it when the hosts
    pick it, so the emulator only checks it is available; the simulator's configured sharing stands
    for it on every engine.

    Attributes:
        name: its name in configs and in ``net.ipv4.tcp_congestion_control`` (the registry key).
        reacts_to_ecn: it slows down on CE marks; False (BBRv1) is refused with ECN marking on.
    """

    name: str
    reacts_to_ecn: bool = True

    installer: ClassVar[str] = "kernel"
    """How the emulator installs it: a key of :data:`emulator.variants.CONGESTION_INSTALLERS`."""

    @property
    def mltcp_base(self) -> str | None:
        """The congestion control whose window growth MLTCP scales by F, or None: it is not MLTCP."""
        return None

    @property
    def is_mltcp(self) -> bool:
        """It is an MLTCP variant: its jobs' flows share links by their progress through an iteration."""
        return self.mltcp_base is not None

    def sharing(self, engine) -> Sharing:
        """How ``engine`` (a :class:`sim.engines.SimEngine`) shares a link under it."""
        return Sharing(CONFIGURED)


@dataclasses.dataclass(frozen=True)
class Mltcp(CongestionControl):
    """An MLTCP variant (``docs/resolutions.md`` Cassini §6): ``base``'s window growth scaled by
    ``F = slope × bytes_ratio + intercept``, a BPF struct_ops program the emulated run registers
    (:mod:`emulator.mltcp`). Every variant is one fluid model to the simulator (spec §6.4 item 5 (a)):
    shares in proportion to F, on the engines that model congestion control.

    Attributes:
        base: the congestion control it scales (``reno``, ``cubic``).
    """

    base: str = dataclasses.field(kw_only=True)

    installer: ClassVar[str] = "struct_ops"

    @property
    def mltcp_base(self) -> str:
        return self.base

    def sharing(self, engine) -> Sharing:
        if engine.models_congestion_control:
            return Sharing(MLTCP_WEIGHTS)
        return Sharing(MAXMIN, modelled=False)
