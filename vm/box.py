"""The VM's box: Debian 12 made here from Debian's packages, packaged for Vagrant's libvirt provider.

No box registry is reachable from every machine the testbed runs on, so the box is built
offline from what the machine's own package mirror serves: ``debootstrap`` with the stock kernel
and every package the set-up installs, a ``vagrant`` account, the project's venv from wheels
downloaded here (:func:`ensure_wheels`), an ext4 image converted to qcow2, and the box's files
beside the kernel and initrd. Everything the build makes outside :data:`BOX_DIR` is in the run
record (:mod:`emulator.journal`) and removed whether the build finishes or not; the box is kept as
a cache, keyed by a digest of its inputs.

Each step of the build: ``docs/vm.md`` (``make vm``, step 1).
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from common.errors import EmulationError
from common.paths import PROJECT_ROOT
from emulator.journal import Change, RunJournal, run_recorded
from emulator.worker_image import BUILD_ROOT, Distribution, host_distribution, project_files

BOX_DIR = Path(PROJECT_ROOT) / "vagrant" / ".box"
"""Where built boxes, their build logs, the packages they were made of and the wheels a VM run
syncs in are kept (not in version control)."""
BOX_NAME = "dtnet/debian12"
"""The name a VM run adds the box under (in its own Vagrant home)."""
GUEST_PACKAGES = ("linux-image-amd64", "systemd-sysv", "udev", "kmod", "dbus", "openssh-server", "sudo",
                  "rsync", "iproute2", "ca-certificates", "make")
"""What the guest needs besides the project's own packages: a kernel and init, ssh and rsync for vagrant."""
DISK_GB = 24
"""The guest disk's virtual size (sparse: the image holds only what is written)."""
GUEST_USER = "vagrant"
KERNEL_ARGS = "root=/dev/vda rw console=ttyS0 net.ifnames=0"
GUEST_PROJECT = "/testbed"
"""Where the VM has the project (vagrant/debian/Vagrantfile syncs it there)."""
PYTHON_INPUTS = ("requirements.txt", "setup.py")
WHEELS_TIMEOUT_S = 1800.0
DEBOOTSTRAP_TIMEOUT_S = 1800.0
STEP_TIMEOUT_S = 600.0


@dataclasses.dataclass(frozen=True)
class Box:
    """A built box file and what went into it."""

    path: str
    digest: str
    kernel: str  # e.g. "6.1.0-50-amd64"
    build_s: float  # 0 when it was already built

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# -- what goes into the box (pure) ------------------------------------------------------------


def project_packages(setup_script: str = os.path.join(PROJECT_ROOT, "scripts", "setup.sh")) -> list[str]:
    """The packages the project's set-up installs on this distribution (its ``--list-packages``).

    Raises:
        EmulationError: when the set-up cannot say (an unsupported distribution).
    """
    cp = subprocess.run(["bash", setup_script, "--list-packages"], capture_output=True, text=True, timeout=30)
    if cp.returncode != 0:
        raise EmulationError(f"cannot list the set-up's packages: {cp.stderr.strip() or cp.stdout.strip()}")
    return cp.stdout.split()


def box_packages(project: list[str]) -> list[str]:
    """Every package debootstrap installs into the box, sorted, no repeats."""
    return sorted(set(GUEST_PACKAGES) | set(project))


def debootstrap_argv(dist: Distribution, packages: list[str], target: str, cache: str) -> list[str]:
    """The box's debootstrap: the standard variant (init, apt, ...) and ``packages``, the
    downloaded packages kept in ``cache`` for the next build."""
    return ["debootstrap", f"--cache-dir={cache}", f"--include={','.join(packages)}", dist.codename, target,
            dist.mirror]


