# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The smoke_tests role's plan, once: pure functions (no I/O). :func:`plan` - from the role's variables, the
cluster's Node objects and the sharing model each node runs: the test pods, requested as a user would (a node
selector on the product and the host, the resource the node advertises for its sharing model, a DRA
ResourceClaimTemplate), and the findings (errors before any change, warnings for a test that cannot run here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.smoke._smoke import (
    AMD_GPU,
    AMD_PRODUCT_LABEL,
    CUDA_SCRIPT,
    DRA_DEVICE_CLASS,
    GPU,
    GPU_SHARED,
    HOST_LABEL,
    IB_SCRIPT,
    KAI_QUEUE_LABEL,
    KAI_SCHEDULER,
    PRODUCT_LABEL,
    ROCM_SCRIPT,
    RUN_LABELS,
    SHARING_MODELS,
    TEST_LABEL,
    TESTS,
    Obj,
    _finding,
    _meta,
    _node_view,
    image_findings,
    resolve_image,
    result_key,
    slug,
    threshold_findings,
)
from ansible_collections.gpuops.platform.plugins.module_utils.smoke._smoke_phases import (
    NCCL_WORKER,
    _requests,
    assign_phases,
    by_phase,
    nccl_script,
    phase_findings,
)
from ansible_collections.gpuops.platform.plugins.module_utils.smoke._smoke_results import table
from ansible_collections.gpuops.platform.plugins.module_utils.status._remediation_marks import quarantine_taints

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"  # the taint a cordon puts on a node


def _pod(
    name: str, test: str, node: Mapping[str, Any], image: str, script: str, resources: Mapping[str, int], ctx: Mapping
) -> Obj:
    selector = {HOST_LABEL: node["labels"].get(HOST_LABEL) or node["name"]}
    if node["product"] and not test.startswith("rocm_smi"):
        selector[PRODUCT_LABEL] = node["product"]
    if node["amd_product"] and test.startswith("rocm_smi"):
        selector[AMD_PRODUCT_LABEL] = node["amd_product"]
    container: dict[str, Any] = {
        "name": "smoke",
        "image": image,
        "command": ["/bin/sh", "-c", script],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if resources:
        amounts = {k: str(v) for k, v in sorted(resources.items())}
        container["resources"] = {"limits": amounts, "requests": dict(amounts)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ctx["namespace"],
            "labels": {**RUN_LABELS, TEST_LABEL: slug(test, 63)},
        },
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": ctx["timeout"],
            "nodeSelector": selector,
            "tolerations": list(ctx["tolerations"]) + list(node["tolerate"]),
            "containers": [container],
        },
    }


