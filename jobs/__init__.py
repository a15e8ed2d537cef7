"""What a distributed-training job is: pure descriptions for the simulator, placement and analysis.

Standard library and our own pure packages only (no torch, sockets or processes):

* :mod:`jobs.models`: model profiles (parameter bytes, DDP gradient buckets, compute time).
* :mod:`jobs.collective`: the collectives a job may name, as objects (``collective_of(name)``).
* :mod:`jobs.modes`: what a run's workers do with a model (replay or train), as objects (``work_mode(name)``).
* :mod:`jobs.patterns`: the exact point-to-point traffic of each collective we implement.
* :mod:`jobs.steps`: a collective's steps routed on the fabric and their contention-free bounds
  (the bound the fidelity monitor, the simulators and Cassini's profiles use).
* :mod:`jobs.records`: per-iteration timing records and their JSON-lines files.
* :mod:`jobs.phase`, :mod:`jobs.pace`: time shifts kept against a common origin on a decision's
  paced line, and the shift file the emulator writes and its workers follow.

The processes that run a job's ranks are the package :mod:`workers`.
"""
