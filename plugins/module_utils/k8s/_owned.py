# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Objects a role owns, once for every role that applies custom resources: pure functions (no I/O).

- :func:`owned` marks a built object with a role's owner labels (``app.kubernetes.io/managed-by=gpuops.platform``,
  ``gpuops.platform/role=<role>``: :func:`owner_labels`).
- :func:`prune_objects`: the live objects carrying those labels that the variables no longer ask for, in the role's
  delete order. Objects without the labels (made by hand, or by another tool) are never touched.
- :func:`split_on_missing_namespaces` (check mode): the objects the API server can dry-run, and those in a namespace
  the run has only planned (its creation is a check-mode change too), which are reported as would-create.
- :func:`labels_set_by`: the labels of an object a field manager set (and no other manager holds).
- :func:`landing_findings`: every value the role asked for (each leaf of a built object's ``spec`` and its labels)
  must be the live object's value; one finding per object with one evidence line per field, naming the field, the
  wanted and the live value (a field the CRD does not know is pruned by the API server, silently).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._plain import plain

Finding = dict[str, Any]
Obj = dict[str, Any]


def finding(fid: str, severity: str, kind: str, name: str, evidence: Sequence[str], cause: str, fix: str) -> Finding:
    """The finding shape of the roles that apply objects: id, severity, object {kind, name}, evidence, cause, fix."""
    return {
        "id": fid,
        "severity": severity,
        "object": {"kind": kind, "name": name},
        "evidence": list(evidence),
        "cause": cause,
        "fix": fix,
    }


def owner_labels(role: str) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "gpuops.platform", "gpuops.platform/role": role}


def selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def owned(obj: Mapping[str, Any], labels: Mapping[str, str]) -> Obj:
    """A copy of ``obj`` with ``labels`` added (its own labels kept)."""
    out = plain(dict(obj))
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    return out


def key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace or "", name) of an object."""
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))


def is_owned(obj: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    have = (obj.get("metadata") or {}).get("labels") or {}
    return all(have.get(k) == v for k, v in labels.items())


def prune_objects(
    wanted: Iterable[Mapping[str, Any]],
    live: Iterable[Mapping[str, Any]],
    labels: Mapping[str, str],
    kinds: Sequence[str],
) -> list[Obj]:
    """The live objects carrying ``labels``, of one of ``kinds``, that ``wanted`` no longer holds, as
    ``{apiVersion, kind, metadata: {name[, namespace]}}`` in the order of ``kinds`` (by namespace and name within a
    kind)."""
    want = {key(o) for o in wanted}
    order = {kind: i for i, kind in enumerate(kinds)}
    out = []
    for obj in live:
        if obj.get("kind") not in order or not is_owned(obj, labels) or key(obj) in want:
            continue
        meta = {"name": obj["metadata"]["name"]}
        if obj["metadata"].get("namespace"):
            meta["namespace"] = obj["metadata"]["namespace"]
        out.append({"apiVersion": obj.get("apiVersion"), "kind": obj["kind"], "metadata": meta})
    return sorted(out, key=lambda o: (order[o["kind"]], key(o)))


def prune_spec(labels: Mapping[str, str], kinds: Sequence[tuple[str, str, str | None]]) -> dict[str, Any]:
    """The ``prune`` option of gpuops.platform.k8s_apply for a role: its owner ``labels`` and the kinds it prunes,
    ``(api_version, kind, namespace or None for every namespace)`` in delete order."""
    return {
        "labels": dict(labels),
        "kinds": [{"api_version": api, "kind": kind, **({"namespace": ns} if ns else {})} for api, kind, ns in kinds],
    }


def landed_queries(wanted: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The cluster_objects_info queries that read the live copies of ``wanted``: one list call per (apiVersion, kind,
    namespace), in the order first seen (``key`` ``<n>``)."""
    seen: dict[tuple[str, str, str], None] = {}
    for obj in wanted:
        seen.setdefault((str(obj.get("apiVersion")), str(obj.get("kind")), key(obj)[1]), None)
    return [
        {"key": str(i), "api_version": api, "kind": kind, **({"namespace": ns} if ns else {})}
        for i, (api, kind, ns) in enumerate(seen)
    ]


