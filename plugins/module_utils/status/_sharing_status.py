# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""GPU sharing status: what each pool's nodes carry and advertise against what the pools' rules expect.

``collect`` reads the cluster with a constant number of list requests whatever the node count (nodes, pods in all
namespaces, ResourceSlices and DeviceClasses of ``resource.k8s.io/v1``, ConfigMaps of the operator namespace when a
device-plugin ConfigMap is named); ``view`` is a pure function of those lists: per pool and node the model, the
sharing labels, expected vs advertised capacity, DRA slices, GPU pods on MIG nodes, the findings, and what is not
ready yet (the ``wait`` of ``gpu_sharing_status``: every MIG node ``success`` and capacity as expected)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common import _table
from ansible_collections.gpuops.platform.plugins.module_utils.host import _gpu_catalog
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _capacity, _mig, _pools
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_views as _cluster_status
from ansible_collections.gpuops.platform.plugins.module_utils.status import _readiness, _workloads
from ansible_collections.gpuops.platform.plugins.module_utils.status._gpu_labels import base_product

Obj = dict[str, Any]
DRA_DRIVER = "gpu.nvidia.com"
DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")
DEPLOY_DEVICE_PLUGIN = _pools.DEPLOY_DEVICE_PLUGIN
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
DRIVER_FULL_LABEL = "nvidia.com/cuda.driver-version.full"
DRIVER_MAJOR_LABEL = "nvidia.com/cuda.driver.major"
NVIDIA_VENDOR = "10de"


def collect(reader: Any, namespace: str, config_map: str | None, dra: bool) -> dict[str, Any]:
    """The lists ``view`` needs; DRA objects only when a pool uses DRA, ConfigMaps only when one is named."""
    raw: dict[str, Any] = {"nodes": reader.nodes(), "pods": reader.core("pods")}
    if config_map:
        raw["configmaps"] = reader.core("configmaps", namespace) or []
    if dra:
        raw["slices"] = reader.objects("resource.k8s.io", "v1", "resourceslices")
        raw["device_classes"] = reader.objects("resource.k8s.io", "v1", "deviceclasses")
    return raw


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _ids_of_product(product: str | None) -> dict[str, str]:
    """GFD's nvidia.com/gpu.product (model with '-' for spaces; '-SHARED' or '-MIG-<profile>' appended) -> PCI ids."""
    base = base_product(product)
    for (vendor, device), entry in _gpu_catalog.GPUS.items():
        if base and str(entry.get("model", "")).replace(" ", "-") == base:
            return {"vendor_id": vendor, "device_id": device}
    return {}


