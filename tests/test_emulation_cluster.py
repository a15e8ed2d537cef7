"""Emulation tests of cluster mode (:mod:`emulator.cluster`) in its single-machine form: the second
"server" is the loopback address 127.0.0.2, served by an ``sshd`` of the test's own (its own
keys, configuration and port), so every mechanism is the multi-machine one (node shells,
commands and workers over SSH, links between the servers as Mininet's SSH tunnels, the
controller's port forwarded); only the kernel is shared.

Skipped, naming why, where no ``sshd`` is installed (the set-up installs openssh-server).
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import time

import pytest
from conftest import (
    CLI,
    MAX_STRUCTURE_RATIO,
    ROOT,
    SCALE,
    leftovers,
    needs,
    read_until,
    ring_bound_ratio,
    wait_until,
)

pytestmark = pytest.mark.emulation

SERVER = "127.0.0.2"
UNREACHABLE = "127.0.0.3"  # nothing listens there


def tiny(servers: list[str], ssh_config: str) -> str:
    """Two racks of one machine, one 2-worker ring, one policy, no plots; the second rack on ``servers``."""
    return ("name: cluster\ntopology: {kind: leaf_spine, n_leaf: 2, n_spine: 1, hosts_per_leaf: 1}\n"
            "jobs: [{name: j, model: resnet50, workers: 2, collective: ring}]\n"
            "background: {h1: 3, h2: 3}\npolicies: [consolidate]\niterations: 6\nwarmup_iterations: 1\nplots: false\n"
            f"ecn: {{marking: optional}}\ncluster: {{servers: [{', '.join(servers)}], ssh_config: {ssh_config}}}\n")


def _ours(marker: str) -> list[str]:
    """``pid: command`` of every process whose command line holds ``marker`` (our SSH config)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and pid != str(os.getpid()):
            out.append(f"{pid}: {cmd[:100]}")
    return out


def _taps() -> list[str]:
    return sorted(i for i in os.listdir("/sys/class/net") if re.fullmatch(r"tap\d+", i))


def _left(ssh_config: str) -> list[str]:
    """What a run left on either server: bridges, interfaces, taps, namespaces, processes (its SSH
    ones among them) and records, once the other server's shells have ended: they end as their
    sessions close, just after the run's own stop (at most 10 s)."""
    from emulator.journal import records

    def now():
        return leftovers() + _taps() + _ours(ssh_config) + records()

    left = [now()]

    def gone():
        left[0] = now()
        return not left[0]

    try:
        wait_until(gone, 10, "the run's objects on both servers to go", poll_s=0.2)
    except AssertionError:
        pass  # the caller's assertion shows what stayed
    return left[0]


@pytest.fixture(scope="module")
def server(emulation_ok):
    """An sshd on 127.0.0.2 that lets root in with a key of its own (:mod:`emulator.loopback_server`);
    yields the ssh_config that reaches it (and 127.0.0.3, where nothing listens)."""
    from common.errors import EmulationError
    from emulator.loopback_server import SSHD, LoopbackServer

    needs(None if os.path.exists(SSHD) else f"{SSHD} is not installed (openssh-server)", "cluster mode")
    srv = LoopbackServer(SERVER, also=(UNREACHABLE,))
    try:
        srv.start()
    except EmulationError as e:
        srv.stop()
        pytest.fail(str(e))
    try:
        yield srv.ssh_config
    finally:
        srv.stop()


