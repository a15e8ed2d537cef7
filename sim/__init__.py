"""Flow-level simulation. Pure: no root, no emulator. The bounds it costs transfers against are
:mod:`jobs.steps`.

* ``sim.maxmin``: max-min fair rates of flows sharing links (progressive filling);
* ``sim.fluid``: the iteration-level engine for traces; ``sim.mltcp``: MLTCP's fluid model;
* ``sim.flowsim``: an event-driven flow-level simulation of concurrent jobs as the replay
  runtime (:mod:`workers.agent`) runs them, flows sharing links max-min fairly, giving per-rank
  iteration records and per-job communication-time estimates aggregated as the report does.

Modules are imported by name (``from sim.flowsim import simulate``): importing ``sim`` loads
none of them.
"""
