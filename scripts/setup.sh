#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 or Ubuntu (22.04, 24.04) machine, run as root:
#   apt packages, Open vSwitch started, a venv with system site packages (for the distribution's
#   Mininet) and the project installed into it. Safe to run again: it only does what is missing.
#   The full-feature VM (vagrant/) runs it after its own extras.
# TORCH_INDEX: where pip takes torch's CPU build from (default PyTorch's CPU index, on every
#   distribution: PyPI's torch for Linux is the CUDA build, gigabytes); set it empty to leave pip to its
#   own configuration (a local wheel directory in pip.conf's find-links, say).
# SETUP_OS_RELEASE names the os-release file the distribution is read from (default
# /etc/os-release; the tests point it at Ubuntu's).
# --docker: also Docker, for workers in containers (`container: {engine: docker}`): docker.io and
#   debootstrap (the worker image is built from a debootstrapped root filesystem), and dockerd
#   started: by systemd where it runs, else on its own without touching the firewall or
#   adding a bridge (its containers use the emulated machines' networks; no iptables rules).
# --vm: also what `make vm` needs (Debian): QEMU, libvirt, vagrant-libvirt, debootstrap (the VM's
#   box is built offline from Debian's packages, vm/box.py) and rsync (the project synced in).
# --list-packages: print the distribution's packages (one a line, bmv2's runtime libraries
#   included, Docker's not) and change nothing; the VM's offline box (vm.box) installs these.
set -euo pipefail
cd "$(dirname "$0")/.."

with_docker=0
with_vm=0
list_packages=0
for arg in "$@"; do
    case "$arg" in
        --docker) with_docker=1 ;;
        --vm) with_vm=1 ;;
        --list-packages) list_packages=1 ;;
        *) echo "setup: unknown option '$arg' (valid: --docker, --vm, --list-packages)" >&2; exit 1 ;;
    esac
done
DOCKER_PACKAGES=(docker.io debootstrap)
VM_PACKAGES=(qemu-system-x86 qemu-utils libvirt-daemon-system libvirt-clients vagrant-libvirt dnsmasq-base
             iptables debootstrap rsync e2fsprogs)
DOCKERD_LOG=/var/log/dtnet-dockerd.log

COMMON_PACKAGES=(mininet openvswitch-switch openvswitch-common iperf3 ethtool iputils-ping iproute2
                 procps psmisc python3-venv python3-dev
                 clang libbpf-dev linux-libc-dev gcc  # the BPF ECN marker: compiled here, loaded by bpftool
                 shellcheck                           # the tests check the shipped shell scripts
                 openssh-server openssh-client sudo)  # cluster mode: Mininet's remote nodes and tunnels
VENV=.venv
TORCH_INDEX="${TORCH_INDEX-https://download.pytorch.org/whl/cpu}"

os_release="${SETUP_OS_RELEASE:-/etc/os-release}"
# shellcheck source=/dev/null
distro=$( . "$os_release" 2>/dev/null && echo "${ID:-unknown} ${VERSION_ID:-}" ) || distro="unknown"
case "$distro" in
    "debian 12")
        # bpftool is a package of its own; vagrant runs the tests' check of vagrant/Vagrantfile.
        APT_PACKAGES=("${COMMON_PACKAGES[@]}" bpftool vagrant)
        # Debian's runtime libraries of a prebuilt bmv2/p4c prefix (the recipe in ../shared/p4 builds on Debian 12).
        P4_RUNTIME_PACKAGES=(libjsoncpp25 libthrift-0.17.0 libboost-program-options1.74.0 libboost-iostreams1.74.0
                             libxxhash0 libpcap0.8 libgmp10 libnanomsg5 libgc1 libprotobuf32 python3-thrift cpp)
        ;;
    "ubuntu 22.04" | "ubuntu 24.04")
        # bpftool comes with the running kernel's tools; bmv2 and p4c from p4lang's packages
        # (vagrant/provision.sh), which bring their own libraries.
        APT_PACKAGES=("${COMMON_PACKAGES[@]}" linux-tools-common "linux-tools-$(uname -r)")
        P4_RUNTIME_PACKAGES=()
        ;;
    *)
        echo "setup: unsupported distribution '${distro% }' (from $os_release): Debian 12, Ubuntu 22.04 or 24.04" >&2
        exit 1
        ;;
esac

if [ "$list_packages" -eq 1 ]; then
    printf '%s\n' "${APT_PACKAGES[@]}" "${P4_RUNTIME_PACKAGES[@]}"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "setup: must run as root (Mininet, Open vSwitch and tc need it): sudo $0" >&2
    exit 1