def test_a_job_across_two_servers_runs_within_its_bound_and_its_workers_end_with_their_sessions(server, tmp_path):
    """A 2-rack leaf-spine spread over this machine and the loopback server (the second rack's leaf
    and machine there, its uplink a tap of an SSH tunnel; the first's here, no tap): TCP runs from
    and to each server; the second rack's nodes run through SSH; a 2-machine ring's communication
    time per iteration is at least the fidelity monitor's lower limit of its contention-free bound
    and under 1.5 times it (traffic crossing the tunnel twice, or directions taking turns, would take
    2x); a long command started on the other server ends there when its local ``ssh`` client is
    stopped (it does not outlive its session); and nothing of the network is left (no bridge,
    interface, tap, namespace or SSH process). That the ring moves the same bytes on every link as
    on one machine is bench/cluster.py's invariant (tests/test_emulation_bench.py), as is how the
    two times compare."""
    from emulator.cluster import ClusterOptions
    from emulator.net import EmulatedNetwork, NetOptions
    from emulator.one_job import OneJob, run_job
    from measure.fidelity import MIN_JOB_RATIO
    from topo import leaf_spine

    buckets = (1_000_000, 250_000)
    opts = NetOptions(scale=SCALE, cluster=ClusterOptions(("localhost", SERVER), ssh_config=server))
    with EmulatedNetwork(leaf_spine(2, 1, 1), str(tmp_path), opts) as net:
        failures = net.tcp_check(["h1", "h2"], ["h1", "h2"])  # from and to each server
        assert not failures, f"TCP sanity check failed: {failures}; evidence in {tmp_path}"
        placed = {"h2 shell": " ".join(net.hosts["h2"].shell.args),
                  "l1 uplink is a tap": os.path.exists("/sys/class/net/l1-eth2/tun_flags"),
                  "l2 uplink is a tap": os.path.exists("/sys/class/net/l2-eth2/tun_flags"),
                  "servers": dict(net.server_of)}
        run = run_job(net, str(tmp_path), OneJob("cluster", ("h1", "h2"), "ring", buckets, iterations=3,
                                                 warmup_iterations=1, compute_s=0.01, timeout_s=300))
        comm = ring_bound_ratio(net, ("h1", "h2"), buckets, run.comm_mean_s())

        marker = f"sleep {int(time.time() % 1000) + 1000}"
        p = net.popen("h2", marker.split(), env={"PATH": os.environ["PATH"]}, cwd="/")
        wait_until(lambda: [x for x in _ours(marker) if "remote_run" not in x and "ssh" not in x], 10,
                   f"{marker!r} started on the server")
        p.kill()
        p.wait()
        wait_until(lambda: not _ours(marker), 10, f"{marker!r} on the server to end with its ssh client")
        net.forget(p)
        error = net.controller.logged_exception()
    assert error is None, f"controller logged an exception: {error}"
    evidence = f"comm per iteration over its bound {comm:.3f}; placement {placed}"
    assert placed["servers"]["h2"] == SERVER and placed["servers"]["h1"] == "localhost", evidence
    assert f"root@{SERVER}" in placed["h2 shell"] and "ssh" in placed["h2 shell"], evidence
    assert placed["l2 uplink is a tap"] and not placed["l1 uplink is a tap"], evidence
    assert MIN_JOB_RATIO <= comm < MAX_STRUCTURE_RATIO, evidence
    assert _left(server) == []


def test_an_unreachable_server_is_one_line_and_nothing_is_started(server, tmp_path):
    """A cluster naming a server where nothing answers: one EmulationError naming it, before
    anything starts on the servers that answered (no bridge, interface, process or record left)."""
    from common.errors import EmulationError
    from emulator.cluster import ClusterOptions
    from emulator.net import EmulatedNetwork, NetOptions
    from topo import leaf_spine

    opts = NetOptions(scale=SCALE, cluster=ClusterOptions(("localhost", SERVER, UNREACHABLE), ssh_config=server,
                                                          connect_timeout_s=3))
    with pytest.raises(EmulationError) as err:
        with EmulatedNetwork(leaf_spine(3, 1, 1), str(tmp_path), opts):
            pass
    msg = str(err.value)
    assert UNREACHABLE in msg and "unreachable" in msg and "\n" not in msg, msg
    assert _left(server) == []


