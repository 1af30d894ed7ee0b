from __future__ import annotations

import pytest
from gpuops_lab import profiles
from gpuops_lab.errors import LabError

NFD = "feature.node.kubernetes.io"


@pytest.mark.parametrize(
    ("profile", "present", "absent"),
    [
        ("dgx-h100", {f"{NFD}/pci-10de.present", f"{NFD}/pci-15b3.present", f"{NFD}/pci-15b3.sriov.capable"}, set()),
        ("pcie-l40s", {f"{NFD}/pci-10de.present", f"{NFD}/pci-15b3.present", f"{NFD}/pci-15b3.sriov.capable"}, set()),
        ("amd-mi300x", {f"{NFD}/pci-1002.present"}, {f"{NFD}/pci-10de.present"}),
        ("cpu-only", {f"{NFD}/pci-8086.present"}, {f"{NFD}/pci-10de.present", f"{NFD}/pci-1002.present"}),
    ],
)
def test_nfd_labels(profile, present, absent):
    labels = profiles.nfd_labels(profiles.load(profile))
    assert present <= {k for k, v in labels.items() if v == "true"}
    assert not absent & set(labels)


def test_nvswitch_class_is_not_whitelisted():
    # NVSwitch is class 0680: NFD (as the GPU operator configures it) publishes no label for it, so the
    # only 10de label on a DGX comes from the GPUs.
    prof = profiles.load("dgx-h100")
    prof["host"]["pci"] = [d for d in prof["host"]["pci"] if d["role"] == "nvswitch"]
    assert f"{NFD}/pci-10de.present" not in profiles.nfd_labels(prof)


def test_cpu_kernel_and_os_labels():
    labels = profiles.nfd_labels(profiles.load("dgx-h100"))
    assert labels[f"{NFD}/cpu-model.vendor_id"] == "Intel"
    assert labels[f"{NFD}/kernel-version.major"] == "5"
    assert labels[f"{NFD}/system-os_release.VERSION_ID"] == "22.04"


def test_profile_hardware_counts():
    gpus = profiles.accelerators(profiles.load("dgx-h100"))
    assert [(g["vendor"], g["device"], g["count"]) for g in gpus] == [("10de", "2330", 8)]
    assert profiles.accelerators(profiles.load("cpu-only")) == []


@pytest.mark.parametrize("name", profiles.known())
def test_node_manifest_has_no_gpu_resources_and_the_kwok_taint(name):
    node = profiles.node_manifest("n-0", profiles.load(name))
    assert not [k for k in node["status"]["capacity"] if "gpu" in k]
    assert node["spec"]["taints"] == [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["labels"][profiles.PROFILE_LABEL] == name


def test_each_node_has_its_own_routable_internal_ip():
    import ipaddress

    node = profiles.node_manifest("dgx-h100-0", profiles.load("dgx-h100"))
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["Hostname"] == "dgx-h100-0"
    ip = ipaddress.ip_address(addresses["InternalIP"])
    # Endpoints refuse loopback and link-local addresses (a hostNetwork pod's IP is its node's)
    assert not ip.is_loopback and not ip.is_link_local and ip in ipaddress.ip_network("172.30.0.0/16")
    assert ip not in ipaddress.ip_network("10.244.0.0/16") and ip not in ipaddress.ip_network("10.96.0.0/16")
    assert profiles.node_ip("dgx-h100-0") == addresses["InternalIP"]  # stable
    ips = {profiles.node_ip(f"fleet-{i:02d}") for i in range(64)}
    assert len(ips) >= 60 and all(not ip.endswith((".0", ".255")) for ip in ips)


def test_known_profiles():
    assert {"dgx-h100", "pcie-l40s", "amd-mi300x", "cpu-only"} <= set(profiles.known())


@pytest.mark.parametrize("bad", ["dgx-h200", "../etc/passwd", "DGX-H100", ""])
def test_unknown_profile_lists_the_known_ones(bad):
    with pytest.raises(LabError) as exc:
        profiles.load(bad)
    assert "unknown hardware profile" in str(exc.value)
    assert "dgx-h100" in str(exc.value) and "cpu-only" in str(exc.value)


def test_profile_missing_keys_is_named(tmp_path):
    (tmp_path / "broken.yml").write_text("description: x\nnode: {}\n")
    with pytest.raises(LabError, match="lacks key"):
        profiles.load("broken", tmp_path)


@pytest.mark.parametrize("bad", ["Bad_Name", "x" * 64, "-a", "a b"])
def test_bad_node_names(bad):
    with pytest.raises(LabError, match="not a valid DNS label"):
        profiles.node_manifest(bad, profiles.load("cpu-only"))
