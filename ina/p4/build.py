"""The P4 tools (bmv2 ``simple_switch``, its runtime CLI, ``p4c-bm2-ss``) and the aggregator's build.

:func:`find_toolchain` looks in ``$P4_PREFIX``, then ``/opt/p4``, then the ``PATH`` (first found
wins), prefers a prefix's ``perf/bin/simple_switch`` and rebuilds the library links of a prefix
copied without them. :func:`compile_program` compiles ``aggregator.p4`` into :data:`BUILD_DIR` when
its source, slot count or compiler changed. ``.venv/bin/python -m ina.p4.build`` does that from the set-up and
says which engine INA will use: bmv2, or the software engine where no toolchain is found.

Where the tools come from and how to install them: ``docs/ina.md`` (Setting up bmv2 and p4c).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys

from common.errors import TestbedError
from ina.protocol import VALUES_PER_PACKET, check_values_per_packet

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "aggregator.p4")
BUILD_DIR = os.path.join(HERE, "build")
DEFAULT_PREFIX = "/opt/p4"
DEFAULT_SLOTS = 4096
"""Register size of the slot pool; a run uses any power of two up to it (table ``ina_config``)."""
_LINK_FILE_MAX = 256  # a flattened library link is a file this small naming its target

SEARCH_PATH: str | None = None
"""The directories searched for the tools after the prefixes, as ``PATH`` writes them (None: ``$PATH``)."""


class P4Error(TestbedError):
    """The P4 toolchain is missing, or the program did not compile or run."""


@dataclasses.dataclass(frozen=True)
class Toolchain:
    """Paths of the P4 tools and the environment they need.

    Attributes:
        origin: where they were found (``P4_PREFIX=...``, ``/opt/p4`` or ``PATH``).
        p4c: the compiler, ``p4c-bm2-ss``.
        simple_switch: the switch binary.
        cli: ``simple_switch_CLI``.
        include: the compiler's include directory (None: it finds its own).
        lib_path: directories to put first on ``LD_LIBRARY_PATH`` (rebuilt library links), or ().
    """

    origin: str
    p4c: str
    simple_switch: str
    cli: str
    include: str | None = None
    lib_path: tuple[str, ...] = ()

    def env(self) -> dict[str, str]:
        """The environment to run the tools in."""
        env = dict(os.environ)
        if self.lib_path:
            env["LD_LIBRARY_PATH"] = os.pathsep.join([*self.lib_path, *filter(None, [env.get("LD_LIBRARY_PATH")])])
        if self.include:
            env["P4C_16_INCLUDE_PATH"] = self.include
        return env


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def relinked_libs(lib_dir: str, out_dir: str) -> str | None:
    """Rebuild flattened library links of ``lib_dir`` as symbolic links in ``out_dir``.

    A flattened link is a regular file of under 256 bytes whose whole content is the name of a
    file beside it (``libbmall.so.0`` holding ``libbmall.so.0.0.0``). Returns ``out_dir`` when
    ``lib_dir`` had any, else None (its links work as they are).
    """
    if not os.path.isdir(lib_dir):
        return None
    links = {}
    for name in sorted(os.listdir(lib_dir)):
        path = os.path.join(lib_dir, name)
        if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) >= _LINK_FILE_MAX:
            continue
        with open(path, "rb") as f:
            target = f.read().decode("ascii", errors="replace").strip()
        if target and "/" not in target and target != name and os.path.isfile(os.path.join(lib_dir, target)):
            links[name] = target
    if not links:
        return None
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(lib_dir):
        if os.path.isfile(os.path.join(lib_dir, name)):
            real = os.path.join(lib_dir, links.get(name, name))
            link = os.path.join(out_dir, name)
            if os.path.realpath(link) != os.path.realpath(real):
                if os.path.lexists(link):
                    os.remove(link)
                os.symlink(real, link)
    return out_dir


def _from_prefix(prefix: str, origin: str) -> Toolchain | None:
    bins = {n: os.path.join(prefix, "bin", n) for n in ("p4c-bm2-ss", "simple_switch", "simple_switch_CLI")}
    if not all(_executable(p) for p in bins.values()):
        return None
    perf = os.path.join(prefix, "perf", "bin", "simple_switch")
    switch, lib = (perf, os.path.join(prefix, "perf", "lib")) if _executable(perf) else (
        bins["simple_switch"], os.path.join(prefix, "lib"))
    tag = hashlib.sha256(os.path.realpath(prefix).encode()).hexdigest()[:12]
    lib_path = tuple(p for p in (relinked_libs(lib, os.path.join(BUILD_DIR, f"runtime-{tag}", "switch")),
                                 relinked_libs(os.path.join(prefix, "lib"),
                                               os.path.join(BUILD_DIR, f"runtime-{tag}", "lib"))) if p)
    include = os.path.join(prefix, "share", "p4c", "p4include")
    return Toolchain(origin, bins["p4c-bm2-ss"], switch, bins["simple_switch_CLI"],
                     include if os.path.isdir(include) else None, lib_path)


def find_toolchain() -> tuple[Toolchain | None, str]:
    """The P4 tools (see ``docs/ina.md``), or None and why not."""
    tried = []
    env_prefix = os.environ.get("P4_PREFIX")
    for prefix, origin in ((env_prefix, f"P4_PREFIX={env_prefix}"), (DEFAULT_PREFIX, DEFAULT_PREFIX)):
        if prefix:
            tc = _from_prefix(prefix, origin)
            if tc is not None:
                return tc, origin
            tried.append(prefix)
    found = {n: shutil.which(n, path=SEARCH_PATH) for n in ("p4c-bm2-ss", "simple_switch", "simple_switch_CLI")}
    if all(found.values()):
        return Toolchain("PATH", found["p4c-bm2-ss"], found["simple_switch"], found["simple_switch_CLI"]), "PATH"
    return None, (f"no bmv2/p4c: none of {', '.join(tried + ['PATH'])} has p4c-bm2-ss, simple_switch and "
                  f"simple_switch_CLI (set P4_PREFIX to a prefix that has)")


def runs(tc: Toolchain) -> str | None:
    """Why the switch binary cannot start here (missing shared libraries), or None."""
    try:
        p = subprocess.run([tc.simple_switch, "--version"], capture_output=True, text=True, env=tc.env(), timeout=20)
    except OSError as e:
        return f"{tc.simple_switch}: {e}"
    except subprocess.TimeoutExpired:
        return f"{tc.simple_switch} --version did not answer in 20 s"
    if p.returncode != 0:
        return f"{tc.simple_switch} does not start: {(p.stderr or p.stdout).strip()[:300]}"
    return None


ENGINES = ("bmv2", "software")
"""INA engines, best first: bmv2 running ``aggregator.p4``, and the software engine (:mod:`ina.softswitch`)."""


def engine_available() -> tuple[str, str]:
    """Which INA engine a run here would use, ``bmv2`` or ``software``, and why."""
    tc, why = find_toolchain()
    if tc is not None:
        why = runs(tc)
        if why is None:
            return "bmv2", f"bmv2 simple_switch from {tc.origin}"
    return "software", why


def _compiler_version(tc: Toolchain) -> str:
    p = subprocess.run([tc.p4c, "--version"], capture_output=True, text=True, env=tc.env(), timeout=60)
    return p.stdout.strip()


def lanes_macro(lanes: int) -> str:
    """The program's ``FOR_LANES`` for ``lanes`` value lanes (the preprocessor has no loop)."""
    return "#define FOR_LANES(X) " + " ".join(f"X({k})" for k in range(lanes)) + "\n"


