"""Unit tests of workers in containers: the ``docker run`` command, the environment a container
gets, the worker image's inputs and tags, the config section, and cleanup's refusals. The
containers themselves run in tests/test_emulation_docker.py."""

from __future__ import annotations

import os
import shutil

import pytest
from conftest import ROOT

from common.errors import ConfigError, EmulationError


def test_a_worker_container_enters_its_machines_namespace_with_nothing_else_of_its_own():
    from emulator.containers import NETNS_PATH, run_argv

    argv = run_argv("dtnet-1-1-h1", "dtnet-worker:abc", "/proc/42/ns/net", 0.5, ["/runs/r1"], ["OMP_NUM_THREADS"],
                    "/proj", ["/venv/bin/python", "-m", "jobs.agent", "/runs/r1/a.json"], {"dtnet.owner": "7"})
    image_at = argv.index("dtnet-worker:abc")
    options, command = argv[:image_at], argv[image_at + 1:]
    assert command == ["nsenter", f"--net={NETNS_PATH}", "--", "/venv/bin/python", "-m", "jobs.agent",
                       "/runs/r1/a.json"]
    pairs = list(zip(options, options[1:], strict=False))
    assert ("--network", "none") in pairs and ("--cpus", "0.5") in pairs and ("--name", "dtnet-1-1-h1") in pairs
    assert ("-v", f"/proc/42/ns/net:{NETNS_PATH}:ro") in pairs and ("-v", "/runs/r1:/runs/r1") in pairs
    assert ("--cap-add", "SYS_ADMIN") in pairs and options.count("--cap-add") == 1
    assert ("-e", "OMP_NUM_THREADS") in pairs and ("-w", "/proj") in pairs
    assert ("--label", "dtnet.testbed=worker") in pairs and ("--label", "dtnet.owner=7") in pairs
    assert {"--rm", "--init"} <= set(options) and "--privileged" not in options


def test_a_container_gets_the_workers_settings_and_not_the_hosts_identity():
    from emulator.containers import container_env_keys

    env = {"PATH": "/usr/bin", "HOME": "/root", "PYTHONPATH": "/p", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
           "GLOO_SOCKET_IFNAME": "h1-eth0", "SUDO_USER": "me", "JOBS_WORKER_DEBUG": "1", "DISPLAY": ":0"}
    assert container_env_keys(env) == ["GLOO_SOCKET_IFNAME", "JOBS_WORKER_DEBUG", "OMP_NUM_THREADS", "PYTHONPATH",
                                       "PYTHONUNBUFFERED"]


def _tree(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def test_the_images_project_layer_is_the_code_without_caches_results_venv_or_build_products(tmp_path):
    from emulator.worker_image import project_files

    _tree(tmp_path, {"run_testbed.py": "", "jobs/worker.py": "", "jobs/__pycache__/worker.cpython-311.pyc": "",
                     "experiment/results.py": "", "results/20260101-x/summary.json": "", ".venv/bin/python": "",
                     ".git/HEAD": "", "ina/p4/build/aggregator.json": "", "ina/p4/aggregator.p4": "",
                     "emulator/bpf/vq_ecn.bpf.o": "", "dtnet_testbed.egg-info/PKG-INFO": "", "docs/results/x.md": ""})
    assert project_files(str(tmp_path)) == ["docs/results/x.md", "experiment/results.py", "ina/p4/aggregator.p4",
                                            "jobs/worker.py", "run_testbed.py"]


def test_digests_follow_content_for_the_project_and_metadata_for_the_venv(tmp_path):
    from emulator.worker_image import content_digest, metadata_digest, tree_files

    _tree(tmp_path, {"a.py": "x = 1\n", "pkg/b.py": "y = 2\n"})
    files = tree_files(str(tmp_path))
    assert files == ["a.py", "pkg/b.py"]
    content, meta = content_digest(str(tmp_path), files), metadata_digest(str(tmp_path), files)
    os.utime(tmp_path / "a.py", ns=(1, 1))
    assert content_digest(str(tmp_path), files) == content and metadata_digest(str(tmp_path), files) != meta
    (tmp_path / "a.py").write_text("x = 2\n")
    assert content_digest(str(tmp_path), files) != content


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".venv", "pyvenv.cfg")) or shutil.which("dpkg-query") is None,
                    reason="needs the project's venv and dpkg")
def test_a_code_change_retags_only_the_project_layer(tmp_path):
    """The venv and distribution layers keep their tags when only the code changes; the base names
    the venv's interpreter packages (its full standard library included)."""
    from emulator.worker_image import image_inputs, project_files

    project = tmp_path / "project"
    for rel in project_files(ROOT):
        if rel.startswith(("jobs/", "common/")):
            os.makedirs(project / os.path.dirname(rel), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), project / rel)
    venv = os.path.join(ROOT, ".venv")
    first = image_inputs(venv, str(project))
    (project / "jobs" / "worker.py").write_text((project / "jobs" / "worker.py").read_text() + "\n# changed\n")
    second = image_inputs(venv, str(project))
    assert (second.base_tag, second.env_tag) == (first.base_tag, first.env_tag) and second.tag != first.tag
    assert first.tag.startswith("dtnet-worker:") and first.env_tag.startswith("dtnet-worker-env:")
    assert "libc6" in first.packages and any(p.startswith("python3.") and not p.endswith("-minimal")
                                             for p in first.packages)


def test_debootstrap_makes_the_machines_own_distribution(tmp_path):
    from emulator.worker_image import debootstrap_argv, host_distribution

    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Ubuntu 24.04 LTS"\nID=ubuntu\nVERSION_CODENAME=noble\n')
    ubuntu = host_distribution(str(release))
    assert debootstrap_argv(ubuntu, ["python3.12", "libc6"], "/t") == [
        "debootstrap", "--variant=minbase", "--components=main,universe", "--include=libc6,python3.12", "noble", "/t",
        "http://archive.ubuntu.com/ubuntu"]
    release.write_text('PRETTY_NAME="Fedora Linux 41"\nID=fedora\n')
    with pytest.raises(EmulationError, match="Debian or Ubuntu; this machine is 'Fedora Linux 41'"):
        host_distribution(str(release))


def test_the_container_section_is_checked_like_the_rest():
    from experiment.config import from_dict, validate

    cfg = from_dict({"container": {"engine": "docker", "cpus": 0.5}, "policies": ["random"]})
    assert (cfg.container.engine, cfg.container.cpus) == ("docker", 0.5)
    with pytest.raises(ConfigError, match=r"config.container.engine: 'podman' is unknown \(valid: none, docker\)"):
        validate(from_dict({"container": {"engine": "podman"}}))
    with pytest.raises(ConfigError, match="config.container.cpus"):
        validate(from_dict({"container": {"cpus": 0}}))


def test_cleanup_removes_only_build_directories_of_its_own(tmp_path, monkeypatch):
    """A recorded build tree outside the builds' directory is refused, not deleted; a container
    that cannot be removed (no daemon to ask) stays recorded, with why."""
    from emulator.journal import Change, RunJournal

    record = RunJournal("test", records_dir=str(tmp_path / "records"))
    keep = tmp_path / "not-ours"
    keep.mkdir()
    tree = record.add(Change("tree", str(keep)))
    assert "not a build directory of ours" in record.undo(tree) and keep.exists() and tree in record.changes
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    box = record.add(Change("container", "dtnet-0-1-h1"))
    assert record.undo(box) and box in record.changes
