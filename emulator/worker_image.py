"""The worker image: made here of this machine's own packages, for workers in containers (:mod:`emulator.containers`).

Nothing is pulled or downloaded. The image, ``dtnet-worker:<digest>``, is one layer of the files
this machine's package manager installed for the venv's interpreter, the libraries its compiled
modules link and ``nsenter``, with their dependencies and the distribution's essential set; the
venv and the code are mounted, not copied in. The tag is a digest of the packages and of
:data:`RECIPE`; a new image is checked before it is tagged, and each build step is in a run
record (:mod:`emulator.journal`) first.

What goes in, the check, the tag and what an interrupted build leaves: ``docs/docker.md``.
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
import sys
import tarfile
import time
from collections.abc import Callable

from common.errors import EmulationError
from common.paths import PROJECT_ROOT
from emulator.containers import LABEL, REMOVE_TIMEOUT_S, SETUP_HINT, docker, docker_cli, docker_missing, image_mounts
from emulator.journal import Change, RunJournal, finish, recorded
from emulator.procs import run_in_session

BUILD_ROOT = os.environ.get("DTNET_BUILD_ROOT", "/var/tmp/dtnet-testbed-build")
"""Where builds keep their logs and scratch trees (the VM's box, :mod:`vm.box`)."""
REPO = "dtnet-worker"
"""The worker image's repository; its tags are digests of what it is made of."""
EXTRA_ENV = "DTNET_IMAGE_PACKAGES"
"""Installed packages to add to the image, comma-separated (e.g. ``procps,iproute2`` to look into a
running container)."""
LEFT_OUT = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/info/", "/usr/share/locale/", "/usr/share/lintian/",
            "/usr/share/bug/")
"""What the workers never read: documentation, manuals, translations, package checkers' notes."""
ACCOUNTS = {"/etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"
                           "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
            "/etc/group": "root:x:0:\nnogroup:x:65534:\n"}
"""The accounts a container runs as (written by packages' install scripts, which are not run here)."""
RECIPE = ("files-of-installed-packages", "depends+pre-depends+essential", *LEFT_OUT,
          *(f"{path}={text}" for path, text in sorted(ACCOUNTS.items())))
"""How the image is made from the packages (in its tag: a change to it makes a new image)."""
CHECK = "import workers.worker, workers.agent, torch.distributed"
IMPORT_TIMEOUT_S = 600.0
CHECK_TIMEOUT_S = 300.0
SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".vagrant", ".mypy_cache", ".box"}
"""Directories of the project that are not its code (anywhere in the tree)."""
SKIP_TOP = {"results"}
"""Top-level directories of the project that are not its code (run results)."""
SKIP_SUFFIXES = (".egg-info", ".o", ".pyc")
SKIP_PATHS = {os.path.join("ina", "p4", "build")}
"""Build products a copy of the project leaves out (the P4 program's bmv2 JSON)."""
MIRRORS = {"debian": "http://deb.debian.org/debian", "ubuntu": "http://archive.ubuntu.com/ubuntu"}
"""Each distribution's mirror for debootstrap (the VM's box; ``DTNET_MIRROR`` overrides)."""
DIGEST_CHARS = 16


@dataclasses.dataclass(frozen=True)
class Distribution:
    """The distribution a debootstrapped tree is made of: this machine's."""

    id: str
    codename: str
    mirror: str


@dataclasses.dataclass(frozen=True)
class WorkerImage:
    """The worker image a run uses, and whether (and how long) this run built it."""

    tag: str
    built: bool
    build_s: float
    docker_version: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Package:
    """One installed package, as ``dpkg-query`` lists it."""

    name: str
    arch: str
    version: str
    essential: bool
    depends: tuple[str, ...]  # Pre-Depends and Depends, each "a (>= 1) | b" as dpkg writes it
    provides: tuple[str, ...] = ()


# -- inputs (pure but for reading files and dpkg's database) --------------------------------------


def host_distribution(os_release: str = "/etc/os-release") -> Distribution:
    """This machine's distribution, for debootstrap (the VM's box).

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
        raise EmulationError(f"debootstrap makes only Debian or Ubuntu; this machine is "
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


def digest(parts: list[str]) -> str:
    """A short hex digest of a list of strings (order matters)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()[:DIGEST_CHARS]