def compile_program(tc: Toolchain, slots: int = DEFAULT_SLOTS, source: str = PROGRAM,
                    out_dir: str = BUILD_DIR, lanes: int = VALUES_PER_PACKET) -> str:
    """The bmv2 JSON of ``source`` with ``slots`` slot registers and ``lanes`` values per packet,
    compiled unless up to date.

    Raises:
        InaError: ``lanes`` out of range.
        P4Error: the compiler failed (its message included).
    """
    check_values_per_packet(lanes)
    with open(source, "rb") as f:
        text = f.read()
    stamp_of = hashlib.sha256(text + f"|{slots}|{lanes}|{_compiler_version(tc)}".encode()).hexdigest()
    base = os.path.splitext(os.path.basename(source))[0]
    out = os.path.join(out_dir, f"{base}-{slots}.json" if lanes == VALUES_PER_PACKET
                       else f"{base}-{slots}-{lanes}lanes.json")
    stamp = out + ".sha256"
    if os.path.isfile(out) and os.path.isfile(stamp):
        with open(stamp) as f:
            if f.read().strip() == stamp_of:
                return out
    os.makedirs(out_dir, exist_ok=True)
    tmp = out + ".tmp"
    cmd = [tc.p4c, f"-DINA_SLOTS={slots}", "-o", tmp, source]
    if lanes != VALUES_PER_PACKET:
        include = os.path.join(out_dir, f"lanes-{lanes}")
        os.makedirs(include, exist_ok=True)
        with open(os.path.join(include, "ina_lanes.p4"), "w") as f:
            f.write(lanes_macro(lanes))
        cmd[2:2] = [f"-DLANES={lanes}", "-DLANES_FILE", "-I", include]
    if tc.include:
        cmd[1:1] = ["-I", tc.include]
    p = subprocess.run(cmd, capture_output=True, text=True, env=tc.env(), timeout=600)
    if p.returncode != 0 or not os.path.isfile(tmp):
        raise P4Error(f"p4c-bm2-ss failed on {source}: {(p.stderr or p.stdout).strip()[-2000:]}")
    os.replace(tmp, out)
    with open(stamp, "w") as f:
        f.write(stamp_of + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """``.venv/bin/python -m ina.p4.build``: compile the aggregator if a toolchain is found; say which engine runs."""
    del argv
    tc, why = find_toolchain()
    if tc is None:
        print(f"ina: {why}; INA runs on the software engine (ina.aggregator)")
        return 0
    broken = runs(tc)
    if broken:
        print(f"ina: bmv2 from {tc.origin} cannot run: {broken}; INA runs on the software engine")
        return 0
    try:
        out = compile_program(tc)
    except (P4Error, OSError, subprocess.TimeoutExpired) as e:
        print(f"ina: {e}", file=sys.stderr)
        return 1
    print(f"ina: P4 aggregator built: {out} (bmv2 from {tc.origin})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