def guest_files(public_key: str) -> dict[str, tuple[str, int]]:
    """The files written into the tree: path (inside the guest) -> (content, mode)."""
    return {
        "/etc/fstab": ("/dev/vda / ext4 rw,errors=remount-ro 0 1\n", 0o644),
        "/etc/hostname": ("dtnet\n", 0o644),
        "/etc/hosts": ("127.0.0.1 localhost\n127.0.1.1 dtnet\n", 0o644),
        "/etc/systemd/network/20-wired.network": ("[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n", 0o644),
        "/etc/sudoers.d/vagrant": (f"{GUEST_USER} ALL=(ALL) NOPASSWD:ALL\n", 0o440),
        "/etc/ssh/sshd_config.d/dtnet.conf": ("UseDNS no\nPasswordAuthentication no\n", 0o644),
        f"/home/{GUEST_USER}/.ssh/authorized_keys": (public_key.strip() + "\n", 0o600),
    }


def box_vagrantfile() -> str:
    """The box's own Vagrantfile: direct kernel boot of the kernel beside the image, and the key."""
    return f'''# The dtnet Debian 12 box (vm.box): the provider boots the kernel beside the image directly.
Vagrant.configure("2") do |config|
  here = File.dirname(__FILE__)
  config.ssh.username = "{GUEST_USER}"
  config.ssh.private_key_path = File.join(here, "id_ed25519")
  config.ssh.insert_key = false
  config.vm.provider :libvirt do |lv|
    lv.kernel = File.join(here, "vmlinuz")
    lv.initrd = File.join(here, "initrd.img")
    lv.cmd_line = "{KERNEL_ARGS}"
    lv.disk_bus = "virtio"
  end
end
'''


def box_metadata() -> dict:
    return {"provider": "libvirt", "format": "qcow2", "virtual_size": DISK_GB}


def python_inputs(root: str = PROJECT_ROOT) -> bytes:
    """What the venv is made of: ``requirements.txt`` and ``setup.py``, in the set-up's order."""
    return b"".join(Path(root, name).read_bytes() for name in PYTHON_INPUTS)


def python_digest(inputs: bytes) -> str:
    """The set-up's digest of :func:`python_inputs` (``sha256sum | cut -c1-16``)."""
    return hashlib.sha256(inputs).hexdigest()[:16]


def setup_stamp(inputs: bytes) -> str:
    """The file the set-up leaves in the venv once its packages are in (``scripts/setup.sh``)."""
    return f".installed-{python_digest(inputs)}"


def inputs_digest(dist: Distribution, packages: list[str], python: bytes = b"") -> str:
    """What the box is made of: the release, the packages, the guest's files, the box's settings,
    the Python packages' inputs."""
    h = hashlib.sha256()
    parts = [f"{dist.id} {dist.codename}", *packages, json.dumps(guest_files("KEY"), sort_keys=True),
             box_vagrantfile(), json.dumps(box_metadata(), sort_keys=True)]
    h.update("\n".join(parts).encode())
    h.update(python)
    return h.hexdigest()[:16]


def box_path(digest: str) -> Path:
    return BOX_DIR / f"dtnet-debian12-{digest}.box"


# -- building (impure) -------------------------------------------------------------------------


