"""Workers in Docker containers on the emulated machines' network (``container: {engine: docker}``).

Each worker process (or, in the agent runtime, each machine's agent) runs in a container of its own,
of the locally built worker image (:mod:`emulator.worker_image`), started by ``docker run``: no
network of its own, its command entering the emulated machine's network namespace
(:data:`NETNS_PATH`) with ``nsenter --net``; a CPU cap; the venv and the code bind-mounted
read-only (:func:`image_mounts`), the run's directory read-write; the worker's variables named by
:data:`ENV_PREFIXES`. :class:`ContainerProcess` signals the container through the daemon. Every
container is in the run record (:mod:`emulator.journal`) before it starts.

The container's network, files, environment, processes and clean-up: ``docs/docker.md``.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import signal
import subprocess
import sys

from common.errors import EmulationError
from emulator.journal import Change

DOCKER_TIMEOUT_S = 30.0
"""Limit of one short docker command (kill, rm, version)."""
REMOVE_TIMEOUT_S = 120.0
"""Limit of removing containers or images (the daemon may take a while)."""
NETNS_PATH = "/run/dtnet/netns"
"""Where a container sees its emulated machine's network namespace."""
LABEL = "dtnet.testbed"
"""Label on everything the project makes in Docker: its value says what (``worker``, ``base``, ...)."""
ENV_PREFIXES = ("PYTHON", "OMP_", "MKL_", "GLOO_", "TORCH", "JOBS_", "DTNET_", "TESTBED_")
"""Environment variables passed into a worker's container, by name prefix."""
SETUP_HINT = "run `sudo make setup DOCKER=1` (installs docker.io and debootstrap, starts dockerd)"


def docker_cli() -> str | None:
    """Path of the docker client, or None."""
    return shutil.which("docker")


def docker(args: list[str], timeout_s: float = DOCKER_TIMEOUT_S, env: dict | None = None,
           check: bool = True) -> subprocess.CompletedProcess:
    """Run one docker client command in its own session (a terminal's Ctrl-C does not cut it short).

    Raises:
        EmulationError: with docker's message, when ``check`` and it fails or takes too long.
    """
    cli = docker_cli()
    if cli is None:
        raise EmulationError(f"docker is not installed: {SETUP_HINT}")
    try:
        cp = subprocess.run([cli, *args], capture_output=True, text=True, timeout=timeout_s, env=env,
                            start_new_session=True)
    except subprocess.TimeoutExpired:
        raise EmulationError(f"`docker {' '.join(args[:3])}` did not finish within {timeout_s:g} s") from None
    if check and cp.returncode != 0:
        raise EmulationError(f"`docker {' '.join(args[:3])}` exited {cp.returncode}: "
                             f"{(cp.stderr or cp.stdout).strip().splitlines()[-1:] or ''}")
    return cp


def remove_containers(changes: list[Change]) -> dict[Change, str | None]:
    """The journal's undo of ``container`` changes (:data:`emulator.journal.UNDO`): ``docker rm -f``
    the named containers at once; a container already gone is done."""
    names = [c.name for c in changes]
    try:
        docker(["rm", "-f", *names], timeout_s=REMOVE_TIMEOUT_S, check=False)
        left = set(docker(["ps", "-a", "--format", "{{.Names}}"]).stdout.split())
    except EmulationError as e:
        return dict.fromkeys(changes, str(e))
    return {c: "still there after `docker rm -f`" if c.name in left else None for c in changes}


def docker_missing() -> str | None:
    """Why worker containers cannot run here (None when the daemon answers)."""
    if docker_cli() is None:
        return f"docker is not installed: {SETUP_HINT}"
    try:
        cp = docker(["version", "--format", "{{.Server.Version}}"], timeout_s=10, check=False)
    except EmulationError as e:
        return f"dockerd does not answer ({e}): {SETUP_HINT}"
    if cp.returncode != 0 or not cp.stdout.strip():
        why = (cp.stderr.strip().splitlines() or ["no answer"])[-1]
        return f"dockerd is not running or not reachable ({why}): {SETUP_HINT}"
    return None


def server_version() -> str:
    """The Docker daemon's version (for the run's record of what ran)."""
    return docker(["version", "--format", "{{.Server.Version}}"]).stdout.strip()


def image_mounts() -> list[str]:
    """What every worker container mounts read-only at its own path, as the worker image holds
    neither: the venv this interpreter runs in (a worker's command is this interpreter) and the
    project's code."""
    from common.paths import PROJECT_ROOT

    return sorted({PROJECT_ROOT, *([sys.prefix] if sys.prefix != sys.base_prefix else [])})


