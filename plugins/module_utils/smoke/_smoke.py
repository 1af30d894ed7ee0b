# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The smoke_tests role's rules, once: pure functions (no I/O).

- :func:`plan` - from the role's variables, the cluster's Node objects and the sharing model each node runs
  (``gpu_cluster_status`` with ``sharing: true``): the test pods, requested as a user would (a node selector on the
  product and the host, the resource the node advertises for its sharing model, a DRA ResourceClaimTemplate), and
  the findings (an image without a ``@sha256:`` digest, a threshold that is not a number - errors before any change;
  a test that cannot run here - warnings). Each test gets a ``phase`` (:func:`assign_phases`): the role runs the
  phases one after the other, and no two tests of one phase ask a node for more than it has (:func:`phase_findings`).
- :func:`results` - from the plan and the live pods (and the logs of the pods that finished on real nodes): each
  test's result (``pass``, ``fail`` or ``not-measured``), the node labels and annotations that record it (with the
  pods' placement and requests, as the pods are deleted), and the table; for one phase or for all. A pod on a
  simulated node (kwok's annotation ``kwok.x-k8s.io/node: fake``) ran nothing: its result is ``not-measured:
  simulated node`` whatever it printed - never a number.
- :func:`parse` - one test's output against its threshold (nccl-tests' ``Avg bus bandwidth``, perftest's
  ``ib_write_bw`` average Gb/s, CUDA's ``Test PASSED``, ``nvidia-smi -L`` and ``rocm-smi`` GPU lines).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

Finding = dict[str, Any]
Obj = dict[str, Any]

TESTS = ("cuda", "sharing", "dra", "nccl", "ib_write_bw", "rocm_smi")
IMAGE_KEYS = ("cuda", "nccl", "ib_write_bw", "rocm_smi")  # the sharing and DRA pods run the cuda image
SIMULATED_ANNOTATION = "kwok.x-k8s.io/node"
SIMULATED_VALUE = "fake"
NOT_MEASURED = "not-measured: simulated node"
RESULTS = ("pass", "fail", "not-measured")
RESULT_PREFIX = "gpuops.platform/smoke."
FIELD_MANAGER = "gpuops-smoke-tests"
TEST_LABEL = "gpuops.platform/smoke-test"
RUN_LABELS = {"app.kubernetes.io/managed-by": "gpuops.platform", "gpuops.platform/role": "smoke_tests"}
SELECTOR = ",".join(f"{k}={v}" for k, v in RUN_LABELS.items())
PRODUCT_LABEL = "nvidia.com/gpu.product"
AMD_PRODUCT_LABEL = "amd.com/gpu.product-name"
HOST_LABEL = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"
AMD_GPU = "amd.com/gpu"
DRA_DEVICE_CLASS = "gpu.nvidia.com"
KAI_SCHEDULER = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
SHARING_MODELS = ("time_slicing", "mps", "mig", "kai_fraction")
_DIGEST_RE = re.compile(r"^(?P<name>[^@\s]+)@sha256:[0-9a-f]{64}\Z")
_MIRROR_RE = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?\Z")
_BUSBW_RE = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.]+)")
_IB_HEADER_RE = re.compile(r"BW average\[Gb/sec\]")
_SLUG_RE = re.compile(r"[^a-z0-9]+")

CUDA_SCRIPT = "nvidia-smi -L && /cuda-samples/vectorAdd"
ROCM_SCRIPT = "rocm-smi --showproductname --showuse"
# perftest in loopback through the rail's HCA: the server in the background, the client to localhost
IB_SCRIPT = "ib_write_bw --report_gbits -F -D 5 & sleep 2; ib_write_bw --report_gbits -F -D 5 localhost; wait"


_finding = _owned.finding


def slug(text: str, limit: int = 40) -> str:
    """A DNS-1123 label part from any text; long texts keep a short hash so that two never meet."""
    out = _SLUG_RE.sub("-", str(text).lower()).strip("-") or "x"
    if len(out) > limit:
        digest = hashlib.sha256(str(text).encode()).hexdigest()[:6]
        out = out[: limit - 7].rstrip("-") + "-" + digest
    return out


