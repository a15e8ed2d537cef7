"""What a distributed-training job is and how its workers run.

Pure modules (standard library only, safe for the simulator and placement code):

* :mod:`jobs.models`: model profiles (parameter bytes, DDP gradient buckets, compute time).
* :mod:`jobs.collective`: the collectives a job may name, as objects (``collective_of(name)``).
* :mod:`jobs.patterns`: the exact point-to-point traffic of each collective we implement.
* :mod:`jobs.steps`: a collective's steps routed on the fabric and their contention-free bounds
  (the bound the fidelity monitor, the simulators and Cassini's profiles use).
* :mod:`jobs.records`: per-iteration timing records and their JSON-lines files.
* :mod:`jobs.launcher`: worker specs, launching workers through a caller-supplied exec
  function, waiting for them with a timeout.

Worker side (imports torch):

* :mod:`jobs.collectives`: allreduce algorithms over gloo point-to-point (registry
  ``COLLECTIVES``).
* :mod:`jobs.nets`: the small torch model that ``train`` mode really trains.
* :mod:`jobs.worker`: the program run inside an emulated host (``python -m jobs.worker SPEC``).

This package's ``__init__`` imports nothing, so importing a pure module never loads torch.
"""
