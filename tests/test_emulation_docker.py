"""Emulation tests of workers in Docker containers (:mod:`emulator.containers`) of the worker image
made here of this machine's packages (:mod:`emulator.worker_image`).

Skipped, naming why, where Docker cannot run (`make setup DOCKER=1` installs and starts it; the
test command's set-up does).
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from conftest import (
    CLI,
    MAX_STRUCTURE_RATIO,
    ROOT,
    SCALE,
    counters_settled,
    leftovers,
    needs,
    read_until,
    ring_bound_ratio,
    two_rack_run,
    wait_until,
)

pytestmark = pytest.mark.emulation

TINY_DOCKER = two_rack_run(20, extra="container: {engine: docker, cpus: 1}\n")
"""The smallest run (:func:`conftest.two_rack_run`) with each machine's worker in a container: long
enough to be running when a signal lands."""


def _ours(*filters: str) -> list[str]:
    """The project's containers (all states) matching ``filters``, by name."""
    from emulator.containers import LABEL, docker

    args = ["ps", "-a", "--format", "{{.Names}}", "--filter", f"label={LABEL}"]
    for f in filters:
        args += ["--filter", f]
    return docker(args).stdout.split()


def _networks() -> list[str]:
    from emulator.containers import docker

    return sorted(docker(["network", "ls", "--format", "{{.Name}}"]).stdout.split())


@pytest.fixture(scope="module")
def image(emulation_ok):
    """The worker image, made of this machine's packages (or found cached: they did not change); a
    second request builds nothing."""
    from emulator.containers import docker_missing
    from emulator.worker_image import ensure_image

    needs(docker_missing(), "docker")
    said: list[str] = []
    first = ensure_image(said.append)
    again = ensure_image(said.append)
    assert again.tag == first.tag and not again.built, said
    return first


@pytest.fixture
def pair_net(image, tmp_path_factory):
    """h1 under l1, h2 under l2, one spine: 20 Mbit/s links."""
    from emulator.net import EmulatedNetwork, NetOptions
    from topo import leaf_spine

    run_dir = str(tmp_path_factory.mktemp("docker"))
    net = EmulatedNetwork(leaf_spine(2, 1, 1), run_dir, NetOptions(scale=SCALE))
    with net:
        failures = net.tcp_check(["h1"], ["h2"])
        assert not failures, f"TCP sanity check failed: {failures}; evidence in {run_dir}"
        yield net
        error = net.controller.logged_exception()
    assert error is None, f"controller logged an exception: {error}; see {net.controller.log_path}"
    assert not leftovers(), f"network left behind: {leftovers()}"


def test_a_job_in_containers_moves_what_it_moves_as_processes(image, pair_net, tmp_path):
    """The same 2-machine ring, as processes and then with each machine's agent in a container
    (1 CPU) of the image: the daemon started exactly those two containers, removed them when they
    exited, and created no network; the communication time per iteration is, both ways, at least
    the fidelity monitor's lower limit of its contention-free bound and under 1.5 times it, and the
    bytes on every link within 1%. How the two times compare is bench/containers.py's to report."""
    from emulator.containers import ContainerRunner, ContainerSettings, docker
    from emulator.one_job import OneJob, run_job
    from measure.fidelity import MIN_JOB_RATIO

    net = pair_net
    networks = _networks()
    buckets = (1_000_000, 250_000)
    runs, moved = {}, {}
    for kind in ("process", "docker"):
        out = tmp_path / kind
        out.mkdir()
        spawn = ContainerRunner(net, ContainerSettings(image.tag, 1.0), [str(out)]) if kind == "docker" else None
        since = docker(["system", "info", "--format", "{{.SystemTime}}"]).stdout.strip()
        before = net.counters.switch_counters()
        runs[kind] = run_job(net, str(out), OneJob(kind, ("h1", "h2"), "ring", buckets, iterations=4,
                                                         warmup_iterations=1, compute_s=0.01, timeout_s=300),
                             spawn=spawn)
        moved[kind] = net.counters.link_bytes(before, counters_settled(net.counters.switch_counters))
        if kind == "docker":
            until = docker(["system", "info", "--format", "{{.SystemTime}}"]).stdout.strip()
            started = docker(["events", "--since", since, "--until", until, "--filter", "type=container",
                              "--filter", "event=start", "--filter", "label=dtnet.testbed=worker",
                              "--format", "{{.Actor.Attributes.name}}"]).stdout.split()
    comm = {k: ring_bound_ratio(net, ("h1", "h2"), buckets, r.comm_mean_s()) for k, r in runs.items()}
    evidence = f"comm per iteration over its bound {comm}; link bytes {moved}; containers started {started}"
    assert len(started) == 2 and all(n.startswith(f"dtnet-{os.getpid()}-") for n in started), evidence
    assert _ours() == [] and _networks() == networks, evidence
    assert all(MIN_JOB_RATIO <= r < MAX_STRUCTURE_RATIO for r in comm.values()), evidence
    for link, b in moved["process"].items():
        if b > 10_000:
            assert abs(moved["docker"][link] - b) <= 0.01 * b, (link, evidence)


