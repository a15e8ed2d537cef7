"""The shipped shell scripts and the VM: shellcheck and `vagrant validate` pass, and scripts/setup.sh
installs the right packages for each distribution it supports.

The distribution tests run the real set-up script, as root, with its distribution detection pointed
at an os-release file (SETUP_OS_RELEASE) and package installation stubbed at the apt boundary only:
`apt-get` and `dpkg-query` earlier on PATH record what they are asked and report nothing
installed; everything else runs for real (on a set-up machine it finds the rest done).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import ROOT, needs

SCRIPTS = ["scripts/setup.sh", "vagrant/provision.sh", ".ci/run"]

UBUNTU_2404 = 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=noble\n'
DEBIAN_12 = 'NAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\nVERSION_CODENAME=bookworm\n'
FEDORA = 'NAME="Fedora Linux"\nVERSION_ID="41"\nID=fedora\n'


def test_shellcheck_passes_on_every_shipped_script():
    """shellcheck finds nothing in scripts/setup.sh, vagrant/provision.sh and .ci/run."""
    assert shutil.which("shellcheck"), "shellcheck is missing: scripts/setup.sh installs it"
    cp = subprocess.run(["shellcheck", *SCRIPTS], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_torch_comes_from_the_cpu_index_on_every_distribution():
    """TORCH_INDEX is set once, before the distribution is read, to PyTorch's CPU index (PyPI's Linux torch
    is the CUDA build); an empty TORCH_INDEX leaves pip to its own configuration (a local wheel directory),
    as does an index the machine cannot reach (the only other assignment, after the probe says so)."""
    with open(os.path.join(ROOT, "scripts", "setup.sh")) as f:
        text = f.read()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("TORCH_INDEX=")]
    assert text.index(line) < text.index('case "$distro" in')
    (cleared,) = [ln.strip() for ln in text.splitlines()
                  if ln.startswith(" ") and ln.lstrip().startswith("TORCH_INDEX=")]
    assert cleared == 'TORCH_INDEX=""' and text.index("cannot be reached") < text.index(cleared, text.index(line) + 1)
    cpu = "https://download.pytorch.org/whl/cpu"
    for given, expected in [(None, cpu), ("", ""), ("file:///srv/wheels", "file:///srv/wheels")]:
        env = {k: v for k, v in os.environ.items() if k != "TORCH_INDEX"}
        if given is not None:
            env["TORCH_INDEX"] = given
        cp = subprocess.run(["bash", "-c", f'{line}\nprintf %s "$TORCH_INDEX"'], env=env, capture_output=True,
                            text=True, timeout=10)
        assert cp.returncode == 0 and cp.stdout == expected, (given, cp.stdout, cp.stderr)


def setup_installs(package: str) -> bool:
    """Whether scripts/setup.sh installs ``package`` on this machine's distribution (its ``--list-packages``)."""
    cp = subprocess.run(["bash", "scripts/setup.sh", "--list-packages"], cwd=ROOT, capture_output=True, text=True,
                        timeout=60)
    return cp.returncode == 0 and package in cp.stdout.split()


@pytest.mark.parametrize("where", ["vagrant", "vagrant/debian"])
def test_vagrant_validates_the_vm(tmp_path, where):
    """`vagrant validate` of vagrant/Vagrantfile (Ubuntu's box) and vagrant/debian/Vagrantfile (the
    offline box, which `make vm` boots), their provider's settings aside; vagrant's state and home
    go to a temporary directory, not into the project or ~."""
    if shutil.which("vagrant") is None:
        if not setup_installs("vagrant"):
            pytest.skip("vagrant: the set-up installs it on Debian 12 only, not on this distribution")
        needs("not installed", "vagrant")
    env = {**os.environ, "VAGRANT_CHECKPOINT_DISABLE": "1", "VAGRANT_DOTFILE_PATH": str(tmp_path / ".vagrant"),
           "VAGRANT_HOME": str(tmp_path / "vagrant.d")}
    cp = subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=os.path.join(ROOT, where),
                        capture_output=True, text=True, timeout=300, env=env)
    assert cp.returncode == 0 and "validated successfully" in cp.stdout, cp.stdout + cp.stderr


