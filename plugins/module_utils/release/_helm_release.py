# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The rules of one Helm release, once: what makes an installed release differ from the one asked for
(deterministic, no helm-diff plugin), user values checked against the chart's ``values.schema.json``, and
the decision on the run's Lease (who holds it, until when, may this run take it)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

Finding = dict[str, Any]

# ------------------------------------------------------------------------------------------------ change plan


def _canonical(values: Any) -> str:
    """Values as Helm stores them (a JSON round trip: tuples are lists, keys sorted); null/{} are the same."""
    return json.dumps({} if values is None else values, sort_keys=True, default=str)


def plan(
    installed: Mapping[str, Any] | None, installed_values: Any, chart: str, version: str, values: Any
) -> list[str]:
    """Why the release must be installed or upgraded; empty when the installed release is the one asked for.

    ``installed`` is ``helm get metadata -o json`` (None when there is no release), ``installed_values`` is
    ``helm get values -o json`` (the user-supplied values of the deployed revision)."""
    if not installed:
        return ["the release is not installed"]
    reasons = deployed_reasons(installed, chart, version)
    if _canonical(installed_values) != _canonical(values):
        changed = sorted(_changed_paths(installed_values, values))
        reasons.append("values differ at " + ", ".join(changed[:10]) + (" ..." if len(changed) > 10 else ""))
    return reasons


def deployed_reasons(installed: Mapping[str, Any] | None, chart: str, version: str) -> list[str]:
    """Why the installed release is not the pinned chart, deployed (its values aside); empty when it is."""
    if not installed:
        return ["the release is not installed"]
    reasons = []
    status = str(installed.get("status", "unknown"))
    if status != "deployed":
        reasons.append(f"the last revision ({installed.get('revision', '?')}) is {status}, not deployed")
    have = f"{installed.get('chart', '?')}-{installed.get('version', '?')}"
    if have != f"{chart}-{version}":
        reasons.append(f"chart {have} is installed, {chart}-{version} is asked for")
    return reasons


def not_deployed_message(
    caller: str, namespace: str, name: str, installed: Mapping[str, Any] | None, chart: str, version: str
) -> str:
    """The validation's message for a release that :func:`deployed_reasons` finds wrong: what it is, what was
    expected, and where Helm says why."""
    status = (installed or {}).get("status") or "not installed"
    have = f"{installed.get('chart')}-{installed.get('version')}" if installed else "none"
    return (
        f"{caller}: release {namespace}/{name} is {status} with chart {have}; expected {chart}-{version} deployed. "
        f"Fix: run the {caller} role; `helm history -n {namespace} {name}` shows why a revision failed."
    )


def absent_reasons(namespace: str, name: str, installed: Mapping[str, Any] | None, namespace_exists: bool) -> list[str]:
    """Why the removal of a release must run; empty when it is gone. ``installed`` as for ``plan``;
    ``namespace_exists``: the release namespace still exists where the removal deletes it (the last step)."""
    reasons = []
    if installed:
        reasons.append(f"release {namespace}/{name} is installed (revision {installed.get('revision', '?')})")
    if namespace_exists:
        reasons.append(f"namespace {namespace} still exists")
    return reasons


def namespace_label_reasons(namespace: str, have: Mapping[str, Any] | None, want: Mapping[str, Any]) -> list[str]:
    """Why the release namespace is not as asked: missing, or labels absent or with other values."""
    if have is None:
        return [f"namespace {namespace} does not exist"]
    wrong = [f"{k}={v}" for k, v in sorted(want.items()) if have.get(k) != str(v)]
    return [f"namespace {namespace} lacks label(s) {', '.join(wrong)}"] if wrong else []


def _changed_paths(before: Any, after: Any, prefix: str = "") -> list[str]:
    before = {} if before is None and not prefix else before
    after = {} if after is None and not prefix else after
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        out: list[str] = []
        for key in set(before) | set(after):
            if key not in before or key not in after or _canonical(before[key]) != _canonical(after[key]):
                out += _changed_paths(before.get(key), after.get(key), f"{prefix}{key}.")
        return out
    return [prefix.rstrip(".") or "(all values)"]


# ------------------------------------------------------------------------------------------------ values schema

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list, tuple),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "null": (type(None),),
}


def _type_ok(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(kind, (object,)))


