"""Flow-level simulation. Pure: no root, no emulator. The bounds it costs transfers against are
:mod:`jobs.steps`.

* ``sim.maxmin``: max-min fair rates of flows sharing links (progressive filling);
* ``sim.fluid``: the iteration-level engine for traces, with ``sim.fluid_costs`` (an iteration's
  costs) and ``sim.overlap`` (how coupled jobs overlap); ``sim.mltcp``: MLTCP's fluid model;
* ``sim.flowsim``: an event-driven flow-level simulation of concurrent jobs as the replay
  runtime (:mod:`workers.agent`) runs them, giving per-rank iteration records and per-job
  communication-time estimates aggregated as the report does; its flows live in ``sim.flows``,
  sharing links as ``sim.sharing`` has them, with ``sim.buckets`` and ``sim.ecn_marks``;
* ``sim.components``: the users of each link (or aggregator) both engines recompute rates over.

Modules are imported by name (``from sim.flowsim import simulate``): importing ``sim`` loads
none of them.
"""
