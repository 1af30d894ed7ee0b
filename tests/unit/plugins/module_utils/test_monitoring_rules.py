"""The monitoring role's rules (_monitoring, _dashboards, _prometheus) and its filters, as tables. The dashboards'
queries are parsed by the real promtool (tests/unit/alerts has the helper)."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.monitoring_objects import monitoring_objects
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import (
    _dashboards,
    _monitoring,
    _monitoring_health,
    _monitoring_spec,
    _placement,
    _plan,
    _prometheus,
    _scrape_objects,
)


def monitoring_owned(wanted, live, check="prune"):
    """What the role's apply prunes (k8s_apply's prune: _owned.prune_objects over the role's kinds) or, with
    ``landed``, what its landing check (role_plan's phase landed) finds."""
    if check == "landed":
        return _plan.landing_findings(wanted, live)
    return _owned.prune_objects(wanted, live, _monitoring_spec.OWNER_LABELS, _monitoring_spec.KINDS)


def prom(spec, name="kps-prometheus", namespace="monitoring"):
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


KPS = prom(  # what kube-prometheus-stack 88.5.3 renders with its defaults (release kps)
    {
        "serviceMonitorSelector": {"matchLabels": {"release": "kps"}},
        "serviceMonitorNamespaceSelector": {},
        "ruleSelector": {"matchLabels": {"release": "kps"}},
        "ruleNamespaceSelector": {},
    }
)
VARS = {
    "monitoring_mode": "attach",
    "monitoring_namespace": "monitoring",
    "monitoring_nvidia": True,
    "monitoring_nvidia_namespace": "gpu-operator",
    "monitoring_amd": False,
    "monitoring_amd_namespace": "kube-amd-gpu",
    "monitoring_scrape_interval": "15s",
    "monitoring_alert_thresholds": {},
    "monitoring_dashboards": True,
    "monitoring_dashboard_labels": {"grafana_dashboard": "1"},
}


def ids(findings):
    return sorted(f["id"] for f in findings)


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        (None, {"a": "b"}, False),  # null selects nothing
        ({}, {}, True),  # empty selects everything
        ({"matchLabels": {"release": "kps"}}, {"release": "kps"}, True),
        ({"matchLabels": {"release": "kps"}}, {"release": "other"}, False),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["gpu", "ml"]}]}, {"team": "ml"}, True),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["x"]}]}, {}, True),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["x"]}]}, {"team": "x"}, False),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, {"team": "a"}, False),
        ({"matchExpressions": [{"key": "team", "operator": "Gt", "values": ["1"]}]}, {"team": "2"}, False),
    ],
)
def test_selects(selector, labels, selected):
    assert _placement.selects(selector, labels) is selected


@pytest.mark.parametrize(
    ("selector", "labels"),
    [
        ({}, {}),
        ({"matchLabels": {"release": "kps"}}, {"release": "kps"}),
        (
            {
                "matchLabels": {"a": "1"},
                "matchExpressions": [
                    {"key": "b", "operator": "In", "values": ["x", "y"]},
                    {"key": "c", "operator": "Exists"},
                    {"key": "d", "operator": "DoesNotExist"},
                ],
            },
            {"a": "1", "b": "x", "c": "gpuops"},
        ),
        (None, None),
        ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, None),
        ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "a", "operator": "In", "values": ["2"]}]}, None),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, None),
        (
            {
                "matchExpressions": [
                    {"key": "a", "operator": "Exists"},
                    {"key": "a", "operator": "NotIn", "values": ["gpuops"]},
                ]
            },
            None,
        ),
    ],
)
def test_satisfying_labels(selector, labels):
    got, why = _placement.satisfying_labels(selector)
    assert got == labels
    assert (why == "") is (labels is not None)
    if labels is not None:
        assert _placement.selects(selector, got)


@pytest.mark.parametrize(
    ("selector", "namespace", "ns_labels", "selected"),
    [
        (None, "monitoring", {}, True),  # null: the Prometheus's own namespace only
        (None, "gpuops", {}, False),
        ({}, "gpuops", {}, True),
        ({"matchLabels": {"kubernetes.io/metadata.name": "gpuops"}}, "gpuops", {}, True),  # the API server's label
        ({"matchLabels": {"monitoring": "on"}}, "gpuops", {"monitoring": "on"}, True),
        ({"matchLabels": {"monitoring": "on"}}, "gpuops", {}, False),
    ],
)
def test_namespace_selected(selector, namespace, ns_labels, selected):
    assert _placement.namespace_selected(selector, namespace, ns_labels, "monitoring") is selected


