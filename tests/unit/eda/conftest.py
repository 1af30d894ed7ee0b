"""The Event-Driven Ansible parts: the event source plugin is loaded from its file, as ansible-rulebook loads it."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "extensions" / "eda" / "plugins" / "event_source" / "alertmanager.py"


@pytest.fixture(scope="session")
def source() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpuops_eda_alertmanager", SOURCE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


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
