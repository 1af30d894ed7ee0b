# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""A release's Lease on the API server (take, renew, give back) and the keeper that renews it while a long helm
command runs: every quarter of the Lease's duration, and only while the run that took it lives. When that run's
controller process is gone (killed with SIGKILL: its workers, this module and helm are orphans that would go on),
the keeper stops helm with SIGTERM (Helm then marks the release failed instead of leaving it pending) and stops
renewing, so the next run does not wait for an orphan. The decisions themselves are in _helm_release."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s
from ansible_collections.gpuops.platform.plugins.module_utils.release import _helm_release


def now() -> datetime:
    return datetime.now(timezone.utc)  # noqa: UP017 - modules run on Python < 3.11 too


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Leases:
    """coordination.k8s.io/v1 Leases in one namespace; every write carries the resourceVersion read."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        from kubernetes import client

        self.api = client.CoordinationV1Api(api_client)
        self.ns = namespace

    def read(self, name: str) -> tuple[Any, dict[str, Any] | None]:
        try:
            obj = self.api.read_namespaced_lease(name, self.ns)
        except _k8s.ApiException as exc:
            if getattr(exc, "status", None) == 404:
                return None, None
            raise
        return obj, self.api.api_client.sanitize_for_serialization(obj.spec) or {}

    def write(self, name: str, holder: str, duration: int, current: Any) -> None:
        t = stamp(now())
        spec = {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": t, "renewTime": t}
        body: Any  # the client takes the object as a dict too
        if current is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}, "spec": spec}
            self.api.create_namespaced_lease(self.ns, body)
        else:
            body = {"metadata": {"name": name, "resourceVersion": current.metadata.resource_version}, "spec": spec}
            self.api.replace_namespaced_lease(name, self.ns, body)

    def renew(self, name: str, holder: str, duration: int) -> bool:
        """Move renewTime to now when ``holder`` holds the Lease; False when another run (or nobody) holds it."""
        obj, spec = self.read(name)
        if spec is None or spec.get("holderIdentity") != holder:
            return False
        body: Any = {
            "metadata": {"name": name, "resourceVersion": obj.metadata.resource_version},
            "spec": {**spec, "leaseDurationSeconds": duration, "renewTime": stamp(now())},
        }
        self.api.replace_namespaced_lease(name, self.ns, body)
        return True

    def delete(self, name: str, current: Any) -> None:
        from kubernetes import client

        pre = client.V1Preconditions(resource_version=current.metadata.resource_version)
        self.api.delete_namespaced_lease(name, self.ns, body=client.V1DeleteOptions(preconditions=pre))

    def give_back(self, name: str, holder: str) -> bool:
        """Delete the Lease when ``holder`` holds it."""
        obj, spec = self.read(name)
        if spec is None or spec.get("holderIdentity") != holder:
            return False
        self.delete(name, obj)
        return True


# ------------------------------------------------------------------------------------------------ the run's process


def _stat(pid: int, proc: str) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state is [0], ppid [1], starttime [19]); None if gone."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()


def start_ticks(pid: int, proc: str = "/proc") -> str | None:
    """The process's start time in clock ticks since boot (pid reuse gives another); None when it is gone."""
    fields = _stat(pid, proc)
    return fields[19] if fields and len(fields) > 19 and fields[0] != "Z" else None


def ancestors(pid: int, proc: str = "/proc") -> list[int]:
    """The parent, grandparent, ... of ``pid`` up to pid 1 (Linux /proc; empty elsewhere)."""
    out: list[int] = []
    while pid > 1 and len(out) < 64:
        fields = _stat(pid, proc)
        if not fields:
            break
        pid = int(fields[1])
        out.append(pid)
    return out


def run_alive_check(holder: str, proc: str = "/proc", me: int | None = None) -> Callable[[], bool] | None:
    """A check that the run named by ``holder`` still lives, when its controller process is an ancestor of this
    module (the module runs on the controller: a local connection); None when that cannot be known here (another
    host, a holder of another format, no /proc)."""
    parsed = _helm_release.parse_holder(holder)
    if parsed is None or parsed["pid"] not in ancestors(me or os.getpid(), proc):
        return None
    pid, ticks = parsed["pid"], start_ticks(parsed["pid"], proc)
    if ticks is None:
        return None
    return lambda: start_ticks(pid, proc) == ticks


# ------------------------------------------------------------------------------------------------ the keeper

KEEPER_POLL = 1.0  # seconds between two looks at the run's process


class Keeper:
    """Renews the Lease from a thread while a command runs (``with keeper:``) and watches the run's process.

    ``renew()`` -> False when the Lease is no longer this run's; ``run_alive()`` or None (not watched). Commands
    started inside are tracked (``track`` is the runner's Popen hook) so that a dead run's helm can be stopped."""

    def __init__(
        self,
        renew: Callable[[], bool],
        interval: float,
        run_alive: Callable[[], bool] | None = None,
        poll: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.renew = renew
        self.interval = max(interval, 0.01)
        self.run_alive = run_alive
        self.poll = min(KEEPER_POLL if poll is None else poll, self.interval)
        self.clock = clock
        self.procs: list[Any] = []
        self.run_died = False
        self.lost = False
        self.errors: list[str] = []
        self.renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def track(self, popen: Any) -> None:
        self.procs.append(popen)
        if self.run_died:
            self._terminate()

    def _terminate(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)  # helm cancels and marks the release failed

    def tick(self, due: float) -> float:
        """One round: the run's process, then the renewal when due; returns the next due time."""
        if self.run_alive is not None and not self.run_died and not self.run_alive():
            self.run_died = True
            self._terminate()
            return due
        if self.run_died or self.clock() < due:
            return due
        try:
            if self.renew():
                self.renewals += 1
            else:
                self.lost = True
        except Exception as exc:  # noqa: BLE001 - an API hiccup: try again next round, report at the end
            self.errors.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return self.clock() + self.interval

    def _loop(self) -> None:
        due = self.clock() + self.interval
        while not self._stop.wait(self.poll):
            due = self.tick(due)

    def __enter__(self) -> Keeper:
        self._thread = threading.Thread(target=self._loop, name="gpuops-lease-keeper", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)  # a renewal stuck on the API server does not hold the module