def test_build_against_kube_prometheus_stack():
    built = _monitoring.build(VARS, [KPS], {})
    assert built["findings"] == []
    by = {(o["kind"], o["metadata"]["name"]): o for o in built["objects"]}
    sm = by[("ServiceMonitor", "gpuops-nvidia-dcgm-exporter")]
    assert sm["metadata"]["labels"]["release"] == "kps"
    assert sm["metadata"]["labels"]["gpuops.platform/role"] == "monitoring"
    assert sm["spec"]["selector"] == {"matchLabels": {"app": "nvidia-dcgm-exporter"}}
    assert sm["spec"]["namespaceSelector"] == {"matchNames": ["gpu-operator"]}
    assert sm["spec"]["jobLabel"] == "app"  # the job the alert rules read: nvidia-dcgm-exporter
    assert sm["spec"]["endpoints"][0]["port"] == "gpu-metrics"
    assert sm["spec"]["endpoints"][0]["relabelings"][0]["targetLabel"] == "node"
    rule = by[("PrometheusRule", "gpuops-gpu-alerts")]
    assert rule["metadata"]["labels"]["release"] == "kps" and rule["metadata"]["namespace"] == "monitoring"
    assert {g["name"] for g in rule["spec"]["groups"]} == {"gpuops-gpu-health", "gpuops-gpu-capacity"}
    dashboards = [o for o in built["objects"] if o["kind"] == "ConfigMap"]
    assert len(dashboards) == 4 and all(o["metadata"]["labels"]["grafana_dashboard"] == "1" for o in dashboards)
    assert ("ServiceMonitor", "gpuops-amd-metrics-exporter") not in by


def test_amd_exporter_and_no_nvidia():
    built = _monitoring.build({**VARS, "monitoring_nvidia": False, "monitoring_amd": True}, [KPS], {})
    sms = [o for o in built["objects"] if o["kind"] == "ServiceMonitor"]
    assert [o["metadata"]["name"] for o in sms] == ["gpuops-amd-metrics-exporter"]
    assert sms[0]["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/service": "default-metrics-exporter"}}
    assert sms[0]["spec"]["endpoints"][0]["port"] == "exporter-port"


@pytest.mark.parametrize(
    ("prometheus", "variables", "ns_labels", "expect"),
    [
        (None, {}, {}, ["monitoring-prometheus-missing"]),
        (prom({**KPS["spec"], "serviceMonitorSelector": None}), {}, {}, ["monitoring-selector-unsatisfiable"]),
        (
            prom({**KPS["spec"], "ruleSelector": {"matchExpressions": [{"key": "x", "operator": "In", "values": []}]}}),
            {},
            {},
            ["monitoring-selector-unsatisfiable"],
        ),
        # a plain Prometheus Operator install: null namespace selectors read only the Prometheus's namespace
        (
            prom({"serviceMonitorSelector": {}, "ruleSelector": {}}),
            {"monitoring_namespace": "gpuops"},
            {},
            ["monitoring-namespace-not-selected", "monitoring-namespace-not-selected"],
        ),
        (prom({"serviceMonitorSelector": {}, "ruleSelector": {}}), {}, {}, []),
        (
            prom({**KPS["spec"], "serviceMonitorNamespaceSelector": {"matchLabels": {"mon": "on"}}}),
            {"monitoring_namespace": "gpuops"},
            {"mon": "on"},
            [],
        ),
        (KPS, {"monitoring_alert_thresholds": {"gpu_temp_celsius": "hot"}}, {}, ["gpu-alerts-threshold-invalid"]),
    ],
)
def test_build_findings(prometheus, variables, ns_labels, expect):
    built = _monitoring.build({**VARS, **variables}, [] if prometheus is None else [prometheus], ns_labels)
    got = ids(built["findings"])
    assert [i for i in got if not i.startswith("gpu-alerts")] == [i for i in expect if not i.startswith("gpu-alerts")]
    assert any(i.startswith("gpu-alerts") for i in got) is any(i.startswith("gpu-alerts") for i in expect)
    for f in built["findings"]:
        assert f["evidence"] and f["cause"] and f["fix"]
    if any(f["severity"] == "error" for f in built["findings"]):
        assert not any(o["kind"] == "PrometheusRule" for o in built["objects"])