def test_an_experiment_spread_over_two_servers_runs_and_says_so(server, tmp_path):
    """``run_testbed.py -c`` with a cluster section: exit 0; capabilities.json names both servers,
    the nodes on each and the tunnel; the job ran on both racks, was checked against its bound and
    trusted (or, where other work saturated the CPU, judged slow and the run not trusted); ECN says it
    was not measured (cluster mode); nothing is left on either server."""
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(tiny([SERVER], server))
    cp = subprocess.run([*CLI, "-c", str(cfg), "--results", str(tmp_path / "res")], cwd=ROOT, capture_output=True,
                        text=True, timeout=600)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0 and "Traceback" not in out, out
    assert f"spread over 2 servers (localhost, {SERVER}; 1 links as SSH tunnels)" in out, out
    (run_dir,) = glob.glob(str(tmp_path / "res" / "*-cluster"))
    with open(os.path.join(run_dir, "capabilities.json")) as f:
        caps = json.load(f)
    assert caps["cluster"]["servers"] == ["localhost", SERVER] and caps["cluster"]["tunnels"] == [["l2", "s1"]]
    assert caps["cluster"]["nodes"][SERVER] == ["h2", "l2"] and caps["switch_ports"] == "system", caps
    assert caps["ecn_method"] == "none" and "cluster mode" in caps["ecn_why"], caps
    with open(os.path.join(run_dir, "summary.json")) as f:
        (row,) = json.load(f)["policies"]
    (job,) = row["jobs"].values()
    assert job["complete"] and job["bound_s"] > 0, (row, out)
    if row["cpu_saturated"]:  # a machine other work keeps busy: a slow job must then make the run distrust itself
        assert job["fidelity"] in ("ok", "slow") and row["trustworthy"] is (job["fidelity"] == "ok"), (row, out)
    else:
        assert job["fidelity"] == "ok" and row["trustworthy"] is True, (row, out)
    assert row["cross_machine_bytes"] > 0 and row["ecn_method"] == "none"
    assert _left(server) == []


def test_an_experiment_naming_an_unreachable_server_is_one_line(server, tmp_path):
    """A cluster section naming a server where nothing answers: exit 2 with one line naming it and
    nothing started on this machine or the server that answered."""
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(tiny([SERVER, UNREACHABLE], server).replace("n_leaf: 2", "n_leaf: 3"))
    cp = subprocess.run([*CLI, "-c", str(cfg), "--results", str(tmp_path / "res")], cwd=ROOT, capture_output=True,
                        text=True, timeout=300)
    assert cp.returncode == 2 and "Traceback" not in cp.stdout + cp.stderr, cp.stdout + cp.stderr
    last = cp.stderr.strip().splitlines()[-1]
    assert UNREACHABLE in last and "unreachable" in last, cp.stderr
    assert _left(server) == []


def test_kill_9_of_a_cluster_run_then_clean(server, tmp_path):
    """kill -9 of a cluster-mode runner while its wave runs: its SSH sessions, node shells, tunnels
    and the bridges and interfaces on both servers stay, recorded; ``clean`` undoes them (those on
    the other server through SSH) and the machine is as before: no bridge, interface, tap,
    namespace, SSH process or record."""
    from emulator.journal import records

    interfaces = sorted(os.listdir("/sys/class/net"))
    cfg = tmp_path / "long.yaml"
    cfg.write_text(tiny([SERVER], server).replace("iterations: 6", "iterations: 400"))
    proc = subprocess.Popen([*CLI, "-c", str(cfg), "--results", str(tmp_path / "res")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = read_until(proc, "ranks joined")
    proc.kill()
    proc.wait(timeout=30)
    assert any("ranks joined" in line for line in seen), "".join(seen)
    assert records() and _ours(server) and leftovers(), "a killed run leaves its changes, recorded"
    cp = subprocess.run([*CLI, "clean"], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert cp.returncode == 0 and "Traceback" not in cp.stdout + cp.stderr, cp.stdout + cp.stderr
    assert _left(server) == []
    assert sorted(os.listdir("/sys/class/net")) == interfaces
