"""The Alertmanager webhook event source (extensions/eda/plugins/event_source/alertmanager.py) through aiohttp's test
client: one event per alert, bad bodies refused with 400 and the server still serving, repeats and out-of-order
alerts dropped, the rate limit answered with 503 (Alertmanager retries 5xx answers only) and the deferred alerts
passed on when Alertmanager retries."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from eda_payloads import alert, notification


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(
    source: Any,
    scenario: Callable[[TestClient, asyncio.Queue, Clock], Awaitable[None]],
    queue_size: int = 0,
    **args: Any,
) -> None:
    """Run scenario(client, queue, clock) against a source app built with these arguments; queue_size bounds the
    rulebook's queue (ansible-rulebook's holds one event)."""

    async def main() -> None:
        queue: asyncio.Queue = asyncio.Queue(queue_size)
        clock = Clock()
        app = source.make_app(queue, source.Settings.from_args(args), clock)
        async with TestClient(TestServer(app)) as client:
            await scenario(client, queue, clock)

    asyncio.run(main())


async def drain(queue: asyncio.Queue) -> list[dict]:
    """The events the source's backlog forwarded to the rulebook's queue."""
    await asyncio.sleep(0.05)
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


def test_one_event_per_alert(source):
    xid79 = alert("GPUXidFallenOffBus", UUID="GPU-1", pci_bus_id="00000000:18:00.0", gpu="0", err_code="79")
    thermal = alert("GPUThermalThrottling", severity="warning", gpu="1")

    async def scenario(client, queue, clock):
        resp = await client.post("/alerts", json=notification(xid79, thermal))
        assert resp.status == 200, await resp.text()
        assert (await resp.json())["accepted"] == 2
        events = await drain(queue)
        assert [e["alert"] for e in events] == [xid79, thermal]
        assert events[0]["meta"] == {
            "endpoint": "/alerts",
            "receiver": "gpuops-remediation",
            "group_key": notification()["groupKey"],
        }
        assert "hosts" not in events[0]["meta"]  # the playbook runs against its own hosts, not the alert's node

    run(source, scenario)


BAD_BODIES = [
    (b"not json", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (b"{}", "no alerts list"),
    (json.dumps({"alerts": "x"}).encode(), "no alerts list"),
    (json.dumps({"alerts": [1]}).encode(), "must be an object"),
    (json.dumps({"alerts": [{"status": "firing", "labels": {}}]}).encode(), "alertname is missing"),
    (json.dumps({"alerts": [{"status": "pending", "labels": {"alertname": "X"}}]}).encode(), "status must be"),
    (json.dumps({"alerts": [{"status": "firing", "labels": {"alertname": 3}}]}).encode(), "object of strings"),
    (json.dumps({"alerts": [{**alert("X"), "annotations": []}]}).encode(), "annotations"),
    (json.dumps({"alerts": [{**alert("X"), "startsAt": 5}]}).encode(), "startsAt must be a string"),
]


@pytest.mark.parametrize(("body", "reason"), BAD_BODIES, ids=[r for _b, r in BAD_BODIES])
def test_bad_body_is_refused_and_the_source_keeps_serving(source, body, reason):
    async def scenario(client, queue, clock):
        resp = await client.post("/alerts", data=body, headers={"Content-Type": "application/json"})
        assert resp.status == 400
        assert reason in (await resp.json())["error"]
        assert await drain(queue) == []
        good = await client.post("/alerts", json=notification(alert("GPUXidFallenOffBus")))
        assert good.status == 200
        assert len(await drain(queue)) == 1

    run(source, scenario)


def test_invalid_alert_is_skipped_and_the_valid_ones_pass(source):
    good = alert("GPURowRemapFailure")

    async def scenario(client, queue, clock):
        resp = await client.post("/alerts", json=notification({"status": "firing", "labels": {}}, good))
        body = await resp.json()
        assert resp.status == 200
        assert body["accepted"] == 1
        assert body["invalid"] == ["alerts[0]: labels.alertname is missing"]
        assert [e["alert"] for e in await drain(queue)] == [good]

    run(source, scenario)


def test_body_over_the_limit_is_refused(source):
    async def scenario(client, queue, clock):
        payload = notification(*(alert("GPUXidFallenOffBus", node=f"n{i}") for i in range(50)))
        resp = await client.post("/alerts", json=payload)
        assert resp.status == 413
        assert await drain(queue) == []

    run(source, scenario, max_body_bytes=2048)


def test_repeats_within_the_window_are_dropped(source):
    a = alert("GPUXidFallenOffBus")

    async def scenario(client, queue, clock):
        for _repeat in range(3):  # Alertmanager's repeat notifications
            assert (await client.post("/alerts", json=notification(a))).status == 200
            clock.now += 10
        assert len(await drain(queue)) == 1
        resolved = {**a, "status": "resolved"}
        assert (await (await client.post("/alerts", json=notification(resolved))).json())["accepted"] == 1
        assert (await (await client.post("/alerts", json=notification(resolved))).json())["duplicate"] == 1
        assert [e["alert"]["status"] for e in await drain(queue)] == ["resolved"]
        clock.now += 301  # past the window: the state is passed on again
        assert (await (await client.post("/alerts", json=notification(resolved))).json())["accepted"] == 1

    run(source, scenario, dedup_window=300)


def test_firing_after_its_resolved_is_stale(source):
    a = alert("GPUXidMemoryError")

    async def scenario(client, queue, clock):
        await client.post("/alerts", json=notification({**a, "status": "resolved"}))
        resp = await client.post("/alerts", json=notification(a))
        assert (await resp.json())["stale"] == 1
        assert [e["alert"]["status"] for e in await drain(queue)] == ["resolved"]
        again = {**a, "startsAt": "2026-11-28T09:00:00.000Z"}  # the fault came back: a new alert instance
        assert (await (await client.post("/alerts", json=notification(again))).json())["accepted"] == 1

    run(source, scenario)


def test_rate_limit_defers_and_the_retry_passes_the_rest(source):
    alerts = [alert("GPUXidFallenOffBus", node=f"node-{i}") for i in range(5)]

    async def scenario(client, queue, clock):
        resp = await client.post("/alerts", json=notification(*alerts))
        assert resp.status == 503
        assert int(resp.headers["Retry-After"]) >= 1
        assert [e["alert"] for e in await drain(queue)] == alerts[:2]
        clock.now += 1  # one token back
        resp = await client.post("/alerts", json=notification(*alerts))  # Alertmanager retries the notification
        assert resp.status == 503
        assert (await resp.json())["duplicate"] == 2
        assert [e["alert"] for e in await drain(queue)] == alerts[2:3]
        clock.now += 10
        resp = await client.post("/alerts", json=notification(*alerts))
        assert resp.status == 200
        assert [e["alert"] for e in await drain(queue)] == alerts[3:]

    run(source, scenario, rate=1, burst=2)


def test_the_answer_does_not_wait_for_the_rulebook(source):
    alerts = [alert("GPUXidFallenOffBus", node=f"node-{i}") for i in range(5)]

    async def scenario(client, queue, clock):
        # nothing takes events from the rulebook's queue (a playbook runs): the notification is answered anyway
        resp = await asyncio.wait_for(client.post("/alerts", json=notification(*alerts[:2])), timeout=5)
        assert resp.status == 200
        await asyncio.sleep(0.05)  # alert 0 waits in the rulebook's queue, alert 1 on its way there
        resp = await asyncio.wait_for(client.post("/alerts", json=notification(*alerts)), timeout=5)
        assert resp.status == 503
        assert await resp.json() == {
            "accepted": 2,
            "duplicate": 2,
            "stale": 0,
            "invalid": [],
            "error": "backlog full (2)",
        }
        assert [e["alert"] for e in await drain(queue)] == alerts[:1]
        assert [e["alert"] for e in await drain(queue)] == alerts[1:2]
        assert [e["alert"] for e in await drain(queue)] == alerts[2:3]

    run(source, scenario, queue_size=1, backlog=2)


def test_bearer_token(source):
    async def scenario(client, queue, clock):
        body = notification(alert("GPUXidFallenOffBus"))
        assert (await client.post("/alerts", json=body)).status == 401
        assert (await client.post("/alerts", json=body, headers={"Authorization": "Bearer nope"})).status == 401
        assert await drain(queue) == []
        assert (await client.post("/alerts", json=body, headers={"Authorization": "Bearer s3cret"})).status == 200
        assert len(await drain(queue)) == 1

    run(source, scenario, token="s3cret")


def test_missing_fingerprint_and_annotations_are_filled(source):
    a = alert("GPUXidFallenOffBus")
    del a["fingerprint"], a["annotations"]

    async def scenario(client, queue, clock):
        await client.post("/alerts", json=notification(a))
        (event,) = await drain(queue)
        assert event["alert"]["annotations"] == {}
        assert event["alert"]["fingerprint"] == source.fingerprint(a["labels"])

    run(source, scenario)


def test_healthz_and_other_paths(source):
    async def scenario(client, queue, clock):
        assert await (await client.get("/healthz")).text() == "ok"
        assert (await client.post("/other", json=notification(alert("X")))).status == 404

    run(source, scenario, path="/hook")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"port": "x"}, "port must be a number"),
        ({"port": 70000}, "port is out of range"),
        ({"rate": 0}, "rate must be above 0"),
        ({"burst": 0}, "burst is out of range"),
        ({"path": "alerts"}, "path must start with '/'"),
        ({"token": 5}, "token must be a string"),
        ({"prot": 1}, "unknown argument 'prot'"),
    ],
)
def test_bad_arguments(source, args, message):
    with pytest.raises(ValueError, match=message):
        source.Settings.from_args(args)


def test_arguments_from_a_rulebook_are_converted(source):
    # ansible-rulebook renders "{{ gpuops_eda_port | default(5050) }}": an int, or a string from --env-vars
    assert source.Settings.from_args({"port": "5051", "host": "0.0.0.0"}).port == 5051
    assert source.Settings.from_args({}).port == 5050
