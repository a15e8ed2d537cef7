"""The worker image: built here, from local parts, for workers in containers (:mod:`emulator.containers`).

No image registry is reachable from the machines this runs on, so nothing is pulled. The
image is three layers of this machine's own making, each tagged with a digest of its inputs
and rebuilt only when they change:

1. ``dtnet-worker-base:<digest>``: a minimal root filesystem of this machine's distribution
   and release (Debian 12 or Ubuntu), made by ``debootstrap`` from the distribution's mirror
   with the interpreter the project's venv runs on and the libraries its compiled modules
   link (found with ``ldd`` and ``dpkg -S``), then ``docker import``-ed;
2. ``dtnet-worker-env:<digest>``: the venv copied in at its path on this machine
   (``docker/worker-env.Dockerfile``), so its interpreter link, scripts and editable install
   resolve unchanged; its digest covers every file's path, size and modification time;
3. ``dtnet-worker:<digest>``: the project's code at its path (``docker/worker.Dockerfile``),
   checked by importing the worker and the agent in the image; its digest covers every file's
   content.

A change to the code rebuilds only the last layer (a few seconds); to the venv, the base and
the venv (about a minute and a half here). When a layer is rebuilt, the older tags of the
project's images are removed, so only the current image stays cached.

Each build step runs in its own session (a Ctrl-C at the terminal reaches this process, which
stops the step itself) and is written to a run record first (:mod:`emulator.journal`): the
scratch root filesystem, the debootstrap and build processes, and the build's unfinished
layers (labelled ``dtnet.build=<digest>``) are removed after an interrupted or failed build,
or by ``run_testbed.py clean`` after a killed one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from common.errors import EmulationError
from common.paths import PROJECT_ROOT
from emulator.containers import LABEL, SETUP_HINT, docker, docker_cli, docker_missing
from emulator.journal import Change, RunJournal, finish, recorded, run_recorded

BUILD_ROOT = os.environ.get("DTNET_BUILD_ROOT", "/var/tmp/dtnet-testbed-build")
"""Where a build's scratch root filesystem and log are made."""
DOCKERFILES = Path(PROJECT_ROOT) / "docker"
MIRRORS = {"debian": "http://deb.debian.org/debian", "ubuntu": "http://archive.ubuntu.com/ubuntu"}
"""Each distribution's mirror for debootstrap (``DTNET_MIRROR`` overrides)."""
COMPONENTS = {"debian": "main", "ubuntu": "main,universe"}
REPOS = ("dtnet-worker", "dtnet-worker-env", "dtnet-worker-base")
"""The project's image repositories, the image that depends on the others first."""
DEBOOTSTRAP_TIMEOUT_S = 900.0
BUILD_TIMEOUT_S = 900.0
SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".vagrant", ".mypy_cache", ".box"}
"""Directories of the project that are not its code (anywhere in the tree)."""
SKIP_TOP = {"results"}
"""Top-level directories of the project that are not its code (run results)."""
SKIP_SUFFIXES = (".egg-info", ".o", ".pyc")
SKIP_PATHS = {os.path.join("ina", "p4", "build")}
"""Build products the workers do not use (the P4 program's bmv2 JSON)."""
DIGEST_CHARS = 16


@dataclasses.dataclass(frozen=True)
class Distribution:
    """The distribution the base layer is made of: this machine's."""

    id: str
    codename: str
    mirror: str


@dataclasses.dataclass(frozen=True)
class WorkerImage:
    """The worker image a run uses, and whether (and how long) this run built it."""

    tag: str
    built: tuple[str, ...]  # the layers this call built, e.g. ("worker",); empty: all cached
    build_s: float
    docker_version: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# -- inputs and digests (pure but for reading files) ----------------------------------------------


def host_distribution(os_release: str = "/etc/os-release") -> Distribution:
    """This machine's distribution, for debootstrap.

    Raises:
        EmulationError: on anything but Debian or Ubuntu (debootstrap makes only those).
    """
    fields = {}
    with contextlib.suppress(OSError), open(os_release) as f:
        for line in f:
            key, sep, value = line.strip().partition("=")
            if sep:
                fields[key] = value.strip('"')
    dist, codename = fields.get("ID", ""), fields.get("VERSION_CODENAME", "")
    if dist not in MIRRORS or not codename:
        raise EmulationError(f"the worker image is built with debootstrap from Debian or Ubuntu; this machine is "
                             f"{fields.get('PRETTY_NAME', 'unknown')!r} ({os_release})")
    return Distribution(dist, codename, os.environ.get("DTNET_MIRROR", MIRRORS[dist]))