def prune_spec_errors(spec: Any) -> list[str]:
    """What is wrong with a ``prune`` option (k8s_apply): a dict with ``labels`` (a non-empty dict of strings: the
    owner labels, never empty - that would select every object) and ``kinds`` (a non-empty list of
    ``{api_version, kind[, namespace]}``), and an optional positive int ``wait_timeout``."""
    if not isinstance(spec, Mapping):
        return [f"prune must be a dict with labels and kinds, got {type(spec).__name__}"]
    errors = [f"prune.{k}: unknown option (labels, kinds, wait_timeout)" for k in spec if k not in PRUNE_KEYS]
    labels = spec.get("labels")
    if (
        not isinstance(labels, Mapping)
        or not labels
        or not all(isinstance(k, str) and isinstance(v, str) and k and v for k, v in labels.items())
    ):
        errors.append(f"prune.labels must be a non-empty dict of label names to values, got {labels!r}")
    kinds = spec.get("kinds")
    if not isinstance(kinds, list) or not kinds:
        errors.append(f"prune.kinds must be a non-empty list of {{api_version, kind[, namespace]}}, got {kinds!r}")
    else:
        keys = {"api_version", "kind", "namespace"}
        for i, k in enumerate(kinds):
            if not isinstance(k, Mapping) or not all(
                isinstance(k.get(f), str) and k.get(f) for f in ("api_version", "kind")
            ):
                errors.append(f"prune.kinds[{i}] must name api_version and kind, got {k!r}")
            elif set(k) - keys:
                errors.append(f"prune.kinds[{i}]: unknown key(s) {sorted(set(k) - keys)}")
    timeout = spec.get("wait_timeout", 120)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
        errors.append(f"prune.wait_timeout must be a positive number of seconds, got {timeout!r}")
    return errors


PRUNE_KEYS = ("labels", "kinds", "wait_timeout")


_ABSENT = object()


def _show(value: Any) -> str:
    return "(absent)" if value is _ABSENT else json.dumps(value, sort_keys=True)


def _same_scalar(want: Any, live: Any) -> bool:
    # strict: true is not 1, 64 is not "64" (json.dumps tells them apart, Python's == does not)
    return live is not _ABSENT and json.dumps(want, sort_keys=True) == json.dumps(live, sort_keys=True)


