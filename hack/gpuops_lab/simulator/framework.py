"""The operator simulator engine: informers (list + watch with a local cache per watched kind), a
deduplicating work queue with retry backoff, handlers that reconcile primary objects, and the context
(`Context`) handlers use to read the caches and to play the parts of GPU components on kwok nodes.

Threads: one per watched kind (list, then watch from the list's resourceVersion; re-list on 410 Gone;
reconnect with backoff on any other error) and one worker that runs reconciles one at a time and
re-enqueues every primary object every `resync_period` seconds. Objects are plain dicts (JSON as the API
server sends it); the engine talks to the API server only through a `KubeClient` (`RealClient` here,
`fakeclient.FakeKubeClient` in unit tests).
"""

from __future__ import annotations

import copy
import heapq
import json
import logging
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, NamedTuple, Protocol

from . import faults as faults_mod

Obj = dict[str, Any]

LOG = logging.getLogger("gpuops_lab.simulator")

# Annotation set on a pod before the simulator writes its status; kwok's pod-ready and pod-complete
# stages are configured (hack/gpuops_lab/kwok.py) to skip pods carrying it, so a fault-injected status
# (CrashLoopBackOff, stuck in Init) is not overwritten with Running/Ready.
MANAGED_STATUS_ANNOTATION = "sim.gpuops.io/managed-status"
FIELD_MANAGER = "gpuops-sim"

# Fields ignored when deciding whether a status write would change anything.
TIME_FIELDS = frozenset(
    {
        "lastTransitionTime",
        "lastHeartbeatTime",
        "lastProbeTime",
        "lastUpdateTime",
        "startedAt",
        "finishedAt",
        "startTime",
    }
)


# --------------------------------------------------------------------------------------------------
# Kinds, keys, errors
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """An API kind, optionally restricted to one namespace (the scope of its watch)."""

    api_version: str
    kind: str
    namespace: str | None = None

    def __str__(self) -> str:
        scope = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.kind}.{self.api_version}{scope}"

    def unscoped(self) -> Kind:
        return Kind(self.api_version, self.kind)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind


NODE = Kind("v1", "Node")
POD = Kind("v1", "Pod")
CONFIGMAP = Kind("v1", "ConfigMap")
NAMESPACE = Kind("v1", "Namespace")
DAEMONSET = Kind("apps/v1", "DaemonSet")
DEPLOYMENT = Kind("apps/v1", "Deployment")
FAULTS_CONFIGMAP_KIND = Kind("v1", "ConfigMap", faults_mod.FAULTS_NAMESPACE)


class Key(NamedTuple):
    """The key of an object: (namespace or None for cluster-scoped objects, name)."""

    namespace: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Key:
        meta = obj.get("metadata") or {}
        return cls(meta.get("namespace") or None, meta["name"])


class ApiError(Exception):
    """An error answered by the API server (or the fake client): HTTP status and message."""

    def __init__(self, status: int, message: str = "") -> None:
        super().__init__(f"{status}: {message}" if message else str(status))
        self.status = status
        self.message = message


def kind_of(obj: Mapping[str, Any]) -> Kind:
    return Kind(obj["apiVersion"], obj["kind"])


def describe(obj: Mapping[str, Any]) -> str:
    """`DaemonSet gpu-operator/nvidia-driver-daemonset` (for log lines)."""
    return f"{obj.get('kind', '?')} {Key.of(obj)}"