def container_env_keys(env: dict) -> list[str]:
    """The variables of ``env`` a worker's container gets (:data:`ENV_PREFIXES`), sorted."""
    return sorted(k for k in env if k.startswith(ENV_PREFIXES))


def run_argv(name: str, image: str, netns: str, cpus: float, mounts: list[str], env_keys: list[str],
             workdir: str, argv: list[str], labels: dict[str, str],
             read_only: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The ``docker run`` arguments of one worker container (``docs/docker.md``, The container).

    Args:
        name: the container's name (unique on this machine).
        image: image reference.
        netns: path of the emulated machine's network namespace on this machine
            (``/proc/<pid>/ns/net`` of the machine's shell).
        cpus: CPU limit (``--cpus``).
        mounts: directories bind-mounted read-write at their own paths.
        env_keys: variables passed from the client's environment (``-e NAME``).
        workdir: the command's working directory.
        argv: the command, run in the machine's network namespace.
        labels: extra labels (``dtnet.testbed=worker`` is always set).
        read_only: directories bind-mounted read-only at their own paths (:func:`image_mounts`).
    """
    out = ["run", "--rm", "--init", "--name", name, "--network", "none", "--cap-add", "SYS_ADMIN",
           "--cpus", f"{cpus:g}", "--log-driver", "none", "--label", f"{LABEL}=worker",
           "-v", f"{netns}:{NETNS_PATH}:ro", "-w", workdir]
    for key, value in sorted(labels.items()):
        out += ["--label", f"{key}={value}"]
    for path in read_only:
        out += ["-v", f"{path}:{path}:ro"]
    for path in mounts:
        out += ["-v", f"{path}:{path}"]
    for key in env_keys:
        out += ["-e", key]
    return out + [image, "nsenter", f"--net={NETNS_PATH}", "--", *argv]


class ContainerProcess(subprocess.Popen):
    """The attached ``docker run`` client of one worker container.

    Its exit status is the worker's (``docker run`` returns once the container has exited and,
    with ``--rm``, has been removed). A signal goes to the container through the daemon
    (``docker kill``): the client alone would die and leave the container running. When the
    daemon cannot deliver it (the container is not created yet, or is gone), the client gets it.
    """

    def __init__(self, container: str, argv: list[str], **kwargs):
        self.container = container
        super().__init__(argv, **kwargs)

    def send_signal(self, sig: int) -> None:
        if self.poll() is not None:
            return
        cp = docker(["kill", "--signal", str(int(sig)), self.container], check=False)
        if cp.returncode != 0 and sig == signal.SIGKILL:
            super().send_signal(sig)


@dataclasses.dataclass(frozen=True)
class ContainerSettings:
    """What every worker container of a run gets: the image (a tag of
    :func:`emulator.worker_image.ensure_image`) and the CPU limit of each."""

    image: str
    cpus: float


class ContainerRunner:
    """Starts workers in containers on an emulated network's machines: an ``exec_fn``
    (:data:`workers.launcher.ExecFn`) for :func:`workers.launcher.launch` and :func:`workers.agent.launch_agents`.

    Args:
        net: the running :class:`emulator.net.EmulatedNetwork` (its machines' shells and run record).
        settings: image and CPU limit.
        mounts: directories the workers read and write (their specs, records and logs are there).
    """

    def __init__(self, net, settings: ContainerSettings, mounts: list[str]):
        self.net, self.settings = net, settings
        self.mounts = sorted({os.path.realpath(m) for m in mounts})
        self._names = itertools.count(1)

    def __call__(self, machine: str, argv: list[str], env: dict, log_path: str) -> ContainerProcess:
        from common.paths import PROJECT_ROOT

        host = self.net.hosts[machine]
        name = f"dtnet-{os.getpid()}-{next(self._names)}-{machine}"
        keys = container_env_keys(env)
        args = run_argv(name, self.settings.image, f"/proc/{host.pid}/ns/net", self.settings.cpus, self.mounts,
                        keys, PROJECT_ROOT, list(argv), {"dtnet.owner": str(os.getpid())}, image_mounts())
        what = " ".join(os.path.basename(a) for a in argv[:3])
        change = self.net.record.add(Change("container", name, what=f"{what} on {machine}"))
        client_env = {k: v for k, v in os.environ.items() if k.startswith("DOCKER_")}  # which daemon
        client_env.update((k, env[k]) for k in keys)
        with open(log_path, "ab") as log:
            try:
                proc = ContainerProcess(name, [docker_cli() or "docker", *args], stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=client_env,
                                        start_new_session=True)
            except OSError as e:
                self.net.record.discard(change)
                raise EmulationError(f"cannot start a worker container on {machine}: {e}") from None
        self.net.track(proc, change)
        return proc
