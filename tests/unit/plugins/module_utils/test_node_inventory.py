"""_node_inventory: GPU nodes as inventory hosts (groups and gpuops_node), from listed objects; base_product."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.status import _label_selectors, _node_inventory
from ansible_collections.gpuops.platform.plugins.module_utils.status._gpu_labels import base_product


def _node(name, labels=None, alloc=None, ready="True", unschedulable=False, addresses=None):
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"unschedulable": unschedulable},
        "status": {
            "allocatable": dict(alloc or {}),
            "conditions": [{"type": "Ready", "status": ready}],
            "addresses": addresses
            if addresses is not None
            else [{"type": "InternalIP", "address": f"10.0.0.{len(name)}"}],
        },
    }


POLICY = {
    "metadata": {"name": "cluster-policy"},
    "spec": {"devicePlugin": {"config": {"name": "cm", "default": "exclusive"}}},
}
CM = {
    "metadata": {"name": "cm"},
    "data": {
        "exclusive": "version: v1\n",
        "ts": "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}",
    },
}
NODES = [
    _node(
        "h100-a",
        {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
            "nvidia.com/mig.capable": "true",
            "nvidia.com/mig.config": "all-1g.10gb",
            "nvidia.com/mig.config.state": "success",
            "feature.node.kubernetes.io/pci-15b3.present": "true",
        },
        {"nvidia.com/gpu": "56", "cpu": "64"},
        addresses=[{"type": "ExternalIP", "address": "203.0.113.5"}, {"type": "InternalIP", "address": "10.1.0.5"}],
    ),
    _node(
        "l40s-a",
        {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
            "nvidia.com/device-plugin.config": "ts",
        },
        {"nvidia.com/gpu": "16", "rdma/rdma_ib": "0"},
        ready="False",
        unschedulable=True,
    ),
    _node("mi300-a", {"amd.com/gpu.product-name": "AMD-Instinct-MI300X"}, {"amd.com/gpu": "8", "rdma/rdma_ib": "63"}),
    _node("cpu-a", {"kubernetes.io/os": "linux"}, {"cpu": "32"}),
]


@pytest.mark.parametrize(
    ("product", "want"),
    [
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "NVIDIA-H100-80GB-HBM3"),
        ("NVIDIA-L40S-SHARED", "NVIDIA-L40S"),
        ("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"),
        (None, None),
        ("", None),
    ],
)
def test_base_product(product, want):
    assert base_product(product) == want


def test_groups_and_vars():
    raw = {"nodes": NODES, "cluster_policies": [POLICY], "configmaps": [CM], "resource_slices": []}
    got = {h["name"]: h for h in _node_inventory.hosts(raw)}
    assert sorted(got) == ["h100-a", "l40s-a", "mi300-a"]  # the CPU node is no GPU node
    assert got["h100-a"]["groups"] == [
        "gpu_nodes",
        "gpu_vendor_nvidia",
        "gpu_product_nvidia_h100_80gb_hbm3",
        "mig_capable",
        "rdma_capable",
        "sharing_mig",
    ]
    assert got["l40s-a"]["groups"] == [
        "gpu_nodes",
        "gpu_vendor_nvidia",
        "gpu_product_nvidia_l40s",
        "sharing_time_slicing",
        "sharing_pool_ts",
        "not_ready",
        "cordoned",
    ]
    # AMD: no NVIDIA sharing model; RDMA from the advertised resource
    assert got["mi300-a"]["groups"] == [
        "gpu_nodes",
        "gpu_vendor_amd",
        "gpu_product_amd_instinct_mi300x",
        "rdma_capable",
    ]
    node = got["h100-a"]["vars"]["gpuops_node"]
    assert node["model"] == "NVIDIA-H100-80GB-HBM3" and node["product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert node["gpus"] == 56 and node["allocatable"] == {"nvidia.com/gpu": 56}
    assert node["sharing"] == {"model": "mig", "detail": "all-1g.10gb (success)"}
    assert node["labels"]["nvidia.com/mig.capable"] == "true"
    assert got["h100-a"]["address"] == "10.1.0.5"
    assert got["mi300-a"]["vars"]["gpuops_node"]["sharing"] is None


def test_selector_and_address_type():
    raw = {"nodes": NODES, "cluster_policies": None, "resource_slices": []}
    sel = _label_selectors.parse_selector("kubernetes.io/os=linux")
    (cpu,) = _node_inventory.hosts(raw, sel)
    assert cpu["name"] == "cpu-a" and cpu["groups"] == ["gpu_nodes"]
    ext = {h["name"]: h["address"] for h in _node_inventory.hosts(raw, None, "ExternalIP")}
    assert ext["h100-a"] == "203.0.113.5"
    assert ext["mi300-a"] == "10.0.0.7"  # no ExternalIP: the InternalIP


def test_no_address_and_group_names():
    raw = {
        "nodes": [_node("g", {"nvidia.com/gpu.present": "true"}, addresses=[])],
        "cluster_policies": None,
        "resource_slices": [],
    }
    (host,) = _node_inventory.hosts(raw)
    assert host["address"] is None and "sharing_exclusive" in host["groups"]
    assert _node_inventory.group_name("NVIDIA H100 80GB/HBM3..x") == "nvidia_h100_80gb_hbm3_x"


class _Reader:
    def __init__(self):
        self.calls = []

    def nodes(self):
        self.calls.append("nodes")
        return NODES

    def cluster_custom(self, group, version, plural):
        self.calls.append(plural)
        return [POLICY]

    def objects(self, group, version, plural, namespace=None):
        self.calls.append(plural)
        return []

    def core(self, plural, namespace=None):
        self.calls.append(f"{plural}/{namespace}")
        return [CM]


def test_collect_is_four_requests():
    reader = _Reader()
    raw = _node_inventory.collect(reader, "gpu-operator")
    assert reader.calls == ["nodes", "clusterpolicies", "resourceslices", "configmaps/gpu-operator"]
    assert raw["configmaps"] == [CM]
