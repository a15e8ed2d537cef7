"""The worker runtime: the processes that run a job's ranks inside emulated hosts.

* :mod:`workers.launcher`: worker specs, launching workers through a caller-supplied exec
  function, waiting for them with a timeout.
* :mod:`workers.agent`: the light replay runtime (``python -m workers.agent PLAN``), one process per
  machine running its ranks over plain TCP; no torch.
* :mod:`workers.worker`: the torch worker program (``python -m workers.worker SPEC``), one process per
  rank over gloo.
* :mod:`workers.collectives`: allreduce algorithms over gloo point-to-point (registry
  ``COLLECTIVES``), INA among them; imports torch.
* :mod:`workers.nets`: the small torch model that ``train`` mode really trains.

What a job is (models, collectives, traffic, records, phases) is the pure package :mod:`jobs`. This
package's ``__init__`` imports nothing, so the agent and the launcher never load torch.
"""
