"""The aggregators' online operations (add_jobs, remove_jobs, release_slots): the software switch's
control ops in process, its client against a real control socket, and bmv2's entry handles.

No raw sockets here: :class:`ina.softswitch.SoftSwitch` with no ports is driven by its control
messages, its engine fed packets directly.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from conftest import wait_until

from common import errors
from ina.aggregator import JobEntry, JobTraffic, Role, SlotState
from ina.p4.build import P4Error
from ina.p4.switch import added_handles
from ina.protocol import VALUES_PER_PACKET, data_packet, slot_of
from ina.softswitch import SoftAggregator, SoftSwitch

N_SLOTS = 64


def ask(sw: SoftSwitch, **msg) -> dict:
    """One control message through the switch's own line handling; its answer."""
    return sw._answer(json.dumps(msg).encode())


def pkt(job: int, seq: int, bit: int) -> bytes:
    """Worker ``bit``'s packet of ``(job, seq)``, slots hashed into :data:`N_SLOTS`."""
    return data_packet(job, seq, 1 << bit, [bit + 1] * VALUES_PER_PACKET, n_slots=N_SLOTS)


def seqs_in_distinct_slots(jobs: list[int]) -> dict[int, int]:
    """A seq per job, all in different slots (so no test packet falls back)."""
    used, out = set(), {}
    for job in jobs:
        seq = next(s for s in range(1000) if slot_of(job, s, N_SLOTS) not in used)
        used.add(slot_of(job, seq, N_SLOTS))
        out[job] = seq
    return out


@pytest.fixture
def switch() -> tuple[SoftSwitch, dict[int, int]]:
    """A switch with jobs 1 and 2 (roots of fan-in 2), one contribution of each held in a slot."""
    sw = SoftSwitch({})
    assert ask(sw, op="configure", n_slots=N_SLOTS, jobs=[[1, 2, "root", 0], [2, 2, "root", 0]]) == {"ok": True}
    seqs = seqs_in_distinct_slots([1, 2, 3])
    for job in (1, 2):
        assert sw.engine.process(pkt(job, seqs[job], 0))[0].reason == "absorbed"
    return sw, seqs


def test_add_jobs_installs_beside_the_others_and_keeps_their_slots_and_the_counters(switch):
    """add_jobs adds job 3; jobs 1 and 2 keep their entries and held slots, the counters stay, and
    job 3 then aggregates."""
    sw, seqs = switch
    slots, counters = sw.engine.occupied(), sw.counters()
    assert sorted(j for j, _, _ in slots.values()) == [1, 2]
    assert ask(sw, op="add_jobs", jobs=[[3, 2, "root", 0]]) == {"ok": True}
    assert sorted(sw.engine.jobs) == [1, 2, 3]
    assert sw.engine.occupied() == slots and sw.counters() == counters
    sw.engine.process(pkt(3, seqs[3], 0))
    assert sw.engine.process(pkt(3, seqs[3], 1))[0].reason == "aggregate"
    (out,) = sw.engine.process(pkt(1, seqs[1], 1))  # job 1's held slot still completes
    assert out.reason == "aggregate"


def test_add_jobs_replaces_an_installed_entry_and_keeps_its_slot(switch):
    """Adding job 1 again with fan-in 3 replaces its entry: its held slot stays and now needs three."""
    sw, seqs = switch
    assert ask(sw, op="add_jobs", jobs=[[1, 3, "root", 0]])["ok"]
    assert sw.engine.jobs[1] == JobEntry(3, Role.ROOT, 0)
    assert sw.engine.process(pkt(1, seqs[1], 1))[0].reason == "absorbed"
    assert sw.engine.process(pkt(1, seqs[1], 2))[0].reason == "aggregate"


def test_add_jobs_with_a_bad_entry_installs_none_and_says_why(switch):
    """One bad entry (fan-in 0) refuses the whole add: the good one beside it is not installed."""
    sw, _ = switch
    answer = ask(sw, op="add_jobs", jobs=[[3, 2, "root", 0], [4, 0, "root", 0]])
    assert not answer["ok"] and "fan_in=0" in answer["error"]
    assert sorted(sw.engine.jobs) == [1, 2]


def test_remove_jobs_keeps_the_slots_and_counters_and_ignores_unknown_ids(switch):
    """Removing job 1 (and unknown 99) leaves job 2's entry, every held slot and the counters; job 1's
    packets then pass to the PS unaggregated."""
    sw, seqs = switch
    slots, counters = sw.engine.occupied(), sw.counters()
    assert ask(sw, op="remove_jobs", job_ids=[1, 99]) == {"ok": True}
    assert sorted(sw.engine.jobs) == [2]
    assert sw.engine.occupied() == slots and sw.counters() == counters
    assert sw.engine.process(pkt(1, seqs[1], 1))[0].reason == "passed"
    assert sw.engine.process(pkt(2, seqs[2], 1))[0].reason == "aggregate"
    assert not ask(sw, op="remove_jobs", job_ids="1")["ok"]


