"""gpuops.platform.prometheus_query through main(), against a local HTTP server that answers as Prometheus's HTTP
API does (/api/v1/query): results by name, a refused query named, an unreachable Prometheus failing or reported, and
the GPU health check asking again until the nodes report (or the timeout)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible_collections.gpuops.platform.plugins.modules import prometheus_query


class FakePrometheus:
    """answers[query] -> vector, or a list of vectors served one per request (the last one repeated)."""

    def __init__(self, answers):
        self.answers, self.asked = answers, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query).get("query", [""])[0]
                outer.asked.append(query)
                if url.path != "/api/v1/query":
                    self._send(404, b"404 page not found")
                    return
                if query not in outer.answers:
                    body = {"status": "error", "errorType": "bad_data", "error": f"parse error in {query}"}
                    self._send(400, json.dumps(body).encode())
                    return
                got = outer.answers[query]
                if isinstance(got, tuple):  # a sequence of answers
                    got = got[min(outer.asked.count(query) - 1, len(got) - 1)]
                body = {"status": "success", "data": {"resultType": "vector", "result": got}}
                self._send(200, json.dumps(body).encode())

            def _send(self, code, body):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prom():
    servers = []

    def make(answers):
        servers.append(FakePrometheus(answers))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def vec(label, counts):
    return [{"metric": {label: k}, "value": [1, str(v)]} for k, v in counts.items()]


NODES = [
    {"metadata": {"name": "dgx-0", "labels": {"nvidia.com/gpu.count": "8"}}},
    {"metadata": {"name": "cpu-0", "labels": {}}},
]
UP = 'sum by (node) (up{job="nvidia-dcgm-exporter"} == 1)'
SERIES = "count by (Hostname) (count by (Hostname, UUID) (DCGM_FI_DEV_GPU_TEMP))"


@pytest.mark.parametrize("check_mode", [True, False])
def test_queries_by_name(run_module, prom, check_mode):
    p = prom({"up": vec("job", {"a": 1})})
    result, failed = run_module(prometheus_query, {"url": p.url, "queries": {"targets": "up"}}, check_mode=check_mode)
    assert not failed, result
    assert result["results"]["targets"] == vec("job", {"a": 1})
    assert result["reachable"] is True and result["changed"] is False and result["via"] == "url"


def test_a_refused_query_is_named(run_module, prom):
    p = prom({})
    result, failed = run_module(prometheus_query, {"url": p.url, "queries": {"bad": "sum(("}})
    assert failed
    assert "query bad (sum(()" in result["msg"] and "bad_data" in result["msg"]


@pytest.mark.parametrize(("unreachable", "fails"), [("fail", True), ("report", False)])
def test_unreachable(run_module, unreachable, fails):
    result, failed = run_module(
        prometheus_query,
        {"url": "http://127.0.0.1:9", "queries": {"x": "up"}, "unreachable": unreachable, "timeout": 2},
    )
    assert failed is fails
    assert result["reachable"] is False and result["results"] == {}
    assert "cannot be reached" in (result.get("msg") or result.get("error"))


def test_gpu_health_asks_again_until_the_node_reports(run_module, prom):
    p = prom(
        {UP: (vec("node", {}), vec("node", {"dgx-0": 1})), SERIES: (vec("Hostname", {}), vec("Hostname", {"dgx-0": 8}))}
    )
    result, failed = run_module(
        prometheus_query, {"url": p.url, "gpu_health": {"nodes": NODES, "timeout": 10, "interval": 1}}
    )
    assert not failed, result
    assert result["health"]["findings"] == []
    assert result["health"]["rows"] == [{"node": "dgx-0", "gpus": 8, "exporter_up": 1, "gpu_series": 8}]
    assert p.asked.count(UP) == 2  # the first round differed, the second did not


def test_gpu_health_names_the_node_after_the_timeout(run_module, prom):
    p = prom({UP: vec("node", {"dgx-0": 1}), SERIES: vec("Hostname", {"dgx-0": 7})})
    result, failed = run_module(prometheus_query, {"url": p.url, "gpu_health": {"nodes": NODES, "timeout": 0}})
    assert not failed  # the module reports; the role asserts
    (f,) = result["health"]["findings"]
    assert f["id"] == "monitoring-gpu-series-mismatch" and f["object"]["name"] == "dgx-0"
    assert p.asked.count(UP) == 1


def test_gpu_health_reads_the_nodes_itself_without_them(run_module, prom, monkeypatch):
    """Without gpu_health.nodes the module reads the cluster's Nodes (one reader, also with a Prometheus url)."""
    from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s

    made = []

    class Reader:
        def nodes(self):
            return NODES

    monkeypatch.setattr(_k8s, "new_reader", lambda params: made.append(params) or Reader())
    p = prom({UP: vec("node", {"dgx-0": 1}), SERIES: vec("Hostname", {"dgx-0": 8})})
    result, failed = run_module(prometheus_query, {"url": p.url, "gpu_health": {"timeout": 0}})
    assert not failed, result
    assert len(made) == 1 and result["health"]["findings"] == []
    assert result["health"]["rows"] == [{"node": "dgx-0", "gpus": 8, "exporter_up": 1, "gpu_series": 8}]