def test_exporter_scraped_twice_is_a_warning():
    policy = {"metadata": {"name": "cluster-policy"}, "spec": {"dcgmExporter": {"serviceMonitor": {"enabled": True}}}}
    (f,) = _monitoring.build(VARS, [KPS], {}, policy)["findings"]
    assert f["id"] == "monitoring-exporter-scraped-twice" and f["severity"] == "warning"
    assert "gpu_operator_dcgm_exporter_service_monitor: false" in f["fix"]
    assert _monitoring.build({**VARS, "monitoring_nvidia": False}, [KPS], {}, policy)["findings"] == []
    policy["spec"]["dcgmExporter"]["serviceMonitor"]["enabled"] = False
    assert _monitoring.build(VARS, [KPS], {}, policy)["findings"] == []


def vec(label, counts):
    return [{"metric": {label: k}, "value": [0, str(v)]} for k, v in counts.items()]


@pytest.mark.parametrize(
    ("expected", "up", "series", "bad"),
    [
        ({"a": 8, "b": 4}, {"a": 1, "b": 1}, {"a": 8, "b": 4}, []),
        ({"a": 8, "b": 4}, {"a": 1}, {"a": 8}, [("monitoring-exporter-not-scraped", "b")]),
        ({"a": 8, "b": 4}, {"a": 1, "b": 1}, {"a": 7, "b": 4}, [("monitoring-gpu-series-mismatch", "a")]),
        ({"a": 8}, {"a": 0}, {}, [("monitoring-exporter-not-scraped", "a")]),
    ],
)
def test_health(expected, up, series, bad):
    nodes = [{"metadata": {"name": n, "labels": {"nvidia.com/gpu.count": str(c)}}} for n, c in expected.items()]
    got = _monitoring_health.health_findings(
        _scrape_objects.expected_gpus(nodes), vec("node", up), vec("Hostname", series)
    )
    assert [(f["id"], f["object"]["name"]) for f in got["findings"]] == bad
    assert [r["node"] for r in got["rows"]] == sorted(expected)
    if bad and bad[0][0] == "monitoring-gpu-series-mismatch":
        assert (
            "7 GPU(s) report DCGM_FI_DEV_GPU_TEMP (distinct UUIDs); the node's hardware has 8"
            in got["findings"][0]["evidence"][0]
        )


def test_prune_and_landed():
    wanted = _monitoring.build(VARS, [KPS], {})["objects"]
    stale = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "old", "namespace": "monitoring", "labels": dict(_monitoring_spec.OWNER_LABELS)},
    }
    foreign = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "theirs", "namespace": "monitoring", "labels": {}},
    }
    assert [o["metadata"]["name"] for o in monitoring_owned(wanted, [*wanted, stale, foreign])] == ["old"]
    assert monitoring_owned(wanted, wanted, "landed") == []
    changed = json.loads(json.dumps(wanted))
    changed[0]["spec"]["jobLabel"] = "other"
    (f,) = monitoring_owned(wanted, changed, "landed")
    assert f["id"] == "monitoring-object-not-landed" and "spec.jobLabel" in f["evidence"][0]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: monitoring_objects("x"), "variables as a dict"),
        (lambda: monitoring_objects({}, "x"), "prometheuses as a list"),
        (lambda: monitoring_objects({}, [], {}, None, "False"), "network_namespace_found as true, false or null"),
    ],
)
def test_filter_errors(call, message):
    with pytest.raises(AnsibleFilterError, match=message):
        call()


def test_filter_returns_the_queries():
    built = monitoring_objects(VARS, [KPS], {})
    assert built["up_query"] == 'sum by (node) (up{job="nvidia-dcgm-exporter"} == 1)'
    assert built["gpu_series_query"] == "count by (Hostname) (count by (Hostname, UUID) (DCGM_FI_DEV_GPU_TEMP))"


# --- dashboards ---------------------------------------------------------------------------------------------------


