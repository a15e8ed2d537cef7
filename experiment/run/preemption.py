"""What preempting a job costs: Tiresias's checkpoint and restore (``docs/schedulers.md``).

A preempted job's chief writes its model to shared storage before its GPUs are free; a resumed job's
workers read it back (and the framework restarts) before it trains again (Tiresias §2.2, §4). Each
is a fixed time plus the model's fp32 parameters at the storage's rate: :class:`CheckpointCost`, the
:class:`experiment.run.loop.PreemptionCost` a config's ``preemption`` section describes. Pure.
"""

from __future__ import annotations

import dataclasses

from backend.protocol import ExperimentJob
from jobs.models import job_model


@dataclasses.dataclass(frozen=True)
class CheckpointCost:
    """A checkpoint costs ``checkpoint_s`` plus the model's bytes at ``storage_bytes_s``; a restore
    ``restore_s`` plus the same bytes read back (0 bytes/s: the bytes cost nothing).

    Attributes:
        checkpoint_s: fixed time of a checkpoint, seconds.
        restore_s: fixed time of a restore, seconds.
        storage_bytes_s: the storage's rate for the model's parameters, bytes per second (0: free).
    """

    checkpoint_s: float = 0.0
    restore_s: float = 0.0
    storage_bytes_s: float = 0.0

    def transfer_s(self, job: ExperimentJob) -> float:
        """The job's model (its fp32 parameters) at the storage's rate, seconds."""
        if not self.storage_bytes_s > 0:
            return 0.0
        return job_model(job.model, job.compute_ms).param_bytes / self.storage_bytes_s

    def pause_s(self, job: ExperimentJob) -> float:
        """How long the job holds its GPUs after it is preempted: its checkpoint written."""
        return self.checkpoint_s + self.transfer_s(job)

    def resume_s(self, job: ExperimentJob) -> float:
        """How long the job holds its GPUs before it trains again: its checkpoint read."""
        return self.restore_s + self.transfer_s(job)

    @property
    def free(self) -> bool:
        """Whether a preemption costs nothing at all."""
        return not (self.checkpoint_s > 0 or self.restore_s > 0 or self.storage_bytes_s > 0)


def preemption_cost(section) -> CheckpointCost | None:
    """The cost a config's ``preemption`` section (:class:`experiment.config.schema.PreemptionConfig`)
    gives a preemption; None where it costs nothing."""
    cost = CheckpointCost(section.checkpoint_s, section.restore_s, section.storage_gbytes_s * 1e9)
    return None if cost.free else cost
