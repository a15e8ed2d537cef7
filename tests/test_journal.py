"""The run journal (``emulator.journal``): written before each change, undone newest first, each step
isolated and shielded from signals, and ``clean`` limited to records of dead runs.

These tests use real processes and directories in a private records directory; the network
kinds (bridges, interfaces, mounts, sysctls) are exercised by the emulation tests
(``test_faults.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from common.errors import EmulationError
from emulator import journal
from emulator.journal import Change, RunJournal, process_change, process_start_time


def sleeper(*, ignore_term: bool = False) -> subprocess.Popen:
    """A process in its own session that lives until stopped (optionally deaf to SIGTERM and SIGHUP)."""
    code = "import signal, time\n"
    if ignore_term:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
    code += "print('ready', flush=True)\ntime.sleep(600)\n"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def alive(p: subprocess.Popen) -> bool:
    return p.poll() is None


def test_each_change_is_on_disk_before_it_is_made_and_gone_when_undone(tmp_path):
    """add() writes the file (atomically, no .tmp left) with every change so far; the last undo removes it."""
    rec = RunJournal("test", str(tmp_path))
    assert not os.path.exists(rec.path)
    d = tmp_path / "made-by-run"
    rec.add(Change("dir", str(d), what="scratch"))
    on_disk = json.loads(open(rec.path).read())
    assert on_disk["pid"] == os.getpid() and on_disk["start_time"] == process_start_time(os.getpid())
    assert on_disk["changes"] == [{"kind": "dir", "name": str(d), "original": None, "start_time": None,
                                   "what": "scratch", "via": []}]
    assert os.listdir(tmp_path) == [os.path.basename(rec.path)]
    d.mkdir()
    assert rec.unwind() == []
    assert not d.exists() and not os.path.exists(rec.path)


def test_unwind_stops_recorded_processes_and_nothing_else(tmp_path):
    """Recorded processes are stopped (one deaf to SIGTERM by SIGKILL); an unrecorded one and a PID whose
    start time differs from the record (a reused PID) are left running."""
    rec = RunJournal("test", str(tmp_path))
    ours, deaf, other, reused = sleeper(), sleeper(ignore_term=True), sleeper(), sleeper()
    try:
        rec.add(process_change(ours.pid, "ours"))
        rec.add(process_change(deaf.pid, "deaf"))
        rec.add(Change("process", str(reused.pid), start_time=process_start_time(reused.pid) + 1, what="reused"))
        assert rec.unwind() == []
        assert not alive(ours) and not alive(deaf)
        assert alive(other) and alive(reused)
        assert not os.path.exists(rec.path)
    finally:
        for p in (ours, deaf, other, reused):
            p.kill()
            p.wait()


def test_a_failing_step_does_not_stop_the_others_and_stays_recorded(tmp_path):
    """A directory that cannot be removed (not empty) is reported; the steps before and after it are still
    undone, and the record keeps only the failed change, for `clean`."""
    rec = RunJournal("test", str(tmp_path / "records"))
    first, stuck, last = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for d in (first, stuck, last):
        rec.add(Change("dir", str(d)))
        d.mkdir()
    (stuck / "file").write_text("x")
    failures = rec.unwind()
    assert len(failures) == 1 and failures[0].startswith(f"dir {stuck}:")
    assert not first.exists() and not last.exists() and stuck.exists()
    assert [c["name"] for c in json.loads(open(rec.path).read())["changes"]] == [str(stuck)]


def test_undoing_a_change_never_made_is_harmless(tmp_path):
    """Recording comes first, so a crash can leave a change recorded but not made: undo skips it."""
    rec = RunJournal("test", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    rec.add(Change("dir", str(tmp_path / "never-made")))
    rec.add(Change("process", str(gone.pid), start_time=12345, what="finished"))
    assert rec.unwind() == []


def test_signals_during_unwind_are_counted_not_obeyed(tmp_path):
    """SIGINT and SIGTERM arriving while the record unwinds (a process deaf to SIGTERM keeps it busy for the
    grace period) do not interrupt it: every step completes, each signal is reported, and the previous
    handlers are back afterwards."""
    rec = RunJournal("test", str(tmp_path))
    deaf = sleeper(ignore_term=True)
    rec.add(process_change(deaf.pid, "deaf"))
    notes: list[str] = []
    timers = [threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)),
              threading.Timer(0.6, os.kill, (os.getpid(), signal.SIGTERM))]
    before = signal.getsignal(signal.SIGINT)
    for t in timers:
        t.start()
    try:
        assert rec.unwind(progress=notes.append) == []
    finally:
        for t in timers:
            t.join()
        deaf.kill()
        deaf.wait()
    assert len(notes) == 2 and all("interrupted again" in n for n in notes)
    assert signal.getsignal(signal.SIGINT) is before


def test_clean_undoes_dead_runs_and_leaves_live_ones(tmp_path):
    """A record whose owner died is unwound by clean(); a record owned by a live process (this one) is not."""
    dead_owner = subprocess.run([sys.executable, "-c",
                                 "import os; from emulator.journal import process_start_time as s; "
                                 "print(os.getpid(), s(os.getpid()))"],
                                capture_output=True, text=True, check=True,
                                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pid, start = map(int, dead_owner.stdout.split())
    victim = sleeper()
    left_dir = tmp_path / "left-by-dead-run"
    left_dir.mkdir()
    with open(tmp_path / f"{pid}-{start}.json", "w") as f:
        json.dump({"pid": pid, "start_time": start, "purpose": "killed run",
                   "changes": [{"kind": "dir", "name": str(left_dir)},
                               {"kind": "process", "name": str(victim.pid),
                                "start_time": process_start_time(victim.pid), "what": "worker"}]}, f)
    live = RunJournal("live run", str(tmp_path))
    live_dir = tmp_path / "live-dir"
    live.add(Change("dir", str(live_dir)))
    live_dir.mkdir()
    said: list[str] = []
    try:
        assert journal.clean(str(tmp_path), say=said.append) == []
        assert not alive(victim) and not left_dir.exists()
        assert live_dir.exists() and os.path.exists(live.path)
        assert any("undid 2 of 2" in s for s in said) and any("still running: left alone" in s for s in said)
    finally:
        victim.kill()
        victim.wait()
        live.unwind()


def test_a_run_refuses_to_start_over_leftovers_or_beside_a_live_run(tmp_path):
    """require_no_leftovers names `clean` for a dead run's record and the other run's PID for a live one."""
    live = RunJournal("other run", str(tmp_path))
    live.add(Change("dir", str(tmp_path / "x")))
    with pytest.raises(EmulationError, match=f"another run \\(pid {os.getpid()}, other run\\)"):
        journal.require_no_leftovers(str(tmp_path))
    live.unwind()
    journal.require_no_leftovers(str(tmp_path))  # nothing left: no error
    with open(tmp_path / "1-1.json", "w") as f:
        json.dump({"pid": 1, "start_time": 1, "purpose": "killed run",
                   "changes": [{"kind": "bridge", "name": "e1"}, {"kind": "sysctl", "name": "k", "original": "v"}]},
                  f)
    with pytest.raises(EmulationError, match=r"left 2 change\(s\) .*\(bridge, sysctl\); undo them with "
                                             r"`sudo python3 run_testbed.py clean`"):
        journal.require_no_leftovers(str(tmp_path))


def test_a_malformed_record_is_one_clear_error(tmp_path):
    """A record file that is not JSON (or lacks fields) is named, not a traceback."""
    (tmp_path / "9-9.json").write_text("{not json")
    with pytest.raises(EmulationError, match="9-9.json is not a readable run record"):
        journal.require_no_leftovers(str(tmp_path))


def test_unknown_kind_is_rejected():
    """A change of a kind the journal cannot undo is refused, listing the kinds."""
    with pytest.raises(ValueError, match="unknown change kind 'file'; valid: process, bridge"):
        Change("file", "/tmp/x")


def test_the_journal_imports_no_owner_of_a_kind_and_finds_each_on_demand():
    """Importing the journal loads none of the modules that undo its kinds (:data:`journal.UNDO`), so
    they import the journal and not the other way round; asked to undo a kind, the journal imports its
    owner then, as ``clean`` does for a dead run's record."""
    owners = sorted({target.partition(":")[0] for target in journal.UNDO.values()} - {"emulator.journal"})
    code = ("import json, sys\nimport emulator.journal as j\nbefore = sorted(sys.modules)\n"
            "handlers = {k: callable(j.undo_handler(k)) for k in j.UNDO}\n"
            "print(json.dumps([before, sorted(sys.modules), handlers]))\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    before, after, handlers = json.loads(cp.stdout)
    assert owners and [m for m in owners if m in before] == [] and not any(m.startswith("vm") for m in before)
    assert [m for m in owners if m not in after] == []
    assert handlers == dict.fromkeys(journal.UNDO, True)


def test_every_kind_has_a_handler_named_after_what_it_undoes():
    """Each registered kind resolves to a function of its owner module; an unknown kind is refused with the
    registered ones listed."""
    for kind, target in journal.UNDO.items():
        module, _, name = target.partition(":")
        handler = journal.undo_handler(kind)
        assert callable(handler) and (handler.__module__, handler.__name__) == (module, name)
    assert journal.KINDS == tuple(journal.UNDO)
    with pytest.raises(ValueError, match="unknown change kind 'file'; valid: process, bridge, link"):
        journal.undo_handler("file")


def test_a_change_on_another_server_keeps_its_way_there_and_is_undone_through_it(tmp_path):
    """A change made on another server of a cluster is written with the command prefix that
    reaches that server (``ssh ... host``), read back with it, and undone through it: here the
    prefix is a local shell, which runs the command the way ssh's remote shell does."""
    rec = RunJournal("test", str(tmp_path))
    via = ("sh", "-c")
    gone = rec.add(Change("link", "dtnetnosuch0", what="tunnel end", via=via))
    back = RunJournal.load(rec.path)
    assert back.changes == [gone] and back.changes[0].via == via
    assert gone.describe() == "link dtnetnosuch0 (tunnel end) on -c"
    broken = rec.add(Change("link", "dtnetnosuch1", via=("false",)))
    failures = rec.unwind()
    assert len(failures) == 1 and failures[0].startswith("link dtnetnosuch1") and "exited 1" in failures[0], failures
    assert rec.changes == [broken]


def test_only_bridges_links_and_sysctls_can_be_on_another_server():
    """A process, mount or directory is always this machine's: a record naming another server for
    one is refused."""
    with pytest.raises(ValueError, match="a process change cannot be on another server"):
        Change("process", "1", via=("ssh", "host"))


def test_process_start_time_is_stable_and_none_for_the_gone():
    """A process's start time reads the same twice and None once the process is gone."""
    p = sleeper()
    try:
        t = process_start_time(p.pid)
        time.sleep(0.05)
        assert t is not None and process_start_time(p.pid) == t
    finally:
        p.kill()
        p.wait()
    assert process_start_time(p.pid) is None


@pytest.mark.emulation  # it adds a network namespace and a veth to the host
def test_a_recorded_network_namespace_goes_with_its_interfaces(tmp_path):
    """A ``netns`` change (an INA aggregator's rate measurement makes one, :func:`ina.rig.packet_rate`):
    undone, the namespace is deleted and with it a veth whose other end is outside; one never made
    is skipped."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    name, outside = f"jtest{os.getpid() % 100000}", f"jt{os.getpid() % 100000}a"
    rec = RunJournal("test", str(tmp_path))
    rec.add(Change("netns", name))
    rec.add(Change("netns", f"{name}x"))  # recorded, never made
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "link", "add", outside, "type", "veth", "peer", "name", f"{outside}b", "netns", name],
                   check=True)
    assert os.path.exists(f"/run/netns/{name}") and os.path.exists(f"/sys/class/net/{outside}")
    assert rec.unwind() == []
    assert not os.path.exists(f"/run/netns/{name}") and not os.path.exists(f"/sys/class/net/{outside}")
