#!/usr/bin/env bash
# Run the collection's read-only host modules on a real GPU machine and keep what they answer, with the raw
# evidence they read, as fixtures (tests/fixtures/real-hosts/, tests/unit/plugins/modules/test_real_host_fixtures.py).
#
#   bash hack/capture-host-fixtures.sh OUTDIR [WHEEL_DIR]
#
# Needs python3 >= 3.12 with jinja2 and PyYAML. ansible-core comes from WHEEL_DIR (a pure-Python wheel, installed
# into a temporary folder without its dependencies: running a module needs only ansible.module_utils). Nothing on
# the machine is changed: gpu_host_facts reads; gpu_host_preflight reads, and its probe runs the fix modules'
# actions in check mode.
set -euo pipefail
out=${1:?usage: capture-host-fixtures.sh OUTDIR [WHEEL_DIR]}
wheels=${2:-.whl}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/ac/ansible_collections/gpuops"
ln -s "$repo" "$work/ac/ansible_collections/gpuops/platform"
if ! python3 -c 'import ansible.module_utils.basic' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" "$wheels"/ansible_core-*.whl
  export PYTHONPATH="$work/site"
fi
export PYTHONPATH="$work/ac${PYTHONPATH:+:$PYTHONPATH}"
mod() { # mod NAME OUTFILE ARGS_JSON: run one module with its arguments, its JSON answer kept (whatever its rc)
  printf '{"ANSIBLE_MODULE_ARGS": %s}' "$3" > "$work/args.json"
  python3 "$repo/plugins/modules/$1.py" "$work/args.json" > "$out/$2" || true
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1], "failed" if d.get("failed") else "ok", d.get("msg", "")[:300])' "$out/$2"
}
node=$(hostname)
mod gpu_host_facts facts.json '{}'
mod gpu_host_preflight preflight-host-driver.json \
  "{\"node_name\": \"$node\", \"stage\": \"preflight\", \"nvidia_driver\": \"host\", \"fail_on\": \"never\"}"
mod gpu_host_preflight preflight-container-driver.json \
  "{\"node_name\": \"$node\", \"stage\": \"preflight\", \"nvidia_driver\": \"container\", \"fail_on\": \"never\"}"
mod gpu_host_preflight preflight-probe.json \
  "{\"node_name\": \"$node\", \"stage\": \"preflight\", \"nvidia_driver\": \"host\", \"fail_on\": \"never\",
    \"probe\": {\"validate\": true}, \"_ansible_check_mode\": true}"
mod gpu_host_preflight validate-host-driver.json \
  "{\"node_name\": \"$node\", \"stage\": \"validate\", \"nvidia_driver\": \"host\", \"fail_on\": \"never\"}"
{ # the evidence the facts were read from, for a reader comparing them
  for c in "uname -a" "cat /etc/os-release" "cat /proc/cmdline" "nvidia-smi -L" "nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total,mig.mode.current --format=csv" \
    "lspci -nn" "ls -l /sys/bus/pci/drivers/nvidia" "cat /sys/module/nvidia/version" "modinfo -F version nvidia" \
    "ls /sys/module" "ls -l /sys/class/infiniband /sys/class/net" "systemctl is-system-running" "cat /proc/modules"; do
    echo "### $c"
    bash -c "$c" 2>&1 | head -200 || true
  done
} > "$out/evidence.txt"