def project_files(root: str) -> list[str]:
    """The project's code and data: every file under ``root`` but caches, results, the venv,
    git and build products (:data:`SKIP_DIRS`, :data:`SKIP_TOP`, :data:`SKIP_SUFFIXES`), sorted."""
    out = []
    for top, dirs, files in os.walk(root):
        rel_top = os.path.relpath(top, root)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(SKIP_SUFFIXES)
                         and not (rel_top == "." and d in SKIP_TOP)
                         and os.path.normpath(os.path.join(rel_top, d)) not in SKIP_PATHS)
        out += [os.path.normpath(os.path.join(rel_top, f)) for f in files if not f.endswith(SKIP_SUFFIXES)]
    return sorted(out)


def tree_files(root: str) -> list[str]:
    """Every file and link under ``root`` (relative paths, sorted)."""
    out = []
    for top, dirs, files in os.walk(root):
        dirs.sort()
        out += [os.path.relpath(os.path.join(top, f), root) for f in files]
        out += [os.path.relpath(os.path.join(top, d), root) for d in dirs if os.path.islink(os.path.join(top, d))]
    return sorted(out)


def digest(parts: list[str]) -> str:
    """A short hex digest of a list of strings (order matters)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()[:DIGEST_CHARS]


def metadata_digest(root: str, files: list[str]) -> str:
    """Digest of files' paths, sizes and modification times (the venv: a gigabyte, rarely changed)."""
    parts = []
    for rel in files:
        st = os.lstat(os.path.join(root, rel))
        parts.append(f"{rel} {st.st_size} {st.st_mtime_ns} {st.st_mode:o}")
    return digest(parts)


def content_digest(root: str, files: list[str]) -> str:
    """Digest of files' paths and contents (the project: a few megabytes, changed often)."""
    h = hashlib.sha256()
    for rel in files:
        path = os.path.join(root, rel)
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        if os.path.islink(path):
            h.update(os.readlink(path).encode() + b"\0")
            continue
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:DIGEST_CHARS]


@dataclasses.dataclass(frozen=True)
class ImageInputs:
    """What the three layers are made of, and their tags."""

    dist: Distribution
    venv: str
    project: str
    packages: tuple[str, ...]
    base_tag: str
    env_tag: str
    tag: str


def image_inputs(venv: str | None = None, project: str = PROJECT_ROOT) -> ImageInputs:
    """Read this machine's inputs of the worker image and derive the tags of its layers."""
    venv = os.path.realpath(venv or os.path.join(project, ".venv"))
    if not os.path.exists(os.path.join(venv, "pyvenv.cfg")):
        raise EmulationError(f"no venv at {venv} to put in the worker image: run `sudo make setup`")
    dist = host_distribution()
    venv_digest = metadata_digest(venv, tree_files(venv))
    dockerfiles = [(DOCKERFILES / n).read_text() for n in ("worker-env.Dockerfile", "worker.Dockerfile")]
    packages = tuple(base_packages(venv))
    base = digest([dist.id, dist.codename, dist.mirror, *packages, venv, venv_digest])
    env = digest([base, dockerfiles[0]])
    worker = digest([env, dockerfiles[1], project, content_digest(project, project_files(project))])
    return ImageInputs(dist, venv, project, packages, f"{REPOS[2]}:{base}", f"{REPOS[1]}:{env}", f"{REPOS[0]}:{worker}")


def debootstrap_argv(dist: Distribution, packages: list[str], target: str) -> list[str]:
    """The debootstrap command of the base layer."""
    return ["debootstrap", "--variant=minbase", f"--components={COMPONENTS[dist.id]}",
            f"--include={','.join(sorted(packages))}", dist.codename, target, dist.mirror]


_LDD_LINE = re.compile(r"=>\s+(/\S+)")


