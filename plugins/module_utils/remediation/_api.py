# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The Kubernetes calls of the remediation, reads and writes through the collection's Reader (plain dicts; the
standard library when the kubeconfig allows it, so the module does not pay for importing the kubernetes client on
the way from the alert to the cordon): a node's marks (a JSON merge patch carrying the resourceVersion read; the
taints are an atomic list, replaced whole), Events on the Node (what ``kubectl describe node`` lists), the circuit
breaker's ConfigMap (written with the resourceVersion read, so two runs cannot both take the last place) and
evictions (the Eviction API, so PodDisruptionBudgets apply)."""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError
from ansible_collections.gpuops.platform.plugins.module_utils.remediation._policy import BY, stamp, utcnow

EVENT_NAMESPACE = "default"  # where the kubelet records a Node's events; kubectl describe node reads them there
BREAKER = "gpuops-remediation-breaker"
COMPONENT = "gpuops-remediation"


def close_command(namespace: str) -> str:
    """How a person closes the breaker."""
    return f'kubectl -n {namespace} patch configmap {BREAKER} --type merge -p \'{{"data":{{"status":"CLOSED"}}}}\''


class Conflict(GpuOpsError):
    """The object changed between the read and the write (HTTP 409): read again and decide again."""


def _message(reason: str, body: Any) -> str:
    """The API server's message from a Status body, else the HTTP reason."""
    try:
        return json.loads(body or "").get("message") or reason
    except (TypeError, ValueError, AttributeError):
        return reason


def _rbac(verb: str, what: str, status: int, reason: str, body: Any) -> GpuOpsError:
    hint = f"; Fix: grant the user {verb} on {what} (RBAC)" if status in (401, 403) else ""
    return GpuOpsError(f"cannot {verb} {what}: HTTP {status} {_message(reason, body)}{hint}", status=status)


class ClusterApi:
    """Reads and writes of one run through ``reader`` (a _k8s.Reader)."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader

    # -- nodes
    def node(self, name: str) -> dict[str, Any] | None:
        return self.reader.get_optional(f"node {name}", f"/api/v1/nodes/{urllib.parse.quote(name, safe='')}")

    def nodes(self) -> list[dict[str, Any]]:
        return self.reader.nodes()

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> None:
        path = f"/api/v1/nodes/{urllib.parse.quote(name, safe='')}"
        status, reason, body = self.reader.send("PATCH", path, patch, "application/merge-patch+json")
        if status == 409:
            raise Conflict(f"node {name} changed while it was being marked")
        if status >= 300:
            raise _rbac("patch", f"node {name}", status, reason, body)

    # -- events
    def record(self, node: Mapping[str, Any], reason: str, message: str, key: str, warning: bool = False) -> bool:
        """A core/v1 Event on the Node, named from the node, the reason and ``key`` (the same event recorded twice is
        one Event: a repeated alert adds nothing). True when it was created, False when it existed."""
        name = (node.get("metadata") or {}).get("name") or ""
        digest = hashlib.sha256(f"{name}/{reason}/{key}".encode()).hexdigest()[:16]
        now = stamp(utcnow())
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.gpuops-{digest}", "namespace": EVENT_NAMESPACE},
            # the kubelet's reference to its node: kind Node, the name as uid (kubectl describe node matches it)
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": name, "uid": name},
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": BY,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        status, reason, answer = self.reader.send("POST", f"/api/v1/namespaces/{EVENT_NAMESPACE}/events", body)
        if status == 409:
            return False
        if status >= 300:
            raise _rbac("create", f"events in namespace {EVENT_NAMESPACE}", status, reason, answer)
        return True

    # -- the circuit breaker's state
    def breaker(self, namespace: str) -> tuple[dict[str, Any], str | None]:
        """(data, resourceVersion) of the breaker's ConfigMap: {status, reason, active: {node: at}, actions: [...]};
        an absent ConfigMap is a closed breaker with no history (resourceVersion None)."""
        got = self.reader.get_optional(
            f"ConfigMap {namespace}/{BREAKER}", f"/api/v1/namespaces/{namespace}/configmaps/{BREAKER}"
        )
        data = (got or {}).get("data") or {}
        out: dict[str, Any] = {"status": data.get("status") or "CLOSED", "reason": data.get("reason") or ""}
        for key, empty in (("active", {}), ("actions", [])):
            try:
                value = json.loads(data.get(key) or "null")
            except ValueError:
                value = None
            out[key] = value if isinstance(value, type(empty)) else empty
        return out, ((got or {}).get("metadata") or {}).get("resourceVersion")

    def write_breaker(self, namespace: str, state: Mapping[str, Any], rv: str | None) -> None:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": BREAKER,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "gpuops.platform"},
                "annotations": {
                    "gpuops.platform/how-to-close": "a person who has looked at the quarantined nodes sets data.status "
                    f"to CLOSED: {close_command(namespace)}"
                },
            },
            "data": {
                "status": state["status"],
                "reason": state.get("reason") or "",
                "active": json.dumps(state["active"], sort_keys=True),
                "actions": json.dumps(state["actions"], sort_keys=True),
            },
        }
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        if rv is None:
            status, reason, answer = self.reader.send("POST", path, body)
        else:
            body["metadata"]["resourceVersion"] = rv
            status, reason, answer = self.reader.send("PUT", f"{path}/{BREAKER}", body)
        if status == 409:
            raise Conflict(f"ConfigMap {namespace}/{BREAKER} changed while it was being written")
        if status == 404:
            raise GpuOpsError(
                f"cannot write the circuit breaker's ConfigMap {namespace}/{BREAKER}: namespace {namespace} does "
                "not exist. Fix: set gpuops_remediation_namespace (the module's state_namespace) to an existing "
                "namespace, or create it.",
            )
        if status >= 300:
            raise _rbac("create and update", f"configmaps in namespace {namespace}", status, reason, answer)

    # -- the drain
    def pods_on(self, node: str) -> list[dict[str, Any]]:
        selector = urllib.parse.quote(f"spec.nodeName={node}", safe="")
        got = self.reader.get(f"pods on node {node}", f"/api/v1/pods?fieldSelector={selector}", verb="list")
        return got.get("items") or []

    def pdbs(self) -> list[dict[str, Any]]:
        return self.reader.objects("policy", "v1", "poddisruptionbudgets") or []

    def evict(self, namespace: str, name: str) -> tuple[int, str]:
        """POST the pod's eviction: (status, message). 201/200 evicted, 429 refused by a PodDisruptionBudget (the
        message names it), 404 gone already; other errors raise."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{urllib.parse.quote(name, safe='')}/eviction"
        status, reason, answer = self.reader.send("POST", path, body)
        if status in (404, 429):
            return status, _message(reason, answer)
        if status >= 300:
            raise _rbac("create", f"pods/eviction of pod {namespace}/{name}", status, reason, answer)
        return 201, "evicted"