def result_key(test: str) -> str:
    """The node label and annotation key of a test's result (the name part at most 63 characters)."""
    name = "smoke." + re.sub(r"[^A-Za-z0-9_.-]+", "_", test)
    if len(name) > 63:
        name = name[:56].rstrip("._-") + "." + hashlib.sha256(test.encode()).hexdigest()[:6]
    return "gpuops.platform/" + name


# --- images ---------------------------------------------------------------------------------------------------


def _registry_split(name: str) -> tuple[str, str]:
    """(registry, path) of an image name, as the container runtimes read it: the first component is a registry when
    it has a dot or a port or is localhost, else the image is on Docker Hub."""
    first, _sep, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "docker.io", name if "/" in name else "library/" + name


def resolve_image(image: str, mirror: str | None) -> str:
    """The image pulled: with a mirror (``host[:port][/prefix]``), the registry part is replaced and the path and
    digest kept (``nvcr.io/nvidia/k8s/cuda-sample@sha256:...`` -> ``mirror.local/nvidia/k8s/cuda-sample@sha256:...``;
    a tag beside the digest is dropped)."""
    if not mirror:
        return image
    name, _at, digest = image.partition("@")
    _registry, path = _registry_split(name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name)
    return f"{mirror.rstrip('/')}/{path}@{digest}"


def image_findings(images: Mapping[str, Any], tests: Sequence[str], mirror: Any) -> list[Finding]:
    out: list[Finding] = []
    wanted = {"cuda"} if {"cuda", "sharing", "dra"} & set(tests) else set()
    wanted |= {t for t in tests if t in ("nccl", "ib_write_bw", "rocm_smi")}
    for key in IMAGE_KEYS:
        image = images.get(key)
        if key not in wanted or image in (None, ""):
            continue
        if not isinstance(image, str) or not _DIGEST_RE.match(_untag(image)):
            out.append(
                _finding(
                    "smoke-image-not-pinned",
                    "error",
                    "Variable",
                    f"smoke_tests_images.{key}",
                    [f"{image!r} has no @sha256: digest"],
                    "a tag can move: the test would prove another image than the one reviewed, and a mirror could "
                    "serve anything under that tag",
                    f"pin it: smoke_tests_images.{key}: <registry>/<path>@sha256:<64 hex digits> "
                    "(crane digest <image>:<tag> or skopeo inspect gives the digest)",
                )
            )
    if mirror not in (None, "") and (not isinstance(mirror, str) or not _MIRROR_RE.match(mirror)):
        out.append(
            _finding(
                "smoke-mirror-invalid",
                "error",
                "Variable",
                "smoke_tests_registry_mirror",
                [f"{mirror!r} is not host[:port][/path]"],
                "the mirror replaces the registry part of each image; a scheme or a tag cannot be part of it",
                "set it like registry.example.com:5000/mirror (no https://), or leave it empty",
            )
        )
    return out


def _untag(image: str) -> str:
    """``name:tag@sha256:d`` -> ``name@sha256:d`` (the runtime ignores the tag when a digest is given)."""
    name, at, digest = image.partition("@")
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: len(name) - len(last[-1])] + last[-1].split(":", 1)[0]
    return name + at + digest


def threshold_findings(var: str, value: Any) -> list[Finding]:
    if not isinstance(value, Mapping):
        return []  # the argument spec types it
    bad = [f"{k}: {v!r}" for k, v in value.items() if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0]
    if not bad:
        return []
    return [
        _finding(
            "smoke-threshold-invalid",
            "error",
            "Variable",
            var,
            bad,
            "a threshold is a number (GB/s for nccl-tests' bus bandwidth, Gb/s for ib_write_bw)",
            f"write {var} as {{<key>: <number>}}",
        )
    ]


# --- nodes ----------------------------------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def is_simulated(node: Mapping[str, Any]) -> bool:
    return (_meta(node).get("annotations") or {}).get(SIMULATED_ANNOTATION) == SIMULATED_VALUE