def base_packages(venv: str) -> list[str]:
    """The distribution packages the venv needs from the base: its interpreter's and those of
    the libraries its compiled modules link outside the venv.

    Raises:
        EmulationError: when the venv's interpreter is not a distribution package's (a venv made
            from a Python built elsewhere cannot run on a debootstrapped base).
    """
    python = os.path.join(venv, "bin", "python")
    hops = []  # the interpreter's link chain out of the venv: each link is some package's
    while os.path.islink(python) and len(hops) < 40:
        python = os.path.join(os.path.dirname(python), os.readlink(python))
        if not python.startswith(venv + "/"):
            hops.append(os.path.normpath(python))
    libs: set[str] = set()
    sos = [os.path.join(top, f) for top, _, files in os.walk(venv) for f in files if ".so" in f]
    for i in range(0, len(sos), 200):
        cp = subprocess.run(["ldd", *sos[i:i + 200]], capture_output=True, text=True, check=False)
        libs.update(m.group(1) for m in _LDD_LINE.finditer(cp.stdout) if not m.group(1).startswith(venv + "/"))
    packages = {_package_of(hop) for hop in hops}
    if not hops or None in packages:
        raise EmulationError(f"the venv's interpreter {python} is not from a {host_distribution().id} package, so "
                             f"it cannot run in the worker image: make the venv with the distribution's python3 "
                             f"(`sudo make setup` does)")
    # An interpreter's -minimal package has a fraction of the standard library; its full one all.
    packages |= {p.removesuffix("-minimal") for p in packages}
    packages |= {p for p in map(_package_of, sorted(libs)) if p}
    return sorted(packages)


def _package_of(path: str) -> str | None:
    """The package that installed ``path`` (trying its /usr twin on merged-/usr systems), or None."""
    twin = path[4:] if path.startswith("/usr/") else "/usr" + path
    for candidate in (path, twin):
        cp = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True, check=False)
        if cp.returncode == 0 and cp.stdout:
            return cp.stdout.split(":", 1)[0].strip()
    return None


# -- building -------------------------------------------------------------------------------------


def image_exists(tag: str) -> bool:
    return docker(["image", "inspect", "--format", "{{.Id}}", tag], check=False).returncode == 0


def ensure_image(say: Callable[[str], None] = print, log_dir: str | None = None) -> WorkerImage:
    """The current worker image, built (the layers whose inputs changed) if missing.

    Args:
        say: progress lines.
        log_dir: where the build's log goes (default :data:`BUILD_ROOT`).

    Raises:
        EmulationError: one line naming what is missing (docker, dockerd, debootstrap, the
            mirror) or what failed, with the build log's path.
    """
    why = docker_missing()
    if why:
        raise EmulationError(why)
    version = docker(["version", "--format", "{{.Server.Version}}"]).stdout.strip()
    inputs = image_inputs()
    if image_exists(inputs.tag):
        return WorkerImage(inputs.tag, (), 0.0, version)
    os.makedirs(BUILD_ROOT, mode=0o700, exist_ok=True)
    log_path = os.path.join(log_dir or BUILD_ROOT, "worker-image-build.log")
    record = RunJournal("worker image build")
    t0, built = time.monotonic(), []
    try:
        with open(log_path, "ab") as log:
            if not image_exists(inputs.env_tag):
                if not image_exists(inputs.base_tag):
                    _build_base(inputs, record, log, say)
                    built.append("base")
                say(f"worker image: the venv ({inputs.venv}) into {inputs.env_tag}")
                _docker_build(inputs.env_tag, "worker-env.Dockerfile",
                              {"BASE": inputs.base_tag, "VENV": inputs.venv},
                              [("venv", inputs.venv, tree_files(inputs.venv))], record, log)
                built.append("env")
            say(f"worker image: the project ({inputs.project}) into {inputs.tag}")
            _docker_build(inputs.tag, "worker.Dockerfile",
                          {"ENV_IMAGE": inputs.env_tag, "VENV": inputs.venv, "PROJECT": inputs.project},
                          [("project", inputs.project, project_files(inputs.project))], record, log)
            built.append("worker")
        _remove_stale({inputs.tag, inputs.env_tag, inputs.base_tag})
    except BaseException as e:
        failures = record.unwind()
        if isinstance(e, EmulationError):
            raise EmulationError(f"{e} (build log: {log_path})"
                                 + (f"; not undone: {'; '.join(failures)}" if failures else "")) from None
        raise
    build_s = time.monotonic() - t0
    say(f"worker image: {inputs.tag} built in {build_s:.0f} s ({', '.join(built)})")
    return WorkerImage(inputs.tag, tuple(built), build_s, version)