def _kind(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _type_ok(value, name):
            return name
    return type(value).__name__


def _show(value: Any) -> str:
    return json.dumps(value, default=str)


def schema_problems(value: Any, schema: Any, path: str = "") -> list[str]:
    """What the chart's JSON schema rejects in ``value``: type, enum, const, required, additionalProperties,
    minimum/maximum, pattern-free subset Helm charts use. Keywords outside that subset are not checked (Helm
    checks them at install time, before any resource is changed)."""
    if not isinstance(schema, Mapping):
        return []
    where = path or "(values)"
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_type_ok(value, k) for k in kinds):
            return [f"{where}: {_show(value)} is {_kind(value)}, the chart expects {' or '.join(kinds)}"]
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {_show(value)} is not one of {', '.join(_show(v) for v in schema['enum'])}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: {_show(value)} must be {_show(schema['const'])}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: {value} is above the maximum {schema['maximum']}")
    if isinstance(value, Mapping):
        props = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in value:
                problems.append(f"{where}: required key {key} is missing")
        for key, sub in value.items():
            sub_path = f"{path}.{key}" if path else str(key)
            if key in props:
                problems += schema_problems(sub, props[key], sub_path)
            elif isinstance(schema.get("additionalProperties"), Mapping):
                problems += schema_problems(sub, schema["additionalProperties"], sub_path)
            elif schema.get("additionalProperties") is False:
                problems.append(f"{sub_path}: the chart does not accept this key")
    if isinstance(value, (list, tuple)) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            problems += schema_problems(item, schema["items"], f"{where}[{i}]")
    return problems


def schema_findings(var: str, values: Any, schema: Any, chart: str) -> list[Finding]:
    """One finding naming the variable and the chart, with every value the chart's values.schema.json rejects in its
    evidence (one cause, one fix); none when the values pass."""
    problems = schema_problems(values, schema)
    if not problems:
        return []
    return [
        {
            "id": "chart-values-schema",
            "severity": "error",
            "object": {"kind": "variable", "name": var},
            "evidence": problems,
            "cause": f"chart {chart} ships values.schema.json and rejects "
            f"{'this value' if len(problems) == 1 else 'these values'} (Helm would fail to render)",
            "fix": f"correct the key in {var} (see the chart's values.yaml and values.schema.json).",
        }
    ]


# ------------------------------------------------------------------------------------------------ run lock

LEASE_PREFIX = "gpuops-helm-"


def lease_name(release: str, namespace: str) -> str:
    """One Lease per release: gpuops-helm-<namespace>.<release> (both validated before, 63 + 53 + 12 fits 253)."""
    return f"{LEASE_PREFIX}{namespace}.{release}"


def parse_time(text: Any) -> datetime | None:
    if not text:
        return None
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=timezone.utc)  # noqa: UP017 - modules run on Python < 3.11 too
    value = str(text).replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)  # noqa: UP017 - modules run on Python < 3.11 too


def lease_expiry(spec: Mapping[str, Any]) -> datetime | None:
    renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    if renewed is None:
        return None
    return renewed + timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))


def lease_decision(spec: Mapping[str, Any] | None, me: str, now: datetime) -> str:
    """``create`` (no Lease), ``renew`` (ours), ``take`` (free: released or expired), ``wait`` (held by another)."""
    if spec is None:
        return "create"
    holder = spec.get("holderIdentity") or ""
    if holder == me:
        return "renew"
    expiry = lease_expiry(spec)
    if not holder or expiry is None or expiry <= now:
        return "take"
    return "wait"


def lease_found(decision: str, spec: Mapping[str, Any] | None) -> str:
    """How the run found the Lease it takes: ``absent``, ``released`` (no holder), ``expired`` (a run that stopped
    renewing it: dead) or ``ours`` (this run holds it already). Only after ``absent``, ``released`` or ``expired``
    does no live run of this collection work on the release."""
    if decision == "create":
        return "absent"
    if decision == "renew":
        return "ours"
    return "expired" if (spec or {}).get("holderIdentity") else "released"


HOLDER_PREFIX = "gpuops.platform "
_HOLDER = re.compile(r"gpuops\.platform (?P<who>\S+) pid (?P<pid>[0-9]+) started (?P<started>\S+)\Z")


