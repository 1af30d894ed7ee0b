# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Diagnosis of a GPU cluster view (built by ``_cluster_views.build_view``): a table of rules, each a pure
function view -> findings, kept by subject in ``_diag_*`` files. A finding names the object, the evidence,
the documented root cause and the fix:
``{id, severity (error|warning|info), object {kind, namespace, name}, node, evidence [..], cause, fix}``.

A rule that only concerns one vendor's operator is listed with that vendor: it runs only when the view is
scoped to that vendor (``view['vendors']``), so the NVIDIA role does not judge the AMD operator's objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.status import (
    _diag_amd,
    _diag_batch,
    _diag_general,
    _diag_network,
    _diag_nvidia,
    _diag_nvidia_operator,
    _diag_scheduling,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._diag_common import (
    SEVERITIES,
    finding,
    node_ref,
    pod_ref,
)

# finding, node_ref and pod_ref are re-exported for rules written outside the _diag_* files
__all__ = ["RULES", "RULE_TABLE", "RULE_VENDOR", "SEVERITIES", "diagnose", "finding", "node_ref", "pod_ref"]

Rule = Callable[[dict[str, Any]], list[dict[str, Any]]]

# (vendor or None for every vendor, rule), in the order the findings are built
RULE_TABLE: tuple[tuple[str | None, Rule], ...] = (
    (None, _diag_general.rule_operator_installed),
    ("nvidia", _diag_nvidia_operator.rule_cluster_policy),
    ("nvidia", _diag_nvidia_operator.rule_operator_namespace),
    ("nvidia", _diag_nvidia_operator.rule_operator_missing),
    (None, _diag_general.rule_operator_crashloop),
    (None, _diag_general.rule_node_not_ready),
    (None, _diag_scheduling.rule_node_scheduling),
    ("nvidia", _diag_nvidia.rule_host_driver_conflict),
    ("nvidia", _diag_nvidia.rule_driver_crashloop),
    ("nvidia", _diag_nvidia.rule_validator_init),
    (None, _diag_general.rule_operand_pending),
    (None, _diag_general.rule_operand_crashloop),
    (None, _diag_general.rule_gpu_resource_missing),
    ("amd", _diag_amd.rule_device_config),
    # the network side: only with the module's network option (view["network"]), but peermem
    (None, _diag_network.rule_nic_cluster_policy),
    (None, _diag_network.rule_ofed_driver),
    (None, _diag_network.rule_network_resource_missing),
    (None, _diag_network.rule_sriov_node_state),
    ("nvidia", _diag_network.rule_peermem),
    # the batch layer: only with the module's batch option (view["batch"])
    (None, _diag_batch.rule_workload_queue),
    (None, _diag_batch.rule_flavor_no_node),
    (None, _diag_batch.rule_scheduler_missing),
    (None, _diag_batch.rule_quota_capacity),
    (None, _diag_batch.rule_scheduler_queue),
)
RULES: tuple[Rule, ...] = tuple(rule for _vendor, rule in RULE_TABLE)
RULE_VENDOR: dict[Rule, str | None] = {rule: vendor for vendor, rule in RULE_TABLE}


def diagnose(view: dict[str, Any], rules: tuple[Rule, ...] = RULES) -> list[dict[str, Any]]:
    """The findings of every rule that applies to the view's vendors, errors first."""
    vendors = view.get("vendors") or ("nvidia", "amd")
    findings = []
    for rule in rules:
        vendor = RULE_VENDOR.get(rule)
        if vendor is None or vendor in vendors:
            findings.extend(rule(view))
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (order[f["severity"]], f["node"] or "", f["id"]))
