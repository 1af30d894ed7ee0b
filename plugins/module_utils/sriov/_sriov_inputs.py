# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""SR-IOV Network Operator (k8snetworkplumbingwg v1.6.0): the sriov_network_operator role's input findings - bad
input before any change, each finding naming the variable and field - and the cluster checks of its plan (a second
operator, the webhooks, the release source). Pure functions (no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.sriov._sriov_config import _operator_config
from ansible_collections.gpuops.platform.plugins.module_utils.sriov._sriov_networks import _network
from ansible_collections.gpuops.platform.plugins.module_utils.sriov._sriov_policy import (
    SOURCES,
    VAR_CONFIG,
    VAR_IB_NETWORKS,
    VAR_NETWORKS,
    VAR_POLICIES,
    VAR_SOURCE,
    Finding,
    Obj,
    _bad,
    _policy,
)


# -- input findings --------------------------------------------------------------------------------------------
def source_findings(source: Any, bundled_enabled: bool, bundled_var: str = "network_operator_mode") -> list[Finding]:
    """One SR-IOV operator, from one source: sriov_network_operator_source chooses the standalone chart or the copy
    bundled in the NVIDIA Network Operator (its sriovNetworkOperator.enabled, which network_operator_mode sriov
    turns on). Both would run two operators fighting over the same CRDs, policies and VFs."""
    if source not in SOURCES:
        return [
            _bad(
                "sriov-source-invalid",
                VAR_SOURCE,
                source,
                f"The value is not one of: {', '.join(SOURCES)}.",
                f"set {VAR_SOURCE} to standalone (the upstream chart, non-NVIDIA NICs) or network_operator (the "
                "copy bundled in the NVIDIA Network Operator).",
            )
        ]
    if source == "standalone" and bundled_enabled:
        return [
            _bad(
                "sriov-operator-two-sources",
                VAR_SOURCE,
                source,
                "Both SR-IOV operator sources are enabled: the standalone chart and the copy bundled in the NVIDIA "
                "Network Operator (sriovNetworkOperator.enabled true). Two operators would fight over the same "
                "policies and VFs.",
                f"choose one: set {VAR_SOURCE}: network_operator, or keep standalone and set {bundled_var} to "
                "rdma_shared or host_device.",
                f"{bundled_var}: sriovNetworkOperator.enabled is true",
            )
        ]
    if source == "network_operator" and not bundled_enabled:
        return [
            _bad(
                "sriov-operator-source-off",
                VAR_SOURCE,
                source,
                "The bundled SR-IOV operator is chosen but the NVIDIA Network Operator does not enable it "
                "(sriovNetworkOperator.enabled false).",
                f"set {bundled_var}: sriov, or {VAR_SOURCE}: standalone.",
                f"{bundled_var}: sriovNetworkOperator.enabled is false",
            )
        ]
    return []


def _resource_names(policies: Sequence[Obj]) -> dict[str, set[str]]:
    """resourceName -> the link types of the policies that provide it ('eth' when not set)."""
    out: dict[str, set[str]] = {}
    for p in policies:
        spec = p.get("spec") or {}
        if spec.get("resourceName"):
            out.setdefault(spec["resourceName"], set()).add(spec.get("linkType") or "eth")
    return out


def _duplicates(items: Sequence[tuple[str, Obj]], what: str) -> list[Finding]:
    """Names used twice among ``items`` ((variable path, object)); networks share one name space across both
    lists, because each renders a NetworkAttachmentDefinition of its name."""
    seen: dict[str, str] = {}
    out = []
    for var, obj in items:
        name = (obj.get("metadata") or {}).get("name")
        if not isinstance(name, str):
            continue
        if name in seen:
            out.append(
                _bad(
                    "sriov-duplicate-name",
                    f"{var}.name",
                    name,
                    f"{what} {name} is defined twice ({seen[name]} and {var}): the second would replace the first.",
                    "give each its own name.",
                )
            )
        else:
            seen[name] = var
    return out


def _as_list(value: Any, var: str) -> tuple[list[Any], list[Finding]]:
    if value is None:
        return [], []
    if isinstance(value, list):
        return value, []
    return [], [_bad("sriov-variable-type", var, value, f"{var} must be a list.", "fix it.")]


def webhook_findings(config: Any, values: Any, source: Any = "standalone") -> list[Finding]:
    """The operator's webhooks need the certificates the standalone chart hands it (upstream v1.6.0): with
    enable_operator_webhook / enable_injector the operator registers webhook configurations whose caBundle is its
    env ADMISSION_CONTROLLERS_CERTIFICATES_*_CA_CRT (bindata/manifests/operator-webhook/003-webhook.yaml,
    webhook/003-webhook.yaml) and servers that mount the Secrets ADMISSION_CONTROLLERS_CERTIFICATES_*_SECRET_NAME
    names; the chart sets those only with operator.admissionControllers.enabled (templates/operator.yaml). Without
    it the operator webhook (failurePolicy Fail) refuses every policy. The bundled copy's values are the Network
    Operator role's: not judged here."""
    if source != "standalone" or not isinstance(config, Mapping):
        return []
    operator = values.get("operator") if isinstance(values, Mapping) else None
    admission = operator.get("admissionControllers") if isinstance(operator, Mapping) else None
    if isinstance(admission, Mapping) and admission.get("enabled") is True:
        return []
    what = {
        "enable_operator_webhook": ("policy webhook (failurePolicy Fail)", " and refuses every SriovNetworkNodePolicy"),
        "enable_injector": ("network-resources-injector webhook", ""),
    }
    return [
        _bad(
            "sriov-webhook-without-certificates",
            f"{VAR_CONFIG}.{key}",
            True,
            f"{key} makes the operator register its {webhook}, but the chart gives it no certificates "
            "(operator.admissionControllers.enabled is not true in sriov_network_operator_values): the webhook "
            "configuration gets an empty caBundle and its server no certificate Secret, so the API server cannot "
            f"call it{refused}.",
            "set sriov_network_operator_values.operator.admissionControllers.enabled: true with certificates "
            "(certificates.certManager.enabled, or certificates.custom with the PEMs, or Secrets of the "
            "certificates.secretNames names), or leave the webhook off.",
        )
        for key, (webhook, refused) in what.items()
        if config.get(key) is True
    ]


def policy_input_findings(
    policies: Any,
    networks: Any = None,
    ib_networks: Any = None,
    config: Any = None,
    source: Any = "standalone",
    bundled_enabled: bool = False,
    values: Any = None,
) -> list[Finding]:
    """Every input rule of the role, before any change: each policy, network and the operator config field by
    field, the source choice, duplicate names, networks whose resource no policy provides (or of the wrong
    link type: a SriovIBNetwork needs a link_type ib policy, a SriovNetwork an Ethernet one) and webhooks turned on
    without the chart's certificates (`values`: sriov_network_operator_values)."""
    out = source_findings(source, bundled_enabled)
    built: dict[str, list[tuple[str, Obj]]] = {VAR_POLICIES: [], VAR_NETWORKS: [], VAR_IB_NETWORKS: []}
    for var, value in ((VAR_POLICIES, policies), (VAR_NETWORKS, networks), (VAR_IB_NETWORKS, ib_networks)):
        items, problems = _as_list(value, var)
        out += problems
        for i, item in enumerate(items):
            path = f"{var}[{i}]"
            obj, found = _policy(item, path) if var == VAR_POLICIES else _network(item, path, var == VAR_IB_NETWORKS)
            out += found
            built[var].append((path, obj))
    out += _duplicates(built[VAR_POLICIES], "SriovNetworkNodePolicy")
    out += _duplicates(built[VAR_NETWORKS] + built[VAR_IB_NETWORKS], "network")
    out += _operator_config(config, VAR_CONFIG)[1]
    out += webhook_findings(config, values, source)

    provided = _resource_names([obj for _where, obj in built[VAR_POLICIES]])
    for var, want in ((VAR_NETWORKS, "eth"), (VAR_IB_NETWORKS, "ib")):
        for path, obj in built[var]:
            resource = (obj.get("spec") or {}).get("resourceName")
            if not resource:
                continue
            if resource not in provided:
                out.append(
                    _bad(
                        "sriov-network-resource-unknown",
                        f"{path}.resource_name",
                        resource,
                        f"No policy in {VAR_POLICIES} provides resource {resource}: the network's pods would wait "
                        "for VFs that nothing advertises.",
                        "use the resource_name of one of the policies, or add the policy.",
                        "policies' resource names: " + (", ".join(sorted(provided)) or "none"),
                    )
                )
            elif want not in provided[resource]:
                kind = "SriovIBNetwork" if want == "ib" else "SriovNetwork"
                other = f"{VAR_NETWORKS} (SriovNetwork)" if want == "ib" else f"{VAR_IB_NETWORKS} (SriovIBNetwork)"
                out.append(
                    _bad(
                        "sriov-network-link-type-mismatch",
                        f"{path}.resource_name",
                        resource,
                        f"A {kind} needs {'InfiniBand' if want == 'ib' else 'Ethernet'} VFs, but the policies that "
                        f"provide {resource} have link_type {', '.join(sorted(provided[resource]))}.",
                        f"move the network to {other}, or set the policy's link_type: {want}.",
                    )
                )
    return out


def second_operator(deployments: Sequence[Mapping[str, Any]], namespace: str) -> list[Finding]:
    """Never two SR-IOV operators: a Deployment with the operator's pod label (name=sriov-network-operator, both
    the standalone chart and the Network Operator's copy use it) outside ``namespace``."""
    out = []
    for dep in deployments:
        meta = dep.get("metadata") or {}
        labels = (((dep.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get("name") != "sriov-network-operator" or meta.get("namespace") == namespace:
            continue
        release = (meta.get("labels") or {}).get("app.kubernetes.io/instance") or "unknown"
        out.append(
            {
                "id": "sriov-operator-second-instance",
                "severity": "error",
                "object": {
                    "kind": "Deployment",
                    "namespace": meta.get("namespace") or "",
                    "name": meta.get("name") or "",
                },
                "evidence": [
                    f"SR-IOV operator Deployment {meta.get('namespace')}/{meta.get('name')} of release {release}"
                ],
                "cause": "an SR-IOV Network Operator already runs in another namespace (standalone, or bundled in the "
                "NVIDIA Network Operator): two would fight over the same policies and VFs",
                "fix": f"keep one: {VAR_SOURCE} chooses; uninstall the other (or turn the Network Operator's "
                "sriovNetworkOperator off)",
            }
        )
    return out