DPKG_FORMAT = "${Package}\t${Architecture}\t${Version}\t${db:Status-Abbrev}\t${Essential}\t${Provides}\t" \
              "${Pre-Depends}\t${Depends}\n"


def parse_installed(text: str, native_arch: str) -> dict[str, Package]:
    """The installed packages in ``dpkg-query -W -f DPKG_FORMAT``'s output, by name (where two
    architectures of one package are installed, the machine's own)."""
    out: dict[str, Package] = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 8 or not fields[3].startswith("ii"):
            continue
        name, arch, version, _, essential, provides, pre, depends = fields
        if name in out and arch != native_arch:
            continue
        deps = tuple(d.strip() for d in f"{pre},{depends}".split(",") if d.strip())
        out[name] = Package(name, arch, version, essential == "yes", deps,
                            tuple(_name(p) for p in provides.split(",") if p.strip()))
    return out


def _name(relation: str) -> str:
    """A package name without its version constraint or architecture qualifier (``libc6:any (>= 2)``)."""
    return relation.strip().split(" ", 1)[0].split("(", 1)[0].split(":", 1)[0]


def closure(roots: list[str], installed: dict[str, Package]) -> list[str]:
    """``roots``, the installed essential packages and everything they depend on (Depends and
    Pre-Depends), sorted. Of alternatives (``a | b``) the first installed one is taken; a virtual
    name is the installed package that provides it.

    Raises:
        EmulationError: when a root is not installed, or a dependency is satisfied by nothing
            installed (dpkg's database is then broken).
    """
    providers: dict[str, str] = {}
    for p in sorted(installed.values(), key=lambda p: p.name):
        for v in p.provides:
            providers.setdefault(v, p.name)
    missing = [r for r in roots if r not in installed]
    if missing:
        raise EmulationError(f"not installed on this machine, so not in the worker image: {', '.join(missing)}")
    seen: set[str] = set()
    todo = [*roots, *(p.name for p in installed.values() if p.essential)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for relation in installed[name].depends:
            options = [_name(a) for a in relation.split("|")]
            found = next((o if o in installed else providers[o] for o in options
                          if o in installed or o in providers), None)
            if found is None:
                raise EmulationError(f"{name} depends on {relation!r}, which nothing installed satisfies "
                                     f"(check with `dpkg --audit`)")
            todo.append(found)
    return sorted(seen)


_LDD_LINE = re.compile(r"=>\s+(/\S+)")


def root_packages(venv: str) -> list[str]:
    """The packages the workers need from the machine: the venv's interpreter's (its full standard
    library too), those of the libraries its compiled modules link outside the venv, nsenter's,
    and :data:`EXTRA_ENV`'s.

    Raises:
        EmulationError: when the venv's interpreter or nsenter is not a package's (a venv made
            from a Python built elsewhere cannot run in the image).
    """
    python = os.path.join(venv, "bin", "python")
    hops = []  # the interpreter's link chain out of the venv: each link is some package's
    while os.path.islink(python) and len(hops) < 40:
        python = os.path.join(os.path.dirname(python), os.readlink(python))
        if not python.startswith(venv + "/"):
            hops.append(os.path.normpath(python))
    sos = [os.path.join(top, f) for top, _, files in os.walk(venv) for f in files if ".so" in f]
    libs: set[str] = set()
    for i in range(0, len(sos), 200):
        cp = subprocess.run(["ldd", *sos[i:i + 200]], capture_output=True, text=True, check=False)
        libs.update(m.group(1) for m in _LDD_LINE.finditer(cp.stdout) if not m.group(1).startswith(venv + "/"))
    nsenter = shutil.which("nsenter")
    owners = packages_of([*hops, *sorted(libs), *([nsenter] if nsenter else [])])
    if not hops or any(owners.get(h) is None for h in hops):
        raise EmulationError(f"the venv's interpreter {python} is not from a package of this machine's, so it "
                             f"cannot run in the worker image: make the venv with the distribution's python3 "
                             f"(`sudo make setup` does)")
    if nsenter is None or owners.get(nsenter) is None:
        raise EmulationError(f"nsenter (util-linux) is not installed from a package here: {SETUP_HINT}")
    packages = {owners[h] for h in hops}
    # An interpreter's -minimal package has a fraction of the standard library; its full one all.
    packages |= {p.removesuffix("-minimal") for p in packages}
    packages |= {p for p in owners.values() if p}
    packages |= {p.strip() for p in os.environ.get(EXTRA_ENV, "").split(",") if p.strip()}
    return sorted(packages)


def packages_of(paths: list[str]) -> dict[str, str | None]:
    """The package that installed each path (trying its /usr twin on merged-/usr systems), or None."""
    twins = {p: p[4:] if p.startswith("/usr/") else "/usr" + p for p in paths}
    cp = subprocess.run(["dpkg-query", "-S", *paths, *twins.values()], capture_output=True, text=True, check=False)
    owner: dict[str, str] = {}
    for line in cp.stdout.splitlines():
        if ": " in line and not line.startswith("diversion"):
            names, path = line.split(": ", 1)
            owner.setdefault(path.strip(), names.split(",")[0].split(":")[0].strip())
    return {p: owner.get(p) or owner.get(twins[p]) for p in paths}


@dataclasses.dataclass(frozen=True)
class ImageInputs:
    """What the image is made of, and its tag."""

    venv: str
    project: str
    packages: tuple[Package, ...]
    tag: str


def image_inputs(venv: str | None = None, project: str = PROJECT_ROOT) -> ImageInputs:
    """Read this machine's inputs of the worker image and derive its tag.

    Args:
        venv: the venv the workers run on (default: this interpreter's).
        project: the project's code.

    Raises:
        EmulationError: where the image cannot be made (no dpkg, no venv, a package missing).
    """
    venv = venv or sys.prefix
    if not os.path.exists(os.path.join(venv, "pyvenv.cfg")):
        raise EmulationError(f"no venv at {venv} for the workers in containers: run `sudo make setup`")
    if shutil.which("dpkg-query") is None:
        raise EmulationError("the worker image is made of this machine's Debian or Ubuntu packages: no dpkg-query here")
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=False).stdout.strip()
    listed = subprocess.run(["dpkg-query", "-W", "-f", DPKG_FORMAT], capture_output=True, text=True, check=True).stdout
    installed = parse_installed(listed, arch)
    names = closure(root_packages(venv), installed)
    packages = tuple(installed[n] for n in names)
    tag = digest([*RECIPE, arch, *(f"{p.name}:{p.arch}={p.version}" for p in packages)])
    return ImageInputs(venv, project, packages, f"{REPO}:{tag}")


