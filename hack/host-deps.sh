#!/usr/bin/env bash
# Debian packages the simulated hosts (hack/gpuops_lab/hostsim) and their tests need on this machine.
# Idempotent: installs only what is missing. Run as root (or with sudo available).
#   pciutils   lspci / setpci: tests cross-check the simulated PCI config spaces with lspci; setpci is
#              what host modules use to change ACS, and it works on the simulated sysfs
#   util-linux unshare / mount (namespaces); dpkg: dpkg-query reads the simulated package database
#   openjdk-17-jre-headless  ansible-rulebook (requirements/dev.txt) runs its rule engine (Drools) in Java 17
set -euo pipefail
need=()
{ command -v lspci && command -v setpci; } >/dev/null 2>&1 || need+=(pciutils)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v dpkg-query >/dev/null 2>&1 || need+=(dpkg)
java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p' || true)
[ "${java_major:-0}" -ge 17 ] 2>/dev/null || need+=(openjdk-17-jre-headless)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${need[@]}"