def _build_base(inputs: ImageInputs, record: RunJournal, log, say) -> None:
    """debootstrap a root filesystem into scratch, import it as the base layer."""
    if shutil.which("debootstrap") is None:
        raise EmulationError(f"debootstrap is not installed (it makes the worker image's base): {SETUP_HINT}")
    packages = inputs.packages
    d = inputs.dist
    say(f"worker image: debootstrap {d.id} {d.codename} from {d.mirror} ({len(packages)} packages: "
        f"{', '.join(packages)}) into {inputs.base_tag}")
    scratch = os.path.join(BUILD_ROOT, f"rootfs-{os.getpid()}")
    tree = record.add(Change("tree", scratch, what="worker image root filesystem"))
    try:
        run_recorded(debootstrap_argv(d, packages, scratch), record, log, DEBOOTSTRAP_TIMEOUT_S,
                     f"debootstrap of {d.id} {d.codename} from {d.mirror} failed")
        label = f"{LABEL}=base"
        tar = subprocess.Popen(["tar", "-C", scratch, "--numeric-owner", "-c", "."], stdout=subprocess.PIPE,
                               stderr=log, start_new_session=True)
        try:
            run_recorded([docker_cli() or "docker", "import", "-c", f"LABEL {label}", "-", inputs.base_tag], record,
                         log, BUILD_TIMEOUT_S, "docker import of the root filesystem failed", stdin=tar.stdout)
        finally:
            tar.stdout.close()
            tar.wait()
    finally:
        left = record.undo(tree)
    if left is not None:
        raise EmulationError(f"could not remove the build's scratch directory {scratch}: {left}")


def _docker_build(tag: str, dockerfile: str, args: dict[str, str], trees: list[tuple[str, str, list[str]]],
                  record: RunJournal, log) -> None:
    """``docker build`` of one layer, its context (the Dockerfile and ``trees``: name in the
    context, directory, files) streamed as a tar; unfinished layers are labelled for removal."""
    build_id = tag.split(":", 1)[1]
    argv = [docker_cli() or "docker", "build", "--network", "none", "--force-rm", "-q", "-t", tag,
            "--build-arg", f"BUILD={build_id}"]
    for key, value in args.items():
        argv += ["--build-arg", f"{key}={value}"]
    change = record.add(Change("image_build", build_id, what=tag))
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}  # the classic builder: no buildx needed, nothing cached beside
    proc = subprocess.Popen([*argv, "-"], stdin=subprocess.PIPE, stdout=log, stderr=log, env=env,
                            start_new_session=True)
    with recorded(proc, record, f"docker build {tag}"):
        try:
            with tarfile.open(fileobj=proc.stdin, mode="w|") as tar:
                text = (DOCKERFILES / dockerfile).read_bytes()
                info = tarfile.TarInfo("Dockerfile")
                info.size, info.mtime = len(text), int(time.time())
                tar.addfile(info, io.BytesIO(text))
                for name, root, files in trees:
                    for rel in files:
                        tar.add(os.path.join(root, rel), arcname=f"{name}/{rel}", recursive=False)
            proc.stdin.close()
        except BrokenPipeError:
            pass  # the build stopped reading: its exit status and log say why
        finish(proc, BUILD_TIMEOUT_S, f"docker build of {tag} failed")
    record.discard(change)


def _remove_stale(keep: set[str]) -> None:
    """Remove the project's other image tags (older builds), dependents first."""
    for repo in REPOS:
        listed = docker(["image", "ls", "--filter", f"label={LABEL}", "--format", "{{.Repository}}:{{.Tag}}",
                         repo]).stdout.split()
        stale = [t for t in listed if t not in keep]
        if stale:
            docker(["image", "rm", *stale], check=False, timeout_s=120)


def main(argv: list[str] | None = None) -> int:
    """``python -m emulator.worker_image``: build the worker image now (``make setup DOCKER=1`` does)."""
    import sys

    try:
        image = ensure_image()
    except EmulationError as e:
        print(f"worker image: {e}", file=sys.stderr)
        return 2
    print(f"worker image: {image.tag} ({'built: ' + ', '.join(image.built) if image.built else 'up to date'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
