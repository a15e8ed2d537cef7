"""The VM run's pure parts: the accelerator's choice, the box's contents, the management
network's subnet, the host's leftovers. The VM itself boots in `make vm` (docs/vm.md)."""

import json
import os
import shutil
import subprocess

import pytest
from conftest import needs

from common.errors import EmulationError
from emulator.journal import KINDS, Change
from emulator.worker_image import Distribution
from vm import accel, box
from vm.run import STEPS, free_subnet, leftovers

PANIC = "[    1.9] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n"


def test_kvm_is_chosen_only_where_a_guest_reaches_its_root_mount():
    """KVM is chosen only where a probe guest got as far as mounting its root; otherwise TCG, saying why."""
    assert accel.decide(True, "Linux version 6.1\n" + PANIC, 1.8).name == "kvm"
    assert accel.decide(True, "Linux version 6.1\n" + PANIC, 1.8).libvirt_driver == "kvm"
    silent = accel.decide(True, None, 30.0)
    assert (silent.name, silent.libvirt_driver) == ("tcg", "qemu")
    assert "no progress in 30 s" in silent.why
    stopped = accel.decide(True, "Decompressing Linux... Parsing ELF... done.\nBooting the kernel.\n", 0.4)
    assert stopped.name == "tcg" and "Booting the kernel" in stopped.why
    assert accel.decide(False, None, 0.0).why.startswith("no /dev/kvm")


def test_probe_boots_the_kernel_under_kvm_without_a_root_file_system():
    """The probe boots the box's kernel under KVM and ends at its panic (no root file system), never rebooting."""
    argv = accel.probe_argv("/box/vmlinuz")
    assert argv[argv.index("-accel") + 1] == "kvm"
    assert "-no-reboot" in argv and argv[argv.index("-kernel") + 1] == "/box/vmlinuz"
    assert "panic=-1" in argv[argv.index("-append") + 1]


def test_the_box_holds_the_set_ups_packages_and_the_stock_kernel():
    """The box holds the set-up's packages (Docker's aside) with Debian's stock kernel, ssh, rsync and
    sudo, sorted and once each, and debootstrap is asked for exactly those."""
    listed = subprocess.run(["bash", "scripts/setup.sh", "--list-packages"], capture_output=True, text=True,
                            check=True).stdout.split()
    assert "mininet" in listed and "openvswitch-switch" in listed and "libthrift-0.17.0" in listed
    assert "docker.io" not in listed  # the VM's set-up runs without Docker
    packages = box.box_packages(listed)
    assert packages == sorted(set(packages))
    assert {"linux-image-amd64", "openssh-server", "rsync", "sudo", "mininet"} <= set(packages)
    dist = Distribution("debian", "bookworm", "http://mirror.example/debian")
    argv = box.debootstrap_argv(dist, packages, "/scratch/root", "/cache")
    assert argv[-3:] == ["bookworm", "/scratch/root", "http://mirror.example/debian"]
    assert f"--include={','.join(packages)}" in argv and "--cache-dir=/cache" in argv


def test_the_guest_boots_from_the_whole_disk_and_lets_vagrant_in_by_the_boxs_key():
    """The guest mounts the whole disk as root, gets DHCP, and lets vagrant in by the box's key with sudo."""
    files = box.guest_files("ssh-ed25519 AAAA dtnet-vm")
    assert files["/etc/fstab"][0].split()[:3] == ["/dev/vda", "/", "ext4"]
    assert "root=/dev/vda" in box.KERNEL_ARGS
    assert files["/home/vagrant/.ssh/authorized_keys"] == ("ssh-ed25519 AAAA dtnet-vm\n", 0o600)
    assert files["/etc/sudoers.d/vagrant"][1] == 0o440
    assert "DHCP=ipv4" in files["/etc/systemd/network/20-wired.network"][0]
    vagrantfile = box.box_vagrantfile()
    for needle in ('lv.kernel = File.join(here, "vmlinuz")', "config.ssh.insert_key = false", box.KERNEL_ARGS):
        assert needle in vagrantfile
    assert box.box_metadata() == {"provider": "libvirt", "format": "qcow2", "virtual_size": box.DISK_GB}


def test_the_box_is_rebuilt_when_its_inputs_change_and_only_then():
    """The box's digest changes with its packages or release, not with the mirror it came from."""
    dist = Distribution("debian", "bookworm", "http://a/debian")
    same = box.inputs_digest(Distribution("debian", "bookworm", "http://b/debian"), ["a", "b"])
    assert box.inputs_digest(dist, ["a", "b"]) == same  # the mirror is not an input
    assert box.inputs_digest(dist, ["a", "b", "c"]) != same
    assert box.inputs_digest(Distribution("debian", "trixie", "http://a/debian"), ["a", "b"]) != same


def test_management_network_takes_the_first_free_24():
    """The management network takes the first /24 no address of the host is in, and says so when none is free."""
    assert free_subnet(["127.0.0.1/8", "10.0.2.15/24"]) == "192.168.121.0/24"
    assert free_subnet(["192.168.121.1/24", "192.168.122.7/24"]) == "192.168.123.0/24"
    assert free_subnet(["192.168.0.0/16"], ("192.168.121.0/24", "10.9.9.0/24")) == "10.9.9.0/24"
    with pytest.raises(EmulationError, match="no free /24"):
        free_subnet(["192.168.0.0/16"], ("192.168.121.0/24",))


def test_leftovers_are_what_the_host_has_after_and_had_not_before():
    """Leftovers are the libvirt objects the host has after the run and did not have before it."""
    before = {"domains": ["theirs"], "processes": ["10 libvirtd"], "networks": []}
    after = {"domains": ["theirs", "dtnet-vm-1-default"], "processes": ["10 libvirtd"], "networks": [],
             "pools": ["dtnet-vm-1"]}
    assert leftovers(before, after) == {"domains": ["dtnet-vm-1-default"], "pools": ["dtnet-vm-1"]}
    assert leftovers(after, after) == {}


