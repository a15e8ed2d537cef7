#!/usr/bin/env bash
# Provisions the full-feature VM (vagrant/Vagrantfile, Ubuntu 24.04), as root. First what only the
# VM has:
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

apt-get update -qq
apt-get install -y -qq --no-install-recommends "linux-modules-extra-$(uname -r)" curl gpg ca-certificates

for module in openvswitch sch_red sch_netem; do
    modprobe "$module"
    echo "$module" > "/etc/modules-load.d/dtnet-$module.conf"
done

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
