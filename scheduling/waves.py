"""``waves``: static experiments' gang scheduling: a batch starts only when the last one has ended.

When no active job is running, every waiting job is admitted in arrival order (ties: input
order), skipping those that do not fit in the GPUs left by count; the placer then places
what it can, and the jobs it places run together as one *wave*. While any job of the wave
runs, nothing else starts, so every wave's jobs start at one instant and share the network
only with each other: the setting in which policies' placements are compared side by side.
Never preempts. O(n log n).
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.base import Decision, JobStatus, Scheduler, admit_by_count, check_jobs, decide, sort_stable


class WaveScheduler(Scheduler):
    """Start the waiting jobs that fit only when nothing runs (see the module docstring)."""

    name = "waves"
    starts_in_batches = True

    def schedule(self, jobs: Sequence[JobStatus], total_gpus: int, now_s: float) -> Decision:
        """Keep the running wave; when none runs, admit the next one by count."""
        check_jobs(jobs, total_gpus)
        ordered = sort_stable(jobs, lambda j: j.arrival_s)
        busy = [j for j in ordered if j.running]
        return decide(ordered, busy if busy else admit_by_count(ordered, total_gpus))
