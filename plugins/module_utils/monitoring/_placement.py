# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The monitoring role's placement, once: what the Prometheus selects, read from its spec, not assumed - its
ServiceMonitor, rule and namespace selectors (null selects nothing or the own namespace only, ``{}`` everything,
else matchLabels and matchExpressions) - and the labels and namespace that satisfy them. Pure functions (no I/O);
see ``_monitoring``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.monitoring._monitoring_spec import (
    EXISTS_VALUE,
    Finding,
    _show,
    finding,
)


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, Any] | None) -> bool:
    """Kubernetes label selector semantics; ``None`` (a null selector) selects nothing, ``{}`` everything."""
    if selector is None:
        return False
    labels = labels or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), list(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def satisfying_labels(selector: Mapping[str, Any] | None) -> tuple[dict[str, str] | None, str]:
    """The fewest labels an object needs to be selected: (labels, "") or (None, why not)."""
    if selector is None:
        return None, "the selector is null, which selects nothing"
    out: dict[str, str] = {str(k): str(v) for k, v in (selector.get("matchLabels") or {}).items()}
    for expr in selector.get("matchExpressions") or []:
        key, op, values = str(expr.get("key")), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        if op == "In":
            if key in out and out[key] not in values:
                return None, f"{key} must be {out[key]} and one of {', '.join(values)}"
            out.setdefault(key, values[0] if values else "")
            if not values:
                return None, f"{key} In [] matches no value"
        elif op == "Exists":
            out.setdefault(key, EXISTS_VALUE)
        elif op == "NotIn" and key in out and out[key] in values:
            return None, f"{key} must be {out[key]} and not one of {', '.join(values)}"
        elif op == "DoesNotExist" and key in out:
            return None, f"{key} must be set and must not exist"
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return None, f"unknown operator {op}"
    # an Exists default value may collide with a NotIn of the same key
    if not selects(selector, out):
        return None, "no label set satisfies every expression"
    return out, ""


def namespace_selected(
    selector: Mapping[str, Any] | None, namespace: str, namespace_labels: Mapping[str, Any] | None, own: str
) -> bool:
    """A Prometheus namespace selector: null is the Prometheus's own namespace only; ``{}`` every namespace. The
    API server gives every namespace the label ``kubernetes.io/metadata.name``."""
    if selector is None:
        return namespace == own
    labels = {"kubernetes.io/metadata.name": namespace, **(namespace_labels or {})}
    return selects(selector, labels)


def placement(
    prometheus: Mapping[str, Any] | None, namespace: str, namespace_labels: Mapping[str, Any] | None, mode: str
) -> tuple[dict[str, dict[str, str]], list[Finding]]:
    """The labels the role's ServiceMonitors (``servicemonitor``) and PrometheusRule (``rule``) need, from the
    Prometheus object's selectors, and findings when the objects could not be selected where they would go."""
    if prometheus is None:
        return {}, [
            finding(
                "monitoring-prometheus-missing",
                "error",
                "Prometheus",
                "(none)",
                [f"monitoring_mode: {mode}; no Prometheus object found"],
                "the role attaches its ServiceMonitors and rules to a Prometheus Operator's Prometheus, read from "
                "its spec; there is none to read",
                "name the Prometheus (monitoring_prometheus_name, monitoring_prometheus_namespace), or set "
                "monitoring_mode: install",
            )
        ]
    meta = prometheus.get("metadata") or {}
    spec = prometheus.get("spec") or {}
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    own = str(meta.get("namespace") or "")
    out: dict[str, dict[str, str]] = {}
    findings: list[Finding] = []
    for what, sel_key, ns_key, kind in (
        ("servicemonitor", "serviceMonitorSelector", "serviceMonitorNamespaceSelector", "ServiceMonitors"),
        ("rule", "ruleSelector", "ruleNamespaceSelector", "PrometheusRules"),
    ):
        labels, why = satisfying_labels(spec.get(sel_key))
        if labels is None:
            findings.append(
                finding(
                    "monitoring-selector-unsatisfiable",
                    "error",
                    "Prometheus",
                    name,
                    [f"spec.{sel_key}: {_show(spec.get(sel_key))}", why],
                    f"Prometheus {name} would read none of the role's {kind}",
                    f"give the Prometheus a {sel_key} (kube-prometheus-stack: "
                    f"prometheus.prometheusSpec.{sel_key.replace('Selector', 'SelectorNilUsesHelmValues')}), or "
                    "attach to another Prometheus",
                )
            )
            continue
        out[what] = labels
        if not namespace_selected(spec.get(ns_key), namespace, namespace_labels, own):
            findings.append(
                finding(
                    "monitoring-namespace-not-selected",
                    "error",
                    "Prometheus",
                    name,
                    [
                        f"spec.{ns_key}: {_show(spec.get(ns_key))}",
                        f"monitoring_namespace: {namespace} (labels {_show(dict(namespace_labels or {}))})",
                    ],
                    f"Prometheus {name} reads {kind} only from "
                    + (
                        f"its own namespace {own}"
                        if spec.get(ns_key) is None
                        else "the namespaces its selector matches"
                    ),
                    f"set monitoring_namespace: {own}, or label namespace {namespace} to match spec.{ns_key}",
                )
            )
    return out, findings
