# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Host rules: every decision about a GPU host, once. Pure functions of the ``gpuops_host`` facts and the
intent (what the roles plan for the host) that return findings ``{id, severity, object, evidence, cause, fix}``.

gpu_host_preflight runs them for host_prep (preflight and validate) and for the GPU Operator's guards;
the cluster diagnosis calls :func:`fabricmanager_lockstep`. Roles assert on the findings and never recompute
a rule in Jinja.

Each finding also says which ``concern`` (rule) produced it and which host_prep fix addresses it
(``fixed_by``: ``nouveau``, ``acs``, ``sriov``, ``fabricmanager`` or None), so a caller can tell a finding that
an earlier step of the run will fix (the plan) from one that must stop the run.

Here: the table of rules (:data:`RULES`), the plan of host_prep's fixes and the evaluation. The finding and the
facts it reads are in ``_host_findings``; the rules in ``_driver_rules`` (headers, nouveau, driver, MOFED, Secure
Boot), ``_fabricmanager_rules`` and ``_pcie_rules`` (ACS, GPUDirect, SR-IOV).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput, for_option
from ansible_collections.gpuops.platform.plugins.module_utils.host import _pci
from ansible_collections.gpuops.platform.plugins.module_utils.host._driver_rules import (
    driver,
    headers,
    mofed,
    nouveau,
    secure_boot,
)
from ansible_collections.gpuops.platform.plugins.module_utils.host._fabricmanager_rules import fabricmanager
from ansible_collections.gpuops.platform.plugins.module_utils.host._host_findings import (
    CONCERNS,
    DEFAULT_INTENT,
    FIXES,
    SEVERITIES,
    Facts,
    Finding,
    Intent,
    nvidia_gpus,
)
from ansible_collections.gpuops.platform.plugins.module_utils.host._pcie_rules import (
    acs,
    gpudirect,
    resolve_sriov,
    sriov,
)

RULES: dict[str, Callable[[Facts, Intent], list[Finding]]] = {
    "headers": headers,
    "nouveau": nouveau,
    "driver": driver,
    "mofed": mofed,
    "fabricmanager": fabricmanager,
    "acs": acs,
    "gpudirect": gpudirect,
    "sriov": sriov,
    "secure_boot": secure_boot,
}


# -- the plan: what host_prep's fixes will do on this host ---------------------------------------------
def resolve_gpudirect(facts: Facts, setting: Any) -> bool:
    """``auto`` -> on when the host has NVIDIA GPUs and RDMA NICs; booleans (and their strings) as given."""
    if isinstance(setting, bool):
        return setting
    text = str(setting).strip().lower()
    if text == "auto":
        rdma = [n for n in facts.get("nics") or [] if n.get("rdma_device")]
        return bool(nvidia_gpus(facts) and rdma)
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise InvalidInput(f"gpudirect must be auto, true or false, got {setting}")


def plan(facts: Facts, policy: dict[str, Any], intent: Intent) -> dict[str, Any]:
    """What host_prep will fix on this host, from its policies (``auto`` follows the hardware facts):
    ``{nouveau, acs, fabricmanager, sriov, gpudirect, fixes}``."""
    gpus = nvidia_gpus(facts)
    nv_policy = policy.get("nouveau") or "skip"
    nouveau_state = {"blacklist": "present", "remove": "absent"}.get(nv_policy)
    if nv_policy == "auto" and gpus:
        nouveau_state = "present"
    acs_policy = policy.get("acs") or "skip"
    devices = []
    for i, text in enumerate(policy.get("acs_devices") or []):
        try:
            devices.append(_pci.normalize_address(text))
        except InvalidInput as exc:
            raise for_option(f"fix.acs_devices[{i}] (host_prep: host_prep_acs_devices[{i}])", exc) from None
    acs_state = {"disable": "disabled", "enable": "enabled"}.get(acs_policy)
    if acs_policy == "auto" and intent["gpudirect"] and any(b.get("acs") for b in facts.get("pcie_bridges") or []):
        acs_state = "disabled"
    fm_policy = policy.get("fabricmanager") or "skip"
    fm = fm_policy == "present" or (
        fm_policy == "auto" and bool(facts.get("nvswitches")) and intent["nvidia_driver"] == "host"
    )
    resolved = resolve_sriov(facts, intent["sriov"])[0]
    out = {
        "nouveau": nouveau_state,
        "acs": {"state": acs_state, "devices": devices} if acs_state else None,
        "fabricmanager": fm,
        "sriov": [{k: r[k] for k in ("pf", "address", "num_vfs")} for r in resolved],
        "gpudirect": intent["gpudirect"],
    }
    out["fixes"] = [f for f in FIXES if out[f]]
    return out


# -- evaluation ------------------------------------------------------------------------------------------
def evaluate(
    facts: Facts,
    intent: Intent,
    checks: Iterable[str] = CONCERNS,
    planned_fixes: Iterable[str] = (),
    managed: Iterable[str] | None = None,
) -> list[Finding]:
    """Run the rules named in ``checks``. A finding that a planned fix addresses becomes part of the plan:
    ``planned: true`` and at most a warning, never a failure. With ``managed`` (validate), only the findings of
    the concerns a role manages are kept."""
    full = {**DEFAULT_INTENT, **intent}
    planned, keep = set(planned_fixes), None if managed is None else set(managed)
    out = []
    for name in checks:
        if keep is not None and name not in keep:
            continue
        for f in RULES[name](facts, full):
            f["concern"] = name
            f["host"] = full["node"]
            f["planned"] = bool(f["fixed_by"] and f["fixed_by"] in planned)
            if f["planned"] and f["severity"] == "error":
                f["severity"] = "warning"
            out.append(f)
    return out


def summarize(findings: list[Finding]) -> dict[str, int]:
    return {s: sum(1 for f in findings if f["severity"] == s) for s in SEVERITIES}


def failing(findings: list[Finding], fail_on: str) -> list[Finding]:
    if fail_on == "never":
        return []
    levels = ("error",) if fail_on == "error" else ("error", "warning")
    return [f for f in findings if f["severity"] in levels and not f.get("planned")]


def describe(f: Finding) -> str:
    """One line: ``id (Kind name): cause. Evidence: a; b. Fix: fix`` - values, never Python reprs."""
    obj = f.get("object") or {}
    plan = " [planned: a fix in this run addresses it]" if f.get("planned") else ""
    evidence = "; ".join(f.get("evidence") or []) or "none"
    return f"{f['id']} ({obj.get('kind')} {obj.get('name')}): {f['cause']}{plan}. Evidence: {evidence}. Fix: {f['fix']}"
