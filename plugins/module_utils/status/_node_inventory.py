# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The GPU nodes of a live cluster as inventory hosts (the ``gpuops.platform.gpu_nodes`` inventory plugin):
``collect`` lists what it needs with a constant number of requests; ``hosts`` is a pure function of those lists:
per GPU node its address, its groups and its ``gpuops_node`` variables."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.status import (
    _cluster_status,
    _cluster_views,
    _label_selectors,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._gpu_labels import NFD, base_product

MIG_CAPABLE = "nvidia.com/mig.capable"
NVIDIA_NIC = f"{NFD}/pci-15b3.present"  # a Mellanox/NVIDIA NIC (NFD, deviceLabelFields [vendor])


def collect(reader: Any, operator_namespace: str) -> dict[str, Any]:
    """Nodes and ClusterPolicies, then (``_cluster_status.collect_sharing``) ResourceSlices and, when the
    ClusterPolicy names one, the device-plugin ConfigMaps: three or four list requests whatever the node count."""
    raw = {"nodes": reader.nodes() or [], "cluster_policies": reader.cluster_custom(*_cluster_status.CLUSTER_POLICY)}
    raw.update(_cluster_status.collect_sharing(reader, raw, operator_namespace))
    return raw


def group_name(text: Any) -> str:
    """A valid Ansible group name part: lower case, runs of other characters as one underscore."""
    return re.sub(r"[^a-z0-9_]+", "_", str(text).lower()).strip("_")


def _address(node: Mapping[str, Any], address_type: str) -> str | None:
    addresses = (node.get("status") or {}).get("addresses") or []
    chosen = next((a.get("address") for a in addresses if a.get("type") == address_type), None)
    return chosen or next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None)


def hosts(
    raw: Mapping[str, Any], selector: list[tuple[str, str, set[str]]] | None = None, address_type: str = "InternalIP"
) -> list[dict[str, Any]]:
    """Per GPU node (vendor label or advertised GPUs; or every node ``selector`` matches): ``name``, ``address``,
    ``groups`` and ``vars`` (``gpuops_node``: vendor, product (the label), model (without the sharing suffix),
    gpus, ready, unschedulable, allocatable GPU resources, sharing model, all labels), sorted by name."""
    views: dict[Any, dict[str, Any]]
    full: dict[Any, Any]
    views, full = {}, {}
    for node in raw["nodes"]:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        alloc = (node.get("status") or {}).get("allocatable") or {}
        vendor = _cluster_views.gpu_vendor(labels, alloc)
        chosen = _label_selectors.selector_matches(selector, labels) if selector is not None else vendor is not None
        if chosen:
            views[meta.get("name")] = _cluster_views.node_view(node, vendor)
            full[meta.get("name")] = node
    _cluster_views.sharing_of(raw, views)
    out = []
    for name in sorted(views):
        view, node = views[name], full[name]
        labels = (node.get("metadata") or {}).get("labels") or {}
        alloc = (node.get("status") or {}).get("allocatable") or {}
        sharing = view.get("sharing") or {}
        groups = ["gpu_nodes"]
        if view["vendor"]:
            groups.append(f"gpu_vendor_{view['vendor']}")
        if base_product(view["product"]):
            groups.append("gpu_product_" + group_name(base_product(view["product"])))
        if labels.get(MIG_CAPABLE) == "true":
            groups.append("mig_capable")
        if labels.get(NVIDIA_NIC) == "true" or any(k.startswith("rdma/") and str(v) != "0" for k, v in alloc.items()):
            groups.append("rdma_capable")
        if sharing:
            groups.append("sharing_" + group_name(sharing["model"]))
            entry = labels.get("nvidia.com/device-plugin.config")
            if sharing["model"] in ("time_slicing", "mps") and entry:
                groups.append("sharing_pool_" + group_name(entry))
        if not view["ready"]:
            groups.append("not_ready")
        if view["unschedulable"]:
            groups.append("cordoned")
        out.append(
            {
                "name": name,
                "address": _address(node, address_type),
                "groups": groups,
                "vars": {
                    "gpuops_node": {
                        "vendor": view["vendor"],
                        "product": view["product"],
                        "model": base_product(view["product"]),
                        "gpus": view["gpus"],
                        "ready": view["ready"],
                        "unschedulable": view["unschedulable"],
                        "allocatable": view["allocatable"],
                        "sharing": {k: sharing[k] for k in ("model", "detail")} if sharing else None,
                        "labels": dict(sorted(labels.items())),
                    }
                },
            }
        )
    return out