def differences(want: Any, live: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, wanted, live) for every wanted leaf whose live value differs. Mappings are compared key by key (keys
    the live object adds, such as CRD defaults, are not differences); lists must have the same length and are
    compared item by item the same way; anything else must be equal, type included. ``live`` is ``_ABSENT`` where
    the live object has no such key."""
    if isinstance(want, Mapping):
        if not isinstance(live, Mapping):
            return [(path, want, live)]
        out = []
        for k in sorted(want):
            sub = f"{path}.{k}" if path else str(k)
            out += differences(want[k], live.get(k, _ABSENT), sub)
        return out
    if isinstance(want, list):
        if not isinstance(live, list) or len(live) != len(want):
            return [(path, want, live)]
        out = []
        for i, w in enumerate(want):
            out += differences(w, live[i], f"{path}[{i}]")
        return out
    return [] if _same_scalar(want, live) else [(path, want, live)]


def landing_findings(
    wanted: Sequence[Mapping[str, Any]], live: Iterable[Mapping[str, Any]], finding_id: str, fix: str
) -> list[Finding]:
    """One finding ``finding_id`` (error) per wanted object that is missing or whose ``spec`` / labels differ from
    the live object's, evidence ``<field>: wanted <json>, live <json>`` per field; ``fix`` says what to do about a
    difference."""
    found = {key(o): o for o in live}
    out = []
    for obj in wanted:
        k = key(obj)
        ref = {"kind": k[0], "name": k[2], **({"namespace": k[1]} if k[1] else {})}
        have = found.get(k)
        if have is None:
            out.append(
                {
                    "id": finding_id,
                    "severity": "error",
                    "object": ref,
                    "evidence": [f"{k[0]} {k[2]}: not found after it was applied"],
                    "cause": "the object the role applied is not in the cluster (deleted meanwhile, or applied "
                    "elsewhere: another kubeconfig or namespace)",
                    "fix": "run the role again and check that nothing else deletes the object",
                }
            )
            continue
        diffs = differences(obj.get("spec") or {}, have.get("spec") or {}, "spec")
        labels = (obj.get("metadata") or {}).get("labels") or {}
        diffs += differences(labels, (have.get("metadata") or {}).get("labels") or {}, "metadata.labels")
        if diffs:
            out.append(
                {
                    "id": finding_id,
                    "severity": "error",
                    "object": ref,
                    "evidence": [f"{p}: wanted {_show(w)}, live {_show(lv)}" for p, w, lv in diffs],
                    "cause": "the live object does not hold what the role asked for: a field the CRD does not know "
                    "is pruned by the API server (CRDs older than the chart), or another field manager changed it",
                    "fix": fix,
                }
            )
    return out


def _managed_time(obj: Mapping[str, Any], field_manager: str) -> str | None:
    times = [
        str(entry.get("time") or "")
        for entry in (obj.get("metadata") or {}).get("managedFields") or []
        if isinstance(entry, Mapping) and entry.get("manager") == field_manager
    ]
    times = [t for t in times if t]
    return max(times) if times else None


def pods_started_before(
    config: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]], field_manager: str
) -> list[str]:
    """The pods created before ``field_manager`` last changed ``config`` (a ConfigMap the pods read only when they
    start): the time of that manager's ``managedFields`` entry, which the API server moves whenever the manager
    changes a value it owns, so a run that failed between the write and the restart is finished by the next one
    without a record of its own. Creation times have one-second resolution: a pod created in the same second as the
    change counts as started after it. No config, or no entry of that manager: none."""
    if not config:
        return []
    changed = _managed_time(config, field_manager)
    if changed is None:
        return []
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        created = str(meta.get("creationTimestamp") or "")
        if created and created < changed and not meta.get("deletionTimestamp"):
            out.append(str(meta.get("name")))
    return sorted(out)


def split_on_missing_namespaces(
    definitions: Iterable[Mapping[str, Any]], namespaces: Iterable[str], default_namespace: str | None = None
) -> tuple[list[Obj], list[Obj]]:
    """(objects to apply, objects to report as would-create) for a check-mode apply. An object in a namespace that
    is not in ``namespaces`` (the live ones: a namespace this run creates is only planned in check mode) cannot be
    dry-run by the API server (``namespaces "x" not found``); a real run creates it, so it is a planned creation.
    ``default_namespace`` is the namespace of objects that name none (the task's ``namespace``); cluster-scoped
    objects (no namespace either way) are applied."""
    live = set(namespaces)
    apply: list[Obj] = []
    planned: list[Obj] = []
    for obj in definitions:
        ns = (obj.get("metadata") or {}).get("namespace") or default_namespace
        (planned if ns and ns not in live else apply).append(plain(dict(obj)))
    return apply, planned


# The API groups a Kubernetes API server serves itself (no CRD): an object of these is never planned for a missing kind
BUILTIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "policy",
        "autoscaling",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)


def custom_kinds(definitions: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The (apiVersion, kind) pairs of ``definitions`` that a CRD serves (not a built-in group), in first-seen order:
    those a check-mode apply asks the API server about."""
    out: list[tuple[str, str]] = []
    for obj in definitions:
        api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
        group = api_version.rpartition("/")[0]
        if group not in BUILTIN_GROUPS and (api_version, kind) not in out:
            out.append((api_version, kind))
    return out


def split_on_missing_kinds(
    definitions: Iterable[Mapping[str, Any]], missing: Iterable[tuple[str, str]]
) -> tuple[list[Obj], list[Obj]]:
    """(objects to apply, objects to report as would-create) for a check-mode apply: an object whose kind the API
    server does not serve yet (its CRD comes with a release the run installs first, only planned in check mode)
    cannot be dry-run; a real run creates it after its CRD."""
    gone = set(missing)
    apply: list[Obj] = []
    planned: list[Obj] = []
    for obj in definitions:
        key = (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
        (planned if key in gone else apply).append(plain(dict(obj)))
    return apply, planned


def planned_creation(
    obj: Mapping[str, Any], default_namespace: str | None = None, missing: str = "namespace"
) -> dict[str, Any]:
    """The check-mode result of an object whose namespace (``missing="namespace"``) or kind (``"kind"``: its CRD) a
    real run creates first: changed, method ``create``, the object as it would be sent, and its diff (nothing
    before)."""
    after = plain(dict(obj))
    meta = after.setdefault("metadata", {})
    if default_namespace and not meta.get("namespace"):
        meta["namespace"] = default_namespace
    where = f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
    why = (
        f"the API server does not serve {after.get('apiVersion')} {after.get('kind')} yet (check mode; a real run "
        "installs its CRD first)"
        if missing == "kind"
        else "its namespace does not exist yet (check mode; a real run creates the namespace first)"
    )
    return {
        "changed": True,
        "method": "create",
        "result": after,
        "diff": {"before": {}, "after": after},
        "msg": f"would create {after.get('kind')} {where}: {why}",
    }


def _label_fields(fields: Any) -> set[str]:
    labels = ((fields or {}).get("f:metadata") or {}).get("f:labels") or {}
    return {k[2:] for k in labels if isinstance(k, str) and k.startswith("f:")}


def labels_set_by(obj: Mapping[str, Any], field_manager: str, keys: Iterable[str] | None = None) -> list[str]:
    """The label keys of ``obj`` (``keys`` only, when given) that ``field_manager`` set and no other manager also
    holds, from ``metadata.managedFields``: the labels to remove when what set them is removed. A label a user also
    set (kubectl label, another tool) is held by that manager too, and is kept."""
    entries = [e for e in (obj.get("metadata") or {}).get("managedFields") or [] if isinstance(e, Mapping)]
    mine: set[str] = set()
    others: set[str] = set()
    for entry in entries:
        (mine if entry.get("manager") == field_manager else others).update(_label_fields(entry.get("fieldsV1")))
    present = set(((obj.get("metadata") or {}).get("labels") or {}).keys())
    wanted = set(keys) if keys is not None else mine
    return sorted((mine - others) & present & wanted)


WEBHOOK_CALL_FAILED = "failed calling webhook"


def webhook_unanswered(result: Mapping[str, Any]) -> bool:
    """Whether an apply failed because the API server could not call an admission webhook (its Service has no endpoint
    yet, or the webhook does not serve yet: a scheduler's admission pod is Ready before its server answers), not
    because a webhook or the API server refused the object."""
    return bool(result.get("failed")) and WEBHOOK_CALL_FAILED in str(result.get("msg") or "")
