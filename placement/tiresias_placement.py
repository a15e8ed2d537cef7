"""Tiresias' profile-based placement as Titan's evaluation characterises it ("Tiresias-F").

Gu et al., NSDI 2019, §3.3, as a baseline of Titan (``docs/resolutions.md`` Titan §3.3 and Tiresias
§4). A job whose model's tensor sizes are skewed (``skew > pack_limit``, [R]: Tiresias ⚠ A1, Titan
A24; :data:`TENSOR_SKEW`, :data:`TRACE_MODEL_SKEW`, else the :mod:`jobs.models` profile) is
consolidated on the fewest machines, waiting if it cannot be (``strict``, ⚠ A3); the others are
spread to balance NIC load [R]. An unknown model is a :class:`PlacementError`.

The skew, both rules, the NIC-load approximation and queueing: ``docs/algorithms.md`` (Tiresias'
placement). Cost: O(M log M + G) per job for M machines and G GPUs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from common.errors import PlacementError, unknown_name
from jobs.models import MODELS
from placement.base import (
    BACKGROUND_JOB,
    ClusterView,
    GpuSlot,
    JobRequest,
    Placement,
    PlacementPolicy,
    Tentative,
    jobs_by_name,
)
from placement.consolidate import whole_idle_plan

TENSOR_SKEW: dict[str, float] = {
    "vgg19": 0.717,
    "vgg16": 0.744,
    "vgg11": 0.774,
    "alexnet": 0.611,
    "resnet152": 0.060,
    "resnet101": 0.075,
    "resnet50": 0.112,
    "inception4": 0.044,
    "inception3": 0.138,
}
"""Largest tensor / total over the tensors >= 1 MB of Tiresias' simulator lists (``docs/resolutions.md`` Titan §3.3)."""

TRACE_MODEL_SKEW: dict[str, float] = {
    # Tiresias' Table 6 (NSDI'19 §3.3): largest tensor 3.9 MB / 26.7 MB. Its simulator has no
    # tensor list for GoogLeNet ([R] simulator/models.py get_model falls back to inception3).
    "googlenet": 0.146,
    # ElasticFlow's executor (pkusys/ElasticFlow elastic-training-executor): bert/bert_ddp.py
    # trains BertForSequenceClassification on bert-base-uncased (word embeddings 30522 x 768
    # of 109,483,778 parameters); GPT2/gpt2_ddp.py GPT2ForSequenceClassification on "gpt2"
    # (token embeddings 50257 x 768 of 124,441,344); deepspeech2/deepspeech2_ddp.py its
    # SpeechRecognitionModel(3 CNN, 5 BiGRU layers, rnn_dim 512) (a second-layer GRU input
    # weight 1536 x 1024 of 23,705,373).
    "bert": 0.214,
    "gpt2": 0.310,
    "deepspeech2": 0.066,
}
"""Largest tensor / total over all tensors of the shipped traces' models missing from :data:`TENSOR_SKEW`.

``tests/test_tiresias.py`` recomputes each value from the architecture.
"""

DEFAULT_PACK_LIMIT = 0.5


def tensor_skew(model: str) -> float:
    """Skew of ``model``: :data:`TENSOR_SKEW`, :data:`TRACE_MODEL_SKEW`, else largest / total
    over its ``jobs.models`` tensors.

    Raises:
        PlacementError: a model in none of them (the message lists the valid names).
    """
    for table in (TENSOR_SKEW, TRACE_MODEL_SKEW):
        if model in table:
            return table[model]
    profile = MODELS.get(model)
    if profile is None or not profile.tensor_bytes:
        valid = set(TENSOR_SKEW) | set(TRACE_MODEL_SKEW) | {k for k, p in MODELS.items() if p.tensor_bytes}
        raise PlacementError(unknown_name("model for Tiresias placement", model, valid))
    return max(profile.tensor_bytes) / sum(profile.tensor_bytes)


