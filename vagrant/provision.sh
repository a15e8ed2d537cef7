#!/usr/bin/env bash
# Provision the full-feature VM: kernel modules for OVS and qdiscs come with Ubuntu's kernel.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq linux-modules-extra-"$(uname -r)" docker.io linux-tools-common linux-tools-"$(uname -r)"  # bpftool
modprobe openvswitch || true
modprobe sch_red sch_netem || true
cd /testbed && bash scripts/setup.sh
