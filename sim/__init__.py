"""Flow-level simulation. Pure: no root, no emulator.

* ``sim.steps``: the step-synchronous bandwidth bounds of a collective on a routed fabric
  (the contention-free bound the fidelity monitor and benchmark use);
* ``sim.maxmin``: max-min fair rates of flows sharing links (progressive filling);
* ``sim.flowsim``: an event-driven flow-level simulation of concurrent jobs as the replay
  runtime (:mod:`jobs.agent`) runs them, flows sharing links max-min fairly, giving per-rank
  iteration records and per-job communication-time estimates aggregated as the report does.

Modules are imported by name (``from sim.flowsim import simulate``): importing ``sim`` loads
none of them.
"""
