"""A VM run: boot the full-feature VM, run in it what needs a stock kernel, copy the results out,
destroy it, and leave nothing on this machine.

The stock kernel's paths (the Open vSwitch kernel datapath, kernel RED for ECN, netem) run only
in the VM where the host's kernel lacks them. One run (``make vm``, ``.venv/bin/python -m vm``) builds the box
when it is missing (:mod:`vm.box`), picks KVM or TCG by a probe (:mod:`vm.accel`), brings the VM up
with libvirt and Vagrant in names and a Vagrant home of the run's own, runs the guest steps
(:data:`STEPS`), copies ``results/vm`` out, destroys the VM and undoes every recorded change
(:mod:`emulator.journal`). ``vm.json`` holds the machine's libvirt state before and after, what
differs, every step's time and exit status and the probe.

The run step by step: ``docs/vm.md`` (``make vm``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import ipaddress
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from common.errors import EmulationError
from common.jsonfile import write_json_atomic
from common.paths import PROJECT_ROOT
from emulator.journal import Change, EmulatorLock, RunJournal, process_change, require_no_leftovers
from emulator.procs import run_in_session
from emulator.worker_image import BUILD_ROOT
from vm import accel, box, marks

LIBVIRT_URI = "qemu:///system"
"""The libvirt connection of the VM run's domain, network and storage pool."""
VAGRANT_DIR = Path(PROJECT_ROOT) / "vagrant" / "debian"
GUEST_RESULTS = "/testbed/results/vm"
GUEST_CONFIG = "experiments/vm.yaml"
"""The experiment run in the VM: sized for software emulation (its dilation), with kernel RED."""
LIBVIRT_START_TIMEOUT_S = 60.0
UNDO_TIMEOUT_S = 120.0
"""Limit of one ``virsh`` command undoing the run's objects (destroying a domain takes a while)."""
UP_TIMEOUT_S = 5400.0
STEP_TIMEOUT_S = 5400.0
DESTROY_TIMEOUT_S = 600.0
SETTLE_TIMEOUT_S = 15.0
SUBNETS = tuple(f"192.168.{n}.0/24" for n in range(121, 250))
"""Where the isolated management network's /24 is chosen: the first that no interface of this machine is in."""
DAEMONS = ("virtlogd", "libvirtd")
"""libvirt's daemons, started by the run (in this order) where none answers and systemd does not run."""
PROCESS_NAMES = ("libvirtd", "virtlogd", "dnsmasq", "qemu-system-x86_64")
LIBVIRT_CHAINS = ("filter/LIBVIRT_INP", "filter/LIBVIRT_OUT", "filter/LIBVIRT_FWO", "filter/LIBVIRT_FWI",
                  "filter/LIBVIRT_FWX", "nat/LIBVIRT_PRT", "mangle/LIBVIRT_PRT")
"""The chains libvirt's networks put their rules in; libvirt makes them with its first network and keeps them."""
LIBVIRT_FILES = ("/etc/libvirt/qemu/*.xml", "/etc/libvirt/qemu/networks/*.xml", "/etc/libvirt/storage/*.xml",
                 "/var/lib/libvirt/images/*", "/var/log/libvirt/qemu/*.log", "/var/lib/libvirt/dnsmasq/*")
"""libvirt's definitions of domains, networks and pools, its default pool's volumes, domain logs, network leases."""


@dataclasses.dataclass(frozen=True)
class GuestStep:
    """One command run in the guest (as root, in ``/testbed``), its output in ``<name>.log``."""

    name: str
    command: str
    what: str


