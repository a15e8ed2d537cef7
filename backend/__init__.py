"""The back-end protocol: what the experiment loop asks of a back end and the records that cross it.

:mod:`backend.protocol` defines :class:`~backend.protocol.Backend` (a clock that runs jobs),
:class:`~backend.protocol.ExperimentJob` (a job as the loop runs it) and
:class:`~backend.protocol.RunEnd` (one run of a job, as the back end saw it). It sits below every
back end (:mod:`sim`, :mod:`emulator`, :mod:`experiment.run.durations`) and below the loop that
drives them (:mod:`experiment.run.loop`), so none of them imports another for these types.
"""