def rfc3339(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def backoff_delay(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff: base, 2*base, 4*base, ... capped at cap (attempt counts from 1)."""
    return min(cap, base * (2 ** min(max(0, attempt - 1), 32)))


def strip_times(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: strip_times(v) for k, v in value.items() if k not in TIME_FIELDS}
    if isinstance(value, list):
        return [strip_times(v) for v in value]
    return value


def is_subset(desired: Any, live: Any) -> bool:
    """True when `live` already has everything `desired` says (dict keys recursively, lists
    element-wise with equal length, `None` meaning absent); extra keys in `live` (defaults filled in
    by the API server, status, metadata) are ignored."""
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return False
        for k, v in desired.items():
            if v is None:
                if live.get(k) is not None:
                    return False
            elif k not in live or not is_subset(v, live[k]):
                return False
        return True
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return False
        return all(is_subset(d, v) for d, v in zip(desired, live, strict=True))
    if desired == live:
        return True
    if isinstance(desired, bool) or isinstance(live, bool):
        return False
    if isinstance(desired, int | float | str) and isinstance(live, int | float | str):
        return str(desired) == str(live)
    return False


def _conditions_subset(desired: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]] | None) -> bool:
    by_type = {c.get("type"): c for c in live or ()}
    return all(c.get("type") in by_type and is_subset(strip_times(c), by_type[c.get("type")]) for c in desired)


def _status_satisfied(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """Would a strategic-merge status patch `desired` leave `live` unchanged (time fields aside)?"""
    live = live or {}
    for k, v in desired.items():
        if k == "conditions" and isinstance(v, list):
            if not _conditions_subset(v, live.get(k)):
                return False
        elif not is_subset(strip_times({k: v}), live):
            return False
    return True


# --------------------------------------------------------------------------------------------------
# Client interface
# --------------------------------------------------------------------------------------------------


class WatchStream(Protocol):
    """An established watch: iterate for events ({"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR,
    "object": {...}}); iteration ends when the server closes the watch; close() ends it early."""

    def __iter__(self) -> Iterator[Obj]: ...

    def close(self) -> None: ...


class KubeClient(Protocol):
    """What the engine needs from the API server. Errors are raised as `ApiError`; a kind the server
    does not serve (yet) is ApiError(404)."""

    def is_namespaced(self, api_version: str, kind: str) -> bool: ...

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> tuple[list[Obj], str]: ...

    def watch(
        self, api_version: str, kind: str, namespace: str | None, resource_version: str | None, timeout_seconds: int
    ) -> WatchStream: ...

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj: ...

    def create(self, manifest: Mapping[str, Any]) -> Obj: ...

    def apply(self, manifest: Mapping[str, Any], field_manager: str) -> Obj: ...

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: Mapping[str, Any],
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> Obj: ...

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None: ...


_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}


class _HttpWatchStream:
    def __init__(self, response: Any) -> None:
        self._response = response
        self._closed = False

    def __iter__(self) -> Iterator[Obj]:
        from kubernetes.watch.watch import iter_resp_lines

        try:
            for line in iter_resp_lines(self._response):
                if self._closed:
                    return
                if line.strip():
                    yield json.loads(line)
        except Exception:
            if self._closed:
                return
            raise

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        resp = self._response
        for meth in ("shutdown", "close", "release_conn"):
            fn = getattr(resp, meth, None)
            if fn is not None:
                try:
                    fn()
                except Exception:  # noqa: BLE001 - best effort teardown
                    pass


class RealClient:
    """`KubeClient` on top of `kubernetes.dynamic.DynamicClient` (discovery) and raw requests (plain
    dict bodies and responses, streamed watches)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes.dynamic import DynamicClient

        self.api_client = api_client
        self._dyn = DynamicClient(api_client)
        self._lock = threading.Lock()

    @classmethod
    def from_kubeconfig(cls, path: str, context: str | None = None) -> RealClient:
        from kubernetes import config

        return cls(config.new_client_from_config(config_file=path, context=context))

    # -- helpers -----------------------------------------------------------------------------------
    def _resource(self, api_version: str, kind: str) -> Any:
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        try:
            with self._lock:  # the lazy discoverer is not thread-safe
                return self._dyn.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError as exc:
            raise ApiError(404, f"{kind}.{api_version} is not served") from exc

    def _request(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return self._dyn.request(method, path, body=body, serialize=False, **params)
        except ApiException as exc:
            message = str(exc.reason or "")
            if exc.body:
                try:
                    message = json.loads(exc.body).get("message") or message
                except (ValueError, AttributeError):
                    message = str(exc.body)[:500]
            raise ApiError(int(exc.status or 0), message) from None

    def _json(self, method: str, path: str, body: Any = None, **params: Any) -> Obj:
        resp = self._request(method, path, body=body, _request_timeout=(10, 60), **params)
        data = resp.data
        return json.loads(data) if data else {}

    @staticmethod
    def _path(resource: Any, name: str | None = None, namespace: str | None = None) -> str:
        return resource.path(name=name, namespace=namespace if resource.namespaced else None)

    # -- KubeClient --------------------------------------------------------------------------------
    def is_namespaced(self, api_version: str, kind: str) -> bool:
        return bool(self._resource(api_version, kind).namespaced)

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> tuple[list[Obj], str]:
        res = self._resource(api_version, kind)
        path = self._path(res, namespace=namespace)
        items: list[Obj] = []
        cont: str | None = None
        rv = ""
        while True:
            body = self._json("get", path, limit=500, _continue=cont)
            for item in body.get("items") or []:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item)
            meta = body.get("metadata") or {}
            rv = meta.get("resourceVersion") or rv
            cont = meta.get("continue")
            if not cont:
                return items, rv

    def watch(
        self, api_version: str, kind: str, namespace: str | None, resource_version: str | None, timeout_seconds: int
    ) -> WatchStream:
        res = self._resource(api_version, kind)
        resp = self._request(
            "get",
            self._path(res, namespace=namespace),
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=int(timeout_seconds),
            _request_timeout=(10, int(timeout_seconds) + 30),
        )
        return _HttpWatchStream(resp)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj:
        res = self._resource(api_version, kind)
        return self._json("get", self._path(res, name, namespace))

    def create(self, manifest: Mapping[str, Any]) -> Obj:
        res = self._resource(manifest["apiVersion"], manifest["kind"])
        ns = (manifest.get("metadata") or {}).get("namespace")
        return self._json("post", self._path(res, namespace=ns), body=dict(manifest), field_manager=FIELD_MANAGER)

    def apply(self, manifest: Mapping[str, Any], field_manager: str) -> Obj:
        res = self._resource(manifest["apiVersion"], manifest["kind"])
        meta = manifest.get("metadata") or {}
        return self._json(
            "patch",
            self._path(res, meta["name"], meta.get("namespace")),
            body=dict(manifest),
            content_type="application/apply-patch+yaml",
            field_manager=field_manager,
            force_conflicts=True,
        )

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
        res = self._resource(api_version, kind)
        path = self._path(res, name, namespace)
        if subresource:
            path = f"{path}/{subresource}"
        return self._json("patch", path, body=dict(body), content_type=_CONTENT_TYPES[patch_type])

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        res = self._resource(api_version, kind)
        self._json("delete", self._path(res, name, namespace), body={"propagationPolicy": "Background"})


# --------------------------------------------------------------------------------------------------
# Work queue
# --------------------------------------------------------------------------------------------------


class WorkQueue:
    """A deduplicating work queue (client-go semantics): an item added while queued is queued once;
    an item added while being processed is queued again when `done` is called; `add_after` delays;
    `add_rate_limited` delays by exponential backoff per item until `forget`."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, *, retry_base: float = 0.5, retry_cap: float = 60.0
    ) -> None:
        self._clock = clock
        self._retry_base = retry_base
        self._retry_cap = retry_cap
        self._cond = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._waiting: list[tuple[float, int, Hashable]] = []
        self._waiting_at: dict[Hashable, float] = {}
        self._seq = 0
        self._failures: dict[Hashable, int] = {}
        self._shutdown = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def add(self, item: Hashable) -> None:
        with self._cond:
            self._add_locked(item)

    def _add_locked(self, item: Hashable) -> None:
        if self._shutdown or item in self._dirty:
            return
        self._dirty.add(item)
        if item in self._processing:
            return
        self._queue.append(item)
        self._cond.notify()

    def add_after(self, item: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(item)
            return
        with self._cond:
            at = self._clock() + delay
            if item in self._waiting_at and self._waiting_at[item] <= at:
                return
            self._waiting_at[item] = at
            self._seq += 1
            heapq.heappush(self._waiting, (at, self._seq, item))
            self._cond.notify()

    def add_rate_limited(self, item: Hashable) -> float:
        """Schedule a retry; returns the delay used."""
        with self._cond:
            n = self._failures.get(item, 0) + 1
            self._failures[item] = n
        delay = backoff_delay(n, self._retry_base, self._retry_cap)
        self.add_after(item, delay)
        return delay

    def failures(self, item: Hashable) -> int:
        with self._cond:
            return self._failures.get(item, 0)

    def forget(self, item: Hashable) -> None:
        with self._cond:
            self._failures.pop(item, None)

    def _promote_locked(self) -> float | None:
        """Move due delayed items to the queue; return seconds until the next one (or None)."""
        now = self._clock()
        while self._waiting:
            at, _seq, item = self._waiting[0]
            if self._waiting_at.get(item) != at:
                heapq.heappop(self._waiting)  # superseded by an earlier schedule
                continue
            if at > now:
                return at - now
            heapq.heappop(self._waiting)
            del self._waiting_at[item]
            self._add_locked(item)
        return None

    def get(self, timeout: float = 0.0) -> Hashable | None:
        """The next item (marked as processing), or None after `timeout` seconds (0: don't block)."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while True:
                next_due = self._promote_locked()
                if self._queue:
                    item = self._queue.popleft()
                    self._dirty.discard(item)
                    self._processing.add(item)
                    return item
                remaining = deadline - time.monotonic()
                if self._shutdown or remaining <= 0:
                    return None
                self._cond.wait(min(remaining, next_due) if next_due is not None else remaining)

    def done(self, item: Hashable) -> None:
        with self._cond:
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                self._cond.notify()

    def pending(self) -> list[Hashable]:
        """Items queued or scheduled (for tests and debugging)."""
        with self._cond:
            return list(self._queue) + list(self._waiting_at)

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()


# --------------------------------------------------------------------------------------------------
# Informer
# --------------------------------------------------------------------------------------------------

EventCallback = Callable[[Kind, str, Obj | None, Obj | None], None]


def _rv_int(obj: Mapping[str, Any] | None) -> int | None:
    try:
        return int((obj or {}).get("metadata", {}).get("resourceVersion"))
    except (TypeError, ValueError):
        return None


class Informer:
    """List + watch one kind into a local cache; calls on_event(kind, type, old, new) for every change
    (type ADDED/MODIFIED/DELETED; for DELETED new is None and old the last state)."""

    def __init__(
        self,
        client: KubeClient,
        kind: Kind,
        on_event: EventCallback | None = None,
        *,
        watch_timeout: int = 60,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        not_served_retry: float = 10.0,
        log: logging.Logger = LOG,
    ) -> None:
        self.client = client
        self.kind = kind
        self.on_event = on_event
        self.watch_timeout = watch_timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.not_served_retry = not_served_retry
        self.log = log
        self.resource_version: str | None = None
        self.served = True
        self.synced = threading.Event()  # the first list has been loaded into the cache
        self.established = threading.Event()  # ...and the first watch is open (or the kind is not served)
        self.lists = 0  # number of (re-)lists done, for tests and logs
        self._lock = threading.RLock()
        self._cache: dict[Key, Obj] = {}
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None

    # -- cache -------------------------------------------------------------------------------------
    def get(self, key: Key) -> Obj | None:
        with self._lock:
            return self._cache.get(key)

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._cache.values())

    def keys(self) -> list[Key]:
        with self._lock:
            return list(self._cache)

    def _normalize(self, obj: Obj) -> Obj:
        obj.setdefault("apiVersion", self.kind.api_version)
        obj.setdefault("kind", self.kind.kind)
        return obj

    def _emit(self, event_type: str, old: Obj | None, new: Obj | None) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(self.kind, event_type, old, new)
        except Exception:  # never let a callback kill the watch
            self.log.exception("event handler for %s failed", self.kind)

    def write_through(self, obj: Mapping[str, Any]) -> None:
        """Store an object a write just returned, when it is newer than the cached one, so the next
        reconcile does not act on stale state before the watch event arrives (no event is emitted)."""
        if obj.get("kind") is not None and not self.kind.matches(obj):
            return
        key = Key.of(obj)
        if self.kind.namespace and key.namespace != self.kind.namespace:
            return
        with self._lock:
            cur = self._cache.get(key)
            new_rv, cur_rv = _rv_int(obj), _rv_int(cur)
            if cur is None or (new_rv is not None and cur_rv is not None and new_rv > cur_rv):
                self._cache[key] = self._normalize(copy.deepcopy(dict(obj)))

    def forget(self, key: Key) -> None:
        with self._lock:
            self._cache.pop(key, None)

    # -- list / watch ------------------------------------------------------------------------------
    def relist(self) -> bool:
        """List into the cache, emitting the differences; False when the kind is not served (the cache
        is then emptied)."""
        try:
            items, rv = self.client.list(self.kind.api_version, self.kind.kind, self.kind.namespace)
            served = True
        except ApiError as exc:
            if exc.status != 404:
                raise
            items, rv, served = [], None, False
        fresh = {Key.of(o): self._normalize(o) for o in items}
        with self._lock:
            old = self._cache
            self._cache = fresh
            self.resource_version = rv
            self.lists += 1
        if served and not self.served:
            self.log.info("watch %s: kind is served now", self.kind)
        self.served = served
        for key, obj in fresh.items():
            prev = old.get(key)
            if prev is None:
                self._emit("ADDED", None, obj)
            elif (prev.get("metadata") or {}).get("resourceVersion") != (obj.get("metadata") or {}).get(
                "resourceVersion"
            ):
                self._emit("MODIFIED", prev, obj)
        for key, prev in old.items():
            if key not in fresh:
                self._emit("DELETED", prev, None)
        self.synced.set()
        return served

    def handle_event(self, event: Mapping[str, Any]) -> None:
        etype = event.get("type")
        obj = event.get("object") or {}
        if etype == "ERROR":
            raise ApiError(int(obj.get("code") or 500), str(obj.get("message") or obj.get("reason") or ""))
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if etype == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            self.log.debug("watch %s: ignoring event type %r", self.kind, etype)
            return
        obj = self._normalize(dict(obj))
        key = Key.of(obj)
        with self._lock:
            old = self._cache.get(key)
            if etype == "DELETED":
                self._cache.pop(key, None)
            else:
                self._cache[key] = obj
            if rv:
                self.resource_version = rv
        if etype == "DELETED":
            self._emit("DELETED", obj, None)
        else:
            self._emit("ADDED" if old is None else "MODIFIED", old, obj)

    def watch_once(self, stop: threading.Event | None = None) -> None:
        """One watch request from the current resourceVersion, until the server closes it."""
        stream = self.client.watch(
            self.kind.api_version, self.kind.kind, self.kind.namespace, self.resource_version, self.watch_timeout
        )
        with self._lock:
            self._stream = stream
        self.established.set()
        try:
            for event in stream:
                if stop is not None and stop.is_set():
                    break
                self.handle_event(event)
        finally:
            with self._lock:
                self._stream = None
            stream.close()

    def run(self, stop: threading.Event, wait: Callable[[float], Any] | None = None) -> None:
        """List, then watch, until `stop` is set: re-list on 410 Gone, back off and re-list on errors,
        poll (every `not_served_retry` s at most) while the kind is not served."""
        wait = wait or stop.wait
        need_list = True
        failures = 0
        gone = 0
        while not stop.is_set():
            try:
                if need_list:
                    if not self.relist():
                        self.established.set()
                        failures += 1
                        delay = backoff_delay(failures, self.backoff_base, self.not_served_retry)
                        (self.log.info if failures == 1 else self.log.debug)(
                            "watch %s: kind not served (yet); retrying in %.1fs", self.kind, delay
                        )
                        wait(delay)
                        continue
                    need_list = False
                self.watch_once(stop)
                failures = 0
                gone = 0
            except ApiError as exc:
                if stop.is_set():
                    break
                need_list = True
                if exc.status == 410:
                    gone += 1
                    self.log.info(
                        "watch %s: resourceVersion %s is too old (410 Gone); re-listing",
                        self.kind,
                        self.resource_version,
                    )
                    if gone > 3:
                        wait(backoff_delay(gone - 3, self.backoff_base, self.backoff_cap))
                    continue
                failures += 1
                delay = backoff_delay(failures, self.backoff_base, self.backoff_cap)
                self.log.warning("watch %s failed (%s); reconnecting in %.1fs", self.kind, exc, delay)
                wait(delay)
            except Exception as exc:  # connection errors, timeouts, bad JSON...
                if stop.is_set():
                    break
                need_list = True
                failures += 1
                delay = backoff_delay(failures, self.backoff_base, self.backoff_cap)
                self.log.warning(
                    "watch %s failed (%s: %s); reconnecting in %.1fs", self.kind, type(exc).__name__, exc, delay
                )
                wait(delay)

    def start(self, stop: threading.Event) -> threading.Thread:
        self._thread = threading.Thread(
            target=self.run, args=(stop,), daemon=True, name=f"watch-{self.kind.kind}-{self.kind.namespace or 'all'}"
        )
        self._thread.start()
        return self._thread

    def close_stream(self) -> None:
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()


# --------------------------------------------------------------------------------------------------
# Cache reader
# --------------------------------------------------------------------------------------------------


def _labels_match(obj: Mapping[str, Any], labels: Mapping[str, str | None] | None) -> bool:
    if not labels:
        return True
    have = (obj.get("metadata") or {}).get("labels") or {}
    return all(k in have and (v is None or have[k] == v) for k, v in labels.items())


class Cache:
    """Reads objects from the informers' caches (deep copies: safe to modify); kinds nobody watches
    are read from the API server."""

    def __init__(self, client: KubeClient, informers: Mapping[Kind, Informer]) -> None:
        self.client = client
        self._informers = informers

    def informer_for(self, kind: Kind, namespace: str | None = None) -> Informer | None:
        base = kind.unscoped()
        inf = self._informers.get(base)
        if inf is not None:
            return inf
        ns = namespace or kind.namespace
        if ns:
            return self._informers.get(Kind(base.api_version, base.kind, ns))
        return None

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj | None:
        ns = namespace or kind.namespace
        inf = self.informer_for(kind, ns)
        if inf is not None:
            obj = inf.get(Key(ns, name))
            return copy.deepcopy(obj) if obj is not None else None
        try:
            obj = self.client.get(kind.api_version, kind.kind, name, ns)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        return obj

    def list(
        self, kind: Kind, namespace: str | None = None, labels: Mapping[str, str | None] | None = None
    ) -> list[Obj]:
        """Objects of a kind (in one namespace, or all), optionally with labels (value None: any
        value), sorted by namespace/name."""
        ns = namespace or kind.namespace
        inf = self.informer_for(kind, ns)
        if inf is not None:
            items = inf.items()
        else:
            try:
                items, _rv = self.client.list(kind.api_version, kind.kind, ns)
            except ApiError as exc:
                if exc.status == 404:
                    return []
                raise
        out = [
            copy.deepcopy(o)
            for o in items
            if (ns is None or (o.get("metadata") or {}).get("namespace") == ns) and _labels_match(o, labels)
        ]
        out.sort(key=lambda o: (str(Key.of(o).namespace or ""), Key.of(o).name))
        return out


# --------------------------------------------------------------------------------------------------
# Handlers
# --------------------------------------------------------------------------------------------------


class Handler:
    """Base class of a simulated component. Subclasses set:

    - `primary`: the kind reconciled; every change of a primary object enqueues its key.
    - `watches`: secondary kinds (Pods, Nodes, DaemonSets...); their changes are mapped back to
      primary keys by `map_to_primary(obj, cache)` (called with both the old and the new object).
    - `known_faults`: fault names the handler honours (others get a warning, once).

    and implement `reconcile(ctx, key)`, which must be idempotent: it is called for any change, after
    errors (with backoff) and every resync period. It may return a delay in seconds to be called again
    sooner. `ctx.primary` is None when the primary object is gone.
    """

    name: ClassVar[str] = ""
    primary: ClassVar[Kind]
    watches: ClassVar[Sequence[Kind]] = ()
    known_faults: ClassVar[frozenset[str]] = frozenset()

    @property
    def handler_name(self) -> str:
        return self.name or type(self).__name__

    def map_to_primary(self, obj: Obj, cache: Cache) -> Iterable[Key]:
        return ()

    def keys_for_fault_change(self, nodes: frozenset[str] | None, cache: Cache) -> Iterable[Key] | None:
        """Primary keys to reconcile when the faults of `nodes` (None: possibly all) changed; None
        (the default) means every primary object."""
        return None

    def reconcile(self, ctx: Context, key: Key) -> float | None:
        raise NotImplementedError


# --------------------------------------------------------------------------------------------------
# Context
# --------------------------------------------------------------------------------------------------

_PRIMARY: Any = object()


class Context:
    """What a reconcile sees: the caches, the faults, and write helpers that log one line per action
    (`reconcile Kind/key: <action>`) and skip writes that would change nothing."""

    def __init__(self, sim: Simulator, handler: Handler, key: Key) -> None:
        self.sim = sim
        self.handler = handler
        self.key = key
        self.client = sim.client
        self.cache = sim.cache
        self.actions: list[str] = []

    # -- reading -----------------------------------------------------------------------------------
    @property
    def primary(self) -> Obj | None:
        return self.cache.get(self.handler.primary, self.key.name, self.key.namespace)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj | None:
        return self.cache.get(kind, name, namespace)

    def list(
        self, kind: Kind, namespace: str | None = None, labels: Mapping[str, str | None] | None = None
    ) -> list[Obj]:
        return self.cache.list(kind, namespace, labels)

    def faults_for(self, node: str | Mapping[str, Any]) -> frozenset[str]:
        name = node if isinstance(node, str) else Key.of(node).name
        return self.sim.faults.faults_for(name)

    def now(self) -> datetime:
        return self.sim.wallclock()

    def log(self, message: str, *args: Any, level: int = logging.INFO) -> None:
        text = message % args if args else message
        self.actions.append(text)
        self.sim.log.log(level, "reconcile %s/%s: %s", self.handler.primary.kind, self.key, text)

    # -- internals ---------------------------------------------------------------------------------
    def _resolve(self, kind: Kind, obj: str | Mapping[str, Any], namespace: str | None = None) -> Obj:
        if isinstance(obj, Mapping):
            return dict(obj)
        found = self.get(kind, obj, namespace)
        if found is None:
            raise ApiError(404, f"{kind.kind} {Key(namespace, obj)} not found")
        return found

    def _stored(self, obj: Obj) -> Obj:
        self.sim.write_through(obj)
        return obj

    # -- generic writes ----------------------------------------------------------------------------
    def patch_status(self, obj: Mapping[str, Any], status: Mapping[str, Any]) -> Obj:
        """Merge-patch the status subresource (falls back to the object itself where the kind has no
        status subresource)."""
        obj = dict(obj)
        if _status_satisfied(status, obj.get("status")):
            return obj
        kind, key = kind_of(obj), Key.of(obj)
        body = {"status": dict(status)}
        try:
            new = self.client.patch(kind.api_version, kind.kind, key.name, key.namespace, body, "merge", "status")
        except ApiError as exc:
            if exc.status != 404:
                raise
            new = self.client.patch(kind.api_version, kind.kind, key.name, key.namespace, body, "merge")
        self.log("patched %s status: %s", describe(obj), _summarize(status))
        return self._stored(new)

    def patch_metadata(
        self,
        obj: Mapping[str, Any],
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
    ) -> Obj:
        """Merge-patch labels/annotations (value None removes the key)."""
        obj = dict(obj)
        meta = obj.get("metadata") or {}
        patch: dict[str, Any] = {}
        for field, want in (("labels", labels), ("annotations", annotations)):
            if not want:
                continue
            have = meta.get(field) or {}
            changes = {k: v for k, v in want.items() if have.get(k) != v and not (v is None and k not in have)}
            if changes:
                patch[field] = changes
        if not patch:
            return obj
        kind, key = kind_of(obj), Key.of(obj)
        new = self.client.patch(kind.api_version, kind.kind, key.name, key.namespace, {"metadata": patch}, "merge")
        for field, changes in patch.items():
            self.log("%s %s: %s", "labelled" if field == "labels" else "annotated", describe(obj), _summarize(changes))
        return self._stored(new)

    def apply_object(self, manifest: Mapping[str, Any], owner: Mapping[str, Any] | None = _PRIMARY) -> Obj:
        """Create or update (server-side apply, field manager gpuops-sim) an operand object, owned by
        `owner` (default: the primary object being reconciled; None: no owner) so that deleting the
        owner deletes it. A namespaced object may be owned by a cluster-scoped object or by one in its
        own namespace; a cluster-scoped object only by a cluster-scoped one."""
        desired = copy.deepcopy(dict(manifest))
        kind = kind_of(desired)
        meta = desired.setdefault("metadata", {})
        namespaced = self.client.is_namespaced(kind.api_version, kind.kind)
        ns = meta.get("namespace")
        if namespaced and not ns:
            raise ValueError(f"{kind.kind} {meta.get('name')}: namespaced object needs metadata.namespace")
        if not namespaced and ns:
            raise ValueError(f"{kind.kind} {meta.get('name')}: cluster-scoped object cannot have a namespace")
        owner_obj = self.primary if owner is _PRIMARY else owner
        if owner_obj is not None:
            ometa = owner_obj.get("metadata") or {}
            owner_ns = ometa.get("namespace")
            if owner_ns and not namespaced:
                raise ValueError(
                    f"cluster-scoped {kind.kind} {meta.get('name')} cannot be owned by namespaced {describe(owner_obj)}"
                )
            if owner_ns and owner_ns != ns:
                raise ValueError(
                    f"{kind.kind} {ns}/{meta.get('name')} cannot be owned by {describe(owner_obj)} in another namespace"
                )
            ref = {
                "apiVersion": owner_obj["apiVersion"],
                "kind": owner_obj["kind"],
                "name": ometa["name"],
                "uid": ometa.get("uid", ""),
                "controller": True,
                "blockOwnerDeletion": True,
            }
            refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != ref["uid"]]
            meta["ownerReferences"] = [ref, *refs]
        existing = self.get(kind, meta["name"], ns)
        if existing is not None and is_subset(desired, existing):
            return existing
        new = self.client.apply(desired, FIELD_MANAGER)
        self.log("%s %s", "created" if existing is None else "updated", describe(desired))
        return self._stored(new)

    def delete_object(
        self, obj: Mapping[str, Any] | Kind, name: str | None = None, namespace: str | None = None
    ) -> bool:
        """Delete (background propagation); False when it was already gone."""
        if isinstance(obj, Kind):
            if name is None:
                raise ValueError("delete_object(kind, name, namespace): name is required")
            kind, key = obj, Key(namespace or obj.namespace, name)
        else:
            kind, key = kind_of(obj), Key.of(obj)
        try:
            self.client.delete(kind.api_version, kind.kind, key.name, key.namespace)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        self.log("deleted %s %s", kind.kind, key)
        self.sim.forget(kind, key)
        return True

    # -- nodes -------------------------------------------------------------------------------------
    def set_unschedulable(self, node: str | Mapping[str, Any], unschedulable: bool) -> Obj:
        """Cordon (True) or uncordon (False) a node: spec.unschedulable, as `kubectl cordon` sets it."""
        node = self._resolve(NODE, node)
        if bool((node.get("spec") or {}).get("unschedulable")) == unschedulable:
            return node
        body = {"spec": {"unschedulable": True if unschedulable else None}}
        new = self.client.patch("v1", "Node", Key.of(node).name, None, body, "merge")
        self.log("%s Node %s", "cordoned" if unschedulable else "uncordoned", Key.of(node).name)
        return self._stored(new)

    def patch_node_status(
        self,
        node: str | Mapping[str, Any],
        *,
        capacity: Mapping[str, str | int | None] | None = None,
        allocatable: Mapping[str, str | int | None] | None = None,
        conditions: Sequence[Mapping[str, Any]] | None = None,
    ) -> Obj:
        """Set (value) or remove (None) capacity/allocatable resources and set node conditions
        ({type, status, reason, message}; transition times are filled in), in one strategic-merge patch
        of the node's status subresource."""
        node = self._resolve(NODE, node)
        status = node.get("status") or {}
        patch: dict[str, Any] = {}
        notes: list[str] = []
        for field, want in (("capacity", capacity), ("allocatable", allocatable)):
            have = status.get(field) or {}
            changes: dict[str, str | None] = {}
            for res, value in (want or {}).items():
                if value is None:
                    if res in have:
                        changes[res] = None
                elif str(have.get(res)) != str(value) or res not in have:
                    changes[res] = str(value)
            if changes:
                patch[field] = changes
                notes.append(f"{field} {_summarize(changes)}")
        if conditions:
            conds = self._conditions(status.get("conditions"), conditions, heartbeat=True)
            if conds:
                patch["conditions"] = conds
                notes.append("conditions " + ", ".join(f"{c['type']}={c['status']}" for c in conds))
        if not patch:
            return node
        new = self.client.patch("v1", "Node", Key.of(node).name, None, {"status": patch}, "strategic", "status")
        self.log("patched Node %s status: %s", Key.of(node).name, "; ".join(notes))
        return self._stored(new)

    def patch_node_labels(self, node: str | Mapping[str, Any], labels: Mapping[str, str | None]) -> Obj:
        return self.patch_metadata(self._resolve(NODE, node), labels=labels)

    def _conditions(
        self, have: Sequence[Mapping[str, Any]] | None, want: Sequence[Mapping[str, Any]], heartbeat: bool = False
    ) -> list[Obj]:
        """The conditions of `want` that differ from `have`, with times filled in."""
        now = rfc3339(self.now())
        current = {c.get("type"): c for c in have or ()}
        out: list[Obj] = []
        for cond in want:
            cur = current.get(cond["type"])
            if cur is not None and is_subset(strip_times(dict(cond)), cur):
                continue
            c = dict(cond)
            if cur is not None and cur.get("status") == c.get("status") and cur.get("lastTransitionTime"):
                c.setdefault("lastTransitionTime", cur["lastTransitionTime"])
            c.setdefault("lastTransitionTime", now)
            if heartbeat:
                c.setdefault("lastHeartbeatTime", now)
            out.append(c)
        return out

    # -- pods --------------------------------------------------------------------------------------
    def set_pod_status(
        self,
        pod: Mapping[str, Any],
        *,
        phase: str | None = None,
        conditions: Sequence[Mapping[str, Any]] | None = None,
        container_statuses: Sequence[Mapping[str, Any]] | None = None,
        init_container_statuses: Sequence[Mapping[str, Any]] | None = None,
        reason: str | None = None,
        message: str | None = None,
    ) -> Obj:
        """Write a pod's status as a failing component would show it. First marks the pod with
        annotation sim.gpuops.io/managed-status=true (kwok's pod stages skip such pods, so kwok does not
        put it back to Running/Ready), then strategic-merge-patches the status subresource (conditions
        merge by type; container status lists are replaced as a whole)."""
        pod = dict(pod)
        status: dict[str, Any] = {}
        if phase is not None:
            status["phase"] = phase
        if conditions is not None:
            status["conditions"] = [self._with_transition(pod, c) for c in conditions]
        if container_statuses is not None:
            status["containerStatuses"] = [dict(c) for c in container_statuses]
        if init_container_statuses is not None:
            status["initContainerStatuses"] = [dict(c) for c in init_container_statuses]
        if reason is not None:
            status["reason"] = reason
        if message is not None:
            status["message"] = message
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if annotations.get(MANAGED_STATUS_ANNOTATION) != "true":
            pod = self.patch_metadata(pod, annotations={MANAGED_STATUS_ANNOTATION: "true"})
        elif _status_satisfied(status, pod.get("status")):
            return pod
        key = Key.of(pod)
        new = self.client.patch("v1", "Pod", key.name, key.namespace, {"status": status}, "strategic", "status")
        self.log("set Pod %s status: %s", key, _pod_summary(status))
        return self._stored(new)

    def _with_transition(self, pod: Mapping[str, Any], cond: Mapping[str, Any]) -> Obj:
        c = dict(cond)
        for cur in (pod.get("status") or {}).get("conditions") or ():
            if cur.get("type") == c.get("type") and cur.get("status") == c.get("status"):
                if cur.get("lastTransitionTime"):
                    c.setdefault("lastTransitionTime", cur["lastTransitionTime"])
        c.setdefault("lastTransitionTime", rfc3339(self.now()))
        c.setdefault("lastProbeTime", None)
        return c

    def set_pod_crashloop(
        self,
        pod: str | Mapping[str, Any],
        containers: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        exit_code: int = 1,
        message: str = "",
        interval: float = 10.0,
    ) -> Obj:
        """Show `containers` (default: all) of a pod in CrashLoopBackOff: waiting reason CrashLoopBackOff,
        lastState terminated with `exit_code`, restartCount growing by one every `interval` seconds of
        wall-clock time (call it from every reconcile; the resync keeps it going), Ready=False."""
        pod = self._resolve(POD, pod, namespace)
        now = self.now()
        spec = pod.get("spec") or {}
        names = set(containers) if containers is not None else {c["name"] for c in spec.get("containers") or ()}
        current = {c.get("name"): c for c in (pod.get("status") or {}).get("containerStatuses") or ()}
        statuses: list[Obj] = []
        for c in spec.get("containers") or ():
            cur = current.get(c["name"]) or {}
            restarts = int(cur.get("restartCount") or 0)
            if c["name"] in names:
                looping = ((cur.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
                last = parse_time(((cur.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
                if not looping or last is None or (now - last).total_seconds() >= interval:
                    restarts += 1
                    last = now
                statuses.append(
                    crashloop_container_status(
                        c, restarts, last, exit_code=exit_code, message=message, pod_name=Key.of(pod).name
                    )
                )
            else:
                started = ((cur.get("state") or {}).get("running") or {}).get("startedAt")
                statuses.append(running_container_status(c, restarts, parse_time(started) or now))
        not_ready = f"containers with unready status: [{' '.join(sorted(names))}]"
        return self.set_pod_status(
            pod,
            phase="Running",
            container_statuses=statuses,
            conditions=[
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": not_ready},
                {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady", "message": not_ready},
                {"type": "PodScheduled", "status": "True"},
            ],
        )

    def set_pod_stuck_init(
        self,
        pod: str | Mapping[str, Any],
        init_container: str | None = None,
        *,
        namespace: str | None = None,
        reason: str = "PodInitializing",
        message: str = "",
    ) -> Obj:
        """Show a pod stuck in Init: the init containers before `init_container` (default: the first)
        completed, it waiting with `reason` (PodInitializing shows as `Init:N/M` in kubectl, another
        reason as `Init:<reason>`), the later ones and all containers waiting; phase Pending,
        Initialized=False, Ready=False."""
        pod = self._resolve(POD, pod, namespace)
        spec = pod.get("spec") or {}
        inits = spec.get("initContainers") or []
        if not inits:
            raise ValueError(f"Pod {Key.of(pod)} has no init containers")
        target = init_container or inits[0]["name"]
        if target not in {c["name"] for c in inits}:
            raise ValueError(f"Pod {Key.of(pod)} has no init container {target}")
        now = self.now()
        init_statuses: list[Obj] = []
        seen = False
        for c in inits:
            if c["name"] == target:
                seen = True
                init_statuses.append(waiting_container_status(c, reason, message))
            elif not seen:
                init_statuses.append(completed_container_status(c, now))
            else:
                init_statuses.append(waiting_container_status(c, "PodInitializing"))
        statuses = [waiting_container_status(c, "PodInitializing") for c in spec.get("containers") or ()]
        pending = f"containers with incomplete status: [{target}]"
        names = " ".join(c["name"] for c in spec.get("containers") or ())
        not_ready = f"containers with unready status: [{names}]"
        return self.set_pod_status(
            pod,
            phase="Pending",
            init_container_statuses=init_statuses,
            container_statuses=statuses,
            conditions=[
                {"type": "Initialized", "status": "False", "reason": "ContainersNotInitialized", "message": pending},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": not_ready},
                {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady", "message": not_ready},
                {"type": "PodScheduled", "status": "True"},
            ],
        )

    def release_pod_status(self, pod: str | Mapping[str, Any], *, namespace: str | None = None) -> Obj:
        """End a simulated failure: write a healthy Running/Ready status (restart counts kept), then
        remove the managed-status annotation. A pod the simulator does not manage is left alone."""
        pod = self._resolve(POD, pod, namespace)
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if MANAGED_STATUS_ANNOTATION not in annotations:
            return pod
        now = self.now()
        spec = pod.get("spec") or {}
        current = {c.get("name"): c for c in (pod.get("status") or {}).get("containerStatuses") or ()}
        statuses = []
        for c in spec.get("containers") or ():
            cur = current.get(c["name"]) or {}
            started = parse_time(((cur.get("state") or {}).get("running") or {}).get("startedAt"))
            statuses.append(running_container_status(c, int(cur.get("restartCount") or 0), started or now))
        inits = [completed_container_status(c, now) for c in spec.get("initContainers") or ()]
        pod = self.set_pod_status(
            pod,
            phase="Running",
            container_statuses=statuses,
            init_container_statuses=inits if inits else None,
            conditions=[
                {"type": t, "status": "True"} for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
        )
        return self.patch_metadata(pod, annotations={MANAGED_STATUS_ANNOTATION: None})


# -- container status builders (pure) ------------------------------------------------------------------


def _container_base(container: Mapping[str, Any]) -> Obj:
    return {"name": container["name"], "image": container.get("image", ""), "imageID": ""}


def running_container_status(container: Mapping[str, Any], restart_count: int, started_at: datetime) -> Obj:
    return {
        **_container_base(container),
        "ready": True,
        "started": True,
        "restartCount": restart_count,
        "state": {"running": {"startedAt": rfc3339(started_at)}},
    }


def waiting_container_status(
    container: Mapping[str, Any], reason: str, message: str = "", restart_count: int = 0
) -> Obj:
    waiting = {"reason": reason, **({"message": message} if message else {})}
    return {
        **_container_base(container),
        "ready": False,
        "started": False,
        "restartCount": restart_count,
        "state": {"waiting": waiting},
    }


def completed_container_status(container: Mapping[str, Any], finished_at: datetime) -> Obj:
    ts = rfc3339(finished_at)
    return {
        **_container_base(container),
        "ready": True,
        "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": ts, "finishedAt": ts}},
    }


def crashloop_container_status(
    container: Mapping[str, Any],
    restart_count: int,
    finished_at: datetime,
    *,
    exit_code: int = 1,
    message: str = "",
    pod_name: str = "",
) -> Obj:
    ts = rfc3339(finished_at)
    backoff = int(min(300, 10 * 2 ** max(0, restart_count - 1)))
    terminated = {"exitCode": exit_code, "reason": "Error", "startedAt": ts, "finishedAt": ts}
    if message:
        terminated["message"] = message
    return {
        **_container_base(container),
        "ready": False,
        "started": False,
        "restartCount": restart_count,
        "state": {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {backoff}s restarting failed container={container['name']} pod={pod_name}",
            }
        },
        "lastState": {"terminated": terminated},
    }


def _summarize(changes: Mapping[str, Any]) -> str:
    parts = []
    for k, v in changes.items():
        if v is None:
            parts.append(f"-{k}")
        elif isinstance(v, Mapping | list):
            parts.append(f"{k}=…")
        else:
            parts.append(f"{k}={v}")
    return ", ".join(parts)


def _pod_summary(status: Mapping[str, Any]) -> str:
    parts = []
    if "phase" in status:
        parts.append(f"phase={status['phase']}")
    for field in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(field) or ():
            state = cs.get("state") or {}
            what = next(iter(state), "?")
            reason = (state.get(what) or {}).get("reason")
            parts.append(
                f"{cs.get('name')}={what}{'(' + reason + ')' if reason else ''}"
                f"{' restarts=' + str(cs['restartCount']) if cs.get('restartCount') else ''}"
            )
    for c in status.get("conditions") or ():
        if c.get("type") in ("Ready", "Initialized"):
            parts.append(f"{c['type']}={c.get('status')}")
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------------


class Simulator:
    """Runs handlers against a cluster: `start()`, `wait_ready()`, `stop()`; or, in unit tests without
    threads, `sync()` (list every kind) and `process_pending()` (run due reconciles)."""

    def __init__(
        self,
        client: KubeClient,
        handlers: Sequence[Handler],
        *,
        resync_period: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], datetime] = lambda: datetime.now(UTC),
        watch_timeout: int = 60,
        retry_base: float = 0.5,
        retry_cap: float = 60.0,
        log: logging.Logger = LOG,
    ) -> None:
        self.client = client
        self.handlers = list(handlers)
        names = [h.handler_name for h in self.handlers]
        if len(set(names)) != len(names):
            raise ValueError(f"handler names must be unique: {names}")
        self._by_name = {h.handler_name: h for h in self.handlers}
        self.resync_period = resync_period
        self.clock = clock
        self.wallclock = wallclock
        self.log = log
        self.queue = WorkQueue(clock, retry_base=retry_base, retry_cap=retry_cap)
        kinds: list[Kind] = [NODE, FAULTS_CONFIGMAP_KIND]
        for h in self.handlers:
            kinds.append(h.primary)
            kinds.extend(h.watches)
        self.informers: dict[Kind, Informer] = {}
        for k in kinds:
            if k not in self.informers:
                self.informers[k] = Informer(client, k, self._on_event, watch_timeout=watch_timeout, log=log)
        self.cache = Cache(client, self.informers)
        known: set[str] = set()
        for h in self.handlers:
            known |= set(h.known_faults)
        self.faults = faults_mod.FaultStore(self._get_node, self._get_faults_configmap, known, log=log)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._next_resync: float | None = None

    # -- faults sources ----------------------------------------------------------------------------
    def _get_node(self, name: str) -> Obj | None:
        return self.informers[NODE].get(Key(None, name))

    def _get_faults_configmap(self) -> Obj | None:
        return self.informers[FAULTS_CONFIGMAP_KIND].get(Key(faults_mod.FAULTS_NAMESPACE, faults_mod.FAULTS_CONFIGMAP))

    # -- events ------------------------------------------------------------------------------------
    def _on_event(self, kind: Kind, event_type: str, old: Obj | None, new: Obj | None) -> None:
        for h in self.handlers:
            keys: set[Key] = set()
            if kind == h.primary:
                keys.add(Key.of(new or old or {}))
            if kind in h.watches:
                for obj in (new, old):
                    if obj is None:
                        continue
                    try:
                        keys.update(h.map_to_primary(obj, self.cache) or ())
                    except Exception:
                        self.log.exception("%s.map_to_primary failed for %s", h.handler_name, describe(obj))
            for key in keys:
                self.queue.add((h.handler_name, key))
        if kind == NODE:
            self._node_faults_event(old, new)
        elif kind == FAULTS_CONFIGMAP_KIND and Key.of(new or old or {}).name == faults_mod.FAULTS_CONFIGMAP:
            before = faults_mod.configmap_entries(old)
            after = faults_mod.configmap_entries(new)
            if before != after:
                self.faults.validate(*after.values())
                self.log.info(
                    "faults ConfigMap %s/%s changed: %s",
                    faults_mod.FAULTS_NAMESPACE,
                    faults_mod.FAULTS_CONFIGMAP,
                    faults_mod.format_entries(after) or "(none)",
                )
                changed = {n for n in set(before) | set(after) if before.get(n) != after.get(n)}
                self._faults_changed(None if faults_mod.ALL_NODES_KEYS & changed else frozenset(changed))

    def _node_faults_event(self, old: Obj | None, new: Obj | None) -> None:
        before = faults_mod.node_annotation_faults(old)
        after = faults_mod.node_annotation_faults(new)
        if before == after:
            if old is None or new is None:
                # a node appearing or leaving: it matters when the ConfigMap gives it faults
                name = Key.of(new or old or {}).name
                if self.faults.configmap_faults(name):
                    self._faults_changed(frozenset({name}))
            return
        name = Key.of(new or old or {}).name
        self.faults.validate(after)
        if old is not None and new is not None:
            self.log.info("faults of node %s changed: %s", name, ",".join(sorted(after)) or "(none)")
        self._faults_changed(frozenset({name}))

    def _faults_changed(self, nodes: frozenset[str] | None) -> None:
        for h in self.handlers:
            try:
                keys = h.keys_for_fault_change(nodes, self.cache)
            except Exception:
                self.log.exception("%s.keys_for_fault_change failed", h.handler_name)
                keys = None
            if keys is None:
                keys = self.primary_keys(h)
            for key in keys:
                self.queue.add((h.handler_name, key))

    def primary_keys(self, handler: Handler) -> list[Key]:
        inf = self.informers[handler.primary]
        return inf.keys()

    def write_through(self, obj: Mapping[str, Any]) -> None:
        if not obj or "metadata" not in obj or "kind" not in obj:
            return
        kind = kind_of(obj)
        ns = (obj.get("metadata") or {}).get("namespace")
        inf = self.cache.informer_for(kind, ns)
        if inf is not None:
            inf.write_through(obj)

    def forget(self, kind: Kind, key: Key) -> None:
        """Drop a deleted object from the cache (the watch's DELETED event will follow)."""
        inf = self.cache.informer_for(kind, key.namespace)
        if inf is not None:
            inf.forget(key)

    # -- reconcile ---------------------------------------------------------------------------------
    def resync(self) -> None:
        """Enqueue every primary object of every handler."""
        for h in self.handlers:
            for key in self.primary_keys(h):
                self.queue.add((h.handler_name, key))

    def enqueue(self, handler: Handler | str, key: Key) -> None:
        name = handler if isinstance(handler, str) else handler.handler_name
        self.queue.add((name, key))

    def _maybe_resync(self) -> float:
        """Resync when due; return seconds until the next one."""
        now = self.clock()
        if self._next_resync is None:
            self._next_resync = now + self.resync_period
        if now >= self._next_resync:
            self.resync()
            self._next_resync = now + self.resync_period
        return max(0.0, self._next_resync - now)

    def process_one(self, item: tuple[str, Key]) -> bool:
        """Reconcile one queue item; True on success. Errors are logged with their traceback and the
        item is retried with exponential backoff."""
        name, key = item
        handler = self._by_name.get(name)
        if handler is None:
            return False
        ctx = Context(self, handler, key)
        try:
            requeue = handler.reconcile(ctx, key)
        except Exception as exc:
            delay = self.queue.add_rate_limited(item)
            self.log.error(
                "reconcile %s/%s failed (attempt %d), retrying in %.1fs: %s: %s\n%s",
                handler.primary.kind,
                key,
                self.queue.failures(item),
                delay,
                type(exc).__name__,
                exc,
                traceback.format_exc().rstrip(),
            )
            return False
        self.queue.forget(item)
        if requeue:
            self.queue.add_after(item, float(requeue))
        return True

    def process_pending(self, limit: int = 1000) -> int:
        """Run every due reconcile without blocking (for tests); returns how many ran."""
        count = 0
        while count < limit:
            item = self.queue.get(timeout=0)
            if item is None:
                break
            try:
                self.process_one(item)  # type: ignore[arg-type]
            finally:
                self.queue.done(item)
            count += 1
        return count

    def sync(self) -> None:
        """List every watched kind once (no threads, for tests and one-shot use)."""
        for inf in self.informers.values():
            inf.relist()

    # -- threads -----------------------------------------------------------------------------------
    def ready(self) -> bool:
        return all(inf.established.is_set() for inf in self.informers.values())

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every kind has been listed and its watch established."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for inf in self.informers.values():
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not inf.established.wait(remaining):
                return False
        return True

    def _worker(self) -> None:
        while not self._stop.is_set():
            if self.ready():
                break
            self._stop.wait(0.05)
        self.log.debug("caches synced; worker running")
        while not self._stop.is_set():
            until_resync = self._maybe_resync()
            item = self.queue.get(timeout=min(0.5, until_resync))
            if item is None:
                continue
            try:
                self.process_one(item)  # type: ignore[arg-type]
            except Exception:  # process_one handles handler errors; this is a framework bug
                self.log.exception("worker: unexpected error")
            finally:
                self.queue.done(item)

    def start(self) -> None:
        if self._threads:
            raise RuntimeError("simulator already started")
        self._stop.clear()
        for inf in self.informers.values():
            self._threads.append(inf.start(self._stop))
        worker = threading.Thread(target=self._worker, daemon=True, name="simulator-worker")
        worker.start()
        self._threads.append(worker)
        self.log.info(
            "simulator starting: handlers %s; watching %s",
            ", ".join(h.handler_name for h in self.handlers) or "(none)",
            ", ".join(str(k) for k in self.informers),
        )

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.queue.shutdown()
        for inf in self.informers.values():
            inf.close_stream()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            self.log.debug("threads still finishing after stop: %s", ", ".join(alive))
        self._threads = []
        self.log.info("simulator stopped")

    def __enter__(self) -> Simulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