def _count(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def _base_product(product: str) -> str:
    """GFD's product label without the suffixes a sharing model adds (``-SHARED``, ``-MIG-<profile>``)."""
    product = re.sub(r"-SHARED$", "", product)
    return re.sub(r"-MIG-[0-9a-z.+]+$", "", product)


def _node_view(node: Mapping[str, Any], model: str | None) -> dict[str, Any]:
    meta = _meta(node)
    labels = meta.get("labels") or {}
    alloc = (node.get("status") or {}).get("allocatable") or {}
    spec = node.get("spec") or {}
    return {
        "name": meta.get("name"),
        "labels": labels,
        "product": labels.get(PRODUCT_LABEL),
        "base_product": _base_product(labels.get(PRODUCT_LABEL) or ""),
        "amd_product": labels.get(AMD_PRODUCT_LABEL),
        "allocatable": {k: _count(v) for k, v in alloc.items()},
        "model": model or "exclusive",
        "simulated": is_simulated(node),
        "schedulable": not spec.get("unschedulable"),
    }


def sharing_models(rows: Sequence[Mapping[str, Any]] | None) -> dict[str, str]:
    """Node -> the sharing model it runs, from ``gpu_cluster_status``'s nodes (``sharing: true``)."""
    return {
        str(r.get("name")): str((r.get("sharing") or {}).get("model"))
        for r in rows or ()
        if isinstance(r, Mapping) and (r.get("sharing") or {}).get("model")
    }


# --- pods -----------------------------------------------------------------------------------------------------


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
            "tolerations": list(ctx["tolerations"]),
            "containers": [container],
        },
    }


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
    view = [n for n in view if n["schedulable"]]
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


# --- phases ---------------------------------------------------------------------------------------------------
# Tests that run at once compete for their nodes' resources: a single-GPU pod on a node of an NCCL pair would leave
# rank 0 (all the node's GPUs) Pending - for ever on a simulated node, where nothing ends. So the tests run in
# phases, one after the other (each phase's pods deleted, or finished, before the next starts): first the tests of
# one node (cuda, sharing, dra, rocm_smi), then the pairs and rails (nccl, ib_write_bw). Within a phase no two
# tests may ask a node for more of a resource than it advertises; a test that would is moved to a later phase.

FIRST_PHASE = {"cuda": 1, "sharing": 1, "dra": 1, "rocm_smi": 1, "nccl": 2, "ib_write_bw": 2}


def pod_needs(pod: Mapping[str, Any]) -> dict[str, int]:
    """The countable resources a pod asks of its node (requests, else limits, of its containers)."""
    out: dict[str, int] = {}
    for container in (pod.get("spec") or {}).get("containers") or ():
        res = container.get("resources") or {}
        for key, value in (res.get("requests") or res.get("limits") or {}).items():
            if key in ("cpu", "memory", "ephemeral-storage"):
                continue
            out[key] = out.get(key, 0) + _count(value)
    return out


