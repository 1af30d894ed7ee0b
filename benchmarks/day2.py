"""Day-2 benchmarks (issue 12), with Ansible's own strategy (as a user runs it), the lab's Prometheus up as in
`make demo`:

1. `site.yml` converge and idempotent re-run at 4 nodes on a new lab (the demo inventory: 3 GPU hosts and a CPU host).
2. Scale-out: the lab racks --nodes - 4 more GPU hosts (alternating DGX H100 with a host driver and L40S servers; a
   simulated host and its kubelet's node each, `nodes sync-inventory`) into that converged platform, then `site.yml`
   converge and idempotent re-run over all of them. Its converge installs nothing: it prepares the new hosts and
   labels their nodes on a platform that already runs, so it is the smallest converge at that size.
3. `site.yml` converge and idempotent re-run at --nodes nodes on a new lab (all hosts racked before the first run):
   the converge the target names. Target: each re-run at most half its converge.
   The host plane's per-host marginal time is (converge at N - converge at 4) / (N - 4), both on a new lab.
4. Onboarding one more node into that cluster (`playbooks/onboard_node.yml`, the DGX of `make demo`): wall time, and
   the proof that only that node changed: every other Node's labels, annotations and spec, every ConfigMap's and
   Secret's resourceVersion, every workload's and custom resource's generation and labels, read before and after.

Usage: PYTHONPATH=hack .venv/bin/python benchmarks/day2.py [--nodes 64] [--forks 8]
Writes benchmarks/results/day2-<UTC date and time>.json and prints it."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from _bench import ansible_env, playbook, write_result
from gpuops_lab.config import REPO
from gpuops_lab.nodes import labelled
from kubernetes import client, config
from kubernetes.client.rest import ApiException

ONBOARD_HOST = "dgx-h100-2"
# (api group/version, plural) of the custom resources the roles write
CUSTOM = (
    ("nvidia.com", "v1", "clusterpolicies"),
    ("nfd.k8s-sigs.io", "v1alpha1", "nodefeaturerules"),
    ("kueue.x-k8s.io", "v1beta1", "clusterqueues"),
    ("kueue.x-k8s.io", "v1beta1", "resourceflavors"),
    ("kueue.x-k8s.io", "v1beta1", "localqueues"),
)


def lab_state() -> Path:
    return Path(os.environ.get("GPUOPS_LAB_STATE") or REPO / ".state" / "lab")


def pair(env: dict[str, str], inventories: list[str]) -> dict[str, Any]:
    argv = ["site.yml", *[a for inv in inventories for a in ("-i", inv)]]
    converge, changed_first = playbook(env, argv)
    rerun, changed_second = playbook(env, argv)
    return {
        "hosts": len(changed_first),
        "converge_s": round(converge, 1),
        "rerun_s": round(rerun, 1),
        "ratio": round(rerun / converge, 2),
        "changed_converge": sum(changed_first.values()),
        "changed_rerun": sum(changed_second.values()),
        "hosts_changed_on_rerun": sorted(h for h, n in changed_second.items() if n),
    }


def fleet_inventory(path: Path, count: int) -> list[str]:
    hosts: dict[str, dict[str, Any]] = {}
    dgx = {"gpuops_hardware_profile": "dgx-h100", "host_prep_nvidia_driver": "host"}
    l40s = {"gpuops_hardware_profile": "pcie-l40s", "host_prep_gpudirect": False}
    for i in range(count):
        name, extra = (f"fleet-h100-{i:02d}", dgx) if i % 2 == 0 else (f"fleet-l40s-{i:02d}", l40s)
        python = "{{ _gpuops_lab_state }}/hosts/" + name + "/python-wrapper"
        hosts[name] = {"ansible_python_interpreter": python, **extra}
    path.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}, sort_keys=False))
    return list(hosts)


def lab(env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "-m", "gpuops_lab", *args], cwd=REPO, env=env, check=True)


def new_lab(env: dict[str, str]) -> None:
    """A new lab with the demo inventory's nodes and its Prometheus, as `make demo` starts it."""
    lab(env, "down")
    lab(env, "up", "--inventory-nodes")
    lab(env, "monitoring", "up")  # site.yml's monitoring layer validates against the lab's Prometheus (make demo)


def rack(env: dict[str, str], fleet: Path, count: int) -> float:
    """Rack `count` more GPU hosts (a simulated host and its node each); returns the seconds it took."""
    fleet_inventory(fleet, count)
    t0 = time.monotonic()
    lab(env, "nodes", "sync-inventory", "--inventory", str(fleet))
    return round(time.monotonic() - t0, 1)


