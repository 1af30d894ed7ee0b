"""Alertmanager webhook payloads for the Event-Driven Ansible tests, as Alertmanager v0.35.0 sends them."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

from ansible_collections.gpuops.platform.plugins.module_utils import _fault_policy as fp

REPO = Path(__file__).resolve().parents[3]


def alert(name: str, status: str = "firing", node: str | None = "gpu-node-1", **labels: str) -> dict:
    """An alert as Alertmanager v0.35 puts it in a webhook notification."""
    all_labels = {"alertname": name, "severity": "critical", **labels}
    if node is not None:
        all_labels["Hostname"] = node
    return {
        "status": status,
        "labels": all_labels,
        "annotations": {"summary": f"{name} on {node}"},
        "startsAt": "2026-11-28T08:00:00.000Z",
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-11-28T08:05:00.000Z",
        "generatorURL": "http://prometheus/graph",
        "fingerprint": hashlib.sha256(json.dumps(sorted(all_labels.items())).encode()).hexdigest()[:16],
    }


def notification(*alerts: dict, status: str = "firing") -> dict:
    return {
        "version": "4",
        "groupKey": '{}/{severity=~"critical|warning"}:{alertname="x"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "gpuops-remediation",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": list(alerts),
    }


def gpu_alert(name: str, i: int) -> dict:
    """The alert ``name`` of the collection's rules on node dgx-<i>, GPU i % 8, with the labels dcgm-exporter gives
    (an XID alert: its err_code, 79 for the fallen-off-bus one)."""
    policy = fp.alert_policies()[name]
    labels = {"UUID": f"GPU-{i:08x}-7d4b", "pci_bus_id": f"00000000:{16 + i:02X}:00.0", "gpu": str(i % 8)}
    if name.startswith("GPUXid"):
        labels["err_code"] = "79" if name == "GPUXidFallenOffBus" else "13" if "Application" in name else "48"
    return alert(name, node=f"dgx-{i}", severity=policy["severity"], **labels)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
