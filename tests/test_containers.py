"""Unit tests of workers in containers: the ``docker run`` command, the environment a container
gets, the worker image's inputs and tags, the config section, and cleanup's refusals. The
containers themselves run in tests/test_emulation_docker.py."""

from __future__ import annotations

import os
import shutil

import pytest
from conftest import ROOT, needs

from common.errors import ConfigError, EmulationError


def test_a_worker_container_enters_its_machines_namespace_with_nothing_else_of_its_own():
    """`docker run` enters the machine's network namespace (mounted read-only) with no network of its
    own, one capability, the worker's CPUs, name, labels and directories (the venv and code read-only);
    never privileged."""
    from emulator.containers import NETNS_PATH, run_argv

    argv = run_argv("dtnet-1-1-h1", "dtnet-worker:abc", "/proc/42/ns/net", 0.5, ["/runs/r1"], ["OMP_NUM_THREADS"],
                    "/proj", ["/venv/bin/python", "-m", "workers.agent", "/runs/r1/a.json"], {"dtnet.owner": "7"},
                    ["/proj", "/venv"])
    image_at = argv.index("dtnet-worker:abc")
    options, command = argv[:image_at], argv[image_at + 1:]
    assert command == ["nsenter", f"--net={NETNS_PATH}", "--", "/venv/bin/python", "-m", "workers.agent",
                       "/runs/r1/a.json"]
    pairs = list(zip(options, options[1:], strict=False))
    assert ("--network", "none") in pairs and ("--cpus", "0.5") in pairs and ("--name", "dtnet-1-1-h1") in pairs
    assert ("-v", f"/proc/42/ns/net:{NETNS_PATH}:ro") in pairs and ("-v", "/runs/r1:/runs/r1") in pairs
    assert ("-v", "/proj:/proj:ro") in pairs and ("-v", "/venv:/venv:ro") in pairs and options.count("-v") == 4
    assert ("--cap-add", "SYS_ADMIN") in pairs and options.count("--cap-add") == 1
    assert ("-e", "OMP_NUM_THREADS") in pairs and ("-w", "/proj") in pairs
    assert ("--label", "dtnet.testbed=worker") in pairs and ("--label", "dtnet.owner=7") in pairs
    assert {"--rm", "--init"} <= set(options) and "--privileged" not in options


def test_a_container_gets_the_workers_settings_and_not_the_hosts_identity():
    """A container gets the worker's settings from the environment (Python, OpenMP, Gloo, debug) and
    none of the host's identity (PATH, HOME, SUDO_USER, DISPLAY)."""
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


def test_the_projects_files_are_the_code_without_caches_results_venv_or_build_products(tmp_path):
    """The project's files (what the VM's box copies) are the code and docs: no caches, results, venv,
    .git or build products."""
    from emulator.worker_image import project_files

    _tree(tmp_path, {"run_testbed.py": "", "workers/worker.py": "", "workers/__pycache__/worker.cpython-311.pyc": "",
                     "experiment/reporting/results.py": "", "results/20260101-x/summary.json": "",
                     ".venv/bin/python": "",
                     ".git/HEAD": "", "ina/p4/build/aggregator.json": "", "ina/p4/aggregator.p4": "",
                     "emulator/bpf/vq_ecn.bpf.o": "", "dtnet_testbed.egg-info/PKG-INFO": "", "docs/results/x.md": ""})
    assert project_files(str(tmp_path)) == ["docs/results/x.md", "experiment/reporting/results.py",
                                            "ina/p4/aggregator.p4", "run_testbed.py", "workers/worker.py"]


DPKG_LINES = [  # dpkg-query -W -f DPKG_FORMAT's fields: name, arch, version, status, essential, provides, pre, depends
    "python3.11\tamd64\t3.11.2-6\tii \tno\t\t\tpython3.11-minimal (= 3.11.2-6), media-types | mime-support",
    "python3.11-minimal\tamd64\t3.11.2-6\tii \tno\t\t\tlibc6 (>= 2.34), libssl3:any (>= 3.0.0)",
    "mailcap\tall\t3.70\tii \tno\tmime-support\t\t",
    "libc6\tamd64\t2.36-9\tii \tno\t\t\tlibgcc-s1",
    "libc6\ti386\t2.36-9\tii \tno\t\t\tlibgcc-s1",
    "libgcc-s1\tamd64\t12.2.0\tii \tno\t\tgcc-12-base (= 12.2.0)\tlibc6 (>= 2.35)",
    "gcc-12-base\tamd64\t12.2.0\tii \tno\t\t\t",
    "libssl3\tamd64\t3.0.15\tii \tno\t\t\tlibc6 (>= 2.34)",
    "dash\tamd64\t0.5.12\tii \tyes\t\t\t",
    "vim\tamd64\t9.0\tii \tno\t\t\tlibc6",
    "removed\tamd64\t1.0\trc \tyes\t\t\t",
]