GUEST_TESTS = ("tests/test_emulation_ecn.py", "tests/test_emulation_red.py", "tests/test_emulation_mltcp.py")
"""The ECN marking paths: the BPF marker's on the kernel datapath, and kernel RED's, which skips where
the kernel has no ``sch_red``; MLTCP's congestion controls (BPF ``struct_ops``) on the stock kernel."""
STEPS = (
    GuestStep("capabilities", ".venv/bin/python -c 'import json; from emulator.capabilities import detect; "
                              "print(json.dumps(detect().to_dict(), indent=1))' "
                              f"| tee {GUEST_RESULTS}/capabilities.json",
              "what the testbed detects in the VM (datapath, qdiscs, ECN marker)"),
    GuestStep("tests", f".venv/bin/python -m pytest -q -rs -p no:cacheprovider --junitxml={GUEST_RESULTS}/tests.xml "
                       + " ".join(GUEST_TESTS), "the tests that need the stock kernel's paths"),
    GuestStep("experiment-red", f".venv/bin/python run_testbed.py run -c {GUEST_CONFIG} --results {GUEST_RESULTS}/red",
              f"{GUEST_CONFIG} with kernel RED marking"),
    GuestStep("experiment-bpf", f"sed 's/^  method: red$/  method: bpf/' {GUEST_CONFIG} > {GUEST_RESULTS}/vm-bpf.yaml"
                                f" && .venv/bin/python run_testbed.py run -c {GUEST_RESULTS}/vm-bpf.yaml "
                                f"--results {GUEST_RESULTS}/bpf",
              f"{GUEST_CONFIG} with the BPF marker, for the marks side by side"),
    GuestStep("bench-marks", f".venv/bin/python bench/ecn.py --skip overhead,k,capacity --rate 5 --seconds 20 "
                             f"| tee {GUEST_RESULTS}/bench-marks.txt",
              "kernel RED beside the BPF marker on one bottleneck, the real and virtual queues sampled"),
)


@dataclasses.dataclass
class StepResult:
    name: str
    seconds: float
    exit_code: int | None  # None: timed out
    log: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


# -- pure helpers ------------------------------------------------------------------------------


def free_subnet(in_use: list[str], candidates: tuple[str, ...] = SUBNETS) -> str:
    """The first candidate /24 that holds none of this machine's addresses (``in_use``, CIDR or bare).

    Raises:
        EmulationError: when every candidate is taken.
    """
    used = [ipaddress.ip_interface(a).network for a in in_use if a]
    for net in candidates:
        n = ipaddress.ip_network(net)
        if not any(n.overlaps(u) for u in used if u.version == 4):
            return net
    raise EmulationError(f"no free /24 for the VM's management network among {candidates[0]} .. {candidates[-1]}")


def leftovers(before: dict[str, list[str]], after: dict[str, list[str]]) -> dict[str, list[str]]:
    """What ``after`` has that ``before`` had not, per kind (empty kinds left out)."""
    out = {}
    for kind, items in after.items():
        new = sorted(set(items) - set(before.get(kind, [])))
        if new:
            out[kind] = new
    return out


# -- the machine's state (impure reads) --------------------------------------------------------


def _out(argv: list[str]) -> str:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return cp.stdout if cp.returncode == 0 else ""


def _libvirt_answers() -> bool:
    return shutil.which("virsh") is not None and bool(_out(["virsh", "-c", LIBVIRT_URI, "uri"]))


def _virsh_names(*argv: str) -> list[str]:
    return _out(["virsh", "-q", "-c", LIBVIRT_URI, *argv]).split()


def host_state() -> dict[str, list[str]]:
    """libvirt's domains, networks, pools and volumes (as its daemon answers, and as files on disk), the
    virtualization processes, the firewall's chains and the network interfaces, as names (PIDs with their
    command for processes)."""
    state: dict[str, list[str]] = {"domains": [], "networks": [], "pools": [], "volumes": []}
    if _libvirt_answers():
        state["domains"] = _virsh_names("list", "--all", "--name")
        state["networks"] = _virsh_names("net-list", "--all", "--name")
        state["pools"] = _virsh_names("pool-list", "--all", "--name")
        state["volumes"] = [f"{p}/{v}" for p in state["pools"] for v in _virsh_names("vol-list", p, "--name")]
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm in PROCESS_NAMES or comm.startswith("qemu-system"):
            procs.append(f"{pid} {comm}")
    state["processes"] = procs
    chains = []
    for table in ("filter", "nat", "mangle"):
        for line in _out(["iptables", "-t", table, "-S"]).splitlines():
            if line.startswith("-N "):
                chains.append(f"{table}/{line[3:]}")
    state["firewall_chains"] = chains
    state["bridges"] = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []
    # What libvirt keeps on disk, seen whether or not its daemon runs (a run may stop the one it started).
    state["libvirt_files"] = sorted(path for pattern in LIBVIRT_FILES for path in glob.glob(pattern))
    return state