def test_every_panel_reads_known_metrics_and_answers_a_question():
    panels = _dashboards.panels()
    assert {p["dashboard"] for p in panels} == {
        "gpuops-cluster",
        "gpuops-node-health",
        "gpuops-pod-usage",
        "gpuops-fabric",
    }
    for p in panels:
        assert p["question"].endswith("?"), p
        assert _dashboards.metrics_of(p["expr"]), f"{p['title']}: reads no known metric"


def test_dashboard_json_model():
    board = _dashboards.dashboard("gpuops-node-health")
    assert board["uid"] == "gpuops-node-health" and board["schemaVersion"] == 39
    assert [t["expr"] for p in board["panels"] for t in p["targets"]] == [
        p["expr"] for p in _dashboards.panels() if p["dashboard"] == "gpuops-node-health"
    ]
    with pytest.raises(KeyError):
        _dashboards.dashboard("nope")
    (cm,) = [c for c in _dashboards.config_maps("mon", {"grafana_dashboard": "1"}) if "fabric" in c["metadata"]["name"]]
    assert json.loads(cm["data"]["gpuops-fabric.json"])["title"] == "GPU fabric (NVLink, PCIe, RDMA)"


def test_every_panel_query_is_valid_promql(tmp_path):
    """Each query as a recording rule: `promtool check rules` parses it with Prometheus's own parser."""
    from gpuops_lab.config import LabConfig

    promtool = LabConfig.load().binary("promtool")
    assert promtool.exists(), f"promtool not found at {promtool}: run hack/cluster/build.sh prometheus"
    rules = [{"record": f"gpuops:panel_{i}", "expr": p["expr"]} for i, p in enumerate(_dashboards.panels())]
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    r = subprocess.run([str(promtool), "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(rules)} rules found" in r.stdout
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "a:b", "expr": "sum(("}]}]}))
    r = subprocess.run([str(promtool), "check", "rules", str(bad)], capture_output=True, text=True, check=False)
    assert r.returncode != 0  # the check can fail


# --- Prometheus API answers ---------------------------------------------------------------------------------------


def test_query_path():
    assert _prometheus.query_path("up == 1") == "/api/v1/query?query=up+%3D%3D+1"
    prefix = _prometheus.proxy_prefix("monitoring", "kps-prometheus", "http-web")
    assert _prometheus.query_path("up", prefix) == (
        "/api/v1/namespaces/monitoring/services/kps-prometheus:http-web/proxy/api/v1/query?query=up"
    )


@pytest.mark.parametrize(
    ("status", "body", "result", "error"),
    [
        (
            200,
            {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "2"]}]}},
            [{"metric": {}, "value": [1, "2"]}],
            None,
        ),
        (
            200,
            {"status": "success", "data": {"resultType": "scalar", "result": [1, "3"]}},
            [{"metric": {}, "value": [1, "3"]}],
            None,
        ),
        (400, {"status": "error", "errorType": "bad_data", "error": "parse error"}, None, "bad_data: parse error"),
        (200, {"status": "success", "data": {"resultType": "matrix", "result": []}}, None, "not an instant vector"),
        (502, "<html>bad gateway</html>", None, "not a Prometheus API answer"),
    ],
)
def test_parse(status, body, result, error):
    raw = body if isinstance(body, str) else json.dumps(body)
    if error is None:
        assert _prometheus.parse("q", "up", status, raw) == result
    else:
        with pytest.raises(_prometheus.QueryError, match=error) as exc:
            _prometheus.parse("q", "up", status, raw)
        assert "query q (up)" in str(exc.value)