def image_paths(listed: list[str], exists: Callable[[str], bool] = os.path.lexists,
                realdir: Callable[[str], str] = os.path.realpath) -> list[str]:
    """The paths to put in the image for the files packages list: each at its real place (a file
    listed under ``/lib`` on a merged-/usr machine is stored under ``/usr/lib``, and ``/lib`` as the
    link it is), with its parent directories, parents first; missing files and :data:`LEFT_OUT` skipped."""
    out: set[str] = set()
    for path in listed:
        if not path.startswith("/") or path in ("/", "/.") or not exists(path):
            continue
        real = os.path.join(realdir(os.path.dirname(path)), os.path.basename(path))
        if (real + "/").startswith(LEFT_OUT) or real.startswith(LEFT_OUT):
            continue
        out.add(real)
        parent = os.path.dirname(real)
        while parent != "/" and parent not in out:
            out.add(parent)
            parent = os.path.dirname(parent)
    return sorted(out)


def _package_files(packages: tuple[Package, ...]) -> list[str]:
    """Every path the packages installed (``dpkg-query -L``)."""
    specs = [p.name if p.arch == "all" else f"{p.name}:{p.arch}" for p in packages]
    cp = subprocess.run(["dpkg-query", "-L", *specs], capture_output=True, text=True, check=False)
    if cp.returncode != 0:
        raise EmulationError(f"dpkg-query -L failed: {cp.stderr.strip()[-300:]}")
    return [line for line in cp.stdout.splitlines() if line.startswith("/")]


