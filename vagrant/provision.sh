#!/usr/bin/env bash
# Provisions the full-feature VM, as root: Ubuntu 24.04 (vagrant/Vagrantfile) or the Debian 12 box
# built offline (vagrant/debian/Vagrantfile, vm/box.py).
# On Debian the box already holds the stock kernel's modules, every package of the set-up and the
# venv (/testbed/.venv): the modules are loaded, the set-up finds the rest installed and builds the
# BPF programs and, with the prefix synced to /opt/p4 where the testbed looks, the P4 program;
# Docker is not set up (its worker image is debootstrapped from a mirror the VM does not reach).
# On Ubuntu, first what only the VM has:
#   - the Open vSwitch kernel datapath and kernel RED and netem: the running kernel's extra
#     modules, loaded now and at every boot;
#   - bmv2 and p4c: p4lang's packages (their openSUSE Build Service repository, as p4c's README
#     gives it), on PATH where ina/p4/build.py finds them;
# then the project's own set-up (scripts/setup.sh --docker: its Ubuntu branch, with Docker for workers
# in containers, started by systemd). Safe to run again.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
# shellcheck source=/dev/null
. /etc/os-release

load_modules() {
    for module in openvswitch sch_red sch_netem; do
        modprobe "$module"
        echo "$module" > "/etc/modules-load.d/dtnet-$module.conf"
    done
}

if [ "$ID" = debian ]; then
    load_modules
    cd /testbed
    bash scripts/setup.sh
    exit 0
fi

apt-get update -qq
apt-get install -y -qq --no-install-recommends "linux-modules-extra-$(uname -r)" curl gpg ca-certificates

load_modules

if ! command -v simple_switch >/dev/null 2>&1; then
    repo="https://download.opensuse.org/repositories/home:/p4lang/xUbuntu_${VERSION_ID}"
    curl -fsSL "$repo/Release.key" | gpg --dearmor --yes -o /usr/share/keyrings/p4lang.gpg
    echo "deb [signed-by=/usr/share/keyrings/p4lang.gpg] $repo/ /" > /etc/apt/sources.list.d/p4lang.list
    apt-get update -qq
    if ! apt-get install -y -qq p4lang-p4c p4lang-bmv2; then
        echo "provision: p4lang's bmv2/p4c did not install for Ubuntu $VERSION_ID; INA runs on the software" \
             "engine (each run records which engine ran)" >&2
    fi
fi

cd /testbed
bash scripts/setup.sh --docker
systemctl enable docker