@pytest.mark.parametrize(
    ("release", "values", "name", "sm_selector", "rule_selector"),
    [
        (
            "kube-prometheus-stack",
            {},
            "kube-prometheus-stack-prometheus",
            {"matchLabels": {"release": "kube-prometheus-stack"}},
            {"matchLabels": {"release": "kube-prometheus-stack"}},
        ),
        (
            "monitoring",  # fullname truncated to 26 characters
            {},
            "monitoring-kube-prometheus-prometheus",
            {"matchLabels": {"release": "monitoring"}},
            {"matchLabels": {"release": "monitoring"}},
        ),
        (
            "kps",
            {"fullnameOverride": "p"},
            "p-prometheus",
            {"matchLabels": {"release": "kps"}},
            {"matchLabels": {"release": "kps"}},
        ),
        (
            "kps",
            {"cleanPrometheusOperatorObjectNames": True},
            "kps-kube-prometheus-stack",
            {"matchLabels": {"release": "kps"}},
            {"matchLabels": {"release": "kps"}},
        ),
        (
            "kps",
            {
                "prometheus": {
                    "prometheusSpec": {
                        "serviceMonitorSelectorNilUsesHelmValues": False,
                        "ruleSelectorNilUsesHelmValues": False,
                    }
                }
            },
            "kps-kube-prometheus-stack-prometheus",
            {},
            {},
        ),
        (
            "kps",
            {"prometheus": {"prometheusSpec": {"ruleSelectorNilUsesHelmValues": False, "ruleSelector": None}}},
            "kps-kube-prometheus-stack-prometheus",
            {"matchLabels": {"release": "kps"}},
            None,
        ),
        (
            "kps",
            {"prometheus": {"prometheusSpec": {"ruleSelector": {"matchLabels": {"team": "gpu"}}}}},
            "kps-kube-prometheus-stack-prometheus",
            {"matchLabels": {"release": "kps"}},
            {"matchLabels": {"team": "gpu"}},
        ),
    ],
)
def test_chart_prometheus_as_the_chart_renders_it(release, values, name, sm_selector, rule_selector):
    got = _scrape_objects.chart_prometheus(release, "monitoring", values)
    assert got["metadata"] == {"name": name, "namespace": "monitoring"}
    assert got["spec"]["serviceMonitorSelector"] == sm_selector
    assert got["spec"]["ruleSelector"] == rule_selector
    assert got["spec"]["serviceMonitorNamespaceSelector"] == {}


def test_install_mode_builds_against_the_chart_before_the_release_exists():
    variables = {
        **VARS,
        "monitoring_mode": "install",
        "monitoring_release_name": "kube-prometheus-stack",
        "monitoring_values": {},
    }
    built = _monitoring.build(variables, [], {})
    assert built["findings"] == []
    assert built["labels"]["servicemonitor"] == {"release": "kube-prometheus-stack"}
    assert ids(_monitoring.build({**variables, "monitoring_mode": "attach"}, [], {})["findings"]) == [
        "monitoring-prometheus-missing"
    ]