# -- building -------------------------------------------------------------------------------------


def image_exists(tag: str) -> bool:
    return docker(["image", "inspect", "--format", "{{.Id}}", tag], check=False).returncode == 0


def ensure_image(say: Callable[[str], None] = print, log_dir: str | None = None) -> WorkerImage:
    """The current worker image, made if missing.

    Args:
        say: progress lines.
        log_dir: where the build's log goes (default :data:`BUILD_ROOT`).

    Raises:
        EmulationError: one line naming what is missing (docker, dockerd, a package) or what
            failed, with the build log's path.
    """
    why = docker_missing()
    if why:
        raise EmulationError(why)
    version = docker(["version", "--format", "{{.Server.Version}}"]).stdout.strip()
    inputs = image_inputs()
    if image_exists(inputs.tag):
        return WorkerImage(inputs.tag, False, 0.0, version)
    os.makedirs(BUILD_ROOT, mode=0o700, exist_ok=True)
    log_path = os.path.join(log_dir or BUILD_ROOT, "worker-image-build.log")
    record = RunJournal("worker image build")
    t0 = time.monotonic()
    try:
        with open(log_path, "ab") as log:
            _build(inputs, record, log, say)
        _remove_stale(inputs.tag)
    except BaseException as e:
        failures = record.unwind()
        if isinstance(e, EmulationError):
            raise EmulationError(f"{e} (build log: {log_path})"
                                 + (f"; not undone: {'; '.join(failures)}" if failures else "")) from None
        raise
    build_s = time.monotonic() - t0
    say(f"worker image: {inputs.tag} built in {build_s:.0f} s")
    return WorkerImage(inputs.tag, True, build_s, version)


def _build(inputs: ImageInputs, record: RunJournal, log, say: Callable[[str], None]) -> None:
    """Import the packages' files as an untagged image, check it, then tag it; the build's
    label (:data:`LABEL` and ``dtnet.build``) lets an interrupted build's leftovers be found."""
    build_id = f"{inputs.tag.split(':', 1)[1]}-{os.getpid()}"
    label = f"dtnet.build={build_id}"
    paths = image_paths(_package_files(inputs.packages))
    say(f"worker image: {len(inputs.packages)} packages of this machine ({len(paths)} files and directories) "
        f"into {inputs.tag}")
    change = record.add(Change("image_build", build_id, what=inputs.tag))
    cli = docker_cli() or "docker"
    proc = subprocess.Popen([cli, "import", "-c", f"LABEL {LABEL}=worker", "-c", f"LABEL {label}", "-"],
                            stdin=subprocess.PIPE, stdout=log, stderr=log, start_new_session=True)
    with recorded(proc, record, "docker import"):
        try:
            _write_tree(proc.stdin, paths)
            proc.stdin.close()
        except BrokenPipeError:
            pass  # the import stopped reading: its exit status and log say why
        finish(proc, IMPORT_TIMEOUT_S, "docker import of the packages' files failed")
    ids = docker(["images", "-q", "--no-trunc", "--filter", "dangling=true", "--filter", f"label={label}"]).stdout
    if len(ids.split()) != 1:
        raise EmulationError(f"docker import left {len(ids.split())} images labelled {label}, not one")
    image_id = ids.split()[0]
    say(f"worker image: checking that a container of it runs the workers ({CHECK})")
    mounts = [a for m in image_mounts() for a in ("-v", f"{m}:{m}:ro")]
    check = [cli, "run", "--rm", "--name", f"dtnet-build-{build_id}", "--network", "none", "--cap-add", "SYS_ADMIN",
             "--label", f"{LABEL}=build", "--label", label, *mounts, "-w", inputs.project,
             "-e", f"PYTHONPATH={inputs.project}", image_id, "nsenter", "--net=/proc/self/ns/net", "--",
             os.path.join(inputs.venv, "bin", "python"), "-c", CHECK]
    out = io.BytesIO()
    proc = subprocess.Popen(check, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    with recorded(proc, record, "docker run (image check)"):
        try:
            out.write(proc.communicate(timeout=CHECK_TIMEOUT_S)[0])
        except subprocess.TimeoutExpired:
            raise EmulationError(f"the image check did not finish within {CHECK_TIMEOUT_S:g} s") from None
    log.write(out.getvalue())
    if proc.returncode != 0:
        last = out.getvalue().decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise EmulationError(f"a container of the new worker image cannot run the workers "
                             f"(`{CHECK}` exited {proc.returncode}: {last[0]})")
    docker(["tag", image_id, inputs.tag])
    record.discard(change)


def _write_tree(stream, paths: list[str]) -> None:
    """A tar of ``paths`` (as they are on this machine, owners by number) and :data:`ACCOUNTS`,
    with the empty directories a root file system has, onto ``stream``."""
    with tarfile.open(fileobj=stream, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for name, mode in (("tmp", 0o1777), ("root", 0o700), ("etc", 0o755), ("proc", 0o555), ("sys", 0o555),
                           ("dev", 0o755), ("run", 0o755)):
            if f"/{name}" not in paths:
                info = tarfile.TarInfo(name)
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, int(time.time())
                tar.addfile(info)
        for path in paths:
            info = tar.gettarinfo(path, arcname=path.lstrip("/"))
            info.uname = info.gname = ""
            if info.isreg():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
        for path, text in sorted(ACCOUNTS.items()):
            data = text.encode()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))