class TiresiasPolicy(PlacementPolicy):
    """Consolidate skewed models, spread the rest by NIC load (see ``docs/algorithms.md``).

    Args:
        seed: unused (the policy is deterministic); kept for the common interface.
        pack_limit: PACKLIMIT, the skew above which a job is consolidated.
        strict: a sensitive job that cannot be consolidated waits (else it takes the fewest
            machines available now).
        strict_order: stop at the first pending job that cannot be placed.
    """

    name = "tiresias"

    def __init__(self, seed: int = 0, pack_limit: float = DEFAULT_PACK_LIMIT, strict: bool = True,
                 strict_order: bool = False):
        super().__init__(seed)
        self.pack_limit = pack_limit
        self.strict = strict
        self.strict_order = strict_order

    def sensitive(self, model: str) -> bool:
        """True when ``model``'s skew exceeds PACKLIMIT (the job is consolidated)."""
        return tensor_skew(model) > self.pack_limit

    def place(self, pending: Sequence[JobRequest], view: ClusterView) -> list[Placement]:
        """Place pending jobs in order; sensitive ones consolidated, others spread; misfits wait."""
        jobs_by_name(pending)
        sensitive = {j.name: self.sensitive(j.model) for j in pending}     # unknown models fail up front
        tentative = Tentative(view)
        load = _nic_load(view)
        out = []
        for job in pending:
            plan = None
            if job.workers <= tentative.total_free:
                if sensitive[job.name]:
                    plan = self._consolidate(job.workers, view, tentative)
                else:
                    plan = _spread(job.workers, view, tentative, load)
            if plan is None:
                if self.strict_order:
                    break
                continue
            slots: list[GpuSlot] = []
            for machine, n in plan:
                slots += tentative.take(machine, n)
            if len(plan) > 1:
                for machine, n in plan:
                    load[machine] += n
            out.append(Placement(job.name, tuple(slots)))
        return out

    def _consolidate(self, workers: int, view: ClusterView,
                     tentative: Tentative) -> list[tuple[str, int]] | None:
        """Fewest machines: one best-fit machine, else whole idle machines plus a best fit for the rest."""
        machines = [m.name for m in view.machines]
        single = tentative.best_fit(machines, workers)
        if single is not None:
            return [(single, workers)]
        plan = whole_idle_plan(workers, view, tentative)
        if plan is not None:
            return plan
        if self.strict:
            return None
        plan, r = [], workers
        for m in sorted(machines, key=lambda n: -tentative.n_free(n)):
            if r == 0:
                break
            t = min(tentative.n_free(m), r)
            if t:
                plan.append((m, t))
                r -= t
        return plan


def _nic_load(view: ClusterView) -> Counter:
    """GPUs per machine held by jobs spanning several machines (the proxy for NIC load)."""
    spans: dict[str, set[str]] = {}
    per_machine: dict[tuple[str, str], int] = Counter()
    for m in view.machines:
        for gpu in range(m.gpus):
            owner = view.owner(GpuSlot(m.name, gpu))
            if owner is not None and owner != BACKGROUND_JOB:
                spans.setdefault(owner, set()).add(m.name)
                per_machine[(owner, m.name)] += 1
    load: Counter = Counter({m.name: 0 for m in view.machines})
    for (owner, machine), n in per_machine.items():
        if len(spans[owner]) > 1:
            load[machine] += n
    return load


def _spread(workers: int, view: ClusterView, tentative: Tentative, load: Counter) -> list[tuple[str, int]]:
    """Machines by (NIC load, most free, machine order), ``min(free, r)`` GPUs each until the job fits."""
    order = [m.name for m in view.machines if tentative.n_free(m.name) > 0]
    order.sort(key=lambda m: (load[m], -tentative.n_free(m)))
    plan, r = [], workers
    for m in order:
        if r == 0:
            break
        t = min(tentative.n_free(m), r)
        plan.append((m, t))
        r -= t
    return plan
