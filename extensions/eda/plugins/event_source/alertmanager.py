# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpuops.platform.alertmanager: an ansible-rulebook event source receiving Alertmanager webhook notifications.

A small aiohttp server. Each alert of a notification becomes one event ``{"alert": {...}, "meta": {...}}`` (the
shape of ansible.eda.alertmanager's events without ``meta.hosts``: the rulebook's playbook runs against its own
hosts), where ``alert`` is the alert as Alertmanager sent it (``status``, ``labels``, ``annotations``, ``startsAt``,
``endsAt``, ``generatorURL``, ``fingerprint``) and ``meta`` names the ``endpoint``, ``receiver`` and ``group_key``.

It never stops on bad input: a body that is not an Alertmanager notification is answered ``400`` and logged, an
invalid alert inside a valid notification is logged and skipped, a body over ``max_body_bytes`` is answered ``413``.

Repeats: Alertmanager sends a firing alert again at every group change and ``repeat_interval``; an alert whose
``fingerprint``, ``status`` and ``startsAt`` were passed on within ``dedup_window`` seconds is acknowledged and
dropped. A ``firing`` that arrives after the ``resolved`` of the same alert instance (same fingerprint and
``startsAt``, out of order) is dropped as stale.

Rate limit: at most ``rate`` events per second with bursts of ``burst`` (a token bucket). Past it the notification
is answered ``503`` with ``Retry-After`` after passing on what the bucket allowed: Alertmanager's webhook notifier
retries a 5xx answer (and not a 4xx one, 429 included: prometheus/alertmanager v0.35.0 ``notify/webhook/webhook.go``
uses a ``notify.Retrier`` without retry codes), and the alerts already passed on are then repeats. The answer does not
wait for the rulebook: events wait in a backlog of ``backlog`` events (ansible-rulebook takes one event at a time
from its source); a full backlog is answered ``503`` the same way.

Arguments (all optional):
  host            address to listen on (default 127.0.0.1)
  port            TCP port (default 5050)
  path            the webhook's URL path (default /alerts); GET /healthz answers "ok"
  token           when set, a request must carry ``Authorization: Bearer <token>`` (Alertmanager's
                  ``http_config.authorization.credentials``), else 401
  dedup_window    seconds a passed-on alert state is remembered (default 300)
  rate, burst     events per second and burst size (default 5 and 50)
  backlog         events accepted and not yet taken by the rulebook, at most (default 1000)
  max_body_bytes  largest body accepted (default 1048576)

