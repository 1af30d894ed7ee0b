# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The remediation of GPU faults on nodes is this package: the event (``_event``), the decisions as pure functions -
the node's marks, the circuit breaker, the drain and the repair ladder (``_policy``) - and the calls that carry them
out (``_api``, ``_quarantine``, ``_drain``, ``_reset``).

The remediation event (what the rulebook passes as ``gpuops_remediation_event``) and its validation, field by
field: a bad event is an InvalidInput naming the field, the value and what is expected, before anything is read
or changed.

    {node, alert, fault_class, action: quarantine|label|none, severity,
     gpu: {uuid, pci_bus_id, index}, starts_at, fingerprint, labels, annotations, status: firing|resolved}"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput

ACTIONS = ("quarantine", "label", "none")
STATUSES = ("firing", "resolved")
MODES = ("dry_run", "act")

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*\Z")
_UUID = re.compile(r"^(GPU|MIG)-[0-9a-fA-F-]{8,}\Z")
# NVML writes the PCI bus id with an 8-digit domain (00000000:17:00.0), sysfs with 4 (0000:17:00.0)
_PCI = re.compile(r"^([0-9a-fA-F]{4}|[0-9a-fA-F]{8}):[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\Z")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")

FIELDS = (
    "node",
    "alert",
    "fault_class",
    "action",
    "severity",
    "gpu",
    "starts_at",
    "fingerprint",
    "labels",
    "annotations",
    "status",
)
EXAMPLE = (
    '{"node": "gpu-node-7", "alert": "GPUXidFallenOffBus", "fault_class": "bus", "action": "quarantine", '
    '"severity": "critical", "gpu": {"uuid": "GPU-5c6f...", "pci_bus_id": "00000000:17:00.0", "index": 3}, '
    '"starts_at": "2026-11-28T08:00:00Z", "fingerprint": "a1b2c3d4e5f60718", "labels": {}, "annotations": {}, '
    '"status": "firing"}'
)


def _bad(field: str, value: Any, expected: str) -> InvalidInput:
    shown = json.dumps(value, default=str)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    return InvalidInput(
        f"gpuops_remediation_event.{field}: {shown} is not valid: expected {expected}. Nothing was changed. "
        f"Fix: send the event as the gpu_health rulebook does, for example {EXAMPLE}",
        field=field,
    )


def _text(event: Mapping[str, Any], field: str, pattern: re.Pattern[str] | None, expected: str) -> str:
    value = event.get(field)
    if not isinstance(value, str) or not value or (pattern is not None and not pattern.match(value)):
        raise _bad(field, value, expected)
    return value


def _string_map(event: Mapping[str, Any], field: str) -> dict[str, str]:
    value = event.get(field)
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _bad(field, value, "a mapping of strings to strings (the alert's labels or annotations)")
    return dict(value)


def parse_time(text: str) -> datetime:
    """An RFC 3339 time (Alertmanager's ``startsAt``) as an aware datetime; ValueError when it is not one."""
    if not _RFC3339.match(text):
        raise ValueError(text)
    base = re.sub(r"(\.\d{1,6})\d*", r"\1", text.replace("Z", "+00:00"))
    return datetime.fromisoformat(base).astimezone(timezone.utc)  # noqa: UP017 - modules run on Python < 3.11


def _gpu(event: Mapping[str, Any]) -> dict[str, Any]:
    gpu = event.get("gpu")
    if gpu is None:
        gpu = {}
    if not isinstance(gpu, Mapping):
        raise _bad("gpu", gpu, "a mapping {uuid, pci_bus_id, index} (values null for an alert about the whole node)")
    unknown = sorted(set(gpu) - {"uuid", "pci_bus_id", "index"})
    if unknown:
        raise _bad("gpu", dict(gpu), f"only the keys uuid, pci_bus_id and index (not {', '.join(unknown)})")
    uuid, bus, index = gpu.get("uuid"), gpu.get("pci_bus_id"), gpu.get("index")
    if uuid not in (None, "") and not (isinstance(uuid, str) and _UUID.match(uuid)):
        raise _bad("gpu.uuid", uuid, "a GPU UUID as NVML writes it (GPU-<hex and dashes>) or null")
    if bus not in (None, "") and not (isinstance(bus, str) and _PCI.match(bus)):
        raise _bad("gpu.pci_bus_id", bus, "a PCI address like 00000000:17:00.0 or 0000:17:00.0, or null")
    if isinstance(index, str) and index.isdigit():
        index = int(index)  # Alertmanager labels are strings: the dcgm-exporter's gpu label arrives as "3"
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        raise _bad("gpu.index", index, "the GPU's index on the node (0, 1, ...) or null")
    return {"uuid": uuid or None, "pci_bus_id": (bus or None) and bus.lower(), "index": index}


def validate_event(event: Any) -> dict[str, Any]:
    """The event, checked field by field and normalised (gpu keys always present, labels and annotations mappings,
    the PCI address in lower case); InvalidInput naming the first bad field."""
    if not isinstance(event, Mapping):
        raise _bad("", event, "a mapping with the keys " + ", ".join(FIELDS))
    unknown = sorted(set(event) - set(FIELDS))
    if unknown:
        raise _bad(unknown[0], event[unknown[0]], "no such key: the event has only " + ", ".join(FIELDS))
    out: dict[str, Any] = {
        "node": _text(event, "node", _SUBDOMAIN, "the name of a Kubernetes node (a DNS-1123 subdomain)"),
        "alert": _text(event, "alert", _WORD, "the alert's name, e.g. GPUXidFallenOffBus"),
        "fault_class": _text(event, "fault_class", _WORD, "the fault class of the alert, e.g. bus, memory"),
        "action": _text(event, "action", None, "one of " + ", ".join(ACTIONS)),
        "severity": _text(event, "severity", _WORD, "the alert's severity, e.g. critical or warning"),
        "gpu": _gpu(event),
        "starts_at": _text(event, "starts_at", _RFC3339, "an RFC 3339 time, e.g. 2026-11-28T08:00:00Z"),
        "fingerprint": _text(event, "fingerprint", _WORD, "Alertmanager's fingerprint of the alert"),
        "labels": _string_map(event, "labels"),
        "annotations": _string_map(event, "annotations"),
        "status": _text(event, "status", None, "firing or resolved"),
    }
    if out["action"] not in ACTIONS:
        raise _bad("action", out["action"], "one of " + ", ".join(ACTIONS))
    if out["status"] not in STATUSES:
        raise _bad("status", out["status"], "firing or resolved")
    if len(out["node"]) > 253:
        raise _bad("node", out["node"], "a node name of at most 253 characters")
    try:
        parse_time(out["starts_at"])
    except ValueError:
        raise _bad("starts_at", out["starts_at"], "an RFC 3339 time that exists") from None
    return out


def validate_mode(mode: Any) -> str:
    if mode not in MODES:
        raise InvalidInput(
            f"gpuops_remediation_mode: {mode!r} is not valid: expected dry_run (record the plan only, the default) "
            "or act. Nothing was changed.",
            field="mode",
        )
    return str(mode)