def test_release_slots_frees_every_slot_and_keeps_the_table_and_counters(switch):
    """release_slots empties the slot pool (occupied() is empty), the table and counters stay; a
    freed slot is claimed afresh by the next packet."""
    sw, seqs = switch
    sw.engine.process(pkt(2, seqs[2], 1))  # job 2's root slot is COMPLETE now, held until a result
    assert SlotState.COMPLETE in {s for _, _, s in sw.engine.occupied().values()}
    counters = sw.counters()
    assert ask(sw, op="release_slots") == {"ok": True}
    assert sw.engine.occupied() == {}
    assert sorted(sw.engine.jobs) == [1, 2] and sw.counters() == counters
    assert sw.engine.process(pkt(1, seqs[1], 1))[0].reason == "absorbed"  # a new claim, not a completion
    assert sw.counters()["claims"] == counters["claims"] + 1


def test_reset_still_zeroes_the_counters_and_unknown_ops_list_the_valid_ones(switch):
    """reset keeps its meaning (slots free, counters 0, table kept); an unknown op names every valid op."""
    sw, _ = switch
    assert ask(sw, op="reset") == {"ok": True}
    assert sw.engine.occupied() == {} and sw.counters()["packets"] == 0 and sorted(sw.engine.jobs) == [1, 2]
    answer = ask(sw, op="frobnicate")
    assert not answer["ok"]
    for op in ("configure", "add_jobs", "remove_jobs", "release_slots", "reset", "counters", "job_traffic"):
        assert op in answer["error"]


def test_job_traffic_answers_per_job_packets_and_refuses_bad_ids(switch):
    """job_traffic gives each asked job's forwarded packets by direction (zero for jobs never seen);
    ids that are not a list of integers are refused, not raised; reset zeroes them."""
    sw, seqs = switch
    sw.engine.process(pkt(1, seqs[1], 1))  # completes job 1's slot: one aggregate to the PS
    assert ask(sw, op="job_traffic", job_ids=[1, 2, 9]) == {"ok": True, "jobs": [[1, 1, 0], [2, 0, 0], [9, 0, 0]]}
    for bad in ("1", [1.5], [True], None):
        answer = ask(sw, op="job_traffic", job_ids=bad)
        assert not answer["ok"] and "job_ids" in answer["error"]
    assert not ask(sw, op="job_traffic")["ok"]
    ask(sw, op="reset")
    assert ask(sw, op="job_traffic", job_ids=[1])["jobs"] == [[1, 0, 0]]


def _accepts(proc: subprocess.Popen, path: str) -> bool:
    """Whether a connection to the control socket ``path`` is accepted, ``proc`` still running."""
    assert proc.poll() is None, proc.stderr.read()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(path)
        except OSError:
            return False
    return True


def test_soft_aggregator_client_speaks_the_ops_to_a_real_control_socket(tmp_path):
    """SoftAggregator's add_jobs/remove_jobs/release_slots are accepted by a SoftSwitch process
    serving its control socket, counters untouched by them; a bad entry is refused as TestbedError."""
    path = str(tmp_path / "ctl.sock")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from ina.softswitch import SoftSwitch; "
                             "SoftSwitch({}).serve(sys.argv[1])", path],
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            stderr=subprocess.PIPE, text=True)
    try:
        client = SoftAggregator({}, path, str(tmp_path / "log"))
        wait_until(lambda: _accepts(proc, path), what=f"the switch listening on {path}")
        client.configure(N_SLOTS, {1: JobEntry(2, Role.ROOT)})
        client.add_jobs({2: JobEntry(2, Role.LEAF, 4), 1: JobEntry(3, Role.ROOT)})
        client.remove_jobs([2, 99])
        client.release_slots()
        assert set(client.counters().values()) == {0}
        assert client.job_traffic([2, 1, 2]) == {1: JobTraffic(), 2: JobTraffic()} and client.job_traffic([]) == {}
        with pytest.raises(errors.TestbedError, match="refused 'add_jobs'.*fan_in=33"):
            client.add_jobs({5: JobEntry(33, Role.ROOT)})
    finally:
        proc.terminate()
        assert proc.wait(10) == 0, proc.stderr.read()


CLI_SESSION = """Obtaining JSON from switch...
Done
Control utility for runtime P4 table manipulation
RuntimeCmd: Adding entry to exact match table ina_job
match key:           EXACT-00:07
action:              set_job
runtime data:        02   00   00
Entry has been added with handle 4
RuntimeCmd: Modifying entry 1 for table ina_job
RuntimeCmd: Adding entry to exact match table ina_job
match key:           EXACT-00:09
action:              set_job
runtime data:        03   01   05
Entry has been added with handle 12
RuntimeCmd: """


def test_bmv2_entry_handles_are_read_in_order_and_a_missing_one_is_an_error():
    """The handles simple_switch_CLI prints for table_add are read in order; fewer than the adds run
    is a P4Error quoting the session (the handles would be unknown)."""
    assert added_handles(CLI_SESSION, 2) == [4, 12]
    with pytest.raises(P4Error, match="printed 2 entry handles for 3 table_add"):
        added_handles(CLI_SESSION, 3)
