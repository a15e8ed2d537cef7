"""Reproductions of the seed papers' headline results: ``run_testbed.py reproduce NAME``.

Each entry of :data:`REPRODUCTIONS` (a :class:`reproduce.base.Reproduction`) runs the testbed, through
the experiment path every run takes, on the setting of one result a paper headlines, and sets each
number it measured beside the paper's, with the figure it is read from and the ratio
(:mod:`reproduce.run` writes ``reproduction.json``, ``.csv``, ``.txt`` and a plot). Their configs are
``reproduce/configs/`` and ``experiments/``; docs/reproductions.md holds the measured table.

This package imports the experiment package, never the emulator: the emulator back end is loaded only
when a reproduction is run on it.
"""

from __future__ import annotations

from common.errors import ConfigError
from reproduce.base import Reproduction
from reproduce.cassini import CassiniFig42, CassiniFig411
from reproduce.cassini_snapshots import CassiniTable43
from reproduce.mltcp import Mltcp
from reproduce.netpack import NetPackFig7, NetPackFig9, NetPackFig11, NetPackFig12, NetPackFig13, NetPackFig14
from reproduce.netpack_system import NetPackFig6, NetPackFig10
from reproduce.tiresias import Tiresias60Job, Tiresias480Job
from reproduce.tiresias_trace import TiresiasTable5
from reproduce.titan import TitanFig1, TitanSim, TitanTestbed

REPRODUCTIONS: dict[str, type[Reproduction]] = {
    "titan-fig1": TitanFig1,
    "titan-sim": TitanSim,
    "titan-testbed": TitanTestbed,
    "tiresias-60job": Tiresias60Job,
    "tiresias-480job": Tiresias480Job,
    "tiresias-table5": TiresiasTable5,
    "netpack-fig6": NetPackFig6,
    "netpack-fig7": NetPackFig7,
    "netpack-fig9": NetPackFig9,
    "netpack-fig10": NetPackFig10,
    "netpack-fig11": NetPackFig11,
    "netpack-fig12": NetPackFig12,
    "netpack-fig13": NetPackFig13,
    "netpack-fig14": NetPackFig14,
    "cassini-fig4.2": CassiniFig42,
    "cassini-fig4.11": CassiniFig411,
    "cassini-table4.3": CassiniTable43,
    "mltcp": Mltcp,
}
"""Name -> reproduction, in the order they are listed."""


def get(name: str) -> Reproduction:
    """The reproduction registered as ``name``.

    Raises:
        ConfigError: unknown name (the message lists the registered ones).
    """
    cls = REPRODUCTIONS.get(name)
    if cls is None:
        raise ConfigError(f"reproduce: no reproduction {name!r}; valid: {', '.join(REPRODUCTIONS)}")
    return cls()