def ensure_box(record: RunJournal, say: Callable[[str], None] = print, log_path: str | None = None) -> Box:
    """The box file for this machine's release and the project's packages, built when missing.

    Raises:
        EmulationError: naming the step that failed and the log.
    """
    dist = host_distribution()
    if dist.id != "debian":
        raise EmulationError(f"the offline box is Debian's; this machine is {dist.id} {dist.codename} (use the "
                             f"Ubuntu box of vagrant/Vagrantfile where boxes can be downloaded)")
    packages = box_packages(project_packages())
    python = python_inputs()
    digest = inputs_digest(dist, packages, python)
    path = box_path(digest)
    if path.exists():
        return Box(str(path), digest, _box_kernel(path), 0.0)
    for tool in ("debootstrap", "mkfs.ext4", "qemu-img", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise EmulationError(f"building the VM's box needs {tool}: run `make vm`, whose set-up installs it")
    BOX_DIR.mkdir(parents=True, exist_ok=True)
    wheels = ensure_wheels(record, python, say)
    os.makedirs(BUILD_ROOT, mode=0o755, exist_ok=True)
    scratch = os.path.join(BUILD_ROOT, f"box-{os.getpid()}")
    log_path = log_path or os.path.join(str(BOX_DIR), f"build-{digest}.log")
    start = time.monotonic()
    say(f"vm box: debootstrap {dist.id} {dist.codename} from {dist.mirror} ({len(packages)} packages), "
        f"log {log_path}")
    tree = record.add(Change("tree", scratch, what="VM box build"))
    try:
        with open(log_path, "w") as log:
            root = os.path.join(scratch, "root")
            os.makedirs(scratch, mode=0o755)
            cache = BOX_DIR / "debs"
            cache.mkdir(exist_ok=True)
            run_recorded(debootstrap_argv(dist, packages, root, str(cache)), record, log, DEBOOTSTRAP_TIMEOUT_S,
                         f"debootstrap of the box from {dist.mirror} failed (log {log_path})")
            key = os.path.join(scratch, "id_ed25519")
            run_recorded(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dtnet-vm", "-f", key], record, log,
                         STEP_TIMEOUT_S, "ssh-keygen failed")
            say("vm box: configuring the guest")
            _configure(root, Path(key + ".pub").read_text(), record, log, log_path)
            say("vm box: the project's venv, from the wheels")
            _install_venv(root, wheels, python, record, log, log_path)
            kernel = _kernel_version(root)
            box_files = os.path.join(scratch, "box")
            os.makedirs(box_files)
            shutil.copy(os.path.join(root, "boot", f"vmlinuz-{kernel}"), os.path.join(box_files, "vmlinuz"))
            shutil.copy(os.path.join(root, "boot", f"initrd.img-{kernel}"), os.path.join(box_files, "initrd.img"))
            shutil.copy(key, os.path.join(box_files, "id_ed25519"))
            say(f"vm box: ext4 image of {DISK_GB} GB (sparse), then qcow2")
            raw = os.path.join(scratch, "disk.raw")
            run_recorded(["mkfs.ext4", "-q", "-F", "-L", "dtnet", "-d", root, raw, f"{DISK_GB}G"], record, log,
                         STEP_TIMEOUT_S, f"mkfs.ext4 of the box image failed (log {log_path})")
            run_recorded(["qemu-img", "convert", "-O", "qcow2", raw, os.path.join(box_files, "box.img")], record, log,
                         STEP_TIMEOUT_S, f"qemu-img convert of the box image failed (log {log_path})")
            Path(box_files, "metadata.json").write_text(json.dumps(box_metadata()) + "\n")
            Path(box_files, "Vagrantfile").write_text(box_vagrantfile())
            Path(box_files, "kernel").write_text(kernel + "\n")
            partial = path.with_suffix(".partial")
            with tarfile.open(partial, "w") as tar:
                for name in sorted(os.listdir(box_files)):
                    tar.add(os.path.join(box_files, name), arcname=name)
            os.replace(partial, path)
    finally:
        left = record.undo(tree)
        with_partial = path.with_suffix(".partial")
        if with_partial.exists():
            with_partial.unlink()
    if left is not None:
        raise EmulationError(f"could not remove the box build's scratch directory {scratch}: {left}")
    for old in BOX_DIR.glob("dtnet-debian12-*.box"):
        if old != path:
            old.unlink()
    build_s = time.monotonic() - start
    say(f"vm box: {path} ({path.stat().st_size / 1e9:.2f} GB, kernel {kernel}) built in {build_s:.0f} s")
    return Box(str(path), digest, kernel, build_s)


def _configure(root: str, public_key: str, record: RunJournal, log, log_path: str) -> None:
    """The account, the network, ssh and sudo in the tree (``chroot`` for what the guest's tools do)."""
    def in_root(*argv: str) -> None:
        run_recorded(["chroot", root, *argv], record, log, STEP_TIMEOUT_S,
                     f"{' '.join(argv)} in the box's tree failed (log {log_path})")

    in_root("useradd", "--create-home", "--shell", "/bin/bash", GUEST_USER)
    in_root("systemctl", "enable", "systemd-networkd")
    for guest_path, (content, mode) in guest_files(public_key).items():
        host_path = os.path.join(root, guest_path.lstrip("/"))
        os.makedirs(os.path.dirname(host_path), exist_ok=True)
        Path(host_path).write_text(content)
        os.chmod(host_path, mode)
    in_root("chown", "-R", f"{GUEST_USER}:{GUEST_USER}", f"/home/{GUEST_USER}/.ssh")
    os.chmod(os.path.join(root, "home", GUEST_USER, ".ssh"), 0o700)


def ensure_wheels(record: RunJournal, python: bytes, say: Callable[[str], None] = print) -> Path:
    """The project's Python packages as wheels for this machine's Python (downloaded once per
    :func:`python_inputs`, ``python``), and those pip needs to install the project itself.

    Raises:
        EmulationError: when pip cannot download them.
    """
    requirements = os.path.join(PROJECT_ROOT, "requirements.txt")
    wheels = BOX_DIR / f"wheels-{python_digest(python)}"
    if wheels.is_dir():
        return wheels
    BOX_DIR.mkdir(parents=True, exist_ok=True)
    say(f"vm box: downloading the Python packages' wheels into {wheels}")
    partial = wheels.with_suffix(".partial")
    shutil.rmtree(partial, ignore_errors=True)
    pip = os.path.join(PROJECT_ROOT, ".venv", "bin", "pip")
    with open(BOX_DIR / "wheels.log", "w") as log:
        run_recorded([pip, "download", "-q", "--disable-pip-version-check", "-d", str(partial), "-r", requirements,
                      "setuptools", "wheel"], record, log, WHEELS_TIMEOUT_S,
                     f"pip download of the wheels failed (log {BOX_DIR / 'wheels.log'})")
    os.replace(partial, wheels)
    for old in BOX_DIR.glob("wheels-*"):
        if old != wheels:
            shutil.rmtree(old, ignore_errors=True)
    return wheels


def _install_venv(root: str, wheels: Path, python: bytes, record: RunJournal, log, log_path: str) -> None:
    """The venv at :data:`GUEST_PROJECT` in the tree, as the set-up makes it (system site packages,
    the requirements, the project editable), from ``wheels`` alone; the project's Python files are
    copied in for the editable install, and the VM's sync replaces them."""
    project = os.path.join(root, GUEST_PROJECT.lstrip("/"))
    for rel in project_files(PROJECT_ROOT):
        if rel.endswith(".py") or rel in PYTHON_INPUTS:
            os.makedirs(os.path.dirname(os.path.join(project, rel)), exist_ok=True)
            shutil.copy2(os.path.join(PROJECT_ROOT, rel), os.path.join(project, rel))
    inside = os.path.join(root, "tmp", "dtnet-wheels")
    shutil.copytree(wheels, inside)
    venv = f"{GUEST_PROJECT}/.venv"
    # A clean environment: pip reaches no index, and only the wheels (this machine's pip settings stay out).
    env = ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "PIP_NO_INDEX=1",
           "PIP_FIND_LINKS=/tmp/dtnet-wheels", "PIP_DISABLE_PIP_VERSION_CHECK=1"]
    pip = [*env, f"{venv}/bin/pip", "install", "-q"]
    try:
        for argv in ([*env, "/usr/bin/python3", "-m", "venv", "--system-site-packages", venv],
                     [*pip, "-r", f"{GUEST_PROJECT}/requirements.txt", "setuptools", "wheel"],
                     [*pip, "--no-deps", "--no-build-isolation", "-e", GUEST_PROJECT]):
            run_recorded(["chroot", root, *argv], record, log, WHEELS_TIMEOUT_S,
                         f"{' '.join(argv[len(env):len(env) + 3])} in the box's tree failed (log {log_path})")
    finally:
        shutil.rmtree(inside, ignore_errors=True)
    Path(project, ".venv", setup_stamp(python)).touch()


def _kernel_version(root: str) -> str:
    kernels = sorted(glob.glob(os.path.join(root, "boot", "vmlinuz-*")))
    if not kernels:
        raise EmulationError("the box's tree has no kernel in /boot (linux-image-amd64 did not install)")
    return os.path.basename(kernels[-1]).removeprefix("vmlinuz-")


def _box_kernel(path: Path) -> str:
    try:
        with tarfile.open(path) as tar:
            member = tar.extractfile("kernel")
            return member.read().decode().strip() if member else ""
    except (OSError, tarfile.TarError, KeyError):
        return ""