def run_holder(user: str, host: str, pid: int, started: datetime) -> str:
    """The identity of a run in its Leases: this collection's prefix, user@host, the controller's pid and its start
    time (UTC), so a Lease can be traced to a process and a dead run's Lease is recognisable."""
    stamp = started.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: UP017 - modules run on Python < 3.11 too
    return f"{HOLDER_PREFIX}{user or 'unknown'}@{host or 'unknown'} pid {int(pid)} started {stamp}"


def parse_holder(holder: Any) -> dict[str, Any] | None:
    """``{who, pid, started}`` of a holder this collection wrote (``run_holder``); None for anything else."""
    m = _HOLDER.match(str(holder or ""))
    return {"who": m["who"], "pid": int(m["pid"]), "started": m["started"]} if m else None


# ------------------------------------------------------------------------------------------------ a killed run

PENDING = ("pending-install", "pending-upgrade", "pending-rollback")


def last_deployed_revision(history: Sequence[Mapping[str, Any]]) -> int | None:
    """The revision to roll back to from ``helm history -o json``: the newest ``deployed`` one, else the newest that
    was deployed once (``superseded``); None when no revision was ever deployed."""
    for wanted in ("deployed", "superseded"):
        revs = [int(h["revision"]) for h in history if str(h.get("status")) == wanted and h.get("revision") is not None]
        if revs:
            return max(revs)
    return None


def pending_recovery(status: Any, history: Sequence[Mapping[str, Any]], found: str | None) -> tuple[str, int | None]:
    """What to do with the installed release before applying: ``("apply", None)`` when it is not pending;
    ``("rollback", rev)`` or ``("uninstall", None)`` (it never deployed) when it is pending and this run took the
    release's Lease from nobody or from a dead run (``found`` absent, released or expired): the operation that left it
    pending is that dead run's, and Helm refuses any other until it is undone; ``("refuse", None)`` when it is pending
    and no such Lease shows its operation is over (``found`` ours, or no Lease given)."""
    if str(status) not in PENDING:
        return ("apply", None)
    if found not in ("absent", "released", "expired"):
        return ("refuse", None)
    revision = last_deployed_revision(history)
    return ("rollback", revision) if revision is not None else ("uninstall", None)


def lease_holder_message(name: str, namespace: str, spec: Mapping[str, Any], now: datetime) -> str:
    expiry = lease_expiry(spec)
    left = int((expiry - now).total_seconds()) if expiry else 0
    return (
        f"Lease {namespace}/{name} is held by {spec.get('holderIdentity')} since "
        f"{spec.get('acquireTime') or 'unknown'} (expires in {left}s unless renewed)"
    )


# ------------------------------------------------------------------------------------------------ chart CRDs


