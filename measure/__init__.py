"""What the emulator's measurements mean, as pure code: shared by the emulator, which measures,
and by the experiment's report, which judges.

* :mod:`measure.shaping`: link rates at a scale and dilation, frames and token buckets;
* :mod:`measure.marking`: ECN marking paths and their thresholds;
* :mod:`measure.ports`: switch port kinds and their limits;
* :mod:`measure.cpu`: a CPU summary and when it counts as saturated;
* :mod:`measure.iterations`: a job's per-iteration times, the slowest rank's, from its records;
* :mod:`measure.linkstats`: per-link byte and mark series from the samplers' files;
* :mod:`measure.fidelity`: the fidelity monitor (jobs against their bounds, ports against their rates).

Standard library, networkx and the project's pure packages only: no Mininet, no processes.
"""
