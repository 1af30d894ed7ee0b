"""The network_operator rules and builders as tables: the NicClusterPolicy per mode and variable (checked against the
fixture chart's structural CRD), the chart values, bad input -> findings naming the variable, IPPools (nv-ipam's own
rules), selectors against the hosts' NICs, MOFED agreement, and the NicClusterPolicy readiness predicate."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network as net
from ansible_collections.gpuops.platform.plugins.module_utils.network import (
    _network_hosts,
    _network_inputs,
    _network_pools,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status import _network_ready

REPO = Path(__file__).resolve().parents[4]
CHART = REPO / "tests" / "fixtures" / "charts" / "network-operator" / "26.4.1"
_spec = importlib.util.spec_from_file_location("fixture_charts", REPO / "tests/unit/charts/test_fixture_charts.py")
assert _spec and _spec.loader
_fixture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixture)
schema_errors = _fixture.schema_errors


def crd(name: str) -> dict[str, Any]:
    path = CHART / "crds" / name
    if not path.exists():
        path = CHART / "manifests" / "state-nv-ipam-cni" / name
    return yaml.safe_load(path.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


NCP_SCHEMA = crd("mellanox.com_nicclusterpolicies.yaml")
SCHEMAS = {
    "NicClusterPolicy": NCP_SCHEMA,
    "MacvlanNetwork": crd("mellanox.com_macvlannetworks.yaml"),
    "HostDeviceNetwork": crd("mellanox.com_hostdevicenetworks.yaml"),
    "IPoIBNetwork": crd("mellanox.com_ipoibnetworks.yaml"),
    "IPPool": crd("nv-ipam.nvidia.com_ippools.yaml"),
}

# gpu_host_facts nics[] entries as the dgx-h100 (ConnectX-7 InfiniBand) and pcie-l40s (ConnectX-6 Dx RoCE) profiles
CX7 = {
    "address": "0000:1a:00.0",
    "vendor_id": "15b3",
    "device_id": "1021",
    "class": "020700",
    "driver": "mlx5_core",
    "model": "ConnectX-7",
    "netdevs": ["ibp26s0"],
    "netdev": "ibp26s0",
    "rdma_device": "mlx5_0",
    "link_layer": "InfiniBand",
    "sriov_totalvfs": 16,
    "sriov_numvfs": 0,
}
CX6DX = {
    **CX7,
    "address": "0000:3b:00.0",
    "device_id": "101d",
    "class": "020000",
    "model": "ConnectX-6 Dx",
    "netdevs": ["ens1f0np0"],
    "netdev": "ens1f0np0",
    "rdma_device": "mlx5_2",
    "link_layer": "Ethernet",
}
INTEL = {
    **CX6DX,
    "address": "0000:5e:00.0",
    "vendor_id": "8086",
    "device_id": "1593",
    "driver": "ice",
    "model": "E810",
    "netdevs": ["ens5f0"],
    "netdev": "ens5f0",
    "rdma_device": None,
}
INBOX = {"ofed": {"flavor": "inbox", "version": None, "raw": None}}
MOFED = {"ofed": {"flavor": "mlnx_ofed", "version": "24.10-1.1.4.0", "raw": "MLNX_OFED_LINUX-24.10-1.1.4.0:"}}
DRIVER = {"nvidia_driver": {"loaded": False, "version": None, "installed_version": None}}


def host(*nics: dict[str, Any], ofed: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"nics": list(nics), **(INBOX if ofed is None else ofed), **DRIVER, "accelerators": [], "nvswitches": []}


def ids(findings: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted((f["id"], f["severity"], f["object"]["name"]) for f in findings)


# ---------------------------------------------------------------------------------------------- builders


def test_default_policy_is_upstreams_example_shape():
    ncp = net.nic_cluster_policy({})
    assert ncp["apiVersion"] == "mellanox.com/v1alpha1" and ncp["kind"] == "NicClusterPolicy"
    assert ncp["metadata"] == {"name": "nic-cluster-policy"}
    spec = ncp["spec"]
    assert spec["global"] == {"repository": "nvcr.io/nvidia/mellanox", "version": "network-operator-v26.4.1"}
    assert spec["ofedDriver"]["image"] == "doca-driver"
    assert spec["ofedDriver"]["version"] == "doca3.4.1-26.04-1.1.0.0-1"
    assert "repository" not in spec["ofedDriver"]  # global.repository applies (ApplyGlobalConfig)
    assert spec["ofedDriver"]["upgradePolicy"]["autoUpgrade"] is True
    assert json.loads(spec["rdmaSharedDevicePlugin"]["config"]) == {
        "configList": [{"resourceName": "rdma_shared_device_a", "rdmaHcaMax": 63, "selectors": {"vendors": ["15b3"]}}]
    }
    assert spec["rdmaSharedDevicePlugin"]["image"] == "k8s-rdma-shared-dev-plugin"
    assert "sriovDevicePlugin" not in spec
    assert spec["secondaryNetwork"] == {"cniPlugins": {"image": "plugins"}, "multus": {"image": "multus-cni"}}
    assert spec["nvIpam"] == {"image": "nvidia-k8s-ipam", "enableWebhook": False}
    assert "tolerations" not in spec and "nodeAffinity" not in spec
    assert schema_errors(ncp, NCP_SCHEMA) == []
    assert _network_inputs.network_input_findings({}) == []


@pytest.mark.parametrize(
    ("mode", "plugin", "absent", "sriov_chart"),
    [
        ("rdma_shared", "rdmaSharedDevicePlugin", "sriovDevicePlugin", False),
        ("host_device", "sriovDevicePlugin", "rdmaSharedDevicePlugin", False),
        ("sriov", None, "rdmaSharedDevicePlugin", True),
    ],
)
def test_mode_decides_the_device_plugin_and_the_bundled_sriov_operator(mode, plugin, absent, sriov_chart):
    spec = net.nic_cluster_policy({"mode": mode})["spec"]
    if plugin:
        assert plugin in spec
    assert absent not in spec
    if mode == "sriov":
        assert "sriovDevicePlugin" not in spec  # the SR-IOV Network Operator runs its own
    assert net.chart_values({"mode": mode})["sriovNetworkOperator"] == {"enabled": sriov_chart}
    assert net.chart_values({"mode": mode, "sriov_bundled": False})["sriovNetworkOperator"] == {"enabled": False}
    # the bundled chart's own SriovOperatorConfig is off whenever the bundled operator runs: the role owns it
    subchart = net.chart_values({"mode": mode}).get("sriov-network-operator")
    assert subchart == ({"sriovOperatorConfig": {"deploy": False}} if sriov_chart else None)
    assert "sriov-network-operator" not in net.chart_values({"mode": mode, "sriov_bundled": False})
    assert schema_errors(net.nic_cluster_policy({"mode": mode}), NCP_SCHEMA) == []


@pytest.mark.parametrize(("managed", "enabled"), [(True, False), (False, True)])
def test_bundled_nfd_is_off_while_the_nfd_role_manages_nfd(managed, enabled):
    assert net.chart_values({"nfd_managed": managed})["nfd"] == {"enabled": enabled}


def test_host_device_config_is_the_sriov_device_plugins_format():
    spec = net.nic_cluster_policy(
        {
            "mode": "host_device",
            "host_device_resources": [
                {"name": "hostdev", "vendors": ["15b3"], "deviceIDs": ["1021"], "pfNames": ["ibp26s0"], "isRdma": True}
            ],
        }
    )["spec"]
    assert json.loads(spec["sriovDevicePlugin"]["config"]) == {
        "resourceList": [
            {
                "resourcePrefix": "nvidia.com",
                "resourceName": "hostdev",
                "selectors": {"vendors": ["15b3"], "devices": ["1021"], "pfNames": ["ibp26s0"], "isRdma": True},
            }
        ]
    }


def test_rdma_config_renders_every_selector_in_upstream_names():
    resources = [
        {"name": "ib", "rdmaHcaMax": 8, "vendors": ["15b3"], "deviceIDs": ["1021"], "linkTypes": ["infiniband"]},
        {"name": "roce", "rdmaHcaMax": 4, "ifNames": ["ens1f0np0"], "drivers": ["mlx5_core"]},
    ]
    conf = json.loads(
        net.nic_cluster_policy({"rdma_shared_resources": resources})["spec"]["rdmaSharedDevicePlugin"]["config"]
    )
    assert conf["configList"] == [
        {
            "resourceName": "ib",
            "rdmaHcaMax": 8,
            "selectors": {"vendors": ["15b3"], "deviceIDs": ["1021"], "linkTypes": ["infiniband"]},
        },
        {"resourceName": "roce", "rdmaHcaMax": 4, "selectors": {"drivers": ["mlx5_core"], "ifNames": ["ens1f0np0"]}},
    ]


@pytest.mark.parametrize(
    ("cfg", "path", "expected"),
    [
        ({"ofed_driver_enabled": False}, ("ofedDriver",), None),
        ({"ofed_driver_version": "doca3.1.0-25.07-0.9.7.0-0"}, ("ofedDriver", "version"), "doca3.1.0-25.07-0.9.7.0-0"),
        (
            {"ofed_driver_env": {"RESTORE_DRIVER_ON_POD_TERMINATION": True, "UNLOAD_STORAGE_MODULES": "true"}},
            ("ofedDriver", "env"),
            [
                {"name": "RESTORE_DRIVER_ON_POD_TERMINATION", "value": "true"},
                {"name": "UNLOAD_STORAGE_MODULES", "value": "true"},
            ],
        ),
        (
            {"ofed_driver_env": [{"name": "CREATE_IFNAMES_UDEV", "value": False}]},
            ("ofedDriver", "env"),
            [{"name": "CREATE_IFNAMES_UDEV", "value": "false"}],
        ),
        ({"ofed_driver_upgrade_policy": {}}, ("ofedDriver", "upgradePolicy"), None),
        ({"ofed_driver_force_precompiled": True}, ("ofedDriver", "forcePrecompiled"), True),
        (
            {"repository": "mirror.example.com/nvidia", "version": "v1", "image_pull_secrets": ["ngc"]},
            ("global",),
            {"repository": "mirror.example.com/nvidia", "version": "v1", "imagePullSecrets": ["ngc"]},
        ),
        (
            {"images": {"nvIpam": {"repository": "r.example.com/x", "version": "v0.4.0"}}},
            ("nvIpam",),
            {"image": "nvidia-k8s-ipam", "repository": "r.example.com/x", "version": "v0.4.0", "enableWebhook": False},
        ),
        (
            {"ipoib_enabled": True, "multus_enabled": False},
            ("secondaryNetwork",),
            {"cniPlugins": {"image": "plugins"}, "ipoib": {"image": "ipoib-cni"}},
        ),
        ({"multus_enabled": False, "cni_plugins_enabled": False}, ("secondaryNetwork",), None),
        ({"nv_ipam_enabled": False}, ("nvIpam",), None),
        ({"nv_ipam_webhook": True}, ("nvIpam", "enableWebhook"), True),
        ({"doca_telemetry_enabled": False}, ("docaTelemetryService",), None),
        (
            {"doca_telemetry_enabled": True},
            ("docaTelemetryService",),
            # its own repository and version (hack/release.yaml), not spec.global's
            {"image": "doca_telemetry", "repository": "nvcr.io/nvidia/doca", "version": "1.25.5-doca3.4.0-host"},
        ),
        (
            {
                "doca_telemetry_enabled": True,
                "doca_telemetry_config_map": "my-dts",
                "images": {"docaTelemetryService": {"repository": "mirror.example.com/doca", "version": "1.26.0"}},
            },
            ("docaTelemetryService",),
            {
                "image": "doca_telemetry",
                "repository": "mirror.example.com/doca",
                "version": "1.26.0",
                "config": {"fromConfigMap": "my-dts"},
            },
        ),
        ({"use_cdi": True}, ("rdmaSharedDevicePlugin", "useCdi"), True),
        (
            {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
            ("tolerations",),
            [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        ),
        (
            {
                "node_affinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]
                    }
                }
            },
            ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", 0),
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
        ),
    ],
)
def test_variables_land_in_the_policy(cfg, path, expected):
    ncp = net.nic_cluster_policy(cfg)
    value: Any = ncp["spec"]
    for p in path:
        value = value[p] if isinstance(value, list) else value.get(p)
    assert value == expected
    assert schema_errors(ncp, NCP_SCHEMA) == []
    assert [f for f in _network_inputs.network_input_findings(cfg) if f["severity"] == "error"] == []


def test_builder_does_not_share_state_with_its_input_or_the_defaults():
    cfg = {"ofed_driver_upgrade_policy": {"drain": {"enable": True}}}
    ncp = net.nic_cluster_policy(cfg)
    ncp["spec"]["ofedDriver"]["upgradePolicy"]["drain"]["enable"] = False
    assert cfg["ofed_driver_upgrade_policy"]["drain"]["enable"] is True
    net.nic_cluster_policy({})["spec"]["ofedDriver"]["upgradePolicy"]["maxParallelUpgrades"] = 9
    assert net.DEFAULTS["ofed_driver_upgrade_policy"]["maxParallelUpgrades"] == 1


NETWORKS = {
    "ip_pools": [{"name": "rdma-pool", "subnet": "192.168.0.0/24", "perNodeBlockSize": 50, "gateway": "192.168.0.1"}],
    "macvlan_networks": [{"name": "roce-net", "master": "ens1f0np0", "mtu": 9000, "ip_pool": "rdma-pool"}],
    "ipoib_networks": [{"name": "ib-net", "namespace": "ml", "master": "ibp26s0", "ipam": {"type": "whereabouts"}}],
    "ipoib_enabled": True,
}


def test_network_objects_follow_the_crds():
    objs = net.network_objects({**NETWORKS, "namespace": "nvidia-network-operator"})
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("IPPool", "rdma-pool"),
        ("MacvlanNetwork", "roce-net"),
        ("IPoIBNetwork", "ib-net"),
    ]
    pool, macvlan, ipoib = objs
    assert pool["apiVersion"] == "nv-ipam.nvidia.com/v1alpha1"
    assert pool["metadata"]["namespace"] == "nvidia-network-operator"
    assert pool["spec"] == {"subnet": "192.168.0.0/24", "perNodeBlockSize": 50, "gateway": "192.168.0.1"}
    assert macvlan["spec"] == {
        "networkNamespace": "default",
        "master": "ens1f0np0",
        "mode": "bridge",
        "mtu": 9000,
        "ipam": '{"type": "nv-ipam", "poolName": "rdma-pool"}',
    }
    assert "namespace" not in macvlan["metadata"]  # cluster-scoped
    assert ipoib["spec"]["networkNamespace"] == "ml" and json.loads(ipoib["spec"]["ipam"]) == {"type": "whereabouts"}
    for obj in objs:
        assert schema_errors(obj, SCHEMAS[obj["kind"]]) == [], obj["kind"]
    assert _network_inputs.network_input_findings(NETWORKS) == []


def test_host_device_network_names_its_resource():
    cfg = {"mode": "host_device", "host_device_networks": [{"name": "hd", "resource": "hostdev"}]}
    (obj,) = net.network_objects(cfg)
    assert obj["kind"] == "HostDeviceNetwork" and obj["spec"] == {
        "networkNamespace": "default",
        "resourceName": "hostdev",
    }
    assert schema_errors(obj, SCHEMAS["HostDeviceNetwork"]) == []
    assert _network_inputs.network_input_findings(cfg) == []


# ---------------------------------------------------------------------------------------------- bad input

V = "network_operator_"


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        ({"mode": "rdma"}, [("network-mode-unknown", "error", V + "mode")]),
        ({"mode": ["rdma_shared"]}, [("network-variable-type", "error", V + "mode")]),
        ({"ofed_driver_enabled": "yes please"}, [("network-variable-type", "error", V + "ofed_driver_enabled")]),
        ({"rdma_shared_resources": {"name": "a"}}, [("network-variable-type", "error", V + "rdma_shared_resources")]),
        ({"tolerations": {"key": "a"}}, [("network-variable-type", "error", V + "tolerations")]),
        (
            {"rdma_shared_resources": [{"name": "rdma-a", "rdmaHcaMax": 1, "vendors": ["15b3"]}]},
            [("network-resource-name-invalid", "error", V + "rdma_shared_resources[0].name")],
        ),
        (
            {"rdma_shared_resources": [{"name": "rdma/a", "rdmaHcaMax": 1, "vendors": ["15b3"]}]},
            [("network-resource-name-invalid", "error", V + "rdma_shared_resources[0].name")],
        ),
        (
            {"rdma_shared_resources": [{"name": "a", "rdmaHcaMax": 1, "vendors": ["15b3"]}] * 2},
            [("network-resource-name-duplicate", "error", V + "rdma_shared_resources[1].name")],
        ),
        (
            {"rdma_shared_resources": [{"name": "a", "rdmaHcaMax": 0, "vendors": ["15b3"]}]},
            [("network-rdma-hca-max-invalid", "error", V + "rdma_shared_resources[0].rdmaHcaMax")],
        ),
        (
            {"rdma_shared_resources": [{"name": "a", "vendors": ["15b3"]}]},
            [("network-rdma-hca-max-invalid", "error", V + "rdma_shared_resources[0].rdmaHcaMax")],
        ),
        (
            {"rdma_shared_resources": [{"name": "a", "rdmaHcaMax": 1}]},
            [("network-selector-missing", "error", V + "rdma_shared_resources[0]")],
        ),
        (
            {"rdma_shared_resources": [{"name": "a", "rdmaHcaMax": 1, "vendors": ["0x15B3"]}]},
            [("network-pci-id-invalid", "error", V + "rdma_shared_resources[0].vendors")],
        ),
        (
            {"rdma_shared_resources": [{"name": "a", "rdmaHcaMax": 1, "deviceIDs": "1021"}]},
            [("network-selector-invalid", "error", V + "rdma_shared_resources[0].deviceIDs")],
        ),
        (
            {"rdma_shared_resources": [{"name": "a", "rdmaHcaMax": 1, "linkTypes": ["ethernet"]}]},
            [("network-link-type-invalid", "error", V + "rdma_shared_resources[0].linkTypes")],
        ),
        (
            {"rdma_shared_resources": [{"name": "a", "rdmaHcaMax": 1, "ifNames": ["bad name"]}]},
            [("network-ifname-invalid", "error", V + "rdma_shared_resources[0].ifNames")],
        ),
        ({"rdma_shared_resources": []}, [("network-resources-missing", "error", V + "rdma_shared_resources")]),
        (
            {"rdma_shared_resources": [{"name": "a", "rdmaHcaMax": 1, "isRdma": True}]},  # not an RDMA plugin selector
            [("network-selector-missing", "error", V + "rdma_shared_resources[0]")],
        ),
        (
            {"mode": "host_device", "host_device_resources": [{"name": "host-dev", "vendors": ["15b3"]}]},
            [("network-resource-name-invalid", "error", V + "host_device_resources[0].name")],
        ),
        ({"mode": "host_device", "host_device_resources": [{"name": "hd.v1", "isRdma": True}]}, []),
        (
            {"mode": "host_device", "host_device_resources": []},
            [("network-resources-missing", "error", V + "host_device_resources")],
        ),
        ({"mode": "sriov", "rdma_shared_resources": [{"name": "bad-name"}]}, []),  # not rendered in sriov mode
        ({"ofed_driver_version": "24.10"}, [("network-ofed-version-invalid", "error", V + "ofed_driver_version")]),
        ({"ofed_driver_version": "24.10-1.1.4.0"}, []),
        ({"ofed_driver_enabled": False, "ofed_driver_version": "latest"}, []),
        (
            {"ofed_driver_env": {"RESTORE_DRIVER_ON_POD_TERMINATON": "true"}},
            [("network-ofed-env-unknown", "warning", V + "ofed_driver_env")],
        ),
        ({"ofed_driver_env": {"1BAD": "x"}}, [("network-ofed-env-invalid", "error", V + "ofed_driver_env")]),
        (
            {"ofed_driver_upgrade_policy": {"autoUpgrade": False, "safeLoad": True}},
            [("network-ofed-safe-load", "error", V + "ofed_driver_upgrade_policy.safeLoad")],
        ),
        (
            {"ofed_driver_upgrade_policy": {"autoUpgrade": True, "drain": {"enabled": True}}},
            [("network-unknown-key", "error", V + "ofed_driver_upgrade_policy.drain.enabled")],
        ),
        (
            {"ofed_driver_upgrade_policy": {"maxParallelUpgrades": "1"}},
            [("network-variable-type", "error", V + "ofed_driver_upgrade_policy.maxParallelUpgrades")],
        ),
        ({"repository": "nvcr.io/nvidia mellanox"}, [("network-repository-invalid", "error", V + "repository")]),
        ({"version": "v1 2"}, [("network-version-invalid", "error", V + "version")]),
        ({"image_pull_secrets": ["NGC Secret"]}, [("network-pull-secret-invalid", "error", V + "image_pull_secrets")]),
        ({"images": {"rdma": {"version": "x"}}}, [("network-images-unknown", "error", V + "images")]),
        (
            {"doca_telemetry_enabled": True, "doca_telemetry_config_map": "My DTS"},
            [("network-doca-telemetry-config-map-invalid", "error", V + "doca_telemetry_config_map")],
        ),
        ({"doca_telemetry_enabled": "yes"}, [("network-variable-type", "error", V + "doca_telemetry_enabled")]),
        (
            {**NETWORKS, "macvlan_networks": [{"name": "m", "master": "ens1f0np0", "mtu": 0}]},
            [("network-mtu-invalid", "error", V + "macvlan_networks[0].mtu")],
        ),
        (
            {**NETWORKS, "macvlan_networks": [{"name": "m", "master": "ens1f0np0", "mtu": "9000"}]},
            [("network-mtu-invalid", "error", V + "macvlan_networks[0].mtu")],
        ),
        (
            {"macvlan_networks": [{"name": "m", "master": "ens1f0np0", "mode": "ethernet"}]},
            [("network-macvlan-mode-invalid", "error", V + "macvlan_networks[0].mode")],
        ),
        (
            {"macvlan_networks": [{"name": "M_net", "master": "eth0"}]},
            [("network-name-invalid", "error", V + "macvlan_networks[0].name")],
        ),
        (
            {"macvlan_networks": [{"name": "m", "master": "eth0", "namespace": "My NS"}]},
            [("name-invalid", "error", V + "macvlan_networks[0].namespace")],
        ),
        (
            {"macvlan_networks": [{"name": "m"}]},
            [("network-master-invalid", "error", V + "macvlan_networks[0].master")],
        ),
        (
            {"macvlan_networks": [{"name": "m", "master": "eth0", "ip_pool": "nope"}]},
            [("network-ip-pool-unknown", "error", V + "macvlan_networks[0].ip_pool")],
        ),
        (
            {"macvlan_networks": [{"name": "m", "master": "eth0", "ip_pool": "p", "ipam": {"type": "x"}}]},
            [("network-ipam-both", "error", V + "macvlan_networks[0]")],
        ),
        (
            {**NETWORKS, "nv_ipam_enabled": False},
            [
                ("network-nv-ipam-disabled", "error", V + "ip_pools"),
                ("network-nv-ipam-disabled", "error", V + "macvlan_networks[0].ip_pool"),
            ],
        ),
        (
            {"ipoib_networks": [{"name": "ib", "master": "ibp26s0"}]},
            [("network-ipoib-disabled", "error", V + "ipoib_networks[0]")],
        ),
        (
            {"host_device_networks": [{"name": "hd", "resource": "hostdev"}]},
            [("network-host-device-mode", "error", V + "host_device_networks[0]")],
        ),
        (
            {"mode": "host_device", "host_device_networks": [{"name": "hd", "resource": "other"}]},
            [("network-resource-unknown", "error", V + "host_device_networks[0].resource")],
        ),
        (
            {"multus_enabled": False, "macvlan_networks": [{"name": "m", "master": "eth0"}]},
            [("network-multus-disabled", "warning", V + "multus_enabled")],
        ),
        (
            {"ip_pools": [NETWORKS["ip_pools"][0]] * 2},
            [("network-ip-pool-duplicate", "error", V + "ip_pools[1].name")],
        ),
    ],
)
def test_bad_input_names_the_variable(cfg, expected):
    found = _network_inputs.network_input_findings(cfg)
    assert ids(found) == sorted(expected)
    for f in found:
        assert f["object"]["kind"] == "variable"
        text = " ".join([*f["evidence"], f["cause"], f["fix"]])
        assert "{'" not in text and "['" not in text and "True" not in text and "None" not in text, text


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        ({"name": "p", "subnet": "192.168.0.0/24", "perNodeBlockSize": 10, "gateway": "192.168.0.1"}, []),
        ({"name": "p", "subnet": "192.168.0.7/24", "perNodeBlockSize": 10}, []),  # Go's ParseCIDR keeps host bits
        ({"name": "p6", "subnet": "fd00::/64", "perNodeBlockSize": 1000, "gateway": "fd00::1"}, []),
        ({"name": "p", "subnet": "192.168.0.0/33", "perNodeBlockSize": 10}, ["network-ip-pool-subnet-invalid"]),
        ({"name": "p", "subnet": "192.168.0.0", "perNodeBlockSize": 10}, ["network-ip-pool-subnet-invalid"]),
        ({"name": "p", "subnet": "rdma", "perNodeBlockSize": 10}, ["network-ip-pool-subnet-invalid"]),
        (
            {"name": "p", "subnet": "192.168.0.0/24", "perNodeBlockSize": 10, "gateway": "192.168.1.1"},
            ["network-ip-pool-gateway-outside"],
        ),
        (
            {"name": "p", "subnet": "192.168.0.0/24", "perNodeBlockSize": 10, "gateway": "192.168.0.300"},
            ["network-ip-pool-gateway-invalid"],
        ),
        ({"name": "p", "subnet": "192.168.0.0/24", "perNodeBlockSize": 0}, ["network-ip-pool-block-invalid"]),
        ({"name": "p", "subnet": "192.168.0.0/24"}, ["network-ip-pool-block-invalid"]),
        ({"name": "p", "subnet": "192.168.0.0/30", "perNodeBlockSize": 3}, ["network-ip-pool-block-too-large"]),
        ({"name": "p", "subnet": "192.168.0.0/30", "perNodeBlockSize": 2}, []),
        ({"name": "p", "subnet": "10.0.0.0/31", "perNodeBlockSize": 2}, []),
        (
            {"name": "p", "subnet": "192.168.0.0/24", "perNodeBlockSize": 10, "defaultGateway": True},
            ["network-ip-pool-gateway-missing"],
        ),
        (
            {
                "name": "p",
                "subnet": "192.168.0.0/24",
                "perNodeBlockSize": 10,
                "exclusions": [{"startIP": "192.168.0.10", "endIP": "192.168.0.20"}],
            },
            [],
        ),
        (
            {
                "name": "p",
                "subnet": "192.168.0.0/24",
                "perNodeBlockSize": 10,
                "exclusions": [{"startIP": "192.168.0.20", "endIP": "192.168.0.10"}],
            },
            ["network-ip-pool-range-invalid"],
        ),
        (
            {
                "name": "p",
                "subnet": "192.168.0.0/24",
                "perNodeBlockSize": 10,
                "exclusions": [{"startIP": "192.168.0.10", "endIP": "192.168.1.10"}],
            },
            ["network-ip-pool-range-outside"],
        ),
        (
            {"name": "p", "subnet": "192.168.0.0/24", "perNodeBlockSize": 10, "exclusions": [{"startIP": "x"}]},
            ["network-ip-pool-range-invalid"],
        ),
        ({"name": "Pool_1", "subnet": "192.168.0.0/24", "perNodeBlockSize": 10}, ["network-ip-pool-name-invalid"]),
    ],
)
def test_ip_pools_follow_nv_ipams_rules(pool, expected):
    assert [f["id"] for f in _network_pools.ip_pool_findings(0, pool)] == expected
    if not expected:
        assert schema_errors(net.ip_pool(pool, "ns"), SCHEMAS["IPPool"]) == []


@pytest.mark.parametrize(
    ("subnet", "count"),
    [("10.0.0.0/24", 254), ("10.0.0.0/31", 2), ("10.0.0.1/32", 1), ("fd00::/120", 255), ("fd00::/127", 2)],
)
def test_possible_ips_as_nv_ipam_counts_them(subnet, count):
    import ipaddress

    assert _network_pools.possible_ips(ipaddress.ip_network(subnet)) == count


# ---------------------------------------------------------------------------------------------- NIC selectors

HOSTS = {"dgx-01": host(CX7, INTEL), "l40s-01": host(CX6DX)}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"vendors": ["15b3"]}, []),
        ({"vendors": ["15b3"], "deviceIDs": ["1021"]}, []),
        ({"deviceIDs": ["101b"]}, [("network-selector-matches-no-nic", "error")]),  # ConnectX-6 VPI: none here
        ({"vendors": ["15b3"], "linkTypes": ["infiniband"]}, []),
        ({"deviceIDs": ["101d"], "linkTypes": ["infiniband"]}, [("network-selector-matches-no-nic", "error")]),  # AND
        ({"deviceIDs": ["101d", "1021"], "linkTypes": ["infiniband"]}, []),  # OR within a key
        ({"ifNames": ["ens1f0np0"]}, []),
        ({"ifNames": ["ens1f0"]}, [("network-selector-matches-no-nic", "error")]),
        ({"drivers": ["mlx5_core"], "vendors": ["15b3"]}, []),
        # the E810 sits on a node where the plugin runs, but has no RDMA device
        ({"vendors": ["8086"]}, [("network-selector-matches-no-rdma-device", "warning")]),
        ({"isRdma": True, "pfNames": ["ens5f0"]}, [("network-selector-matches-no-nic", "error")]),
        ({"rootDevices": ["0000:3b:00.0"]}, []),
    ],
)
def test_selector_against_the_hosts_nics(selector, expected):
    found = _network_hosts.nic_selector_findings([{"name": "r", **selector}], HOSTS)
    assert [(f["id"], f["severity"]) for f in found] == expected
    for f in found:
        assert f["object"] == {"kind": "variable", "name": "network_operator_rdma_shared_resources[0]"}
        if f["severity"] == "warning":
            assert f["evidence"][1:] == ["dgx-01: 0000:5e:00.0 8086:1593 E810 ens5f0 ice ether no rdma device"]
            continue
        evidence = "\n".join(f["evidence"])
        assert "dgx-01: 0000:1a:00.0 15b3:1021 ConnectX-7 ibp26s0 mlx5_core infiniband rdma mlx5_0" in evidence
        assert "l40s-01: 0000:3b:00.0 15b3:101d ConnectX-6 Dx ens1f0np0 mlx5_core ether rdma mlx5_2" in evidence
        assert "dgx-01: 0000:5e:00.0 8086:1593 E810 ens5f0 ice ether no rdma device" in evidence


def test_selector_findings_accept_nic_lists_and_name_the_variable():
    found = _network_hosts.nic_selector_findings(
        [{"name": "ok", "vendors": ["15b3"]}, {"name": "hd", "deviceIDs": ["beef"]}],
        {"h": [CX7]},
        variable="host_device_resources",
    )
    assert ids(found) == [("network-selector-matches-no-nic", "error", "network_operator_host_device_resources[1]")]
    assert "the resource hd selects no NIC" in found[0]["cause"]


def test_selector_on_hosts_without_nvidia_nics_and_without_rdma():
    (f,) = _network_hosts.nic_selector_findings([{"name": "r", "vendors": ["8086"]}], {"cpu-01": host(INTEL)})
    assert f["id"] == "network-selector-matches-no-nic" and "no host has an NVIDIA NIC" in f["cause"]
    no_rdma = {**CX7, "rdma_device": None}
    (f,) = _network_hosts.nic_selector_findings([{"name": "r", "vendors": ["15b3"]}], {"h": host(no_rdma)})
    assert (f["id"], f["severity"]) == ("network-selector-matches-no-rdma-device", "warning")
    assert (
        _network_hosts.nic_selector_findings(
            [{"name": "r", "vendors": ["15b3"]}], {"h": host(no_rdma)}, "host_device_resources"
        )
        == []
    )
    assert (
        _network_hosts.nic_selector_findings([{"name": "r", "vendors": ["15b3"]}], {})[0]["evidence"][-1]
        == "no host reports a NIC"
    )


# ---------------------------------------------------------------------------------------------- MOFED

GPU_RDMA = {"rdma": True, "use_host_mofed": False, "driver": "container"}
GPU_HOST_MOFED = {"rdma": True, "use_host_mofed": True, "driver": "container"}


@pytest.mark.parametrize(
    ("hosts", "cfg", "gpu", "expected"),
    [
        # the DOCA driver container on clean hosts, GPU Operator built against it
        ({"a": host(CX7)}, {}, GPU_RDMA, []),
        ({"a": host(CX7)}, {}, None, []),
        # the container where MOFED is installed: an error unless allowed
        ({"a": host(CX7, ofed=MOFED)}, {}, None, [("host-ofed-with-doca-driver", "error", "a")]),
        (
            {"a": host(CX7, ofed=MOFED)},
            {"allow_host_mofed": True},
            GPU_RDMA,
            [("host-ofed-with-doca-driver", "warning", "a")],
        ),
        # hosts without an NVIDIA NIC never get the container
        ({"a": host(INTEL, ofed=MOFED)}, {}, None, []),
        # useHostMofed with the container: once, naming the GPU Operator's variable
        (
            {"a": host(CX7), "b": host(CX7)},
            {},
            GPU_HOST_MOFED,
            [("network-gpu-mofed-disagree", "error", "gpu_operator_driver_rdma_use_host_mofed")],
        ),
        # no container: useHostMofed must follow each host (the _host_rules rule)
        ({"a": host(CX7, ofed=MOFED)}, {"ofed_driver_enabled": False}, GPU_HOST_MOFED, []),
        (
            {"a": host(CX7, ofed=MOFED)},
            {"ofed_driver_enabled": False},
            GPU_RDMA,
            [("rdma-host-mofed-mismatch", "error", "a")],
        ),
        (
            {"a": host(CX7)},
            {"ofed_driver_enabled": False},
            GPU_HOST_MOFED,
            [("rdma-host-mofed-mismatch", "error", "a")],
        ),
        ({"a": host(CX7, ofed=MOFED)}, {"ofed_driver_enabled": False}, None, []),
    ],
)
def test_mofed_agreement(hosts, cfg, gpu, expected):
    found = _network_hosts.mofed_findings(hosts, cfg, gpu)
    got = sorted((f["id"], f["severity"], f.get("host") or f["object"]["name"]) for f in found)
    assert got == sorted(expected)
    for f in found:
        assert f["fix"] and f["cause"] and f["evidence"]


def test_mofed_error_says_how_to_accept_and_warning_says_it_was_accepted():
    (err,) = _network_hosts.mofed_findings({"a": host(CX7, ofed=MOFED)}, {}, None)
    assert "network_operator_allow_host_mofed: true" in err["fix"]
    (warn,) = _network_hosts.mofed_findings({"a": host(CX7, ofed=MOFED)}, {"allow_host_mofed": True}, None)
    assert "accepted: network_operator_allow_host_mofed is true" in warn["cause"]


# ---------------------------------------------------------------------------------------------- readiness


def policy(
    state: str | None, applied: list[dict[str, Any]] | None = None, name: str = "nic-cluster-policy", **spec: Any
):
    obj: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": spec or copy.deepcopy(net.nic_cluster_policy({})["spec"]),
    }
    if state is not None:
        obj["status"] = {"state": state, "appliedStates": applied or []}
    return obj


ALL_READY = [{"name": n, "state": "ready"} for n in _network_ready.STATES.values()]


@pytest.mark.parametrize(
    ("obj", "unmet"),
    [
        (policy("ready", ALL_READY), None),
        (policy(None), "status.state is empty, want ready (not reconciled yet: is the network-operator pod running?)"),
        (
            policy(
                "notReady",
                [
                    *[s for s in ALL_READY if s["name"] != "state-OFED"],
                    {"name": "state-OFED", "state": "notReady", "message": "waiting for pods"},
                ],
            ),
            "status.state is notReady, want ready; not ready: state-OFED notReady (waiting for pods)",
        ),
        (
            policy("ready", [s for s in ALL_READY if s["name"] != "state-nv-ipam-cni"]),
            "status.state is ready, want ready; no status yet for state-nv-ipam-cni",
        ),
        (
            policy("ready", [{"name": "state-OFED", "state": "ready"}], ofedDriver={"image": "doca-driver"}),
            None,
        ),
        (
            policy(
                "notReady",
                [{"name": "state-doca-telemetry-service", "state": "notReady"}],
                docaTelemetryService={"image": "doca_telemetry"},
            ),
            "status.state is notReady, want ready; not ready: state-doca-telemetry-service notReady",
        ),
        (
            policy("ready", [], docaTelemetryService={"image": "doca_telemetry"}),
            "status.state is ready, want ready; no status yet for state-doca-telemetry-service",
        ),
        (
            policy("ignore", name="ncp"),
            "the operator ignores NicClusterPolicies not named nic-cluster-policy (this one is ncp)",
        ),
        (
            policy("error", [{"name": "state-RDMA-device-plugin", "state": "error", "message": "bad config"}]),
            "status.state is error, want ready; not ready: state-RDMA-device-plugin error (bad config); no status yet "
            "for state-OFED, state-nv-ipam-cni, state-multus-cni, state-container-networking-plugins",
        ),
    ],
)
def test_nic_cluster_policy_ready(obj, unmet):
    assert _network_ready.nic_cluster_policy_ready(obj) == unmet


def test_ignored_policy_shows_the_operators_reason():
    obj = policy("ignore", name="my-policy")
    obj["status"]["reason"] = "Unsupported NicClusterPolicy instance my-policy."
    assert _network_ready.nic_cluster_policy_ready(obj).endswith(
        "; status.reason: Unsupported NicClusterPolicy instance my-policy.)"
    )


@pytest.mark.parametrize(
    ("status", "unmet"),
    [
        ({"state": "ready", "macvlanNetworkAttachmentDef": "x"}, None),
        (None, "status.state is empty, want ready (not reconciled yet)"),
        ({"state": "error", "reason": "no master"}, "status.state is error, want ready (reason: no master)"),
    ],
)
def test_network_ready(status, unmet):
    obj = {"metadata": {"name": "n"}, **({"status": status} if status else {})}
    assert _network_ready.network_ready(obj) == unmet


def test_the_crds_mirror_upstreams_identity():
    """Group, kind, scope and the status enums the predicates read (upstream v26.4.1 / nvidia-k8s-ipam)."""
    found = {}
    for path in [*sorted((CHART / "crds").glob("*.yaml")), *sorted((CHART / "manifests").rglob("*.yaml"))]:
        doc = yaml.safe_load(path.read_text())
        found[doc["spec"]["names"]["kind"]] = (
            doc["spec"]["group"],
            doc["spec"]["versions"][0]["name"],
            doc["spec"]["scope"],
        )
    assert found == {
        "NicClusterPolicy": ("mellanox.com", "v1alpha1", "Cluster"),
        "MacvlanNetwork": ("mellanox.com", "v1alpha1", "Cluster"),
        "HostDeviceNetwork": ("mellanox.com", "v1alpha1", "Cluster"),
        "IPoIBNetwork": ("mellanox.com", "v1alpha1", "Cluster"),
        "NetworkAttachmentDefinition": ("k8s.cni.cncf.io", "v1", "Namespaced"),
        "IPPool": ("nv-ipam.nvidia.com", "v1alpha1", "Namespaced"),
    }
    status = NCP_SCHEMA["properties"]["status"]["properties"]
    assert status["state"]["enum"] == ["ignore", "notReady", "ready", "error"]
    assert status["appliedStates"]["items"]["properties"]["state"]["enum"] == ["ready", "notReady", "ignore", "error"]
    assert "x-kubernetes-preserve-unknown-fields" not in json.dumps(NCP_SCHEMA)
    bad = {"spec": {"ofedDriver": {"version": "x"}, "rdmaSharedDevicePlugin": {"image": "p", "configs": "{}"}}}
    assert sorted(schema_errors(bad, NCP_SCHEMA)) == [
        ".spec.ofedDriver: missing image",
        ".spec.rdmaSharedDevicePlugin.configs: unknown field",
    ]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["name"], chart["version"], chart["appVersion"]) == ("network-operator", "26.4.1", "v26.4.1")
    conditions = {d["name"]: d["condition"] for d in chart["dependencies"]}
    assert conditions == {
        "node-feature-discovery": "nfd.enabled",
        "sriov-network-operator": "sriovNetworkOperator.enabled",
        "maintenance-operator-chart": "maintenanceOperator.enabled",
    }
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["nfd"]["enabled"] is True and values["sriovNetworkOperator"]["enabled"] is False
    assert values["imagePullSecrets"] == [] and "deployCR" not in values