def settled(before: dict[str, list[str]], timeout_s: float = SETTLE_TIMEOUT_S) -> dict[str, list[str]]:
    """The host's state once what the run stopped has exited (libvirt's dnsmasq goes a moment after
    its network), or as it is after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        after = host_state()
        if not leftovers(before, after) or time.monotonic() > deadline:
            return after
        time.sleep(0.5)


def host_addresses() -> list[str]:
    return [a for line in _out(["ip", "-o", "-4", "addr", "show"]).splitlines()
            for a in line.split()[3:4]]


# -- undoing the run's libvirt objects and firewall chains (the journal's handlers) ---------------


def remove_domains(changes: list[Change]) -> dict[Change, str | None]:
    """``vm_domain``: stop and undefine each domain, and remove its console log, which libvirt keeps
    after the domain goes (:data:`emulator.journal.UNDO`)."""
    def forget_log(name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"/var/log/libvirt/qemu/{name}.log")

    return {c: _undefine(c.name, "dominfo", "destroy", "undefine", first=forget_log) for c in changes}


def remove_networks(changes: list[Change]) -> dict[Change, str | None]:
    """``vm_network``: stop and undefine each network (:data:`emulator.journal.UNDO`)."""
    return {c: _undefine(c.name, "net-info", "net-destroy", "net-undefine") for c in changes}


def remove_pools(changes: list[Change]) -> dict[Change, str | None]:
    """``vm_pool``: delete every volume in each storage pool, then stop and undefine it
    (:data:`emulator.journal.UNDO`)."""
    def empty(name: str) -> None:
        _virsh("pool-refresh", name)
        for volume in _virsh("vol-list", name, "--name").stdout.split():
            _virsh("vol-delete", "--pool", name, volume)

    return {c: _undefine(c.name, "pool-info", "pool-destroy", "pool-undefine", present=empty) for c in changes}


def _virsh(*argv: str) -> subprocess.CompletedProcess:
    return run_in_session(["virsh", "-q", "-c", LIBVIRT_URI, *argv], timeout_s=UNDO_TIMEOUT_S)


def _undefine(name: str, info: str, stop: str, forget: str, first: Callable[[str], None] | None = None,
              present: Callable[[str], None] | None = None) -> str | None:
    """Stop and undefine the libvirt object ``name`` (its ``virsh`` verbs ``info``, ``stop`` and
    ``forget``), calling ``first`` before looking it up and ``present`` when it is there; skipped when
    libvirt is not installed or no longer has it. None, or why it is still there."""
    if shutil.which("virsh") is None:
        return None
    if first is not None:
        first(name)
    if _virsh(info, name).returncode != 0:
        return None
    if present is not None:
        present(name)
    _virsh(stop, name)  # fails harmlessly when it was not running
    cp = _virsh(forget, name)
    if cp.returncode != 0 and _virsh(info, name).returncode == 0:
        return cp.stderr.strip() or f"virsh {forget} exited {cp.returncode}"
    return None


def remove_firewall_chains(changes: list[Change]) -> dict[Change, str | None]:
    """``fw_chain`` (``table/chain``): an iptables chain libvirt made for the run (it keeps them, empty,
    after its networks go): the jumps to it and the chain itself, only while nothing but those jumps
    uses it (:data:`emulator.journal.UNDO`)."""
    return {c: _remove_chain(*c.name.partition("/")[::2]) for c in changes}


def _remove_chain(table: str, chain: str) -> str | None:
    if shutil.which("iptables") is None:
        return None
    rules = run_in_session(["iptables", "-t", table, "-S"]).stdout.splitlines()
    if f"-N {chain}" not in rules:
        return None
    if any(r.startswith(f"-A {chain} ") for r in rules):
        return "it has rules again (someone else's): left alone"
    for rule in rules:
        if rule.endswith(f" -j {chain}") and rule.startswith("-A "):
            run_in_session(["iptables", "-t", table, "-D", *rule[3:].split()])
    cp = run_in_session(["iptables", "-t", table, "-X", chain])
    return None if cp.returncode == 0 else cp.stderr.strip()


# -- the run -----------------------------------------------------------------------------------


class VmRun:
    """One run of the VM: everything it makes is in ``record`` before it is made.

    Args:
        results: where ``vm.json``, the logs and the guest's ``results/vm`` go.
        record: the run record.
        say: progress lines.
        p4_prefix: a bmv2/p4c prefix synced into the VM (None: INA on its software engine).
    """

    def __init__(self, results: str, record: RunJournal, say: Callable[[str], None] = print,
                 p4_prefix: str | None = None):
        self.results = Path(results)
        self.record = record
        self.say = say
        self.p4_prefix = p4_prefix
        self.name = f"dtnet-vm-{os.getpid()}"
        self.state_dir = Path(BUILD_ROOT) / self.name
        self.steps: list[StepResult] = []
        self.env: dict[str, str] = {}

    def _log(self, name: str) -> Path:
        return self.results / f"{name}.log"

    def _command(self, name: str, argv: list[str], timeout_s: float, stdout=None) -> StepResult:
        """A host command of the run, in its own session and in the record while it runs."""
        log_path = self._log(name)
        start = time.monotonic()
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout or log, stderr=log,
                                    env={**os.environ, **self.env}, cwd=VAGRANT_DIR, start_new_session=True)
            change = self.record.add(process_change(proc.pid, name))
            try:
                code: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                if proc.poll() is None:
                    self.record.undo(change)
                    proc.wait()
                else:
                    self.record.discard(change)
        result = StepResult(name, round(time.monotonic() - start, 1), code, str(log_path))
        self.steps.append(result)
        return result

    def _check(self, result: StepResult, what: str) -> None:
        if not result.ok:
            how = "timed out" if result.exit_code is None else f"exited {result.exit_code}"
            raise EmulationError(f"{what} {how} after {result.seconds:.0f} s (log {result.log})")

    def start_libvirt(self) -> None:
        """libvirt's daemons: the ones that run, else started here (recorded, stopped at the end)."""
        if _libvirt_answers():
            return
        if os.path.isdir("/run/systemd/system"):
            raise EmulationError("libvirtd does not answer: start it (`systemctl start libvirtd`) and run again")
        for daemon in DAEMONS:
            path = shutil.which(daemon) or f"/usr/sbin/{daemon}"
            if not os.path.exists(path):
                raise EmulationError(f"{daemon} is not installed: `make vm` installs it (scripts/setup.sh --vm)")
            with open(self._log(daemon), "ab") as log:  # the daemon keeps its own descriptor
                proc = subprocess.Popen([path], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        start_new_session=True)
            self.record.add(process_change(proc.pid, daemon))
        deadline = time.monotonic() + LIBVIRT_START_TIMEOUT_S
        while not _libvirt_answers():
            if time.monotonic() > deadline:
                raise EmulationError(f"libvirtd did not answer within {LIBVIRT_START_TIMEOUT_S:g} s "
                                     f"(log {self._log('libvirtd')})")
            time.sleep(0.5)
        self.say("vm: started libvirt's daemons (they stop with the run)")

    def prepare(self) -> None:
        """The run's own directory (its Vagrant home, disks, the probe's kernel), in the record first."""
        os.makedirs(BUILD_ROOT, mode=0o755, exist_ok=True)
        os.chmod(BUILD_ROOT, 0o755)  # the hypervisor reads the box's kernel from the run's Vagrant home
        self.record.add(Change("tree", str(self.state_dir), what="VM run state (Vagrant home, disks)"))
        self.state_dir.mkdir(mode=0o755)
        os.chmod(self.state_dir, 0o755)

    def probe(self, box_file: str) -> accel.Accel:
        """The accelerator, from the box's own kernel (read out of the box file) booted under KVM."""
        kernel = self.state_dir / "vmlinuz"
        with open(kernel, "wb") as out:
            subprocess.run(["tar", "-xf", box_file, "-O", "vmlinuz"], stdout=out, check=True, timeout=60)
        try:
            return accel.probe(str(kernel), self.record)
        finally:
            kernel.unlink()

    def up(self, accelerator: accel.Accel, box_file: str) -> None:
        subnet = free_subnet(host_addresses())
        pool_dir = self.state_dir / "pool"
        pool_dir.mkdir(mode=0o755)
        self.record.add(Change("vm_pool", self.name, what="the VM's disks"))
        self._check(self._command("pool", ["virsh", "-c", LIBVIRT_URI, "pool-create-as", self.name, "dir",
                                           "--target", str(pool_dir)], 60), "creating the VM's storage pool")
        self.env = {
            "VAGRANT_HOME": str(self.state_dir / "home"), "VAGRANT_DOTFILE_PATH": str(self.state_dir / "dotfile"),
            "VAGRANT_DEFAULT_PROVIDER": "libvirt", "VAGRANT_CHECKPOINT_DISABLE": "1",
            "VAGRANT_BOX_UPDATE_CHECK_DISABLE": "1", "DTNET_ACCEL": accelerator.libvirt_driver,
            "DTNET_VM_PREFIX": f"{self.name}-", "DTNET_VM_POOL": self.name, "DTNET_VM_NETWORK": self.name,
            "DTNET_VM_SUBNET": subnet,
            "DTNET_VM_CONSOLE": str(self.results.resolve() / "console.log"),
        }
        if self.p4_prefix:
            self.env["DTNET_P4_PREFIX"] = self.p4_prefix
        self._check(self._command("box-add", ["vagrant", "box", "add", "--name", box.BOX_NAME, box_file], 600),
                    "vagrant box add")
        existing = set(host_state()["firewall_chains"])
        for chain in LIBVIRT_CHAINS:
            if chain not in existing:
                self.record.add(Change("fw_chain", chain, what="libvirt's, for the VM's network"))
        self.record.add(Change("vm_network", self.name, what=f"the VM's isolated network {subnet}"))
        self.record.add(Change("vm_domain", f"{self.name}-default", what="the VM"))
        self.say(f"vm: vagrant up under {accelerator.name.upper()} (domain {self.name}-default, network {subnet}); "
                 f"boot and provisioning log {self._log('up')}")
        self._check(self._command("up", ["vagrant", "up", "--provider", "libvirt"], UP_TIMEOUT_S), "vagrant up")

    def guest(self, step: GuestStep) -> StepResult:
        self.say(f"vm: {step.name}: {step.what}")
        command = (f"sudo mkdir -p {GUEST_RESULTS} && cd /testbed && "
                   f"sudo bash -o pipefail -c {shlex.quote(step.command)}")
        result = self._command(step.name, ["vagrant", "ssh", "-c", command], STEP_TIMEOUT_S)
        self.say(f"vm: {step.name}: exit {result.exit_code} in {result.seconds:.0f} s (log {result.log})")
        return result

    def copy_out(self) -> None:
        """The guest's ``results/vm`` into the results directory (``guest/``)."""
        target = self.results / "guest"
        target.mkdir(exist_ok=True)
        tar_path = self.results / "guest.tar"
        with open(tar_path, "wb") as out:
            command = f"sudo mkdir -p {GUEST_RESULTS} && sudo tar -C {GUEST_RESULTS} -cf - ."
            argv = ["vagrant", "ssh", "-c", command, "--", "-T"]  # -T: bytes, no tty
            result = self._command("copy", argv, 600, stdout=out)
        self._check(result, "copying the guest's results")
        subprocess.run(["tar", "-C", str(target), "-xf", str(tar_path)], check=True, timeout=300)
        tar_path.unlink()

    def report_marks(self) -> dict | None:
        """Kernel RED's marks beside the BPF marker's (:mod:`vm.marks`), when both experiments ran:
        printed, written to ``marks.csv``; per policy the ports' totals ``[red, bpf]``."""
        runs = {}
        for method in ("red", "bpf"):
            found = sorted((self.results / "guest" / method).glob("*/summary.json"))
            if not found:
                return None
            runs[method] = str(found[-1].parent)
        rows = marks.compare_runs(runs["red"], runs["bpf"])
        marks.write_csv(str(self.results / "marks.csv"), rows)
        self.say("vm: ECN marks, kernel RED beside the BPF marker (same experiment; marks.csv):\n"
                 + marks.table(rows))
        return {policy: list(pair) for policy, pair in marks.totals(rows).items()}

    def hold(self) -> None:
        """Wait, the VM up, until the run is interrupted."""
        env = " ".join(f"{k}={v}" for k, v in self.env.items() if k.startswith("VAGRANT_"))
        self.say(f"vm: held up until Ctrl-C (or SIGTERM to pid {os.getpid()}); to reach it:\n"
                 f"  cd {VAGRANT_DIR} && {env} vagrant ssh")
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        while True:
            time.sleep(3600)

    def destroy(self) -> None:
        if self.env:
            self._command("destroy", ["vagrant", "destroy", "-f"], DESTROY_TIMEOUT_S)


