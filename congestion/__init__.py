"""The TCP congestion controls a config may name (``congestion_control:``), each an object chosen once.

A part of the testbed that treats congestion controls differently asks the run's
:class:`CongestionControl` (``congestion_control(cfg.congestion_control)``) rather than testing names:
whether it reacts to ECN, whether it is MLTCP, how the emulator installs it
(:data:`emulator.variants.CONGESTION_INSTALLERS`) and how each simulator engine shares a link under it.

Adding one is one entry in :data:`CONGESTION_CONTROLS` (docs/architecture.md). Importing this package
loads nothing but its classes.
"""

from __future__ import annotations

from common.errors import ConfigError, unknown_name
from congestion.base import CONFIGURED, MAXMIN, MLTCP_WEIGHTS, CongestionControl, Mltcp, Sharing

__all__ = ["CONFIGURED", "CONGESTION_CONTROLS", "MAXMIN", "MLTCP_WEIGHTS", "CongestionControl", "Mltcp",
           "Sharing", "congestion_control"]

CONGESTION_CONTROLS: dict[str, CongestionControl] = {
    "reno": CongestionControl("reno"),
    "cubic": CongestionControl("cubic"),
    "dctcp": CongestionControl("dctcp"),
    "bbr": CongestionControl("bbr", reacts_to_ecn=False),  # BBRv1 ignores CE marks
    "vegas": CongestionControl("vegas"),
    "westwood": CongestionControl("westwood"),
    "htcp": CongestionControl("htcp"),
    "highspeed": CongestionControl("highspeed"),
    "illinois": CongestionControl("illinois"),
    "bic": CongestionControl("bic"),
    "scalable": CongestionControl("scalable"),
    "lp": CongestionControl("lp"),
    "veno": CongestionControl("veno"),
    "yeah": CongestionControl("yeah"),
    "hybla": CongestionControl("hybla"),
    "nv": CongestionControl("nv"),
    "cdg": CongestionControl("cdg"),
    "mltcp_reno": Mltcp("mltcp_reno", base="reno"),
    "mltcp_cubic": Mltcp("mltcp_cubic", base="cubic"),
}
"""Every congestion control a config may name, in the order the config's messages list them: the Linux
modules, whose presence the emulated run checks, then the MLTCP variants the run registers itself."""


def congestion_control(name: str) -> CongestionControl:
    """The congestion control registered under ``name``.

    Raises:
        ConfigError: no such congestion control (the message lists the valid ones).
    """
    try:
        return CONGESTION_CONTROLS[name]
    except KeyError:
        raise ConfigError(unknown_name("congestion control", name, CONGESTION_CONTROLS)) from None