def _test_needs(entry: Mapping[str, Any], pods_by_name: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Node -> resource -> amount, for one test (its pods are on its nodes, in order)."""
    out: dict[str, dict[str, int]] = {}
    for i, name in enumerate(entry["pods"]):
        node = entry["nodes"][min(i, len(entry["nodes"]) - 1)]
        for key, amount in pod_needs(pods_by_name.get(name) or {}).items():
            per_node = out.setdefault(node, {})
            per_node[key] = per_node.get(key, 0) + amount
    return out


def assign_phases(
    entries: list[dict[str, Any]], pods: Sequence[Mapping[str, Any]], allocatable: Mapping[str, Mapping[str, int]]
) -> None:
    """Sets each test's ``phase`` (1, 2, ...): the test's first phase (:data:`FIRST_PHASE`), or a later one when the
    tests already there would leave one of its nodes short of a resource it asks for. Phases are numbered without
    gaps."""
    by_name = {str(_meta(p).get("name")): p for p in pods}
    used: dict[int, dict[str, dict[str, int]]] = {}
    for entry in entries:
        needs = _test_needs(entry, by_name)
        phase = FIRST_PHASE.get(entry["test"].split(".", 1)[0], 1)
        while True:
            taken = used.get(phase, {})
            short = any(
                taken.get(node, {}).get(key, 0) > 0
                and taken[node][key] + amount > (allocatable.get(node) or {}).get(key, 0)
                for node, want in needs.items()
                for key, amount in want.items()
            )
            if not short:
                break
            phase += 1
        entry["phase"] = phase
        for node, want in needs.items():
            per_node = used.setdefault(phase, {}).setdefault(node, {})
            for key, amount in want.items():
                per_node[key] = per_node.get(key, 0) + amount
    numbers = {n: i for i, n in enumerate(sorted({e["phase"] for e in entries}), start=1)}
    for entry in entries:
        entry["phase"] = numbers[entry["phase"]]


def phase_findings(
    entries: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    allocatable: Mapping[str, Mapping[str, int]],
) -> list[Finding]:
    """The rule: no two tests of one phase may ask a node for more of a resource than the node advertises (they would
    compete, and one would stay Pending). An error: the run stops before any change."""
    by_name = {str(_meta(p).get("name")): p for p in pods}
    sums: dict[tuple[int, str, str], list[tuple[str, int]]] = {}
    for entry in entries:
        for node, want in _test_needs(entry, by_name).items():
            for key, amount in want.items():
                sums.setdefault((int(entry.get("phase") or 1), node, key), []).append((entry["test"], amount))
    out: list[Finding] = []
    for (phase, node, key), asks in sorted(sums.items()):
        has = (allocatable.get(node) or {}).get(key, 0)
        if len(asks) >= 2 and sum(a for _t, a in asks) > has:
            out.append(
                _finding(
                    "smoke-phase-overcommit",
                    "error",
                    "Node",
                    node,
                    [f"phase {phase}: " + ", ".join(f"{t} {key}={a}" for t, a in asks) + f"; the node has {has}"],
                    "tests of one phase run at once: together they ask the node for more than it advertises, and "
                    "one would stay Pending (Insufficient " + key + ")",
                    "put the tests in different phases (_smoke.assign_phases), or run fewer tests (smoke_tests_tests)",
                )
            )
    return out


def by_phase(
    entries: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    services: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Per phase, in order: its number, tests and the objects the role creates for it (and deletes after it)."""
    out: list[dict[str, Any]] = []
    for number in sorted({int(e["phase"]) for e in entries}):
        mine = [e for e in entries if e["phase"] == number]
        names = {n for e in mine for n in e["pods"]}
        svc = {e.get("service") for e in mine}
        tpl = {e.get("claim_template") for e in mine}
        out.append(
            {
                "phase": number,
                "tests": [e["test"] for e in mine],
                "pods": [p for p in pods if p["metadata"]["name"] in names],
                "services": [s for s in services if s["metadata"]["name"] in svc],
                "claim_templates": [c for c in claims if c["metadata"]["name"] in tpl],
            }
        )
    return out


def _requests(pod: Mapping[str, Any]) -> str:
    """What a test pod asks for, in one cell of the table."""
    spec = pod["spec"]
    container = spec["containers"][0]
    asked = [f"{k}={v}" for k, v in sorted(((container.get("resources") or {}).get("limits") or {}).items())]
    asked += [f"claim {c['resourceClaimTemplateName']}" for c in spec.get("resourceClaims") or ()]
    if spec.get("schedulerName"):
        asked.append(f"scheduler {spec['schedulerName']} gpu-fraction {pod['metadata']['annotations']['gpu-fraction']}")
    return ", ".join(asked) or "nothing"


NCCL_WORKER = "exec /usr/sbin/sshd -D -e"


def nccl_script(variables: Mapping[str, Any], hosts: str, gpus: int) -> str:
    """Rank 0's command: mpirun over both pods (reached by their headless Service names), one rank per GPU."""
    args = variables.get("smoke_tests_nccl_args") or "-b 8 -e 8G -f 2 -g 1"
    hostlist = ",".join(f"{h}:{gpus}" for h in hosts.split(","))
    return (
        f"sleep 10; mpirun --allow-run-as-root -np {2 * gpus} -H {hostlist} -x NCCL_DEBUG=WARN all_reduce_perf {args}"
    )


# --- results --------------------------------------------------------------------------------------------------


def parse(kind: str, text: str, threshold: Any) -> tuple[str, str, float | None]:
    """(result, detail, measured value) of one test's output. A bandwidth test without a threshold passes on its
    number alone and says so."""
    text = text or ""
    if kind == "cuda":
        gpus = len(re.findall(r"^GPU \d+: ", text, re.M))
        if "Test PASSED" in text and gpus >= 1:
            return "pass", f"vectorAdd Test PASSED; nvidia-smi lists {gpus} GPU(s)", None
        return "fail", "no 'Test PASSED'" if "Test PASSED" not in text else "nvidia-smi listed no GPU", None
    if kind == "rocm_smi":
        gpus = len(set(re.findall(r"^GPU\[(\d+)\]", text, re.M)))
        return ("pass", f"rocm-smi lists {gpus} GPU(s)", None) if gpus else ("fail", "rocm-smi listed no GPU", None)
    value: float | None = None
    unit = "GB/s" if kind == "nccl" else "Gb/s"
    if kind == "nccl":
        found = _BUSBW_RE.findall(text)
        value = float(found[-1]) if found else None
    elif kind == "ib_write_bw":
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if _IB_HEADER_RE.search(line):
                for row in lines[i + 1 :]:
                    cols = row.split()
                    if len(cols) >= 4 and cols[0].isdigit():
                        try:
                            value = float(cols[3])
                        except ValueError:
                            value = None
                        break
    if value is None:
        return "fail", f"no bandwidth in the output of {kind}", None
    if threshold is None:
        return "pass", f"{value:g} {unit} (no threshold set)", value
    if value >= float(threshold):
        return "pass", f"{value:g} {unit} >= {threshold} {unit}", value
    return "fail", f"{value:g} {unit} < {threshold} {unit}", value


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        term = (status.get("state") or {}).get("terminated")
        if term:
            return term
    return {}


def _unscheduled(pod: Mapping[str, Any]) -> str | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return cond.get("message") or cond.get("reason") or "not scheduled"
    return None


def pod_outcome(pod: Mapping[str, Any] | None, simulated: set[str], final: bool) -> dict[str, Any]:
    """One pod: ``done`` (nothing more will happen or nothing more is to be learnt), ``node``, and for a pod that
    cannot give a result ``result``/``detail``; ``logs`` true when its output must be read."""
    if pod is None:
        return {"done": final, "result": "fail", "detail": "pod not found", "node": None}
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    phase = (pod.get("status") or {}).get("phase")
    if node and node in simulated:
        return {"done": True, "result": "not-measured", "detail": NOT_MEASURED, "node": node}
    if phase == "Succeeded":
        return {"done": True, "node": node, "logs": True}
    if phase == "Failed":
        term = _terminated(pod)
        reason = term.get("reason") or (pod.get("status") or {}).get("reason") or "Failed"
        code = term.get("exitCode")
        return {
            "done": True,
            "node": node,
            "logs": bool(node),
            "result": "fail",
            "detail": f"{reason}" + (f", exit code {code}" if code is not None else ""),
        }
    if final:
        why = _unscheduled(pod)
        detail = f"not scheduled: {why}" if why else f"not finished within the timeout (phase {phase})"
        return {"done": True, "node": node, "result": "fail", "detail": detail}
    return {"done": False, "node": node}


def results(
    built: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    logs: Mapping[str, str] | None = None,
    final: bool = False,
    timestamp: str = "",
    phase: int | None = None,
) -> dict[str, Any]:
    """Each test's result from the live pods (``logs``: pod name -> its log, for the pods whose ``logs`` is true).
    ``done`` is true when every pod is done; with ``final`` a pod still waiting is a failure (the timeout).
    ``phase``: only the tests of that phase (the wait of one phase). ``pods`` may hold a pod more than once (what
    each phase read): the last one counts. ``holding``: the pods that exist and have not ended - they hold their
    node's resources until deleted."""
    by_name = {str(_meta(p).get("name")): p for p in pods}
    simulated = set(built.get("simulated") or ())
    logs = logs or {}
    rows: list[dict[str, Any]] = []
    to_read: list[str] = []
    holding: list[str] = []
    done = True
    for entry in built.get("tests") or ():
        if phase is not None and int(entry.get("phase") or 1) != int(phase):
            continue
        holding += [
            n
            for n in entry["pods"]
            if n in by_name and (by_name[n].get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        outcomes = {name: pod_outcome(by_name.get(name), simulated, final) for name in entry["pods"]}
        main = entry.get("result_pod") or entry["pods"][0]
        if outcomes[main]["done"] and "result" not in outcomes[main]:
            # rank 0 finished: the workers (sshd for mpirun) have served their purpose, running or not
            for name, o in outcomes.items():
                if name != main and o.get("result") == "fail" and "timeout" in o.get("detail", ""):
                    outcomes[name] = {"done": True, "node": o["node"]}
                elif name != main and not o["done"]:
                    outcomes[name] = {"done": True, "node": o["node"]}
        row_done = all(o["done"] for o in outcomes.values())
        done = done and row_done
        placed = [o["node"] for o in outcomes.values()]
        if any(o.get("result") == "not-measured" for o in outcomes.values()):
            result, detail, value = "not-measured", NOT_MEASURED, None
        elif any(o.get("result") == "fail" for o in outcomes.values()):
            bad = [f"{n}: {o['detail']}" for n, o in outcomes.items() if o.get("result") == "fail"]
            result, detail, value = "fail", "; ".join(bad), None
        else:
            pod = by_name.get(main) or {}
            text = logs.get(main) or _terminated(pod).get("message") or ""
            result, detail, value = parse(entry["kind"], text, entry.get("threshold"))
        to_read += [name for name, o in outcomes.items() if o.get("logs") and name == main]
        rows.append(
            {
                "test": entry["test"],
                "phase": entry.get("phase"),
                "key": entry["key"],
                "nodes": entry["nodes"],
                "placed_on": placed,
                "product": entry.get("product"),
                "pods": entry["pods"],
                "pod_records": [pod_record(name, by_name.get(name)) for name in entry["pods"]],
                "result": result if row_done else "waiting",
                "detail": detail if row_done else "",
                "value": value,
                "threshold": entry.get("threshold"),
            }
        )
    return {
        "done": done,
        "results": rows,
        "read_logs": sorted(set(to_read)),
        "holding": holding,
        "nodes": node_records(rows, timestamp),
        "table": table(rows),
    }


def pod_record(name: str, pod: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the API said of one test pod when its phase ended: the node it was bound to, its image, what it asked
    for (requests, DRA claim templates, scheduler) and its node selector - kept in the result annotation, since the
    pods are deleted."""
    if not pod:
        return {"name": name, "node": None}
    spec = pod.get("spec") or {}
    container = (spec.get("containers") or [{}])[0]
    res = container.get("resources") or {}
    out: dict[str, Any] = {
        "name": name,
        "node": spec.get("nodeName"),
        "phase": (pod.get("status") or {}).get("phase"),
        "image": container.get("image"),
        "requests": dict(res.get("requests") or res.get("limits") or {}),
        "selector": dict(spec.get("nodeSelector") or {}),
    }
    claims = [c.get("resourceClaimTemplateName") for c in spec.get("resourceClaims") or ()]
    if claims:
        out["claims"] = claims
    if spec.get("schedulerName") not in (None, "default-scheduler"):
        out["scheduler"] = spec["schedulerName"]
    return out


def node_records(rows: Sequence[Mapping[str, Any]], timestamp: str) -> list[Obj]:
    """Per node, the Node object to apply (server-side, field manager ``gpuops-smoke-tests``): a label per test
    (``gpuops.platform/smoke.<test>: pass|fail|not-measured``, unchanged by a rerun with the same result) and an
    annotation with the time, the detail, the test's phase and its pods as the API had them (:func:`pod_record`;
    changed by every run: that is the record of the run)."""
    nodes: dict[str, dict[str, dict[str, str]]] = {}
    for row in rows:
        if row["result"] not in RESULTS:
            continue
        for node in row["nodes"]:
            rec = nodes.setdefault(node, {"labels": {}, "annotations": {}})
            rec["labels"][row["key"]] = row["result"]
            note = {
                "result": row["result"],
                "detail": row["detail"],
                "time": timestamp,
                "phase": row.get("phase"),
                "pods": row.get("pod_records") or [{"name": name} for name in row["pods"]],
            }
            if row.get("value") is not None:
                note["value"] = row["value"]
            rec["annotations"][row["key"]] = json.dumps(note, sort_keys=True)
    return [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, **rec}} for name, rec in sorted(nodes.items())
    ]


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    head = ("TEST", "PHASE", "NODE", "PRODUCT", "RESULT", "DETAIL")
    body = [
        (
            r["test"],
            str(r.get("phase") or "-"),
            ",".join(r["nodes"]),
            str(r.get("product") or "-"),
            str(r["result"]),
            str(r["detail"] or ""),
        )
        for r in rows
    ]
    if not body:
        return "no smoke test planned"
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head) - 1)]
    lines = [
        "  ".join(line[i].ljust(widths[i]) for i in range(len(widths))) + "  " + line[-1] for line in [head, *body]
    ]
    return "\n".join(line.rstrip() for line in lines)