def run(results: str, p4_prefix: str | None = None, say: Callable[[str], None] = print,
        steps: tuple[GuestStep, ...] = STEPS, hold: bool = False) -> int:
    """The whole VM run; 0 when every step passed and nothing was left behind.

    Args:
        steps: the guest steps to run, in order.
        hold: keep the VM up after the steps until the run is interrupted (Ctrl-C, SIGTERM),
            saying how to reach it; it is destroyed then as at the end of any run.

    Raises:
        EmulationError: when another run holds the emulator (:class:`emulator.journal.EmulatorLock`, held
            for the whole run) or a dead run's changes are still in place.
    """
    with EmulatorLock("VM run (python -m vm)", say=say):
        require_no_leftovers()
        return _run(results, p4_prefix, say, steps, hold)


def _run(results: str, p4_prefix: str | None, say: Callable[[str], None], steps: tuple[GuestStep, ...],
         hold: bool) -> int:
    os.makedirs(results, exist_ok=True)
    before = host_state()
    record = RunJournal("VM run (python -m vm)")
    vm = VmRun(results, record, say, p4_prefix)
    summary: dict = {"host_before": before}
    failure = None
    start = time.monotonic()
    try:
        vm.prepare()
        built = box.ensure_box(record, say)
        summary["box"] = built.to_dict()
        chosen = vm.probe(built.path)
        summary["accel"] = chosen.to_dict()
        say(f"vm: accelerator {chosen.name.upper()}: {chosen.why}")
        vm.start_libvirt()
        vm.up(chosen, built.path)
        for step in steps:
            vm.guest(step)
        vm.copy_out()
        summary["marks"] = vm.report_marks()
        if hold:
            vm.hold()
    except EmulationError as e:
        failure = str(e)
        say(f"vm: {failure}")
    except KeyboardInterrupt:
        failure = "interrupted"
        say("vm: interrupted: destroying the VM and undoing the run's changes")
    finally:
        vm.destroy()
        left = record.unwind()
        after = settled(before)
        summary.update(steps=[dataclasses.asdict(s) for s in vm.steps], host_after=after,
                       left_on_host=leftovers(before, after), unwind_failures=left, failure=failure,
                       total_s=round(time.monotonic() - start, 1))
        write_json_atomic(os.path.join(results, "vm.json"), summary)
    for line in left:
        say(f"vm: could not undo: {line}")
    if summary["left_on_host"]:
        say(f"vm: left on this machine: {json.dumps(summary['left_on_host'])}")
    failed = [s.name for s in vm.steps if not s.ok and s.name != "destroy"]
    say(f"vm: {len(vm.steps) - len(failed)} of {len(vm.steps)} steps passed in {summary['total_s']:.0f} s; "
        f"results in {results}/vm.json")
    return 1 if failure or failed or left or summary["left_on_host"] else 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog=".venv/bin/python -m vm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=os.path.join("results", time.strftime("vm-%Y%m%d-%H%M%S")),
                        help="where vm.json, the logs and the guest's results go")
    parser.add_argument("--steps", default=",".join(s.name for s in STEPS),
                        help=f"the guest steps to run, comma-separated, or 'none' (default: all of "
                             f"{', '.join(s.name for s in STEPS)})")
    parser.add_argument("--hold", action="store_true",
                        help="keep the VM up after the steps until Ctrl-C, saying how to reach it")
    args = parser.parse_args(argv)
    by_name = {s.name: s for s in STEPS}
    names = [] if args.steps == "none" else [n.strip() for n in args.steps.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        print(f"vm: unknown step(s) {', '.join(unknown)}; valid: {', '.join(by_name)} or none", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("vm: must run as root (libvirt, the box's debootstrap): sudo make vm", file=sys.stderr)
        return 1
    p4 = os.environ.get("P4_PREFIX") or ("/opt/p4" if os.path.isdir("/opt/p4") else None)
    return run(args.results, p4, steps=tuple(by_name[n] for n in names), hold=args.hold)