def test_libvirt_changes_are_recorded_kinds():
    """The VM's libvirt objects are kinds the run journal records, and the run starts with capabilities, then tests."""
    for kind in ("vm_domain", "vm_network", "vm_pool"):
        assert kind in KINDS
        json.dumps(Change(kind, "dtnet-vm-1").__dict__)
    assert [s.name for s in STEPS][:2] == ["capabilities", "tests"]


def test_the_datapath_is_the_kernels_where_it_can_run_and_asked_names_are_checked():
    """``auto`` resolves once per network to what this kernel offers (the capabilities report the same);
    ``kernel`` where the module is missing, or an unknown name, is one clear error."""
    from emulator.capabilities import kernel_datapath_available, resolve_datapath

    assert resolve_datapath("auto") == ("kernel" if kernel_datapath_available() else "user")
    assert resolve_datapath("user") == "user"
    with pytest.raises(EmulationError, match="choose from auto, user, kernel"):
        resolve_datapath("netdev")
    if not kernel_datapath_available():
        with pytest.raises(EmulationError, match="no openvswitch module"):
            resolve_datapath("kernel")


def test_the_boxs_venv_carries_the_stamp_the_set_up_looks_for():
    """The set-up skips pip when ``.venv/.installed-<digest of requirements.txt and setup.py>`` is there:
    the box's venv is made with the same stamp, so the VM's set-up finds its packages installed."""
    script = subprocess.run(["bash", "-c", "cat requirements.txt setup.py | sha256sum | cut -c1-16"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert box.setup_stamp(box.python_inputs()) == f".installed-{script}"
    assert 'stamp="$VENV/.installed-$(cat requirements.txt setup.py | sha256sum | cut -c1-16)"' in open(
        "scripts/setup.sh").read()
    dist = Distribution("debian", "bookworm", "http://a/debian")
    assert box.inputs_digest(dist, ["a"], b"torch==1") != box.inputs_digest(dist, ["a"], b"torch==2")


@pytest.mark.emulation  # it adds a chain to the host's firewall
@pytest.mark.skipif(os.geteuid() != 0, reason="the host's firewall needs root")
def test_a_firewall_chain_libvirt_left_is_removed_only_while_empty():
    """The ``fw_chain`` change: the jumps to the chain and the chain go; a chain that has rules again
    (someone else's) is left alone and said to be."""
    from emulator.journal import undo_group

    # docker.io depends on it (`make test`'s set-up), as does `make vm`'s
    needs(None if shutil.which("iptables") else "not installed", "iptables")
    chain = f"DTNET_T{os.getpid() % 100000}"

    def iptables(*argv):
        return subprocess.run(["iptables", "-t", "filter", *argv], capture_output=True, text=True)

    change = Change("fw_chain", f"filter/{chain}")
    try:
        assert iptables("-N", chain).returncode == 0
        assert iptables("-A", "INPUT", "-j", chain).returncode == 0
        assert iptables("-A", chain, "-j", "RETURN").returncode == 0
        assert "rules again" in undo_group([change])[change]
        assert f"-N {chain}" in iptables("-S").stdout
        assert iptables("-F", chain).returncode == 0
        assert undo_group([change])[change] is None
        rules = iptables("-S").stdout
        assert chain not in rules, rules
        assert undo_group([change])[change] is None  # gone already: nothing to do
    finally:
        iptables("-D", "INPUT", "-j", chain)
        iptables("-F", chain)
        iptables("-X", chain)


def test_red_and_bpf_marks_are_set_side_by_side_per_port_and_job(tmp_path):
    """``vm.marks`` reads two runs' link_bytes.csv (window marks summed over waves) and summary.json
    (each job's marks); ports neither run marked are left out, a job missing from one run is '-'."""
    from vm import marks

    def run(name, links, jobs):
        d = tmp_path / name
        d.mkdir()
        rows = ["policy,wave,src,dst,rate_mbps,bytes,duration_s,wave_utilisation,window_bytes,window_s,"
                "window_utilisation,window_marks"]
        rows += [f"{p},{w},{s},{t},20,1,1,0.5,1,1,0.5,{m}" for p, w, s, t, m in links]
        (d / "link_bytes.csv").write_text("\n".join(rows) + "\n")
        (d / "summary.json").write_text(json.dumps({"policies": [
            {"policy": p, "jobs": {j: {"ecn_marks": m} for j, m in js.items()}} for p, js in jobs.items()]}))
        return str(d)

    red = run("red", [("spread", 0, "e2", "h4", 30), ("spread", 1, "e2", "h4", 10), ("spread", 0, "a1", "e2", 0),
                      ("spread", 0, "h4", "e2", "")], {"spread": {"a": 25, "b": 15}})
    bpf = run("bpf", [("spread", 0, "e2", "h4", 50), ("spread", 0, "a1", "e2", 4)], {"spread": {"a": 40}})
    rows = marks.compare_runs(red, bpf)
    assert [(r.kind, r.name, r.red, r.bpf) for r in rows] == [
        ("port", "a1->e2", 0, 4), ("port", "e2->h4", 40, 50), ("job", "a", 25, 40), ("job", "b", 15, None)]
    assert rows[1].ratio == 1.25 and rows[0].ratio is None
    assert marks.totals(rows) == {"spread": (40, 54)}
    text = marks.table(rows)
    assert "spread       all   ports               40      54     1.35" in text
    marks.write_csv(str(tmp_path / "m.csv"), rows)
    assert (tmp_path / "m.csv").read_text().splitlines()[-1] == "spread,job,b,15,"