def test_expected_gpus_from_the_gfd_count():
    nodes = [
        {"metadata": {"name": "a", "labels": {"nvidia.com/gpu.count": "8"}}},
        {"metadata": {"name": "b", "labels": {"nvidia.com/gpu.count": "0"}}},
        {"metadata": {"name": "c", "labels": {}}},
        {"metadata": {"name": "d", "labels": {"nvidia.com/gpu.count": "x"}}},
        # MIG strategy single: GFD counts the MIG devices (7 x 1g.10gb per H100 80GB) - the hardware has 8
        {
            "metadata": {
                "name": "mig",
                "labels": {"nvidia.com/gpu.count": "56", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"},
            }
        },
        # time-slicing: the product gets -SHARED, the count stays the GPUs
        {
            "metadata": {
                "name": "ts",
                "labels": {"nvidia.com/gpu.count": "4", "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"},
            }
        },
    ]
    assert _scrape_objects.expected_gpus(nodes) == {"a": 8, "mig": 8, "ts": 4}


def test_pick_prometheus():
    other = prom({}, name="other")
    assert _scrape_objects.pick_prometheus({**VARS, "monitoring_prometheus_name": "other"}, [KPS, other])[0] is other
    assert _scrape_objects.pick_prometheus(VARS, [KPS])[0] is KPS  # the only one
    got, found = _scrape_objects.pick_prometheus(VARS, [KPS, other])
    assert got is None and ids(found) == ["monitoring-prometheus-ambiguous"]
    assert "kps-prometheus, other" in found[0]["evidence"][0]
    install = {**VARS, "monitoring_mode": "install", "monitoring_release_name": "kps", "monitoring_values": {}}
    live = prom(
        {"serviceMonitorSelector": {"matchLabels": {"mine": "yes"}}}, name="kps-kube-prometheus-stack-prometheus"
    )
    assert _scrape_objects.pick_prometheus(install, [live])[0] is live  # the release's, live
    assert _scrape_objects.pick_prometheus(install, [])[0]["spec"]["ruleSelector"] == {
        "matchLabels": {"release": "kps"}
    }


@pytest.mark.parametrize(
    ("variables", "values", "expect"),
    [
        (
            {},
            {
                "grafana": {
                    "sidecar": {"dashboards": {"enabled": True, "label": "grafana_dashboard", "labelValue": "1"}}
                }
            },
            [],
        ),
        ({"monitoring_dashboards": False}, {"grafana": {"sidecar": {"dashboards": {"enabled": False}}}}, []),
        ({"monitoring_dashboard_labels": {"a": "1", "b": "2"}}, {}, ["monitoring-dashboard-labels"]),
        ({"monitoring_mode": "attach", "monitoring_dashboard_labels": {"a": "1", "b": "2"}}, {}, []),
        (  # an admin password: the chart gets the Secret's name, never the password
            {"monitoring_dashboards": False, "monitoring_grafana_admin_password": "s3cret-pw"},
            {
                "grafana": {
                    "sidecar": {"dashboards": {"enabled": False}},
                    "admin": {
                        "existingSecret": "gpuops-grafana-admin",
                        "userKey": "admin-user",
                        "passwordKey": "admin-password",
                    },
                }
            },
            [],
        ),
        (
            {
                "monitoring_dashboards": False,
                "monitoring_grafana_admin_password": "s3cret-pw",
                "monitoring_grafana_admin_secret": "grafana-admin",
            },
            {
                "grafana": {
                    "sidecar": {"dashboards": {"enabled": False}},
                    "admin": {
                        "existingSecret": "grafana-admin",
                        "userKey": "admin-user",
                        "passwordKey": "admin-password",
                    },
                }
            },
            [],
        ),
    ],
)
def test_install_chart_values(variables, values, expect):
    got, found = _monitoring.chart_values({**VARS, "monitoring_mode": "install", **variables})
    assert got == values and ids(found) == expect


def test_wait_objects():
    install = {**VARS, "monitoring_mode": "install", "monitoring_release_name": "kube-prometheus-stack"}
    built = _monitoring.build(install, [], {})
    assert [o["name"] for o in built["wait_objects"]] == [
        "kube-prometheus-stack-operator",
        "kube-prometheus-stack-grafana",
    ]
    assert _monitoring.build(VARS, [KPS], {})["wait_objects"] == []


def test_the_docs_table_is_the_code():
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[4] / "docs/observability.md").read_text()
    for p in _dashboards.panels():
        assert f"| {p['title']} | {p['question']} `{p['expr'].replace('|', chr(92) + '|')}` |" in docs, p["title"]


def test_prometheus_service():
    install = {"monitoring_mode": "install", "monitoring_namespace": "mon", "monitoring_release_name": "kps"}
    assert _monitoring.prometheus_service(install) == {
        "namespace": "mon",
        "name": "kps-kube-prometheus-stack-prometheus",
        "port": "http-web",
    }
    attach = {"monitoring_mode": "attach", "monitoring_namespace": "gpu", "monitoring_prometheus_namespace": "mon"}
    assert _monitoring.prometheus_service(attach) == {"namespace": "mon", "name": "prometheus-operated", "port": "web"}
    assert _monitoring.build(VARS, [KPS], {})["prometheus_service"]["namespace"] == "monitoring"


def test_alerts_by_node():
    vector = [
        {"metric": {"alertname": "GPUXidFallenOffBus", "alertstate": "firing", "Hostname": "a", "gpu": "3"}},
        {"metric": {"alertname": "GPUXidFallenOffBus", "alertstate": "firing", "Hostname": "a", "gpu": "3"}},
        {"metric": {"alertname": "GPUExporterDown", "alertstate": "firing", "node": "b"}},
        {"metric": {"alertname": "GPUThermalThrottling", "alertstate": "pending", "Hostname": "a", "gpu": "1"}},
        {"metric": {"alertname": "Watchdog", "alertstate": "firing"}},
        {"labels": {"alertname": "GPURowRemapFailure", "Hostname": "c", "gpu": "0"}, "state": "firing"},
    ]
    assert _monitoring.alerts_by_node(vector) == {
        "a": ["GPUXidFallenOffBus(gpu 3)"],
        "b": ["GPUExporterDown"],
        "c": ["GPURowRemapFailure(gpu 0)"],
    }