def _remove_stale(keep: str) -> None:
    """Remove the project's other tagged images (older builds, and the layers of earlier image formats)."""
    listed = docker(["image", "ls", "--filter", f"label={LABEL}", "--format", "{{.Repository}}:{{.Tag}}"]).stdout
    stale = [t for t in listed.split() if t != keep and "<none>" not in t]
    if stale:
        docker(["image", "rm", *stale], check=False, timeout_s=120)


# -- undoing a build (the journal's handlers, :data:`emulator.journal.UNDO`) -----------------------


def remove_builds(changes: list[Change]) -> dict[Change, str | None]:
    """``image_build``: the unfinished layers of interrupted image builds."""
    return {c: _remove_build(c) for c in changes}


def _remove_build(c: Change) -> str | None:
    """An interrupted build's containers and untagged images, found by the build's label (tagged
    images are finished ones, kept as the cache)."""
    label = f"dtnet.build={c.name}"
    try:
        ids = docker(["ps", "-aq", "--filter", f"label={label}"]).stdout.split()
        if ids:
            docker(["rm", "-f", *ids], timeout_s=REMOVE_TIMEOUT_S)
        docker(["image", "prune", "-f", "--filter", f"label={label}"], timeout_s=REMOVE_TIMEOUT_S)
    except EmulationError as e:
        return str(e)
    return None


def remove_trees(changes: list[Change]) -> dict[Change, str | None]:
    """``tree``: scratch directories of builds (a worker image's or the VM's box) or of VM runs."""
    return {c: _remove_tree(c) for c in changes}


def _remove_tree(c: Change) -> str | None:
    """A scratch directory with whatever was mounted in it (debootstrap mounts /proc and /sys in its
    target while it runs); only ever one directly under :data:`BUILD_ROOT`."""
    path = os.path.realpath(c.name)
    if os.path.dirname(path) != os.path.realpath(BUILD_ROOT):
        return f"not a build directory of ours (outside {BUILD_ROOT})"
    with open("/proc/mounts") as f:
        inside = [line.split()[1] for line in f if line.split()[1].startswith(path + "/")]
    for mount in sorted(inside, key=len, reverse=True):
        cp = run_in_session(["umount", "-l", mount])
        if cp.returncode != 0:
            return f"cannot unmount {mount}: {cp.stderr.strip()}"
    shutil.rmtree(path, ignore_errors=True)
    return f"{path} could not be removed" if os.path.exists(path) else None


def main(argv: list[str] | None = None) -> int:
    """``python -m emulator.worker_image``: build the worker image now (``make setup DOCKER=1`` does)."""
    try:
        image = ensure_image()
    except EmulationError as e:
        print(f"worker image: {e}", file=sys.stderr)
        return 2
    print(f"worker image: {image.tag} ({'built' if image.built else 'up to date'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
