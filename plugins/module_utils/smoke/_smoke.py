# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The smoke_tests role's rules, once: pure functions (no I/O). Here: the tests, the labels and annotations that
record them, the test images (a ``@sha256:`` digest, a registry mirror) and the thresholds, and the view of a node
(its product, host and GPUs) the plan reads. The plan of the test pods is in ``_smoke_plan``, their phases in
``_smoke_phases``, the results in ``_smoke_results``.
"""

from __future__ import annotations

import hashlib
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
