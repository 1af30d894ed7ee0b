# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of gpuops.platform.k8s_apply: kubernetes.core.k8s (its own action plugin, so kubeconfig, src and
template behave as there), except in check mode for the objects whose namespace does not exist yet - a namespace the
run creates earlier is only planned in check mode, and the API server cannot dry-run an object in it (``namespaces
"x" not found``) - or whose kind is not served yet (its CRD comes with a release the run installs earlier). Those are
reported as would-create (changed, with their diff); the others are dry-run as usual. The splits are
``_owned.split_on_missing_kinds`` and ``_owned.split_on_missing_namespaces``.

With ``prune`` (a role's owner labels and kinds, in delete order), the same task then reads the objects of those kinds
that carry the labels (one cluster_objects_info run; a kind not served has none) and deletes, in that order and each
waited on, the ones ``definition`` does not hold (``_owned.prune_objects``): apply and prune in one task. In check
mode the deletions are kubernetes.core.k8s's check mode (named, nothing deleted).

With ``webhook_wait`` (seconds), an apply that failed because the API server could not call an admission webhook
(``_owned.webhook_unanswered``) is tried again every 2 s until that long has passed; any other failure ends it."""

from __future__ import annotations

import time
from typing import Any

import yaml
from ansible.plugins.action import ActionBase
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s, _owned

K8S = "kubernetes.core.k8s"
# the connection options a namespace read takes from the task (kubernetes.core's k8s_auth_options)
AUTH = (
    "kubeconfig",
    "context",
    "host",
    "api_key",
    "username",
    "password",
    "validate_certs",
    "ca_cert",
    "client_cert",
    "client_key",
    "proxy",
    "no_proxy",
    "proxy_headers",
    "persist_config",
    "impersonate_user",
    "impersonate_groups",
)


# the connection options gpuops.platform.cluster_objects_info takes
READER_AUTH = tuple(_k8s.AUTH_ARG_SPEC)


def definitions_of(definition: Any) -> list[dict[str, Any]] | None:
    """The objects of a task's ``definition`` (a dict, a list, or YAML text of one or more documents); None when
    there is none (the task names its object by kind and name, or uses src or template)."""
    if definition is None:
        return None
    docs = list(yaml.safe_load_all(definition)) if isinstance(definition, str) else definition
    if isinstance(docs, dict):
        docs = [docs]
    if not isinstance(docs, list) or not all(isinstance(d, dict) for d in docs if d is not None):
        return None
    return [d for d in docs if d]


def _ref(meta: dict[str, Any]) -> str:
    """``namespace/name`` (``name`` for a cluster-scoped object)."""
    return "/".join(filter(None, [meta.get("namespace"), meta["name"]]))


def _as_list(diff: Any) -> list[Any]:
    """A task's ``diff`` as a list (one object's diff, several objects', or none)."""
    if not diff:
        return []
    return list(diff) if isinstance(diff, list) else [diff]


def merge_results(applied: dict[str, Any] | None, planned: list[dict[str, Any]], diff: bool) -> dict[str, Any]:
    """One task result from kubernetes.core.k8s's (``applied``: None when every object was planned) and the planned
    creations, shaped as kubernetes.core.k8s shapes one (a single object) or several (``result.results``)."""
    if not diff:
        planned = [{k: v for k, v in p.items() if k != "diff"} for p in planned]
    if applied is None and len(planned) == 1:
        return planned[0]
    results: list[dict[str, Any]] = []
    if applied is not None:
        inner = applied.get("result") or {}
        results = list(inner["results"]) if isinstance(inner, dict) and "results" in inner else [applied]
    results += planned
    out: dict[str, Any] = {"changed": any(r.get("changed") for r in results), "result": {"results": results}}
    if diff:
        diffs = [r["diff"] for r in results if r.get("diff")]
        if diffs:
            out["diff"] = diffs
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _run_k8s(self, module: str, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        task = self._task.copy()
        task.args = args
        task.action = module
        action = self._shared_loader_obj.action_loader.get(
            module,
            task=task,
            connection=self._connection,
            play_context=self._play_context,
            loader=self._loader,
            templar=self._templar,
            shared_loader_obj=self._shared_loader_obj,
        )
        return action.run(task_vars=task_vars)

    def _missing_kinds(
        self, objs: list[dict[str, Any]], auth: dict[str, Any], task_vars: dict[str, Any]
    ) -> list[tuple[str, str]] | dict[str, Any]:
        """The (apiVersion, kind) pairs of ``objs`` the API server does not serve, from one cluster_objects_info run
        (one read of one object per custom kind, by name); the failed result when the server could not be asked."""
        kinds = _owned.custom_kinds(objs)
        if not kinds:
            return []
        queries = []
        for api_version, kind in kinds:
            first = next(o for o in objs if (o.get("apiVersion"), o.get("kind")) == (api_version, kind))
            name = (first.get("metadata") or {}).get("name")
            queries.append({"api_version": api_version, "kind": kind, "name": name, "metadata_only": True})
        read = self._read(queries, auth, task_vars)
        if read.get("failed"):
            return read
        return [kinds[i] for i, r in enumerate(read.get("results") or []) if r.get("api_found") is False]

    def _read(self, queries: list[dict[str, Any]], auth: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """One gpuops.platform.cluster_objects_info run of ``queries`` with the task's connection options."""
        supported = {k: v for k, v in auth.items() if k in READER_AUTH}
        return self._execute_module(
            module_name="gpuops.platform.cluster_objects_info",
            module_args={**supported, "queries": queries},
            task_vars=task_vars,
        )

    def _prune(
        self, spec: dict[str, Any], objs: list[dict[str, Any]], auth: dict[str, Any], task_vars: dict[str, Any]
    ) -> dict[str, Any]:
        """Delete the objects of ``spec``'s kinds carrying its labels that ``objs`` does not hold (in the kinds'
        order, each waited on); the result has ``pruned`` (``Kind namespace/name`` each) and, when something was
        deleted, kubernetes.core.k8s's result of the deletion."""
        selector = _owned.selector(spec["labels"])
        queries = [
            {
                "api_version": k["api_version"],
                "kind": k["kind"],
                "label_selectors": [selector],
                **({"namespace": k["namespace"]} if k.get("namespace") else {}),
            }
            for k in spec["kinds"]
        ]
        read = self._read(queries, auth, task_vars)
        if read.get("failed"):
            return read
        live = [o for r in read.get("results") or [] for o in r.get("resources") or []]
        gone = _owned.prune_objects(objs, live, spec["labels"], [k["kind"] for k in spec["kinds"]])
        names = [f"{o['kind']} {_ref(o['metadata'])}" for o in gone]
        if not gone:
            return {"changed": False, "pruned": []}
        deleted = self._run_k8s(
            K8S,
            {
                **auth,
                "definition": gone,
                "state": "absent",
                "wait": True,
                "wait_sleep": 1,
                "wait_timeout": spec.get("wait_timeout", 120),
            },
            task_vars,
        )
        return {**deleted, "pruned": names}

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        prune = args.pop("prune", None)
        self._webhook_wait = int(args.pop("webhook_wait", 0) or 0)
        if prune is None:
            result.update(self._apply(args, task_vars))
            return result
        if isinstance(prune, dict) and isinstance(prune.get("wait_timeout"), str) and prune["wait_timeout"].isdigit():
            prune = {**prune, "wait_timeout": int(prune["wait_timeout"])}
        errors = _owned.prune_spec_errors(prune)
        objs = definitions_of(args.get("definition"))
        if objs is None and args.get("definition") is not None or args.get("state", "present") != "present":
            errors.append("prune needs state present and the objects given in definition (not src or a template)")
        if errors:
            result.update(failed=True, msg="gpuops.platform.k8s_apply: " + "; ".join(errors))
            return result
        objs = objs or []
        applied = self._apply(args, task_vars) if objs else {"changed": False}
        if applied.get("failed"):
            result.update(applied)
            return result
        auth = {k: args[k] for k in AUTH if k in args}
        pruned = self._prune(prune, objs, auth, task_vars)
        if pruned.get("failed"):  # after the apply: its change stands (a rerun finishes the prune)
            result.update(pruned, changed=bool(applied.get("changed")))
            return result
        result.update(applied)
        result["pruned"] = pruned["pruned"]
        if pruned.get("changed"):
            result["changed"] = True
            result["prune_result"] = pruned.get("result")
            if pruned.get("diff"):
                result["diff"] = [*_as_list(applied.get("diff")), *_as_list(pruned.get("diff"))]
        return result

    def _apply(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """:meth:`_apply_once`, tried again while an admission webhook is not answered, up to ``webhook_wait``."""
        deadline = time.monotonic() + getattr(self, "_webhook_wait", 0)
        while True:
            result = self._apply_once(args, task_vars)
            if not _owned.webhook_unanswered(result) or time.monotonic() >= deadline:
                return result
            time.sleep(2)

    def _apply_once(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """kubernetes.core.k8s's result for ``args``; in check mode the objects it cannot dry-run planned."""
        result: dict[str, Any] = {}
        objs = definitions_of(args.get("definition"))
        if not self._task.check_mode or args.get("state", "present") == "absent" or not objs:
            return self._run_k8s(K8S, args, task_vars)
        default_ns = args.get("namespace")
        auth = {k: args[k] for k in AUTH if k in args}
        # kinds first: an object whose CRD a release of this run installs first cannot be dry-run (no such kind). Asked
        # of the API server's discovery itself (cluster_objects_info): kubernetes.core's client trusts a discovery
        # cache kept per server URL, which still lists the kinds of a cluster recreated at the same address.
        missing = self._missing_kinds(objs, auth, task_vars)
        if isinstance(missing, dict):  # the API server could not be asked (its invocation says so): that failure
            result.update(missing)
            return result
        objs, no_kind = _owned.split_on_missing_kinds(objs, missing)
        wanted = {(o.get("metadata") or {}).get("namespace") or default_ns for o in objs} - {None, ""}
        live: list[str] | None = None
        if wanted:
            read = self._run_k8s(
                "kubernetes.core.k8s_info", {**auth, "kind": "Namespace", "api_version": "v1"}, task_vars
            )
            if read.get("failed"):  # the namespaces could not be read (its invocation says so): that failure
                result.update(read)
                return result
            live = [r["metadata"]["name"] for r in read.get("resources") or []]
        apply, no_ns = _owned.split_on_missing_namespaces(objs, live, default_ns) if live is not None else (objs, [])
        applied = self._run_k8s(K8S, {**args, "definition": apply}, task_vars) if apply else None
        if applied is not None and applied.get("failed"):
            result.update(applied)
            return result
        diff = bool(self._task.diff if self._task.diff is not None else self._play_context.diff)
        planned = [_owned.planned_creation(p, default_ns) for p in no_ns]
        planned += [_owned.planned_creation(p, default_ns, missing="kind") for p in no_kind]
        result.update(merge_results(applied, planned, diff))
        return result
