# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The GPU reset of the repair ladder (``gpu_reset``, on the node's host): find the GPU by index and check that it
is the GPU of the event (its UUID and PCI bus id), check that no process uses it, then ``nvidia-smi -r -i <index>``.
A busy GPU is not reset (the result says which processes); a GPU whose identity does not match is an error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import HostStateError, NotFound


def parse_gpus(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader`` as [{index, uuid, pci_bus_id}]."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 3 and cells[0].isdigit():
            out.append({"index": int(cells[0]), "uuid": cells[1], "pci_bus_id": cells[2].lower()})
    return out


def parse_processes(text: str) -> list[str]:
    """``nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader`` as ``pid name`` words."""
    return [" ".join(c.strip() for c in line.split(",", 1)) for line in text.splitlines() if line.strip()]


def _same_bus(a: str, b: str) -> bool:
    """PCI bus ids equal whatever the domain's width (00000000:17:00.0 and 0000:17:00.0)."""
    return a.lower()[-7:] == b.lower()[-7:] and int(a.split(":")[0], 16) == int(b.split(":")[0], 16)


def the_gpu(gpus: list[dict[str, Any]], params: Mapping[str, Any]) -> dict[str, Any]:
    """The GPU at ``index``, checked against the event's UUID and PCI bus id when given."""
    index = params["index"]
    found = next((g for g in gpus if g["index"] == index), None)
    if found is None:
        listed = ", ".join(str(g["index"]) for g in gpus) or "none"
        raise NotFound(
            f"GPU index {index} is not on this host (nvidia-smi lists {listed}): nothing was reset. Fix: a GPU that "
            "fell off the bus is not listed - hand the node to break-fix.",
            gpus=gpus,
        )
    if params.get("uuid") and found["uuid"] != params["uuid"]:
        raise HostStateError(
            f"GPU index {index} is {found['uuid']}, not {params['uuid']} as the event says: nothing was reset (the "
            "indexes changed since the alert). Fix: resend the event with the GPU's current index.",
            gpu=found,
        )
    if params.get("pci_bus_id") and not _same_bus(found["pci_bus_id"], params["pci_bus_id"]):
        raise HostStateError(
            f"GPU index {index} is at {found['pci_bus_id']}, not {params['pci_bus_id']} as the event says: nothing "
            "was reset. Fix: resend the event with the GPU's current index.",
            gpu=found,
        )
    return found


def reset(runner: Any, params: Mapping[str, Any], check_mode: bool) -> dict[str, Any]:
    """Identify, check idleness, reset: {changed, gpu, idle, processes, reset}."""
    listed = runner.run("nvidia-smi", ["--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"])
    gpu = the_gpu(parse_gpus(listed.out), params)
    apps = runner.run(
        "nvidia-smi", ["--query-compute-apps=pid,process_name", "--format=csv,noheader", "-i", str(params["index"])]
    )
    processes = parse_processes(apps.out)
    result: dict[str, Any] = {"changed": False, "gpu": gpu, "idle": not processes, "processes": processes}
    if processes:
        result["reset"] = False
        result["msg"] = (
            f"GPU {params['index']} ({gpu['uuid']}) is not idle ({'; '.join(processes)}): not reset. Drain the node "
            "first, or let the ladder take its next step."
        )
        return result
    runner.run("nvidia-smi", ["-r", "-i", str(params["index"])], mutating=True)
    result.update(changed=True, reset=not check_mode)
    result["msg"] = f"GPU {params['index']} ({gpu['uuid']}) {'would be' if check_mode else 'was'} reset"
    return result
