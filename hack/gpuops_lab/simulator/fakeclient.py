"""An in-memory `KubeClient` for unit tests of the simulator and its handlers (no network).

It keeps objects per kind with a global resourceVersion counter, an event history per kind for watches
(`compact()` drops it, so watching from an older resourceVersion gets 410 Gone), approximates merge,
strategic-merge (conditions/addresses merge by `type`, other lists are replaced) and server-side apply
(deep merge; map keys a field manager applied before and leaves out now are removed, as the API server
does for the fields that manager owns), deletes dependents by ownerReferences, records every write in
`writes`, and can be told to fail the next calls of an operation (`fail_next`).
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from .framework import ApiError, Key, Obj

CLUSTER_SCOPED = frozenset(
    {
        ("v1", "Node"),
        ("v1", "Namespace"),
        ("v1", "PersistentVolume"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        ("storage.k8s.io/v1", "StorageClass"),
        ("node.k8s.io/v1", "RuntimeClass"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
    }
)

_MERGE_BY_TYPE = frozenset({"conditions", "addresses"})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def prune_unapplied(obj: Any, before: Any, after: Any) -> None:
    """Remove from `obj` the map keys the previous apply (`before`) set and this one (`after`) does not."""
    if not (isinstance(obj, dict) and isinstance(before, Mapping) and isinstance(after, Mapping)):
        return
    for k, v in before.items():
        if k not in after:
            obj.pop(k, None)
        else:
            prune_unapplied(obj.get(k), v, after[k])


def strategic_merge_patch(target: Any, patch: Any, field: str | None = None) -> Any:
    """Approximates Kubernetes strategic merge patch for the fields the simulator writes."""
    if isinstance(patch, list):
        if field in _MERGE_BY_TYPE and isinstance(target, list) and all(isinstance(p, Mapping) for p in patch):
            out = [dict(t) for t in target]
            for p in patch:
                for i, t in enumerate(out):
                    if t.get("type") == p.get("type"):
                        out[i] = strategic_merge_patch(t, p)
                        break
                else:
                    out.append({k: v for k, v in p.items() if v is not None})
            return out
        return copy.deepcopy(patch)
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = strategic_merge_patch(out.get(k), v, k)
    return out


class _FakeWatch:
    def __init__(
        self, client: FakeKubeClient, kind: tuple[str, str], namespace: str | None, start: int, timeout: float
    ) -> None:
        self._client = client
        self._kind = kind
        self._namespace = namespace
        self._pos = start
        self._deadline = time.monotonic() + timeout
        self._closed = False

    def __iter__(self) -> Iterator[Obj]:
        c = self._client
        while True:
            with c.cond:
                if self._pos < c.compacted.get(self._kind, 0):
                    yield {
                        "type": "ERROR",
                        "object": {
                            "kind": "Status",
                            "code": 410,
                            "reason": "Expired",
                            "message": "too old resource version",
                        },
                    }
                    return
                pending = [e for e in c.history.get(self._kind, []) if e[0] > self._pos]
                if not pending:
                    remaining = self._deadline - time.monotonic()
                    if self._closed or remaining <= 0:
                        return
                    c.cond.wait(min(remaining, 0.05))
                    continue
            for rv, etype, obj in pending:
                if self._closed:
                    return
                self._pos = rv
                ns = (obj.get("metadata") or {}).get("namespace")
                if self._namespace is None or ns == self._namespace:
                    yield {"type": etype, "object": copy.deepcopy(obj)}

    def close(self) -> None:
        self._closed = True
        with self._client.cond:
            self._client.cond.notify_all()


class FakeKubeClient:
    """In-memory API server for tests; see the module docstring."""

    def __init__(self, cluster_scoped: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset()) -> None:
        self.cluster_scoped = set(CLUSTER_SCOPED) | set(cluster_scoped)
        self.objects: dict[tuple[str, str], dict[Key, Obj]] = {}
        self.history: dict[tuple[str, str], list[tuple[int, str, Obj]]] = {}
        self.compacted: dict[tuple[str, str], int] = {}
        self.not_served: set[tuple[str, str]] = set()
        self.rv = 0
        self.cond = threading.Condition(threading.RLock())
        self.writes: list[tuple[str, str, str, Any]] = []  # (verb, kind, key, body)
        self.calls: list[tuple[str, str]] = []  # (verb, kind) of every call
        self._failures: dict[str, list[BaseException]] = {}
        self._applied: dict[tuple[str, str, Key, str], Obj] = {}  # last apply per object and field manager
        self.watches_opened = 0

    # -- test helpers ------------------------------------------------------------------------------
    def fail_next(self, verb: str, *errors: BaseException) -> None:
        """The next calls of `verb` (list, watch, get, create, apply, patch, delete) raise `errors`."""
        with self.cond:
            self._failures.setdefault(verb, []).extend(errors)

    def compact(self, api_version: str, kind: str) -> None:
        """Forget the event history of a kind: watches from an older resourceVersion get 410 Gone."""
        with self.cond:
            self.compacted[(api_version, kind)] = self.rv
            self.history[(api_version, kind)] = []
            self.cond.notify_all()

    def add(self, obj: Mapping[str, Any]) -> Obj:
        """Create an object (alias of create, not recorded in `writes`)."""
        return self._create(obj, record=False)

    def obj(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        with self.cond:
            found = self.objects.get((api_version, kind), {}).get(Key(namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def writes_of(self, verb: str | None = None, kind: str | None = None) -> list[tuple[str, str, str, Any]]:
        return [w for w in self.writes if (verb is None or w[0] == verb) and (kind is None or w[1] == kind)]

    # -- internals ---------------------------------------------------------------------------------
    def _check(self, verb: str, api_version: str, kind: str) -> None:
        self.calls.append((verb, kind))
        errors = self._failures.get(verb)
        if errors:
            raise errors.pop(0)
        if (api_version, kind) in self.not_served:
            raise ApiError(404, f"{kind}.{api_version} is not served")

    def _bump(self, obj: Obj) -> None:
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)

    def _event(self, etype: str, obj: Obj) -> None:
        k = (obj["apiVersion"], obj["kind"])
        self.history.setdefault(k, []).append((self.rv, etype, copy.deepcopy(obj)))
        self.cond.notify_all()

    def _key(self, api_version: str, kind: str, obj_or_meta: Mapping[str, Any]) -> Key:
        meta = obj_or_meta.get("metadata", obj_or_meta)
        ns = meta.get("namespace") or None
        if (api_version, kind) in self.cluster_scoped:
            ns = None
        elif ns is None:
            raise ApiError(422, f"{kind} {meta.get('name')}: namespace is required")
        return Key(ns, meta["name"])

    def _create(self, manifest: Mapping[str, Any], record: bool = True) -> Obj:
        obj = copy.deepcopy(dict(manifest))
        av, kind = obj["apiVersion"], obj["kind"]
        with self.cond:
            key = self._key(av, kind, obj)
            store = self.objects.setdefault((av, kind), {})
            if key in store:
                raise ApiError(409, f"{kind} {key} already exists")
            meta = obj.setdefault("metadata", {})
            if key.namespace is None:
                meta.pop("namespace", None)
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", "2024-01-01T00:00:00Z")
            meta["generation"] = 1
            self._bump(obj)
            store[key] = obj
            self._event("ADDED", obj)
            if record:
                self.writes.append(("create", kind, str(key), copy.deepcopy(dict(manifest))))
            return copy.deepcopy(obj)

    # -- KubeClient --------------------------------------------------------------------------------
    def is_namespaced(self, api_version: str, kind: str) -> bool:
        return (api_version, kind) not in self.cluster_scoped

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> tuple[list[Obj], str]:
        with self.cond:
            self._check("list", api_version, kind)
            items = [
                copy.deepcopy(o)
                for k, o in sorted(
                    self.objects.get((api_version, kind), {}).items(),
                    key=lambda kv: (kv[0].namespace or "", kv[0].name),
                )
                if namespace is None or k.namespace == namespace
            ]
            for item in items:  # like the API server: list items carry no apiVersion/kind
                item.pop("apiVersion", None)
                item.pop("kind", None)
            return items, str(self.rv)

    def watch(
        self, api_version: str, kind: str, namespace: str | None, resource_version: str | None, timeout_seconds: float
    ) -> _FakeWatch:
        with self.cond:
            self._check("watch", api_version, kind)
            self.watches_opened += 1
            start = int(resource_version) if resource_version else self.rv
            return _FakeWatch(self, (api_version, kind), namespace, start, timeout_seconds)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj:
        with self.cond:
            self._check("get", api_version, kind)
            found = self.obj(api_version, kind, name, None if (api_version, kind) in self.cluster_scoped else namespace)
            if found is None:
                raise ApiError(404, f"{kind} {Key(namespace, name)} not found")
            return found

    def create(self, manifest: Mapping[str, Any]) -> Obj:
        with self.cond:
            self._check("create", manifest["apiVersion"], manifest["kind"])
            return self._create(manifest)

    def apply(self, manifest: Mapping[str, Any], field_manager: str) -> Obj:
        av, kind = manifest["apiVersion"], manifest["kind"]
        with self.cond:
            self._check("apply", av, kind)
            key = self._key(av, kind, manifest)
            self.writes.append(("apply", kind, str(key), copy.deepcopy(dict(manifest))))
            store = self.objects.setdefault((av, kind), {})
            applied = {k: v for k, v in manifest.items() if k != "status"}
            before = self._applied.get((av, kind, key, field_manager))
            self._applied[(av, kind, key, field_manager)] = copy.deepcopy(applied)
            if key not in store:
                return self._create(manifest, record=False)
            obj = copy.deepcopy(store[key])
            if before is not None:
                prune_unapplied(obj, before, applied)
            obj = strategic_merge_patch(obj, applied)
            if obj != store[key]:
                obj["metadata"]["generation"] = int(obj["metadata"].get("generation", 1)) + 1
                self._bump(obj)
                store[key] = obj
                self._event("MODIFIED", obj)
            return copy.deepcopy(store[key])

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: Mapping[str, Any],
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> Obj:
        with self.cond:
            self._check("patch", api_version, kind)
            key = self._key(api_version, kind, {"name": name, "namespace": namespace})
            store = self.objects.get((api_version, kind), {})
            if key not in store:
                raise ApiError(404, f"{kind} {key} not found")
            self.writes.append(
                (f"patch/{subresource}" if subresource else "patch", kind, str(key), copy.deepcopy(dict(body)))
            )
            if subresource == "status":
                body = {"status": body.get("status") or {}}
            else:
                body = {k: v for k, v in body.items() if k != "status"}
            fn = merge_patch if patch_type == "merge" else strategic_merge_patch
            obj = fn(store[key], body)
            if obj != store[key]:
                self._bump(obj)
                store[key] = obj
                self._event("MODIFIED", obj)
            return copy.deepcopy(store[key])

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        with self.cond:
            self._check("delete", api_version, kind)
            key = self._key(api_version, kind, {"name": name, "namespace": namespace})
            store = self.objects.get((api_version, kind), {})
            if key not in store:
                raise ApiError(404, f"{kind} {key} not found")
            self.writes.append(("delete", kind, str(key), None))
            self._remove(store, key)

    def _remove(self, store: dict[Key, Obj], key: Key) -> None:
        obj = store.pop(key)
        for applied in [a for a in self._applied if a[:3] == (obj["apiVersion"], obj["kind"], key)]:
            del self._applied[applied]
        self._bump(obj)
        self._event("DELETED", obj)
        uid = obj["metadata"].get("uid")
        for other in list(self.objects.values()):
            for okey, o in list(other.items()):
                refs = (o.get("metadata") or {}).get("ownerReferences") or []
                if okey in other and any(r.get("uid") == uid for r in refs):
                    self._remove(other, okey)


# -- object builders for tests -------------------------------------------------------------------------


def make_node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
) -> Obj:
    res = dict(allocatable or {"cpu": "8", "memory": "32Gi", "pods": "110"})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
        "status": {
            "capacity": dict(res),
            "allocatable": dict(res),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def make_daemonset(
    name: str,
    namespace: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    image: str = "example.com/plugin:1",
) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }


def make_pod(
    name: str,
    namespace: str,
    node: str | None,
    *,
    owner: Mapping[str, Any] | None = None,
    ready: bool = True,
    containers: tuple[str, ...] = ("main",),
    init_containers: tuple[str, ...] = (),
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """A pod bound to `node`, Running/Ready like kwok makes it (or Pending when ready=False), owned by
    `owner` (an object with metadata.uid, e.g. what FakeKubeClient.add returned)."""
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"].get("uid", ""),
                "controller": True,
            }
        ]
    spec: Obj = {"containers": [{"name": c, "image": f"example.com/{c}:1"} for c in containers]}
    if init_containers:
        spec["initContainers"] = [{"name": c, "image": f"example.com/{c}:1"} for c in init_containers]
    if node:
        spec["nodeName"] = node
    flag = "True" if ready else "False"
    status: Obj = {
        "phase": "Running" if ready else "Pending",
        "conditions": [{"type": t, "status": flag} for t in ("Initialized", "Ready", "ContainersReady")],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