def _lookup(values: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(values, Mapping) or key not in values:
            return None
        values = values[key]
    return values


def dig(data: Any, path: Sequence[str]) -> Any:
    """The value at a key path in nested mappings, or None when a key is missing or a step is not a mapping."""
    for key in path:
        if not isinstance(data, Mapping) or key not in data:
            return None
        data = data[key]
    return data


def landing_differences(want: Any, live_spec: Any, paths: Sequence[Sequence[str]]) -> list[str]:
    """The landing rule: every requested field (at each key path; null or empty means "not asked") must hold
    the same value in the live object's spec. One line per field that did not land, naming it with both
    values, for instance ``mig.strategy: asked "mixed", live "single"``."""
    out = []
    for path in paths:
        asked = dig(want, path)
        if asked is None or asked == "":
            continue
        live = dig(live_spec, path)
        if asked != live:
            out.append(
                f"{'.'.join(path)}: asked {json.dumps(asked, sort_keys=True)}, live {json.dumps(live, sort_keys=True)}"
            )
    return out


def merge(base: Any, over: Any) -> Any:
    """Helm's values merge: mappings recursively, anything else replaced."""
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = dict(base)
        for key, value in over.items():
            out[key] = merge(base.get(key), value) if key in base else value
        return out
    return over


def dependency_enabled(condition: str | None, values: Any) -> bool:
    """Helm's rule: the first path of the comma-separated condition that holds a boolean decides; none -> enabled."""
    for path in (condition or "").split(","):
        found = _lookup(values, path.strip()) if path.strip() else None
        if isinstance(found, bool):
            return found
    return True


def chart_crd_files(chart_dir: str, values: Any, read_text: Any = None) -> list[str]:
    """The CRD files Helm would install for this chart with these values: its own crds/ and, recursively, the
    crds/ of every dependency chart under charts/ that its condition enables (condition evaluated on the chart's
    defaults merged with the given values, as Helm does; tags are not evaluated)."""
    import os

    import yaml

    def _read(path: str) -> str:
        with open(path, encoding="utf-8") as f:
            return f.read()

    read = read_text or _read
    found: list[str] = []

    def walk(directory: str, user: Any) -> None:
        try:
            defaults = yaml.safe_load(read(os.path.join(directory, "values.yaml"))) or {}
        except OSError:
            defaults = {}
        vals = merge(defaults, user or {})
        crds = os.path.join(directory, "crds")
        if os.path.isdir(crds):
            found.extend(
                os.path.join(crds, n) for n in sorted(os.listdir(crds)) if n.endswith((".yaml", ".yml", ".json"))
            )
        meta = yaml.safe_load(read(os.path.join(directory, "Chart.yaml"))) or {}
        conditions = {d.get("alias") or d.get("name"): d.get("condition") for d in meta.get("dependencies") or []}
        charts = os.path.join(directory, "charts")
        if not os.path.isdir(charts):
            return
        for sub in sorted(os.listdir(charts)):
            sub_dir = os.path.join(charts, sub)
            if not os.path.isfile(os.path.join(sub_dir, "Chart.yaml")):
                continue
            name = (yaml.safe_load(read(os.path.join(sub_dir, "Chart.yaml"))) or {}).get("name", sub)
            if dependency_enabled(conditions.get(name), vals):
                walk(sub_dir, vals.get(name) if isinstance(vals, Mapping) else None)

    walk(chart_dir, values)
    return found


def chart_default_values(chart_dir: str) -> dict[str, Any]:
    """The chart's values.yaml with each dependency chart's defaults under its name (as Helm merges them), so
    keys of subcharts (for example kmm.controller.manager.tolerations) are known keys of the parent chart."""
    import os

    import yaml

    def load(path: str) -> Any:
        try:
            with open(path, encoding="utf-8") as f:
                return yaml.safe_load(f) or {}
        except OSError:
            return {}

    values = load(os.path.join(chart_dir, "values.yaml"))
    values = values if isinstance(values, dict) else {}
    charts = os.path.join(chart_dir, "charts")
    for sub in sorted(os.listdir(charts)) if os.path.isdir(charts) else []:
        sub_dir = os.path.join(charts, sub)
        meta = load(os.path.join(sub_dir, "Chart.yaml"))
        if isinstance(meta, dict) and meta.get("name"):
            values[meta["name"]] = merge(chart_default_values(sub_dir), values.get(meta["name"]) or {})
    return values


# ------------------------------------------------------------------------------------------------ uninstall


def aggregated_cluster_roles(manifest: str) -> list[str]:
    """The ClusterRoles of a release's manifest that aggregate others (``aggregationRule``: Kueue's batch admin and
    user roles). Uninstalled with the rest, such a role is often created again at once, without Helm's labels, by
    kube-controller-manager's clusterrole-aggregation controller: a role it aggregates is deleted in the same breath,
    and the controller server-side-applies the aggregate's rules with no UID precondition (kubernetes v1.34.4
    ``pkg/controller/clusterroleaggregation``), which creates an object that is gone. ``helm uninstall --wait`` then
    waits its whole timeout for it, and the next install refuses to adopt it. Deleted first, alone, it stays gone."""
    import yaml  # a dependency of ansible-core

    names = []
    for doc in yaml.safe_load_all(manifest or ""):
        if isinstance(doc, dict) and doc.get("kind") == "ClusterRole" and doc.get("aggregationRule"):
            names.append(str((doc.get("metadata") or {}).get("name")))
    return names


def owned_by_release(metadata: Mapping[str, Any] | None, name: str, namespace: str) -> bool:
    """Whether an object carries Helm's ownership annotations of release ``namespace/name``."""
    annotations = (metadata or {}).get("annotations") or {}
    return (
        annotations.get("meta.helm.sh/release-name") == name
        and annotations.get("meta.helm.sh/release-namespace") == namespace
    )