def test_nothing_to_ask_is_an_error(run_module):
    result, failed = run_module(prometheus_query, {"url": "http://127.0.0.1:9"})
    assert failed and "give queries, gpu_health or gpu_overview" in result["msg"]


def test_url_and_service_are_exclusive(run_module):
    result, failed = run_module(
        prometheus_query,
        {"url": "http://x", "service": {"namespace": "m", "name": "p"}, "queries": {"x": "up"}},
    )
    assert failed and "mutually exclusive" in result["msg"]


def test_gpu_overview_per_node(run_module, prom):
    firing = [
        {
            "metric": {"alertname": "GPUXidFallenOffBus", "alertstate": "firing", "Hostname": "dgx-0", "gpu": "3"},
            "value": [1, "1"],
        }
    ]
    p = prom({'ALERTS{alertstate="firing", alertname=~"GPU.*"}': firing, SERIES: vec("Hostname", {"dgx-0": 7})})
    result, failed = run_module(prometheus_query, {"url": p.url, "gpu_overview": True})
    assert not failed, result
    assert result["gpu_overview"] == {"dgx-0": {"alerts": ["GPUXidFallenOffBus(gpu 3)"], "reporting": 7}}


COUNTERS = {"GPUNVLinkErrors": ["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"], "GPUUncorrectableECCError": ["X_ECC"]}
COUNTERS_Q = 'group by (__name__) ({__name__=~"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL|X_ECC"})'


@pytest.mark.parametrize(
    ("present", "warned"),
    [
        (["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "X_ECC"], []),
        (["X_ECC"], ["GPUNVLinkErrors"]),
        ([], ["GPUNVLinkErrors", "GPUUncorrectableECCError"]),
    ],
)
def test_gpu_health_warns_about_alerts_whose_counters_no_exporter_reports(run_module, prom, present, warned):
    p = prom(
        {
            UP: vec("node", {"dgx-0": 1}),
            SERIES: vec("Hostname", {"dgx-0": 8}),
            COUNTERS_Q: [{"metric": {"__name__": n}, "value": [1, "1"]} for n in present],
        }
    )
    result, failed = run_module(prometheus_query, {"url": p.url, "gpu_health": {"nodes": NODES, "counters": COUNTERS}})
    assert not failed, result
    findings = result["health"]["findings"]
    assert [f["object"]["name"] for f in findings] == warned
    assert {f["severity"] for f in findings} <= {"warning"}
    assert all(f["id"] == "monitoring-counters-not-exported" and "never fire" in f["cause"] for f in findings)


def test_no_counter_question_while_no_exporter_is_up(run_module, prom):
    p = prom({UP: vec("node", {}), SERIES: vec("Hostname", {})})
    result, failed = run_module(prometheus_query, {"url": p.url, "gpu_health": {"nodes": NODES, "counters": COUNTERS}})
    assert not failed
    assert [f["id"] for f in result["health"]["findings"]] == ["monitoring-exporter-not-scraped"]
    assert COUNTERS_Q not in p.asked


TELEMETRY_UP = 'sum by (node) (up{job="gpuops-doca-telemetry"} == 1)'
NIC_NODES = [
    {
        "metadata": {
            "name": n,
            "labels": {
                "feature.node.kubernetes.io/pci-15b3.present": "true",
                "network.nvidia.com/operator.mofed.wait": "false",
            },
        }
    }
    for n in ("dgx-0", "dgx-1")
]


def test_telemetry_alone_asks_no_gpu_question_and_waits_for_every_nic_node(run_module, prom):
    p = prom({TELEMETRY_UP: (vec("node", {"dgx-0": 1}), vec("node", {"dgx-0": 1, "dgx-1": 1}))})
    result, failed = run_module(
        prometheus_query,
        {
            "url": p.url,
            "gpu_health": {"nodes": NIC_NODES, "timeout": 10, "interval": 1, "gpus": False, "telemetry": True},
        },
    )
    assert not failed, result
    assert result["health"]["findings"] == [] and result["health"]["rows"] == []
    assert result["health"]["telemetry_rows"] == [
        {"node": "dgx-0", "telemetry_up": 1},
        {"node": "dgx-1", "telemetry_up": 1},
    ]
    assert p.asked.count(TELEMETRY_UP) == 2 and UP not in p.asked and SERIES not in p.asked


def test_telemetry_and_gpus_together_name_the_nic_node_without_a_target(run_module, prom):
    nodes = [
        {
            **NODES[0],
            "metadata": {
                **NODES[0]["metadata"],
                "labels": {**NODES[0]["metadata"]["labels"], **NIC_NODES[0]["metadata"]["labels"]},
            },
        }
    ]
    p = prom({UP: vec("node", {"dgx-0": 1}), SERIES: vec("Hostname", {"dgx-0": 8}), TELEMETRY_UP: vec("node", {})})
    result, failed = run_module(
        prometheus_query, {"url": p.url, "gpu_health": {"nodes": nodes, "timeout": 0, "telemetry": True}}
    )
    assert not failed
    (f,) = result["health"]["findings"]
    assert f["id"] == "monitoring-telemetry-not-scraped" and f["object"]["name"] == "dgx-0"
    assert result["health"]["rows"] == [{"node": "dgx-0", "gpus": 8, "exporter_up": 1, "gpu_series": 8}]