Example (a rulebook's sources):
  - gpuops.platform.alertmanager:
      host: 0.0.0.0
      port: 5050
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

LOG = logging.getLogger("gpuops.platform.alertmanager")
STATUSES = ("firing", "resolved")
MAX_REMEMBERED = 100_000  # alert states kept for deduplication at most (oldest forgotten first)


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 5050
    path: str = "/alerts"
    token: str = ""
    dedup_window: float = 300.0
    rate: float = 5.0
    burst: int = 50
    backlog: int = 1000
    max_body_bytes: int = 1048576

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> Settings:
        """The source's arguments checked; ValueError naming every bad one."""
        args = dict(args or {})
        errors = [f"unknown argument {k!r}" for k in args if k not in cls.__dataclass_fields__]
        out: dict[str, Any] = {}
        for name, kind, low in (
            ("port", int, 1),
            ("dedup_window", float, 0),
            ("rate", float, 0),
            ("burst", int, 1),
            ("backlog", int, 1),
            ("max_body_bytes", int, 1),
        ):
            if name not in args:
                continue
            value = args[name]
            try:
                number = kind(value)
            except (TypeError, ValueError):
                errors.append(f"{name} must be a number, got {value!r}")
                continue
            if isinstance(value, bool) or number < low or (name == "port" and number > 65535):
                errors.append(f"{name} is out of range: {value!r}")
                continue
            if name == "rate" and number == 0:
                errors.append("rate must be above 0 events per second")
                continue
            out[name] = number
        for name in ("host", "path", "token"):
            if name in args:
                if not isinstance(args[name], str):
                    errors.append(f"{name} must be a string, got {args[name]!r}")
                else:
                    out[name] = args[name]
        if "path" in out and not out["path"].startswith("/"):
            errors.append(f"path must start with '/', got {out['path']!r}")
        if errors:
            raise ValueError("gpuops.platform.alertmanager: " + "; ".join(errors))
        return cls(**out)


def _string_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def alert_problem(alert: Any) -> str:
    """Why an item of a notification's ``alerts`` is not an Alertmanager alert; empty when it is one."""
    if not isinstance(alert, dict):
        return f"an alert must be an object, got {type(alert).__name__}"
    if alert.get("status") not in STATUSES:
        return f"status must be one of {', '.join(STATUSES)}, got {alert.get('status')!r}"
    if not _string_map(alert.get("labels")):
        return "labels must be an object of strings"
    if not alert["labels"].get("alertname"):
        return "labels.alertname is missing"
    if "annotations" in alert and not _string_map(alert["annotations"]):
        return "annotations must be an object of strings"
    for key in ("startsAt", "endsAt", "fingerprint", "generatorURL"):
        if key in alert and not isinstance(alert[key], str):
            return f"{key} must be a string"
    return ""


def fingerprint(labels: Mapping[str, str]) -> str:
    """A stand-in for Alertmanager's fingerprint (a hash of the label set) when a sender leaves it out."""
    text = json.dumps(sorted(labels.items()), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def parse_notification(body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """(notification, its valid alerts, problems): ValueError when the body is not an Alertmanager notification."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"the body must be a JSON object, got {type(data).__name__}")
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise ValueError("the body has no alerts list: not an Alertmanager webhook notification")
    valid, problems = [], []
    for i, alert in enumerate(alerts):
        problem = alert_problem(alert)
        if problem:
            problems.append(f"alerts[{i}]: {problem}")
            continue
        alert = dict(alert)
        alert.setdefault("annotations", {})
        alert.setdefault("startsAt", "")
        alert.setdefault("fingerprint", fingerprint(alert["labels"]))
        valid.append(alert)
    if alerts and not valid:
        raise ValueError("no valid alert: " + "; ".join(problems))
    return data, valid, problems


class Dedup:
    """The alert states passed on recently: fingerprint -> (status, startsAt, when)."""

    def __init__(self, window: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.clock = clock
        self.seen: OrderedDict[str, tuple[str, str, float]] = OrderedDict()

    def verdict(self, alert: Mapping[str, Any]) -> str:
        """ "new", "duplicate" (same state passed on within the window) or "stale" (a firing after its resolved)."""
        now = self.clock()
        while self.seen and (len(self.seen) > MAX_REMEMBERED or now - next(iter(self.seen.values()))[2] >= self.window):
            self.seen.popitem(last=False)
        prev = self.seen.get(alert["fingerprint"])
        if prev is None or prev[1] != alert["startsAt"]:
            return "new"
        if prev[0] == alert["status"]:
            return "duplicate"
        return "stale" if prev[0] == "resolved" else "new"

    def record(self, alert: Mapping[str, Any]) -> None:
        self.seen.pop(alert["fingerprint"], None)
        self.seen[alert["fingerprint"]] = (alert["status"], alert["startsAt"], self.clock())


class TokenBucket:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = float(burst)
        self.last = clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def wait_seconds(self) -> int:
        return max(1, int((1 - self.tokens) / self.rate + 0.999))


def make_app(queue: Any, settings: Settings, clock: Callable[[], float] = time.monotonic) -> web.Application:
    """The webhook: POST ``settings.path`` puts one event per new alert on ``queue`` (see the module doc)."""
    dedup = Dedup(settings.dedup_window, clock)
    bucket = TokenBucket(settings.rate, settings.burst, clock)
    backlog: asyncio.Queue[dict[str, Any]] = asyncio.Queue(settings.backlog)

    async def forward(_app: web.Application) -> Any:
        async def run() -> None:
            while True:
                event = await backlog.get()
                await queue.put(event)

        task = asyncio.create_task(run())
        yield
        task.cancel()

    async def receive(request: web.Request) -> web.Response:
        peer = request.remote or "-"
        if settings.token:
            sent = request.headers.get("Authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Bearer {settings.token}".encode()):
                LOG.warning("refused a notification from %s: no or wrong bearer token", peer)
                return web.json_response({"error": "unauthorized"}, status=401)
        body = await request.read()
        try:
            data, alerts, problems = parse_notification(body)
        except ValueError as exc:
            LOG.warning("refused a notification from %s: %s", peer, exc)
            return web.json_response({"error": str(exc)}, status=400)
        for problem in problems:
            LOG.warning("skipped an alert of a notification from %s: %s", peer, problem)
        if data.get("version") not in (None, "4"):
            LOG.warning("notification version %r from %s: this source reads version 4", data.get("version"), peer)
        meta = {"endpoint": settings.path, "receiver": data.get("receiver", ""), "group_key": data.get("groupKey", "")}
        counts = {"accepted": 0, "duplicate": 0, "stale": 0}
        for alert in alerts:
            verdict = dedup.verdict(alert)
            name = f"{alert['labels']['alertname']} {alert['status']} ({alert['fingerprint']})"
            if verdict != "new":
                LOG.info("%s: %s, not passed on", name, verdict)
                counts[verdict] += 1
                continue
            full = backlog.full()
            if full or not bucket.take():
                why = f"backlog full ({settings.backlog})" if full else f"rate limit ({settings.rate:g}/s)"
                LOG.warning("%s: %s and the rest deferred", why, name)
                return web.json_response(
                    {**counts, "invalid": problems, "error": why},
                    status=503,
                    headers={"Retry-After": str(5 if full else bucket.wait_seconds())},
                )
            backlog.put_nowait({"alert": alert, "meta": dict(meta)})
            dedup.record(alert)
            counts["accepted"] += 1
            LOG.info("%s: passed on", name)
        return web.json_response({**counts, "invalid": problems})

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(client_max_size=settings.max_body_bytes)
    app.cleanup_ctx.append(forward)
    app.router.add_post(settings.path, receive)
    app.router.add_get("/healthz", healthz)
    return app


async def main(queue: Any, args: Mapping[str, Any]) -> None:
    """ansible-rulebook's entry point: serve until cancelled."""
    settings = Settings.from_args(args)
    runner = web.AppRunner(make_app(queue, settings), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, settings.host, settings.port).start()
        LOG.info("listening on http://%s:%d%s", settings.host, settings.port, settings.path)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


if __name__ == "__main__":

    class _PrintQueue:
        async def put(self, event: Any) -> None:
            print(json.dumps(event), flush=True)

    logging.basicConfig(level=logging.INFO)
    asyncio.run(main(_PrintQueue(), {}))