def pinned_tolerations(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What a test pod needs to reach a node named in smoke_tests_nodes although it is cordoned or quarantined: the
    cordon's taint (kube-scheduler's NodeUnschedulable admits a pod that tolerates it) and the taint gpuops'
    remediation quarantine added (its annotation names it) - no other taint of the node."""
    out: list[dict[str, Any]] = []
    if (node.get("spec") or {}).get("unschedulable"):
        out.append({"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"})
    for taint in quarantine_taints(node):
        value = taint.get("value") or ""
        out.append({"key": taint["key"], "operator": "Equal", "value": value, "effect": taint["effect"]})
    return out


def _entry(test: str, pods: Sequence[Obj], nodes: Sequence[str], product: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "test": test,
        "key": result_key(test),
        "pods": [p["metadata"]["name"] for p in pods],
        "nodes": list(nodes),
        "product": product,
        **extra,
    }


def _sharing_resources(node: Mapping[str, Any]) -> dict[str, int] | None:
    alloc = node["allocatable"]
    if node["model"] in ("time_slicing", "mps"):
        res = GPU_SHARED if alloc.get(GPU_SHARED) else GPU
        return {res: 1} if alloc.get(res) else None
    if node["model"] == "mig":
        migs = sorted(k for k, v in alloc.items() if k.startswith("nvidia.com/mig-") and v > 0)
        if migs:
            return {migs[0]: 1}
        return {GPU: 1} if alloc.get(GPU) else None  # mig.strategy single: MIG devices as nvidia.com/gpu
    return {}


def plan(variables: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], models: Mapping[str, str]) -> dict[str, Any]:
    """The test pods (and DRA ResourceClaimTemplates) and the findings. ``models``: node -> sharing model."""
    tests = [t for t in variables.get("smoke_tests_tests") or () if t in TESTS]
    images = variables.get("smoke_tests_images") or {}
    mirror = variables.get("smoke_tests_registry_mirror") or None
    nccl_thresholds = variables.get("smoke_tests_nccl_busbw_gbps") or {}
    ib_thresholds = variables.get("smoke_tests_ib_write_bw_gbps") or {}
    findings = image_findings(images, tests, mirror)
    unknown = [str(t) for t in variables.get("smoke_tests_tests") or () if t not in TESTS]
    if unknown:
        findings.append(
            _finding(
                "smoke-test-unknown",
                "error",
                "Variable",
                "smoke_tests_tests",
                [f"unknown: {', '.join(unknown)}"],
                "the role runs only the tests it knows",
                f"choose among {', '.join(TESTS)}",
            )
        )
    findings += threshold_findings("smoke_tests_nccl_busbw_gbps", nccl_thresholds)
    findings += threshold_findings("smoke_tests_ib_write_bw_gbps", ib_thresholds)
    ctx = {
        "namespace": variables.get("smoke_tests_namespace") or "gpuops-smoke-tests",
        "timeout": int(variables.get("smoke_tests_timeout") or 300),
        "tolerations": variables.get("smoke_tests_tolerations") or [],
    }
    view = sorted(
        (_node_view(n, models.get(str(_meta(n).get("name")))) for n in nodes if _meta(n).get("name")),
        key=lambda n: n["name"],
    )
    pinned = [str(n) for n in variables.get("smoke_tests_nodes") or ()]
    if pinned:
        raw = {str(_meta(n).get("name")): n for n in nodes}
        unknown_nodes = [n for n in pinned if n not in raw]
        if unknown_nodes:
            findings.append(
                _finding(
                    "smoke-node-unknown",
                    "error",
                    "Variable",
                    "smoke_tests_nodes",
                    [f"not in the cluster: {', '.join(unknown_nodes)}"],
                    "the role tests only nodes the cluster has",
                    "name nodes of `kubectl get nodes`, or leave smoke_tests_nodes empty (every schedulable node)",
                )
            )
        view = [dict(n, tolerate=pinned_tolerations(raw[n["name"]])) for n in view if n["name"] in pinned]
    else:
        view = [dict(n, tolerate=[]) for n in view if n["schedulable"]]
    pods: list[Obj] = []
    claims: list[Obj] = []
    entries: list[dict[str, Any]] = []

    def image_of(key: str, test: str) -> str | None:
        image = images.get(key)
        if image:
            return resolve_image(str(image), mirror)
        findings.append(
            _finding(
                "smoke-image-unset",
                "warning",
                "Variable",
                f"smoke_tests_images.{key}",
                [f"test {test} would run; no image is set"],
                "the collection ships no digest it has not checked for this image",
                f"set smoke_tests_images.{key} to a pinned image (name@sha256:...), or drop the test from "
                "smoke_tests_tests",
            )
        )
        return None

    nvidia = [n for n in view if n["product"] and n["model"] not in ("dra",)]
    exclusive = [n for n in nvidia if n["model"] == "exclusive" and n["allocatable"].get(GPU, 0) > 0]
    by_product: dict[str, list[dict[str, Any]]] = {}
    for n in exclusive:
        by_product.setdefault(n["base_product"], []).append(n)

    if "cuda" in tests and by_product and (image := image_of("cuda", "cuda")):
        for product, members in sorted(by_product.items()):
            node = members[0]
            test = f"cuda.{slug(product, 40)}"
            pod = _pod(f"smoke-cuda-{slug(product)}", test, node, image, CUDA_SCRIPT, {GPU: 1}, ctx)
            pods.append(pod)
            entries.append(_entry(test, [pod], [node["name"]], product, kind="cuda", threshold=None))

    if "sharing" in tests:
        seen: set[str] = set()
        for node in nvidia:
            model = node["model"]
            if model not in SHARING_MODELS or model in seen:
                continue
            resources = _sharing_resources(node)
            if resources is None:
                findings.append(
                    _finding(
                        "smoke-sharing-nothing-advertised",
                        "warning",
                        "Node",
                        node["name"],
                        [f"model {model}; allocatable {node['allocatable']}"],
                        "the node runs a sharing model but advertises no GPU resource for it",
                        "see playbooks/diagnose.yml's SHARING column for that node",
                    )
                )
                continue
            if model == "kai_fraction" and not variables.get("smoke_tests_kai_queue"):
                findings.append(
                    _finding(
                        "smoke-kai-queue-unset",
                        "warning",
                        "Variable",
                        "smoke_tests_kai_queue",
                        [f"node {node['name']} runs kai_fraction"],
                        "a KAI fraction pod must name a leaf queue (label kai.scheduler/queue)",
                        "set smoke_tests_kai_queue to a leaf queue of kai_scheduler_queues",
                    )
                )
                continue
            image = image_of("cuda", f"sharing.{model}")
            if not image:
                continue
            seen.add(model)
            test = f"sharing.{model}"
            pod = _pod(f"smoke-sharing-{slug(model)}", test, node, image, CUDA_SCRIPT, resources, ctx)
            if model == "kai_fraction":
                pod["spec"]["schedulerName"] = KAI_SCHEDULER
                pod["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
                pod["metadata"]["labels"][KAI_QUEUE_LABEL] = str(variables["smoke_tests_kai_queue"])
            pods.append(pod)
            entries.append(_entry(test, [pod], [node["name"]], node["product"], kind="cuda", threshold=None))

    dra_nodes = [n for n in view if n["model"] == "dra"]
    if "dra" in tests and dra_nodes and (image := image_of("cuda", "dra")):
        node = dra_nodes[0]
        name = "smoke-dra"
        claims.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": ctx["namespace"], "labels": dict(RUN_LABELS)},
                "spec": {
                    "spec": {
                        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRA_DEVICE_CLASS}}]}
                    }
                },
            }
        )
        pod = _pod(name, "dra", node, image, CUDA_SCRIPT, {}, ctx)
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": name}]
        pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
        pods.append(pod)
        entries.append(
            _entry("dra", [pod], [node["name"]], node["product"], kind="cuda", threshold=None, claim_template=name)
        )

    rails_wanted = list(variables.get("smoke_tests_rdma_resources") or [])

    def rails(node: Mapping[str, Any]) -> list[str]:
        alloc = node["allocatable"]
        names = rails_wanted or [k for k in alloc if k.startswith("rdma/")]
        return sorted(k for k in names if alloc.get(k, 0) > 0)

    if "nccl" in tests:
        pairs = {p: m[:2] for p, m in sorted(by_product.items()) if len(m) >= 2}
        if pairs and (image := image_of("nccl", "nccl")):
            for product, (first, second) in pairs.items():
                gpus = min(first["allocatable"].get(GPU, 0), second["allocatable"].get(GPU, 0))
                common = sorted(set(rails(first)) & set(rails(second)))
                resources = {GPU: gpus, **{r: 1 for r in common}}
                test = f"nccl.{slug(product, 40)}"
                base = f"smoke-nccl-{slug(product)}"
                hosts = f"{base}-0.{base},{base}-1.{base}"
                script = nccl_script(variables, hosts, gpus)
                pair = []
                for rank, node in enumerate((first, second)):
                    pod = _pod(
                        f"{base}-{rank}", test, node, image, script if rank == 0 else NCCL_WORKER, resources, ctx
                    )
                    pod["spec"]["hostname"] = f"{base}-{rank}"
                    pod["spec"]["subdomain"] = base
                    pod["metadata"]["labels"]["gpuops.platform/smoke-pair"] = base
                    pair.append(pod)
                pods.extend(pair)
                threshold = nccl_thresholds.get(product)
                entries.append(
                    _entry(
                        test,
                        pair,
                        [first["name"], second["name"]],
                        product,
                        kind="nccl",
                        threshold=threshold,
                        service=base,
                        result_pod=pair[0]["metadata"]["name"],
                    )
                )
        elif by_product:
            findings.append(
                _finding(
                    "smoke-nccl-no-pair",
                    "warning",
                    "Cluster",
                    "nccl",
                    [f"{p}: {len(m)} node(s)" for p, m in sorted(by_product.items())],
                    "the all-reduce test needs two schedulable exclusive nodes of one GPU product",
                    "add a second node of the product, or drop nccl from smoke_tests_tests",
                )
            )

    if "ib_write_bw" in tests:
        done: set[str] = set()
        for node in view:
            for rail in rails(node):
                if rail in done:
                    continue
                image = image_of("ib_write_bw", f"ib_write_bw.{rail}")
                if not image:
                    done.add(rail)
                    continue
                done.add(rail)
                test = f"ib_write_bw.{rail.rpartition('/')[2]}"
                pod = _pod(f"smoke-ib-{slug(rail.rpartition('/')[2])}", test, node, image, IB_SCRIPT, {rail: 1}, ctx)
                pod["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
                pods.append(pod)
                threshold = ib_thresholds.get(rail, ib_thresholds.get("*"))
                entries.append(
                    _entry(
                        test, [pod], [node["name"]], node["product"], kind="ib_write_bw", threshold=threshold, rail=rail
                    )
                )

    if "rocm_smi" in tests:
        amd: dict[str, dict[str, Any]] = {}
        for node in view:
            if node["allocatable"].get(AMD_GPU, 0) > 0:
                amd.setdefault(node["amd_product"] or "amd", node)
        if amd and (image := image_of("rocm_smi", "rocm_smi")):
            for product, node in sorted(amd.items()):
                test = f"rocm_smi.{slug(product, 40)}"
                pod = _pod(f"smoke-rocm-{slug(product)}", test, node, image, ROCM_SCRIPT, {AMD_GPU: 1}, ctx)
                pods.append(pod)
                entries.append(_entry(test, [pod], [node["name"]], product, kind="rocm_smi", threshold=None))

    services = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": e["service"], "namespace": ctx["namespace"], "labels": dict(RUN_LABELS)},
            "spec": {"clusterIP": "None", "selector": {"gpuops.platform/smoke-pair": e["service"]}},
        }
        for e in entries
        if e.get("service")
    ]
    if not entries and not findings:
        findings.append(
            _finding(
                "smoke-nothing-to-test",
                "warning",
                "Cluster",
                "nodes",
                [f"{len(view)} schedulable node(s); tests {', '.join(tests) or 'none'}"],
                "no node advertises a GPU or RDMA resource that the enabled tests need",
                "install the GPU Operator (or the AMD GPU Operator, the Network Operator) first",
            )
        )
    allocatable = {n["name"]: n["allocatable"] for n in view}
    assign_phases(entries, pods, allocatable)
    findings += phase_findings(entries, pods, allocatable)
    requests = {p["metadata"]["name"]: _requests(p) for p in pods}
    would = [
        {
            "test": e["test"],
            "phase": e["phase"],
            "nodes": e["nodes"],
            "product": e["product"],
            "result": "would run",
            "detail": "; ".join(f"{name}: {requests[name]}" for name in e["pods"]),
        }
        for e in entries
    ]
    return {
        "namespace": ctx["namespace"],
        "table": table(would),
        "tests": entries,
        "pods": pods,
        "claim_templates": claims,
        "services": services,
        "phases": by_phase(entries, pods, services, claims),
        "simulated": sorted(n["name"] for n in view if n["simulated"]),
        "findings": findings,
    }