def nvidia_gpus(
    facts: Mapping[str, Any] | None, labels: Mapping[str, str], mig_configs: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The node's NVIDIA GPUs: the host facts' accelerators, else as many GPUs as GFD's gpu.count label, of the
    model its gpu.product label names (under MIG strategy single: MIG devices / devices per GPU, from the custom
    config the node's nvidia.com/mig.config names when ``mig_configs`` has it)."""
    accel = (facts or {}).get("accelerators") or []
    gpus = [
        dict(a)
        for a in accel
        if str(a.get("vendor_id", "")).lower().removeprefix("0x") == NVIDIA_VENDOR
        and str(a.get("class", "03")).startswith("03")
    ]
    if gpus or facts:
        return gpus
    try:
        count = int(labels.get(GPU_COUNT_LABEL, "0"))
    except ValueError:
        count = 0
    product = str(labels.get(GPU_PRODUCT_LABEL) or "")
    ids = _ids_of_product(product)
    if "-MIG-" in product and ids:
        # strategy single: GFD counts the MIG devices (internal/lm/mig-strategy.go); the GPUs are count / per GPU
        profile = product.split("-MIG-", 1)[1]
        per_gpu = _gpu_catalog.mig_profiles(ids["vendor_id"], ids["device_id"]).get(profile)
        entries = (mig_configs or {}).get(labels.get(_pools.MIG_CONFIG_LABEL) or "")
        if isinstance(entries, list):  # single strategy: one profile on every GPU (mig_strategy_findings)
            layout = _mig.mig_layouts(entries, (ids["vendor_id"], ids["device_id"]), 1)[0]
            per_gpu = (layout or {}).get(profile) or per_gpu
        if per_gpu:
            count //= per_gpu
    return [dict(ids) for _i in range(count)]


def driver_version(facts: Mapping[str, Any] | None, labels: Mapping[str, str]) -> str | None:
    """The host's NVIDIA driver version: the host facts', else GFD's nvidia.com/cuda.driver-version.full or
    cuda.driver.major label."""
    version = ((facts or {}).get("nvidia_driver") or {}).get("version")
    return version or labels.get(DRIVER_FULL_LABEL) or labels.get(DRIVER_MAJOR_LABEL)


def gpu_pods(pods: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """node -> namespace/name of the running or pending pods that hold GPUs there (``_workloads.gpu_resources``)."""
    out: dict[str, list[str]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if _workloads.gpu_resources(pod):
            out.setdefault(node, []).append(f"{_meta(pod).get('namespace')}/{_meta(pod).get('name')}")
    return {k: sorted(v) for k, v in out.items()}


def _finding(fid: str, node: str, evidence: list[str], cause: str, fix: str, kind: str = "Node") -> dict[str, Any]:
    return {
        "id": fid,
        "severity": "error",
        "object": {"kind": kind, "name": node},
        "evidence": evidence,
        "cause": cause,
        "fix": fix,
    }


def _slices_by_node(slices: Sequence[Mapping[str, Any]] | None) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for s in slices or ():
        spec = s.get("spec") or {}
        if spec.get("driver") != DRA_DRIVER or not spec.get("nodeName"):
            continue
        out.setdefault(spec["nodeName"], []).append(
            {"name": _meta(s).get("name"), "devices": len(spec.get("devices") or ())}
        )
    return out


def _advertised(node: Mapping[str, Any]) -> dict[str, int]:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {k: int(v) for k, v in _cluster_status.gpu_resources(alloc).items() if k.startswith("nvidia.com/")}


def _mig_failed_reason(
    pool: Mapping[str, Any],
    node: str,
    gpus: list[dict[str, Any]],
    pods: list[str],
    mig_configs: Mapping[str, Any] | None = None,
) -> str:
    invalid = _mig.mig_findings([pool], {pool["name"]: [node]}, {node: gpus}, mig_configs)
    if invalid:
        return "; ".join(invalid[0]["evidence"])
    if pods:
        return "the GPUs are in use by " + ", ".join(pods) + " (mig-manager cannot reconfigure a GPU in use)"
    return "see the nvidia-mig-manager pod's log on the node"


def _node_row(
    pool: Mapping[str, Any],
    name: str,
    node: Mapping[str, Any],
    gpus: Any,
    strategy: Any,
    slices: Any,
    pods: Any,
    configs: Any,
    mig_configs: Any = None,
) -> tuple[dict[str, Any], list[dict[str, Any]], Any]:
    labels = _meta(node).get("labels") or {}
    model = pool["model"]
    expected = _capacity.expected_capacity(pool, gpus, strategy, mig_configs)
    row: dict[str, Any] = {
        "name": name,
        "pool": pool["name"],
        "model": model,
        "gpus": len(gpus),
        "labels": {
            k: labels.get(k)
            for k in (_pools.CONFIG_LABEL, _pools.MIG_CONFIG_LABEL, _pools.MIG_STATE_LABEL, DEPLOY_DEVICE_PLUGIN)
        },
        "expected": expected,
        "advertised": _advertised(node),
        "gpu_pods": pods,
        "resource_slices": slices,
    }
    findings: list[dict[str, Any]] = []
    unmet: list[str] = []
    if model != "dra":
        findings += _capacity.capacity_findings({name: expected}, {name: row["advertised"]}, {name: pool["name"]})
    if model in ("time_slicing", "mps"):
        entry = labels.get(_pools.CONFIG_LABEL)
        if entry != pool["name"]:
            unmet.append(f"label {_pools.CONFIG_LABEL} is {entry!r}, want {pool['name']!r}")
        if configs is not None and entry and entry not in configs:
            findings.append(
                _finding(
                    "sharing-config-entry-missing",
                    name,
                    [f"{_pools.CONFIG_LABEL}={entry}", "entries: " + (", ".join(sorted(configs)) or "none")],
                    f"The device plugin fails on this node: 'specified config {entry} does not exist'.",
                    "Add the entry to the device-plugin ConfigMap (the gpu_sharing role writes one per pool) or fix "
                    "the label.",
                )
            )
    if model == "mig":
        want, state = pool.get("mig_config"), labels.get(_pools.MIG_STATE_LABEL)
        if labels.get(_pools.MIG_CONFIG_LABEL) != want:
            unmet.append(f"label {_pools.MIG_CONFIG_LABEL} is {labels.get(_pools.MIG_CONFIG_LABEL)!r}, want {want!r}")
        elif state == "failed":
            reason = _mig_failed_reason(pool, name, gpus, pods, mig_configs)
            row["mig_failed_reason"] = reason
            findings.append(
                _finding(
                    "sharing-mig-config-failed",
                    name,
                    [f"{_pools.MIG_CONFIG_LABEL}={want}", f"{_pools.MIG_STATE_LABEL}=failed", reason],
                    "mig-manager could not apply the MIG configuration.",
                    "Fix the cause (a name valid on the GPU; stop the GPU pods on the node), then change the label "
                    "again: mig-manager retries only on a label change.",
                )
            )
        elif state != "success":
            unmet.append(f"{_pools.MIG_STATE_LABEL} is {state!r}, want 'success'")
    if model == "dra":
        devices = sum(s["devices"] for s in slices)
        if devices != len(gpus):
            unmet.append(
                f"ResourceSlices of driver {DRA_DRIVER} publish {devices} device(s), the node has {len(gpus)} GPU(s)"
            )
        if labels.get(DEPLOY_DEVICE_PLUGIN) != "false" or any(row["advertised"].values()):
            findings.append(
                _finding(
                    "sharing-dra-and-device-plugin",
                    name,
                    [
                        f"{DEPLOY_DEVICE_PLUGIN}={labels.get(DEPLOY_DEVICE_PLUGIN)}",
                        "advertised: "
                        + (", ".join(f"{k}={v}" for k, v in sorted(row["advertised"].items())) or "none"),
                    ],
                    "The device plugin may advertise the GPUs that the DRA driver also publishes: two allocators for "
                    "the same devices.",
                    f"Label the node {DEPLOY_DEVICE_PLUGIN}=false (the gpu_sharing role does for its DRA pools).",
                )
            )
    return row, findings, unmet


def view(raw: Mapping[str, Any], pools: Sequence[Mapping[str, Any]], params: Mapping[str, Any]) -> dict[str, Any]:
    """Per pool and node the sharing state, the findings and what is not ready (``_readiness.NotReady``)."""
    nodes: dict[str, Mapping[str, Any]] = {str(_meta(n).get("name")): n for n in raw.get("nodes") or ()}
    groups = params.get("groups") or {}
    member_input = {
        name: {"labels": _meta(n).get("labels") or {}, "groups": [g for g, hosts in groups.items() if name in hosts]}
        for name, n in nodes.items()
    }
    members, findings = _pools.pool_members(pools, member_input)
    facts = _cluster_status.match_host_facts(params.get("host_facts"), list(nodes))
    slices = _slices_by_node(raw.get("slices"))
    pods = gpu_pods(raw.get("pods") or ())
    configs = None
    if "configmaps" in raw:
        cm = next((c for c in raw["configmaps"] if _meta(c).get("name") == params.get("config_map")), None)
        configs = set((cm or {}).get("data") or {}) if cm else set()
    strategy = params.get("mig_strategy") or "single"
    not_ready: list[_readiness.NotReady] = []
    out_pools = []
    for pool in pools:
        rows = []
        for name in members.get(pool["name"], ()):
            labels = _meta(nodes[name]).get("labels") or {}
            gpus = nvidia_gpus(facts.get(name), labels, params.get("mig_configs"))
            row, got, unmet = _node_row(
                pool,
                name,
                nodes[name],
                gpus,
                strategy,
                slices.get(name, []),
                pods.get(name, []) if pool["model"] == "mig" else [],
                configs,
                params.get("mig_configs") or None,
            )
            rows.append(row)
            findings += got
            # a failed MIG change is final (mig-manager retries on the next label change only): no use waiting
            unmet += [f"{f['id']}: " + "; ".join(f["evidence"]) for f in got if f["id"] != "sharing-mig-config-failed"]
            not_ready += [_readiness.NotReady("Node", None, name, text) for text in unmet]
        out_pools.append({"name": pool["name"], "model": pool["model"], "nodes": rows})
    if any(p["model"] == "dra" for p in pools):
        present = {_meta(c).get("name") for c in raw.get("device_classes") or ()}
        for dc in DEVICE_CLASSES:
            if dc not in present:
                not_ready.append(_readiness.NotReady("DeviceClass", None, dc, "not found"))
                findings.append(
                    _finding(
                        "sharing-dra-deviceclass-missing",
                        dc,
                        [f"DeviceClass {dc} not found"],
                        "The dra-driver-nvidia-gpu chart creates the DeviceClasses claims refer to.",
                        "Install the dra-driver-nvidia-gpu release (the gpu_sharing role does for DRA pools).",
                        kind="DeviceClass",
                    )
                )
    return {"pools": out_pools, "diagnosis": findings, "not_ready": not_ready}


def _amounts(counts: Mapping[str, Any] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((counts or {}).items())) or "-"


def table(pools: Sequence[Mapping[str, Any]]) -> str:
    """The per-node sharing table the gpu_sharing role prints: NODE, POOL, MODEL, EXPECTED and ADVERTISED (resource
    counts), MIG (the node's ``nvidia.com/mig.config.state``, MIG pools), SLICES (DRA devices the node publishes, DRA
    pools); ``-`` where a column does not apply; ``no node in any pool`` when the pools have none."""

    def slices(n: Mapping[str, Any]) -> int:
        return sum(int(s.get("devices") or 0) for s in n.get("resource_slices") or ())

    rows = [
        [
            n.get("name"),
            pool.get("name"),
            pool.get("model"),
            _amounts(n.get("expected")),
            _amounts(n.get("advertised")),
            ((n.get("labels") or {}).get(_pools.MIG_STATE_LABEL) or "none") if pool.get("model") == "mig" else "-",
            slices(n) if pool.get("model") == "dra" else "-",
        ]
        for pool in pools
        for n in pool.get("nodes") or ()
    ]
    if not rows:
        return "no node in any pool"
    return "\n".join(_table.aligned([["NODE", "POOL", "MODEL", "EXPECTED", "ADVERTISED", "MIG", "SLICES"], *rows]))