def test_metrics_by_node():
    firing = [{"metric": {"alertname": "GPUExporterDown", "alertstate": "firing", "node": "b"}}]
    reporting = [{"metric": {"Hostname": "a"}, "value": [0, "8"]}]
    assert _monitoring.metrics_by_node(firing, reporting) == {
        "a": {"alerts": [], "reporting": 8},
        "b": {"alerts": ["GPUExporterDown"], "reporting": 0},
    }


# --- counters the alert rules read beyond the exporter's default list ------------------------------------------------


def test_counters_query_names_each_counter_once():
    q = _monitoring_health.counters_query({"A": ["X_1", "X_2"], "B": ["X_2"]})
    assert q == 'group by (__name__) ({__name__=~"X_1|X_2"})'
    assert _monitoring_health.counters_query({}) is None and _monitoring_health.counters_query({"A": []}) is None


@pytest.mark.parametrize(
    ("present", "alerts"),
    [(["X_1", "X_2"], []), (["X_1"], ["A", "B"]), ([], ["A", "B"]), (["X_2"], ["A"])],
)
def test_counter_findings_name_the_alerts_that_cannot_fire(present, alerts):
    got = _monitoring_health.counter_findings(
        {"A": ["X_1", "X_2"], "B": ["X_2"]}, [{"metric": {"__name__": n}, "value": [0, "1"]} for n in present]
    )
    assert [f["object"]["name"] for f in got] == alerts
    assert all(f["severity"] == "warning" and f["object"]["kind"] == "Alert" for f in got)
    for f in got:
        missing = [n for n in {"A": ["X_1", "X_2"], "B": ["X_2"]}[f["object"]["name"]] if n not in present]
        assert f["evidence"] == [f"no exporter reports {', '.join(missing)}"]


def test_build_hands_the_alert_counters_to_the_health_check():
    built = _monitoring.build({"monitoring_mode": "attach", "monitoring_nvidia": True}, [], None)
    assert set(built["alert_counters"]) == {"GPUUncorrectableECCError", "GPUNVLinkErrors"}


def test_nic_telemetry_gets_a_headless_service_and_a_service_monitor():
    built = _monitoring.build(
        {**VARS, "monitoring_network": True, "monitoring_network_namespace": "nvidia-network-operator"}, [KPS], {}
    )
    assert built["findings"] == [] and built["telemetry_namespace_ready"] is True
    by = {(o["kind"], o["metadata"]["name"]): o for o in built["objects"]}
    svc = by[("Service", "gpuops-doca-telemetry")]
    # upstream's DaemonSet: pods labelled app.kubernetes.io/name=doca-telemetry, no declared port; a numeric
    # targetPort still gets Endpoints
    assert svc["metadata"]["namespace"] == "nvidia-network-operator"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {"app.kubernetes.io/name": "doca-telemetry"}
    assert svc["spec"]["ports"] == [{"name": "telemetry", "port": 9189, "targetPort": 9189, "protocol": "TCP"}]
    assert svc["metadata"]["labels"]["gpuops.platform/role"] == "monitoring"  # owned: pruned when dropped
    sm = by[("ServiceMonitor", "gpuops-doca-telemetry")]
    assert sm["metadata"]["namespace"] == "monitoring" and sm["metadata"]["labels"]["release"] == "kps"
    assert all(svc["metadata"]["labels"][k] == v for k, v in sm["spec"]["selector"]["matchLabels"].items())
    assert sm["spec"]["namespaceSelector"] == {"matchNames": ["nvidia-network-operator"]}
    assert sm["spec"]["endpoints"][0]["port"] == "telemetry" and "jobLabel" not in sm["spec"]  # job = the Service
    # off: neither, and a stale pair is pruned
    off = _monitoring.build(VARS, [KPS], {})
    assert off["telemetry_namespace_ready"] is True  # nothing of the telemetry waits for a namespace
    assert not [o for o in off["objects"] if "doca" in o["metadata"]["name"]]
    stale = monitoring_owned(off["objects"], built["objects"])
    assert [(o["kind"], o["metadata"]["name"]) for o in stale] == [
        ("ServiceMonitor", "gpuops-doca-telemetry"),
        ("Service", "gpuops-doca-telemetry"),
    ]
    assert stale[1]["metadata"]["namespace"] == "nvidia-network-operator"


