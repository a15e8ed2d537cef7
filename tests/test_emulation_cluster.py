"""Emulation tests of cluster mode (:mod:`testbed.cluster`) in its single-machine form: the second
"server" is the loopback address 127.0.0.2, served by an ``sshd`` of the test's own (its own
keys, configuration and port), so every mechanism is the multi-machine one (node shells,
commands and workers over SSH, links between the servers as Mininet's SSH tunnels, the
controller's port forwarded); only the kernel is shared.

Skipped, naming why, where no ``sshd`` is installed (the set-up installs openssh-server).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time

import pytest
from conftest import SCALE, leftovers

pytestmark = pytest.mark.emulation

SSHD = "/usr/sbin/sshd"
SERVER = "127.0.0.2"
UNREACHABLE = "127.0.0.3"  # nothing listens there


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


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


@pytest.fixture(scope="module")
def server(emulation_ok, tmp_path_factory):
    """An sshd on 127.0.0.2 that lets root in with a key of the test's own; yields the ssh_config
    that reaches it (and 127.0.0.3, where nothing listens)."""
    if not os.path.exists(SSHD):
        pytest.skip(f"cluster mode: {SSHD} is not installed (openssh-server; the set-up installs it)")
    d = tmp_path_factory.mktemp("sshd")
    for key in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True)
    shutil.copy(d / "client.pub", d / "authorized_keys")
    port = _free_port(SERVER)
    (d / "sshd_config").write_text(
        f"ListenAddress {SERVER}:{port}\nHostKey {d}/host\nPidFile none\nAuthorizedKeysFile {d}/authorized_keys\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\nPermitTunnel ethernet\nAllowTcpForwarding yes\nMaxSessions 100\n"
        "MaxStartups 100\n")
    config = d / "ssh_config"
    config.write_text(
        f"Host {SERVER} {UNREACHABLE}\n  Port {port}\n  IdentityFile {d}/client\n  IdentitiesOnly yes\n"
        f"  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
    made_run_dir = not os.path.isdir("/run/sshd")  # sshd's privilege separation directory
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    sshd = subprocess.Popen([SSHD, "-D", "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log")])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            cp = subprocess.run(["ssh", "-F", str(config), "-o", "BatchMode=yes", f"root@{SERVER}", "true"],
                                capture_output=True, text=True, timeout=10)
            if cp.returncode == 0:
                break
            time.sleep(0.2)
        assert cp.returncode == 0, f"test sshd did not answer: {cp.stderr}; {(d / 'sshd.log').read_text()}"
        yield str(config)
    finally:
        sshd.terminate()
        sshd.wait(timeout=10)
        if made_run_dir:
            shutil.rmtree("/run/sshd", ignore_errors=True)


def test_a_job_across_two_servers_moves_what_it_moves_on_one(server, tmp_path):
    """A 2-rack leaf-spine on one machine, then spread over this machine and the loopback server
    (the second rack's leaf and machine there, its uplink a tunnel): the second rack's nodes ran
    through SSH, the same 2-machine ring's communication time per iteration is the one-machine
    one's within the fidelity monitor's band (0.95-1.10), the bytes on every link within 1%, and
    nothing of either network is left (no bridge, interface, tap, namespace or SSH process)."""
    from testbed.cluster import ClusterOptions
    from testbed.fidelity import MAX_JOB_RATIO, MIN_JOB_RATIO
    from testbed.net import EmulatedNetwork, NetOptions
    from testbed.replay import run_job
    from topo import leaf_spine

    buckets = (1_000_000, 250_000)
    comm, moved, placed = {}, {}, {}
    for kind in ("one", "cluster"):
        cluster = ClusterOptions(("localhost", SERVER), ssh_config=server) if kind == "cluster" else None
        out = tmp_path / kind
        with EmulatedNetwork(leaf_spine(2, 1, 1), str(out), NetOptions(scale=SCALE, cluster=cluster)) as net:
            failures = net.tcp_check(["h1"], ["h2"])
            assert not failures, f"TCP sanity check failed: {failures}; evidence in {out}"
            placed[kind] = {"h2 shell": " ".join(net.hosts["h2"].shell.args),
                            "l2 uplink is a tap": os.path.exists("/sys/class/net/l2-eth2/tun_flags"),
                            "servers": dict(net.server_of)}
            before = net.switch_counters()
            run = run_job(net, str(out), kind, ["h1", "h2"], "ring", buckets, iterations=4, warmup_iterations=1,
                          compute_s=0.01, timeout_s=300)
            time.sleep(0.3)
            moved[kind] = net.link_bytes(before, net.switch_counters())
            comm[kind] = run.comm_mean_s()
            error = net.controller.logged_exception()
        assert error is None, f"controller logged an exception: {error}"
    evidence = f"comm per iteration {comm}; link bytes {moved}; placement {placed}"
    assert placed["cluster"]["servers"]["h2"] == SERVER and placed["cluster"]["servers"]["h1"] == "localhost"
    assert f"root@{SERVER}" in placed["cluster"]["h2 shell"] and "ssh" in placed["cluster"]["h2 shell"], evidence
    assert placed["cluster"]["l2 uplink is a tap"] and not placed["one"]["l2 uplink is a tap"], evidence
    assert MIN_JOB_RATIO <= comm["cluster"] / comm["one"] <= MAX_JOB_RATIO, evidence
    for link, b in moved["one"].items():
        if b > 10_000:
            assert abs(moved["cluster"][link] - b) <= 0.01 * b, (link, evidence)
    assert not leftovers() and not _taps() and not _ours(server), (leftovers(), _taps(), _ours(server))


def test_a_worker_on_the_other_server_ends_with_its_session(server, tmp_path):
    """A long command started on the loopback server's machine: stopping its local ``ssh`` client
    ends it there too (it does not outlive its session)."""
    from testbed.cluster import ClusterOptions
    from testbed.net import EmulatedNetwork, NetOptions
    from topo import leaf_spine

    opts = NetOptions(scale=SCALE, cluster=ClusterOptions(("localhost", SERVER), ssh_config=server))
    with EmulatedNetwork(leaf_spine(2, 1, 1), str(tmp_path), opts) as net:
        marker = f"sleep {int(time.time() % 1000) + 1000}"
        p = net.popen("h2", marker.split(), env={"PATH": os.environ["PATH"]}, cwd="/")
        deadline = time.monotonic() + 10
        while not [x for x in _ours(marker) if "remote_run" not in x and "ssh" not in x]:
            assert time.monotonic() < deadline, "the command never started on the server"
            time.sleep(0.1)
        p.kill()
        p.wait()
        deadline = time.monotonic() + 10
        while _ours(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _ours(marker) == [], _ours(marker)
        net.forget(p)
    assert not leftovers() and not _taps() and not _ours(server)


def test_an_unreachable_server_is_one_line_and_nothing_is_started(server, tmp_path):
    """A cluster naming a server where nothing answers: one EmulationError naming it, before
    anything starts on the servers that answered (no bridge, interface, process or record left)."""
    from common.errors import EmulationError
    from testbed.cluster import ClusterOptions
    from testbed.net import EmulatedNetwork, NetOptions
    from testbed.record import records
    from topo import leaf_spine

    opts = NetOptions(scale=SCALE, cluster=ClusterOptions(("localhost", SERVER, UNREACHABLE), ssh_config=server,
                                                          connect_timeout_s=3))
    with pytest.raises(EmulationError) as err:
        with EmulatedNetwork(leaf_spine(3, 1, 1), str(tmp_path), opts):
            pass
    msg = str(err.value)
    assert UNREACHABLE in msg and "unreachable" in msg and "\n" not in msg, msg
    assert not leftovers() and not _taps() and not _ours(server) and records() == []