def snapshot(api: client.ApiClient) -> dict[str, str]:
    """What a change of ours would move, per object (see molecule/site/side_effect.yml: a Node's status and
    resourceVersion move with the simulated kubelet's heartbeats; controllers write status)."""
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    ser = api.sanitize_for_serialization
    out: dict[str, str] = {}
    for n in core.list_node().items:
        m = n.metadata
        out[f"Node//{m.name}"] = json.dumps([m.labels or {}, m.annotations or {}, ser(n.spec)], sort_keys=True)
    for kind, items in (
        ("ConfigMap", core.list_config_map_for_all_namespaces().items),
        ("Secret", core.list_secret_for_all_namespaces().items),
    ):
        for o in items:
            out[f"{kind}/{o.metadata.namespace}/{o.metadata.name}"] = o.metadata.resource_version
    for kind, items in (
        ("DaemonSet", apps.list_daemon_set_for_all_namespaces().items),
        ("Deployment", apps.list_deployment_for_all_namespaces().items),
    ):
        for o in items:
            out[f"{kind}/{o.metadata.namespace}/{o.metadata.name}"] = json.dumps(
                [o.metadata.generation, o.metadata.labels or {}], sort_keys=True
            )
    for group, version, plural in CUSTOM:
        try:
            items = custom.list_cluster_custom_object(group, version, plural)["items"]
        except ApiException as e:
            if e.status == 404:
                continue
            raise
        for o in items:
            m = o["metadata"]
            out[f"{plural}/{m.get('namespace', '')}/{m['name']}"] = json.dumps(
                [m.get("generation", 0), m.get("labels", {})], sort_keys=True
            )
    return out


def onboard(env: dict[str, str], inventories: list[str], api: client.ApiClient) -> dict[str, Any]:
    demo = REPO / "hack" / "demo" / "onboard-inventory.yml"
    lab(env, "nodes", "sync-inventory", "--inventory", str(demo))
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # NFD labels the new node (its GPUs are found) before the snapshot
        if labelled(core.read_node(ONBOARD_HOST)):
            break
        time.sleep(1)
    before = snapshot(api)
    argv = ["playbooks/onboard_node.yml", *[a for inv in [*inventories, str(demo)] for a in ("-i", inv)]]
    took, changed = playbook(env, [*argv, "-e", f"gpuops_onboard_host={ONBOARD_HOST}"])
    after = snapshot(api)
    moved = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    return {
        "nodes_before": sum(1 for k in before if k.startswith("Node//")),
        "wall_s": round(took, 1),
        "changed": changed,
        "objects_compared": len(before),
        "objects_changed": moved,
        "objects_new": sorted(after.keys() - before.keys()),
        "objects_gone": sorted(before.keys() - after.keys()),
        "only_that_node_changed": moved in ([], [f"Node//{ONBOARD_HOST}"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=64, help="cluster size of the second pair (the demo has 4)")
    ap.add_argument("--forks", type=int, default=8, help="ANSIBLE_FORKS for every run")
    args = ap.parse_args()
    env = ansible_env(ANSIBLE_FORKS=str(args.forks))
    fleet = lab_state() / "fleet-inventory.yml"
    inventories = ["inventories/local", str(fleet)]
    out: dict[str, Any] = {"machine": f"{platform.machine()} {os.cpu_count()} cores", "forks": args.forks}
    new_lab(env)
    out["site_4"] = pair(env, ["inventories/local"])
    out["rack_fleet_s"] = rack(env, fleet, args.nodes - 4)
    out[f"site_{args.nodes}_scale_out"] = pair(env, inventories)
    new_lab(env)
    rack(env, fleet, args.nodes - 4)
    out[f"site_{args.nodes}"] = big = pair(env, inventories)
    out["host_plane_marginal_s_per_host"] = {
        "converge": round((big["converge_s"] - out["site_4"]["converge_s"]) / (args.nodes - 4), 2),
        "rerun": round((big["rerun_s"] - out["site_4"]["rerun_s"]) / (args.nodes - 4), 2),
    }
    api = config.new_client_from_config(str(lab_state() / "kubeconfig"))
    out["onboard"] = onboard(env, inventories, api)
    out["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out["load_avg_at_end"] = os.getloadavg()
    out["targets"] = "site re-run <= 0.5 x converge with changed=0; onboarding changes no other node or object"
    write_result("day2", out, stamp="%Y%m%d-%H%M")


if __name__ == "__main__":
    main()