fi

if [ "$with_docker" -eq 1 ]; then
    APT_PACKAGES+=("${DOCKER_PACKAGES[@]}")
fi
if [ "$with_vm" -eq 1 ]; then
    if [ "${distro%% *}" != debian ]; then
        echo "setup: --vm (make vm) builds its box from Debian's packages on Debian 12; on $distro use" \
             "vagrant/Vagrantfile's Ubuntu box (README: the full-feature VM)" >&2
        exit 1
    fi
    APT_PACKAGES+=("${VM_PACKAGES[@]}")
fi
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]} ($distro)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Open vSwitch: this kernel may have no openvswitch module; the userspace datapath needs only
# the daemons, which ovs-ctl starts (its ulimit warning in containers is harmless).
if ! ovs-vsctl --timeout=3 show >/dev/null 2>&1; then
    echo "setup: starting Open vSwitch"
    /usr/share/openvswitch/scripts/ovs-ctl start >/dev/null 2>&1 || true
    ovs-vsctl --timeout=10 show >/dev/null || { echo "setup: Open vSwitch did not start" >&2; exit 1; }
fi

docker_up() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
if [ "$with_docker" -eq 1 ] && ! docker_up; then
    echo "setup: starting dockerd"
    if [ -d /run/systemd/system ]; then
        systemctl start docker
    else
        setsid dockerd --iptables=false --ip6tables=false --bridge=none >>"$DOCKERD_LOG" 2>&1 </dev/null &
    fi
    for _ in $(seq 60); do docker_up && break; sleep 1; done
    docker_up || { echo "setup: dockerd did not start (see $DOCKERD_LOG)" >&2; exit 1; }
fi

# pip, its error shown and the set-up stopped when it fails (its "Location ... is ignored" noise dropped).
pip_install() {
    local out
    if ! out=$("$VENV/bin/pip" install -q --disable-pip-version-check "$@" 2>&1); then
        printf '%s\n' "$out" | grep -v "^WARNING: Location" >&2
        echo "setup: pip install $* failed" >&2
        exit 1
    fi
    printf '%s\n' "$out" | grep -v "^WARNING: Location" | grep -v '^$' || true
}

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV (with system site packages, for the distribution's mininet)"
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
stamp="$VENV/.installed-$(cat requirements.txt setup.py | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "setup: installing Python packages into $VENV"
    index=()
    # An index this machine cannot reach would cost pip retries on every package: probe it once.
    if [ -n "$TORCH_INDEX" ] && ! /usr/bin/python3 -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=5)' "$TORCH_INDEX/" >/dev/null 2>&1; then
        echo "setup: $TORCH_INDEX cannot be reached: pip takes torch from its own configuration (pip.conf)"
        TORCH_INDEX=""
    fi
    if [ -n "$TORCH_INDEX" ]; then index=(--extra-index-url "$TORCH_INDEX"); fi
    pip_install "${index[@]}" -r requirements.txt
    pip_install --no-deps -e .
    # Every pinned requirement at its version, and the modules the testbed imports.
    "$VENV/bin/python" scripts/check_requirements.py requirements.txt \
        || { echo "setup: Python packages did not install (see above)" >&2; exit 1; }
    rm -f "$VENV"/.installed-*
    touch "$stamp"
fi
# The BPF ECN marker (emulator/bpf/vq_ecn.bpf.c), compiled when its source changed.
"$VENV/bin/python" -m emulator.ecn build
# MLTCP-Reno and MLTCP-CUBIC as BPF struct_ops (emulator/bpf/mltcp_*.bpf.c, with vmlinux.h from the
# kernel's BTF), each compiled when its source changed; optional: a run asking for one says why it cannot run.
"$VENV/bin/python" -m emulator.mltcp build
# INA's P4 aggregator (ina/p4/aggregator.p4) for bmv2, compiled when its source changed. A prebuilt
# bmv2/p4c prefix (P4_PREFIX, else /opt/p4) needs Debian's runtime libraries; p4lang's packages
# (the VM's) are on PATH with theirs; without any toolchain INA runs on the software engine and
# the build says so.
p4_prefix="${P4_PREFIX:-/opt/p4}"
if [ -x "$p4_prefix/bin/simple_switch" ] && [ ${#P4_RUNTIME_PACKAGES[@]} -gt 0 ]; then
    missing=()
    for p in "${P4_RUNTIME_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "setup: installing bmv2's runtime libraries: ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi
"$VENV/bin/python" -m ina.p4.build
echo "setup: ready ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'), $(ovs-vsctl --version | head -1))"