@pytest.mark.parametrize(
    ("network", "found", "check_mode", "want", "ready"),
    [
        (True, True, False, [], True),
        (True, None, False, [], True),  # not read: judged by nobody, as before the namespace was read
        (True, False, False, [("monitoring-network-namespace-missing", "error")], False),
        # --check over a whole site: the Network Operator's role earlier in the run would create it, so a plan, no stop
        (True, False, True, [("monitoring-network-namespace-missing", "warning")], False),
        (False, False, False, [], True),  # telemetry off: the namespace does not matter
    ],
)
def test_nic_telemetry_needs_the_network_operator_namespace(network, found, check_mode, want, ready):
    built = monitoring_objects(
        {**VARS, "monitoring_network": network, "monitoring_network_namespace": "netops"},
        [KPS],
        {},
        None,
        found,
        check_mode,
    )
    assert [(f["id"], f["severity"]) for f in built["findings"]] == want
    assert built["telemetry_namespace_ready"] is ready
    for f in built["findings"]:
        assert f["object"]["kind"] == "Namespace" and f["object"]["name"] == "netops"
        assert "monitoring_network_namespace" in f["fix"] and "monitoring_network: false" in f["fix"]
    # the objects are still built: --check lists them as changes, a real run refuses before applying any
    assert bool([o for o in built["objects"] if o["kind"] == "Service"]) is network


@pytest.mark.parametrize("port", [0, 70000, "9189", True])
def test_nic_telemetry_port_must_be_a_port(port):
    built = _monitoring.build({**VARS, "monitoring_network": True, "monitoring_network_port": port}, [KPS], {})
    assert ids(built["findings"]) == ["monitoring-network-port-invalid"]
    assert not [o for o in built["objects"] if o["kind"] == "Service"]


def _nic_node(name, wait="false", nic=True):
    labels = {"network.nvidia.com/operator.mofed.wait": wait}
    if nic:
        labels["feature.node.kubernetes.io/pci-15b3.present"] = "true"
    return {"metadata": {"name": name, "labels": labels}}


@pytest.mark.parametrize(
    ("nodes", "up", "bad", "cause"),
    [
        ([_nic_node("a"), _nic_node("b")], {"a": 1, "b": 1}, [], None),
        ([_nic_node("a"), _nic_node("b")], {"a": 1}, [("monitoring-telemetry-not-scraped", "b")], "does not scrape"),
        ([_nic_node("a", wait="true")], {}, [("monitoring-telemetry-not-scraped", "a")], "DOCA driver is not ready"),
        ([_nic_node("a"), _nic_node("cpu", nic=False)], {"a": 1}, [], None),  # no NVIDIA NIC: nothing expected
        ([_nic_node("a")], {"a": 0}, [("monitoring-telemetry-not-scraped", "a")], "does not scrape"),
    ],
)
def test_telemetry_health(nodes, up, bad, cause):
    got = _monitoring_health.telemetry_findings(nodes, vec("node", up))
    assert [(f["id"], f["object"]["name"]) for f in got["findings"]] == bad
    assert [r["node"] for r in got["rows"]] == _monitoring_health.telemetry_nodes(nodes)
    if cause:
        assert cause in got["findings"][0]["cause"]
        assert "no target of job gpuops-doca-telemetry with node=" in got["findings"][0]["evidence"][0]
        # the port is the user's (monitoring_network_port), not the operator's default written into the fix
        assert "monitoring_network_port" in got["findings"][0]["fix"] and "9189" not in got["findings"][0]["fix"]
    assert _monitoring_health.TELEMETRY_UP_QUERY == 'sum by (node) (up{job="gpuops-doca-telemetry"} == 1)'


@pytest.mark.parametrize(
    ("health", "want"),
    [
        ({"rows": [], "findings": []}, "no GPU or NIC node to check"),
        (
            {"rows": [{"node": "a", "gpus": 8, "exporter_up": 1, "gpu_series": 7}]},
            "a: 7/8 GPUs reporting, 1 exporter target(s) up",
        ),
        (
            {
                "rows": [{"node": "a", "gpus": 8, "exporter_up": 1, "gpu_series": 8}],
                "telemetry_rows": [{"node": "n", "telemetry_up": 2}],
            },
            "a: 8/8 GPUs reporting, 1 exporter target(s) up || n: 2 NIC telemetry target(s) up",
        ),
    ],
)
def test_health_summary_one_line(health, want):
    assert _monitoring_health.summary(health) == want