def test_the_image_holds_the_roots_their_dependencies_and_the_essential_set():
    """The image's packages: the roots, the first installed of each alternative (a virtual name by
    what provides it), versions and architecture qualifiers ignored, every essential package, the
    machine's own architecture of a package installed twice; nothing else installed, nothing
    merely configured; a dependency nothing satisfies is refused naming it."""
    from emulator.worker_image import closure, parse_installed

    installed = parse_installed("\n".join(DPKG_LINES) + "\n", "amd64")
    assert installed["libc6"].arch == "amd64" and "removed" not in installed
    assert closure(["python3.11"], installed) == ["dash", "gcc-12-base", "libc6", "libgcc-s1", "libssl3", "mailcap",
                                                 "python3.11", "python3.11-minimal"]
    with pytest.raises(EmulationError, match="not installed on this machine, so not in the worker image: nano"):
        closure(["nano"], installed)
    broken = parse_installed("\n".join([*DPKG_LINES, "tool\tamd64\t1\tii \tno\t\t\tlibfoo (>= 1) | libbar"]), "amd64")
    with pytest.raises(EmulationError, match="tool depends on 'libfoo \\(>= 1\\) \\| libbar'"):
        closure(["tool"], broken)


def test_the_images_files_sit_where_they_really_are_with_their_parents():
    """A file a package lists under /lib on a merged-/usr machine is stored under /usr/lib, /lib as the
    link it is; parents come first; documentation, manuals and files missing here are left out."""
    from emulator.worker_image import image_paths

    real = {"/lib": "/usr/lib", "/lib/x86_64-linux-gnu": "/usr/lib/x86_64-linux-gnu"}
    listed = ["/.", "/lib", "/lib/x86_64-linux-gnu/libc.so.6", "/usr/share/doc/libc6/copyright", "/usr/share/doc",
              "/usr/bin/gone", "diverted by x to: /usr/bin/y", "/etc/ld.so.conf.d/libc.conf"]
    paths = image_paths(listed, exists=lambda p: p != "/usr/bin/gone", realdir=lambda d: real.get(d, d))
    assert paths == ["/etc", "/etc/ld.so.conf.d", "/etc/ld.so.conf.d/libc.conf", "/lib", "/usr", "/usr/lib",
                     "/usr/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu/libc.so.6"]


def test_neither_the_code_nor_the_venvs_place_is_in_the_images_tag(tmp_path, monkeypatch):
    """The image is this machine's packages the venv's interpreter, its compiled modules and nsenter
    need (the full standard library included): the same tag whatever the project's code, which
    containers mount; one more package makes another."""
    from emulator.worker_image import EXTRA_ENV, image_inputs

    if shutil.which("dpkg-query") is None:
        pytest.skip("the worker image is made of a Debian or Ubuntu machine's packages: no dpkg here")
    needs(None if os.path.exists(os.path.join(ROOT, ".venv", "pyvenv.cfg")) else "no .venv/pyvenv.cfg",
          "the project's venv")
    venv = os.path.join(ROOT, ".venv")
    first = image_inputs(venv, str(tmp_path))
    assert image_inputs(venv, ROOT).tag == first.tag and first.tag.startswith("dtnet-worker:")
    names = {p.name for p in first.packages}
    assert {"libc6", "util-linux"} <= names and any(n.startswith("python3.") and not n.endswith("-minimal")
                                                    for n in names)
    monkeypatch.setenv(EXTRA_ENV, "iproute2")
    more = image_inputs(venv, ROOT)
    assert more.tag != first.tag and "iproute2" in {p.name for p in more.packages}


def test_the_machines_distribution_is_read_and_others_refused(tmp_path):
    """The machine's distribution and release are read from os-release (for debootstrap, the VM's
    box); any other distribution than Debian or Ubuntu is refused in one line naming it."""
    from emulator.worker_image import host_distribution

    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Ubuntu 24.04 LTS"\nID=ubuntu\nVERSION_CODENAME=noble\n')
    ubuntu = host_distribution(str(release))
    assert (ubuntu.id, ubuntu.codename, ubuntu.mirror) == ("ubuntu", "noble", "http://archive.ubuntu.com/ubuntu")
    release.write_text('PRETTY_NAME="Fedora Linux 41"\nID=fedora\n')
    with pytest.raises(EmulationError, match="Debian or Ubuntu; this machine is 'Fedora Linux 41'"):
        host_distribution(str(release))


def test_the_container_section_is_checked_like_the_rest():
    """The config's container section is read and checked like the rest: unknown engine, CPUs out of range."""
    from experiment.config.schema import from_dict, validate

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