def test_an_interrupted_docker_run_leaves_no_container(image, tmp_path):
    """SIGINT while the workers run in containers: exit 130, and no container, unfinished image
    layer, network, bridge, interface or process is left; the image stays cached."""
    from emulator.containers import LABEL, docker

    cfg = tmp_path / "docker.yaml"
    cfg.write_text(TINY_DOCKER)
    networks = _networks()
    proc = subprocess.Popen([*CLI, "-c", str(cfg), "--results", str(tmp_path / "res")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = read_until(proc, "wave 0:")
    def agents_running():
        running = _ours("status=running")
        return running if len(running) >= 2 else None

    running = wait_until(agents_running, 60, "both machines' agent containers running")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    evidence = "".join(seen) + out
    assert len(running) == 2, evidence
    assert proc.returncode == 130, evidence
    assert "Traceback" not in out
    assert _ours() == [] and _networks() == networks, evidence
    assert docker(["images", "-q", "--filter", "dangling=true", "--filter", f"label={LABEL}"]).stdout.split() == []
    assert docker(["images", "-q", image.tag]).stdout.strip(), "the cached image was removed"
    assert leftovers() == []


def test_an_interrupted_image_build_leaves_no_image_container_or_process(image, tmp_path):
    """SIGINT while a run checks a new image it built (one more package: new inputs, so a build):
    exit 130, and the check's container, the untagged image, the build's processes and its run
    record are gone, no new tag exists; the cached image stays."""
    from emulator.containers import LABEL, docker
    from emulator.journal import records
    from emulator.worker_image import EXTRA_ENV

    def tagged():
        return sorted(docker(["images", "--filter", f"label={LABEL}", "--format", "{{.Repository}}:{{.Tag}}"])
                      .stdout.split())

    before = tagged()
    cfg = tmp_path / "docker.yaml"
    cfg.write_text(TINY_DOCKER)
    env = {**os.environ, EXTRA_ENV: "iproute2"}
    proc = subprocess.Popen([*CLI, "-c", str(cfg), "--results", str(tmp_path / "res")], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def checking():
        if proc.poll() is not None:
            return ["the run, which exited before its image check"]
        return _ours(f"label={LABEL}=build", "status=running")

    try:
        check = wait_until(checking, 300, "the new image's check container running")
    finally:
        proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert len(check) == 1 and check[0].startswith("dtnet-build-") and proc.returncode == 130, (check, out)
    assert "Traceback" not in out
    assert _ours() == [] and records() == [], out
    assert subprocess.run(["pgrep", "-f", check[0]], capture_output=True).returncode == 1, out
    assert docker(["images", "-q", "--filter", "dangling=true", "--filter", f"label={LABEL}"]).stdout.split() == []
    assert tagged() == before and image.tag in before, (before, tagged())
    assert leftovers() == []


def test_docker_asked_for_where_dockerd_cannot_be_reached_is_one_line(emulation_ok, tmp_path):
    """``container: docker`` with no daemon to talk to: exit 2, one line naming dockerd and how to
    start it, before any network is built or any run directory made."""
    cfg = tmp_path / "docker.yaml"
    cfg.write_text(TINY_DOCKER)
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-dockerd.sock"}
    cp = subprocess.run([*CLI, "-c", str(cfg), "--results", str(tmp_path / "res")], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert "Traceback" not in cp.stdout + cp.stderr
    last = cp.stderr.strip().splitlines()[-1]
    assert "dockerd" in last and "make setup DOCKER=1" in last, cp.stderr
    assert not (tmp_path / "res").exists()
    assert leftovers() == []