def stubbed_setup(tmp_path, os_release: str, timeout: float = 900, args: tuple[str, ...] = ()):
    """Run scripts/setup.sh (with ``args``) with the given os-release and apt stubbed; returns
    (process, apt calls)."""
    (tmp_path / "os-release").write_text(os_release)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "apt.log"
    (stubs / "apt-get").write_text(f'#!/bin/sh\necho "apt-get $*" >> {log}\n')
    (stubs / "dpkg-query").write_text(f'#!/bin/sh\necho "dpkg-query $*" >> {log}\nexit 1\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = {**os.environ, "SETUP_OS_RELEASE": str(tmp_path / "os-release"), "PATH": f"{stubs}:{os.environ['PATH']}"}
    cp = subprocess.run(["bash", "scripts/setup.sh", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                        timeout=timeout)
    calls = log.read_text().splitlines() if log.exists() else []
    return cp, calls


def installed(calls: list[str]) -> list[str]:
    """The packages of the first `apt-get install` call."""
    (first, *_) = [c for c in calls if c.startswith("apt-get install")]
    return [word for word in first.split()[2:] if not word.startswith("-")]


def runs_the_setup(test):
    """A test running the real scripts/setup.sh: as root (skipped without), and in the emulation tier,
    since the set-up changes the host (it starts Open vSwitch and dockerd, makes the venv)."""
    root = pytest.mark.skipif(os.geteuid() != 0, reason="scripts/setup.sh runs as root")
    return pytest.mark.emulation(root(test))


@runs_the_setup
def test_setup_on_ubuntu_asks_apt_for_ubuntus_packages(tmp_path):
    """On Ubuntu 24.04 the set-up asks apt (updated once) for the common packages and the running
    kernel's linux-tools; not bpftool, vagrant or the libraries p4lang's packages bring."""
    cp, calls = stubbed_setup(tmp_path, UBUNTU_2404)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    assert "setup: installing" in cp.stdout and "(ubuntu 24.04)" in cp.stdout
    packages = installed(calls)
    kernel = os.uname().release
    assert {"mininet", "openvswitch-switch", "clang", "libbpf-dev", "shellcheck", "linux-tools-common",
            f"linux-tools-{kernel}"} <= set(packages)
    assert "bpftool" not in packages and "vagrant" not in packages  # Ubuntu has bpftool in linux-tools
    assert not any("libthrift" in p or "libboost" in p for c in calls for p in c.split())  # p4lang's own
    assert calls.count("apt-get update -qq") == 1
    assert "setup: ready" in cp.stdout


@runs_the_setup
def test_setup_on_debian_asks_apt_for_debians_packages(tmp_path):
    """On Debian 12 the set-up asks apt for the common packages, bpftool and vagrant; no linux-tools, no
    Docker without --docker, and bmv2's runtime libraries where a prebuilt bmv2 prefix is there."""
    cp, calls = stubbed_setup(tmp_path, DEBIAN_12)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    packages = installed(calls)
    assert {"mininet", "openvswitch-switch", "bpftool", "vagrant", "shellcheck"} <= set(packages)
    assert not any(p.startswith("linux-tools") for p in packages)
    assert "docker.io" not in packages and "debootstrap" not in packages  # only with --docker
    if os.path.exists(os.path.join(os.environ.get("P4_PREFIX", "/opt/p4"), "bin", "simple_switch")):
        # a prebuilt bmv2 prefix: Debian's runtime libraries asked for too
        assert any("libthrift-0.17.0" in c for c in calls if c.startswith("apt-get install"))


@runs_the_setup
def test_an_unsupported_distribution_is_one_line(tmp_path):
    """An unsupported distribution stops the set-up in one line naming it and the supported ones,
    before apt is asked anything."""
    cp, calls = stubbed_setup(tmp_path, FEDORA, timeout=60)
    assert cp.returncode == 1 and calls == []
    assert cp.stderr.strip() == (f"setup: unsupported distribution 'fedora 41' (from {tmp_path / 'os-release'}): "
                                 "Debian 12, Ubuntu 22.04 or 24.04")


@runs_the_setup
def test_setup_with_docker_adds_docker_and_debootstrap_and_a_running_daemon(tmp_path):
    """``--docker`` (``make test``, ``make setup DOCKER=1``): docker.io and debootstrap in the same
    apt call as the rest, and dockerd answering when the set-up ends (it started it, or found it)."""
    cp, calls = stubbed_setup(tmp_path, UBUNTU_2404, args=("--docker",))
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    assert {"docker.io", "debootstrap", "mininet"} <= set(installed(calls))
    version = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                             text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip(), version.stderr


@runs_the_setup
def test_an_unknown_setup_option_is_one_line(tmp_path):
    """A misspelt option stops the set-up in one line listing the valid ones, before apt is asked anything."""
    cp, calls = stubbed_setup(tmp_path, DEBIAN_12, timeout=60, args=("--dokcer",))
    assert cp.returncode == 1 and calls == []
    assert cp.stderr.strip() == "setup: unknown option '--dokcer' (valid: --docker, --vm, --list-packages)"


@runs_the_setup
def test_setup_with_vm_adds_qemu_libvirt_and_vagrant_libvirt_on_debian_only(tmp_path):
    """``--vm`` (``make vm``): what builds the offline box and runs it, in the same apt call; on
    Ubuntu one line pointing at the Ubuntu box."""
    cp, calls = stubbed_setup(tmp_path, DEBIAN_12, args=("--vm",))
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    assert {"qemu-system-x86", "libvirt-daemon-system", "vagrant-libvirt", "debootstrap", "mininet"} <= set(
        installed(calls))
    (tmp_path / "ubuntu").mkdir()
    cp, calls = stubbed_setup(tmp_path / "ubuntu", UBUNTU_2404, timeout=60, args=("--vm",))
    assert cp.returncode == 1 and calls == []
    assert cp.stderr.strip().startswith("setup: --vm (make vm) builds its box from Debian's packages on Debian 12")
