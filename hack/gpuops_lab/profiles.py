"""Hardware profiles (tests/fixtures/hardware/*.yml) and the Kubernetes nodes they describe."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import yaml

from .config import PROFILES_DIR
from .errors import LabError

NFD = "feature.node.kubernetes.io"
# The PCI source as the NVIDIA GPU Operator configures its bundled NFD, plus class 12 (accelerators).
PCI_CLASS_WHITELIST = ("02", "0200", "0207", "0300", "0302", "12")
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
PROFILE_LABEL = "gpuops.io/hardware-profile"
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def known(directory: Path = PROFILES_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.yml"))


def load(name: str, directory: Path = PROFILES_DIR) -> dict[str, Any]:
    path = directory / f"{name}.yml"
    if not _NAME_RE.match(name) or not path.is_file():
        raise LabError(
            f"unknown hardware profile {name!r}; known profiles: {', '.join(known(directory))} "
            f"(add one as {directory}/<name>.yml)"
        )
    data = yaml.safe_load(path.read_text())
    try:
        data["node"]["cpu"], data["host"]["pci"], data["host"]["cpu"]["vendor"]  # noqa: B018 - shape check
    except (KeyError, TypeError) as exc:
        raise LabError(f"hardware profile {path} lacks key {exc}; see {directory}/README.md") from exc
    data["name"] = name
    return data


def _whitelisted(pci_class: str) -> bool:
    return any(pci_class.startswith(w) if len(w) == 2 else pci_class == w for w in PCI_CLASS_WHITELIST)


def nfd_labels(profile: dict[str, Any]) -> dict[str, str]:
    """The labels NFD v0.19 would publish for this hardware (PCI vendor-only, CPU, kernel, OS)."""
    host = profile["host"]
    labels = {
        f"{NFD}/cpu-model.vendor_id": host["cpu"]["vendor"],
        f"{NFD}/system-os_release.ID": host["os"]["id"],
        f"{NFD}/system-os_release.VERSION_ID": host["os"]["version_id"],
    }
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)", host["kernel_release"])
    if m:
        labels[f"{NFD}/kernel-version.full"] = host["kernel_release"]
        labels[f"{NFD}/kernel-version.major"], labels[f"{NFD}/kernel-version.minor"] = m.group(1), m.group(2)
        labels[f"{NFD}/kernel-version.revision"] = m.group(3)
    for dev in host["pci"]:
        if _whitelisted(str(dev["class"])):
            labels[f"{NFD}/pci-{dev['vendor']}.present"] = "true"
            if dev.get("sriov_totalvfs"):
                labels[f"{NFD}/pci-{dev['vendor']}.sriov.capable"] = "true"
    return labels


def node_feature_spec(profile: dict[str, Any]) -> dict[str, Any]:
    """`spec` of the NodeFeature nfd-worker v0.19 would publish on this hardware: the raw features of
    its sources (what NodeFeatureRules match on) and the labels of its label sources (nfd_labels)."""
    host = profile["host"]
    pci = []
    for dev in host["pci"]:
        attrs = {"class": str(dev["class"]), "vendor": str(dev["vendor"]), "device": str(dev["device"])}
        if dev.get("sriov_totalvfs"):
            attrs["sriov_totalvfs"] = str(dev["sriov_totalvfs"])
        pci += [{"attributes": dict(attrs)} for _dev in range(int(dev.get("count") or 1))]
    kernel = {"full": host["kernel_release"]}
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)", host["kernel_release"])
    if m:
        kernel.update(major=m.group(1), minor=m.group(2), revision=m.group(3))
    modules = [m if isinstance(m, str) else m["name"] for m in host.get("modules_loaded") or ()]
    return {
        "features": {
            "flags": {"kernel.loadedmodule": {"elements": {name: {} for name in sorted(modules)}}},
            "attributes": {
                "kernel.version": {"elements": kernel},
                "cpu.model": {"elements": {"vendor_id": host["cpu"]["vendor"]}},
                "system.osrelease": {"elements": {"ID": host["os"]["id"], "VERSION_ID": str(host["os"]["version_id"])}},
            },
            "instances": {"pci.device": {"elements": pci}},
        },
        "labels": nfd_labels(profile),
    }


def accelerators(profile: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in profile["host"]["pci"] if d["role"] == "gpu"]


NODE_NET = (172, 30)  # the nodes' own addresses: outside the pod (10.244/16) and Service (10.96/16) ranges


def node_ip(name: str) -> str:
    """A node's InternalIP, stable per name in 172.30.0.0/16 (as a kubelet reports its host's address). Not kwok's
    one shared nodeIP: a hostNetwork pod takes its node's InternalIP (kwok's pod-ready stage), and Endpoints refuse
    a loopback address, so a Service over host-network pods (the DOCA Telemetry Service's) gets none with it."""
    digest = hashlib.sha256(name.encode()).digest()
    return f"{NODE_NET[0]}.{NODE_NET[1]}.{digest[0]}.{1 + digest[1] % 254}"


def node_manifest(name: str, profile: dict[str, Any]) -> dict[str, Any]:
    """A kwok-managed Node of this profile: capacity, the profile label, the kwok taint; no GPU resources
    and no NFD labels (the simulator publishes the node's NodeFeature, nfd-master labels the node)."""
    if not _NAME_RE.match(name) or len(name) > 63:
        raise LabError(f"node name {name!r} is not a valid DNS label (lowercase letters, digits and '-')")
    n = profile["node"]
    res = {
        "cpu": str(n["cpu"]),
        "memory": str(n["memory"]),
        "pods": str(n["pods"]),
        "ephemeral-storage": str(n.get("ephemeral_storage", "100Gi")),
    }
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        PROFILE_LABEL: profile["name"],
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"providerID": f"kwok://{name}", "taints": [dict(KWOK_TAINT)]},
        "status": {
            "capacity": dict(res),
            "allocatable": dict(res),
            # kwok's node-initialize stage keeps addresses a node already has
            "addresses": [{"type": "InternalIP", "address": node_ip(name)}, {"type": "Hostname", "address": name}],
        },
    }
