"""The remediation route's rules (monitoring/_alertmanager) and their filters, as tables: the install chart values (the
chart's or the user's lists kept, the token by Secret), the attach AlertmanagerConfig and the Alertmanager's
findings, the landing check of the rendered Secret."""

from __future__ import annotations

import base64
import copy

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.monitoring_objects import monitoring_objects
from ansible_collections.gpuops.platform.plugins.filter.monitoring_route import monitoring_route
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _alertmanager, _monitoring_spec, _plan


def monitoring_owned(wanted, live, check="prune"):
    """What the role's apply prunes (k8s_apply's prune: _owned.prune_objects over the role's kinds) or, with
    ``landed``, what its landing check (role_plan's phase landed) finds."""
    if check == "landed":
        return _plan.landing_findings(wanted, live)
    return _owned.prune_objects(wanted, live, _monitoring_spec.OWNER_LABELS, _monitoring_spec.KINDS)


URL = "http://rulebook.gpuops:5050/alerts"
INSTALL = {
    "monitoring_mode": "install",
    "monitoring_namespace": "monitoring",
    "monitoring_release_name": "kube-prometheus-stack",
    "monitoring_remediation_webhook_url": URL,
    "monitoring_remediation_token_key": "token",
    "monitoring_nvidia": True,
    "monitoring_nvidia_namespace": "gpu-operator",
    "monitoring_dashboards": True,
    "monitoring_dashboard_labels": {"grafana_dashboard": "1"},
}
ATTACH = {**INSTALL, "monitoring_mode": "attach", "monitoring_alertmanager_namespace": "obs"}
ROUTE = {
    "receiver": "gpuops-remediation",
    "matchers": ['alertname=~"GPU.+"'],
    "group_by": ["alertname", "Hostname", "UUID"],
    "group_wait": "1s",
    "group_interval": "5s",
    "repeat_interval": "1h",
    "continue": True,
}
WATCHDOG = {"receiver": "null", "matchers": ['alertname = "Watchdog"']}


def ids(findings):
    return sorted(f["id"] for f in findings)


@pytest.mark.parametrize(
    ("extra", "routes", "receivers", "secrets"),
    [
        pytest.param({}, [ROUTE, WATCHDOG], ["null", "gpuops-remediation"], None, id="chart-lists-kept"),
        pytest.param(
            {"monitoring_values": {"alertmanager": {"config": {"route": {"routes": [{"receiver": "pager"}]}}}}},
            [ROUTE, {"receiver": "pager"}],
            ["null", "gpuops-remediation"],
            None,
            id="user-routes-kept",
        ),
        pytest.param(
            {
                "monitoring_values": {
                    "alertmanager": {
                        "config": {
                            "route": {"routes": [{"receiver": "gpuops-remediation", "matchers": ["x=y"]}]},
                            "receivers": [{"name": "pager"}, {"name": "gpuops-remediation"}],
                        }
                    }
                }
            },
            [ROUTE],
            ["pager", "gpuops-remediation"],
            None,
            id="user-entries-of-the-receiver-replaced",
        ),
        pytest.param(
            {
                "monitoring_remediation_token_secret": "rb-token",
                "monitoring_values": {"alertmanager": {"alertmanagerSpec": {"secrets": ["tls", "rb-token"]}}},
            },
            [ROUTE, WATCHDOG],
            ["null", "gpuops-remediation"],
            ["tls", "rb-token"],
            id="token-secret-mounted-once",
        ),
    ],
)
def test_install_chart_values(extra, routes, receivers, secrets):
    variables = {**INSTALL, **extra}
    values, findings = _alertmanager.chart_values(variables)
    assert findings == []
    am = values["alertmanager"]
    assert am["config"]["route"]["routes"] == routes
    assert [r["name"] for r in am["config"]["receivers"]] == receivers
    hook = am["config"]["receivers"][-1]["webhook_configs"][0]
    assert hook["url"] == URL and hook["send_resolved"] is True
    assert am.get("alertmanagerSpec", {}).get("secrets") == secrets
    if secrets:
        assert hook["http_config"]["authorization"] == {
            "type": "Bearer",
            "credentials_file": "/etc/alertmanager/secrets/rb-token/token",
        }
        assert "rb-token" not in str(am["config"]).replace("/rb-token/", "")  # a path, never the token
    else:
        assert "http_config" not in hook
    # the merged lists outrank the user's in the release values; the chart values of the role carry them too
    built = monitoring_objects(variables, [])
    assert built["alertmanager_values"] == values
    assert built["chart_values"]["alertmanager"] == am
    assert built["alertmanager_secret"] == {
        "name": "alertmanager-kube-prometheus-stack-alertmanager",
        "namespace": "monitoring",
    }


@pytest.mark.parametrize(
    ("extra", "want"),
    [
        pytest.param({"monitoring_remediation_webhook_url": ""}, [], id="off"),
        pytest.param({"monitoring_mode": "attach"}, [], id="attach-no-values"),
        pytest.param(
            {"monitoring_values": {"alertmanager": {"enabled": False}}},
            ["monitoring-remediation-no-alertmanager"],
            id="alertmanager-disabled",
        ),
        pytest.param(
            {"monitoring_values": {"alertmanager": {"alertmanagerSpec": {"useExistingSecret": True}}}},
            ["monitoring-remediation-existing-secret"],
            id="existing-secret",
        ),
    ],
)
def test_install_chart_values_off_or_refused(extra, want):
    values, findings = _alertmanager.chart_values({**INSTALL, **extra})
    assert values == {}
    assert ids(findings) == want


@pytest.mark.parametrize(
    ("key", "want"),
    [
        ("token", []),
        ("bearer.txt", []),
        ("to ken", ["monitoring-remediation-token-key"]),
        ("", ["monitoring-remediation-token-key"]),
    ],
)
def test_token_key(key, want):
    variables = {**INSTALL, "monitoring_remediation_token_secret": "s", "monitoring_remediation_token_key": key}
    if key == "":
        variables["monitoring_remediation_token_key"] = "   "
    assert ids(_alertmanager.key_findings(variables)) == want
    if want:
        assert ids(monitoring_objects(variables, [])["findings"]) == want


def alertmanager(spec, name="main"):
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Alertmanager",
        "metadata": {"name": name, "namespace": "obs"},
        "spec": spec,
    }


OK_SPEC = {
    "alertmanagerConfigSelector": {"matchLabels": {"alertmanagerConfig": "main"}},
    "alertmanagerConfigMatcherStrategy": {"type": "OnNamespaceExceptForAlertmanagerNamespace"},
}


@pytest.mark.parametrize(
    ("extra", "alertmanagers", "crd", "labels", "want"),
    [
        pytest.param({}, [alertmanager(OK_SPEC)], True, {"alertmanagerConfig": "main"}, [], id="ok"),
        pytest.param(
            {},
            [alertmanager({**OK_SPEC, "alertmanagerConfigMatcherStrategy": {"type": "None"}})],
            True,
            {"alertmanagerConfig": "main"},
            [],
            id="strategy-none",
        ),
        pytest.param(
            {},
            [alertmanager({"alertmanagerConfigSelector": {}})],
            True,
            None,
            ["monitoring-remediation-matcher-strategy"],
            id="default-strategy-matches-nothing",
        ),
        pytest.param(
            {},
            [alertmanager({**OK_SPEC, "alertmanagerConfigSelector": None})],
            True,
            None,
            ["monitoring-remediation-selector"],
            id="null-selector",
        ),
        pytest.param({}, [], True, None, ["monitoring-remediation-no-alertmanager"], id="no-alertmanager"),
        pytest.param(
            {},
            [alertmanager(OK_SPEC), alertmanager(OK_SPEC, "other")],
            True,
            None,
            ["monitoring-remediation-no-alertmanager"],
            id="two-none-named",
        ),
        pytest.param(
            {"monitoring_alertmanager_name": "other"},
            [alertmanager(OK_SPEC), alertmanager(OK_SPEC, "other")],
            True,
            {"alertmanagerConfig": "main"},
            [],
            id="two-one-named",
        ),
        pytest.param({}, [alertmanager(OK_SPEC)], False, None, ["monitoring-remediation-no-alertmanager"], id="no-crd"),
        pytest.param({"monitoring_mode": "install"}, [], False, None, [], id="install-not-judged"),
        pytest.param({"monitoring_remediation_webhook_url": ""}, [], False, None, [], id="off"),
    ],
)
def test_attach_alertmanager(extra, alertmanagers, crd, labels, want):
    variables = {**ATTACH, **extra}
    got, findings = _alertmanager.alertmanager_findings(variables, alertmanagers, "obs", crd)
    assert (got, ids(findings)) == (labels, want)
    configs = [
        o
        for o in monitoring_objects(variables, [], {}, None, None, False, alertmanagers, crd)["objects"]
        if o["kind"] == "AlertmanagerConfig"
    ]
    assert len(configs) == (1 if labels is not None else 0)


def test_attach_config_object():
    variables = {**ATTACH, "monitoring_remediation_token_secret": "rb-token"}
    obj = _alertmanager.config_object(variables, "obs", {"alertmanagerConfig": "main"})
    assert obj["apiVersion"] == "monitoring.coreos.com/v1alpha1"
    assert obj["metadata"]["namespace"] == "obs"
    assert obj["metadata"]["labels"] == {
        "alertmanagerConfig": "main",
        "app.kubernetes.io/managed-by": "gpuops.platform",
        "gpuops.platform/role": "monitoring",
    }
    route = obj["spec"]["route"]
    assert route["matchers"] == [{"name": "alertname", "value": "GPU.+", "matchType": "=~"}]
    assert route["continue"] is True and route["receiver"] == "gpuops-remediation"
    hook = obj["spec"]["receivers"][0]["webhookConfigs"][0]
    assert hook == {
        "url": URL,
        "sendResolved": True,
        "httpConfig": {"authorization": {"type": "Bearer", "credentials": {"name": "rb-token", "key": "token"}}},
    }
    # owned and pruned like the role's other objects; landed when the live spec is the same
    assert monitoring_owned([], [obj]) == [
        {
            "apiVersion": obj["apiVersion"],
            "kind": "AlertmanagerConfig",
            "metadata": {"name": "gpuops-remediation", "namespace": "obs"},
        }
    ]
    assert monitoring_owned([obj], [obj]) == []
    assert monitoring_owned([obj], [obj], "landed") == []
    drifted = copy.deepcopy(obj)
    drifted["spec"]["route"]["continue"] = False
    assert ids(monitoring_owned([obj], [drifted], "landed")) == ["monitoring-object-not-landed"]


def secret(config):
    return {"data": {"alertmanager.yaml": base64.b64encode(yaml.safe_dump(config).encode()).decode()}}


GOOD = {
    "route": {"receiver": "null", "routes": [ROUTE, WATCHDOG]},
    "receivers": [
        {"name": "null"},
        {"name": "gpuops-remediation", "webhook_configs": [{"url": URL, "send_resolved": True}]},
    ],
}


@pytest.mark.parametrize(
    ("extra", "live", "evidence"),
    [
        pytest.param({}, secret(GOOD), None, id="landed"),
        pytest.param({"monitoring_remediation_webhook_url": ""}, None, None, id="off"),
        pytest.param({"monitoring_mode": "attach"}, None, None, id="attach-checked-with-the-objects"),
        pytest.param({}, None, "the Secret does not exist", id="no-secret"),
        pytest.param({}, {"data": {}}, "no key alertmanager.yaml", id="no-key"),
        pytest.param({}, {"data": {"alertmanager.yaml": "!!!"}}, "is not YAML", id="not-base64"),
        pytest.param(
            {}, secret({**GOOD, "route": {"routes": [WATCHDOG, ROUTE]}}), "the first route is not", id="not-first"
        ),
        pytest.param(
            {},
            secret({**GOOD, "route": {"routes": [{**ROUTE, "continue": False}]}}),
            "does not continue",
            id="no-continue",
        ),
        pytest.param(
            {"monitoring_remediation_webhook_url": "http://other:5050/alerts"},
            secret(GOOD),
            "no receiver",
            id="other-url",
        ),
        pytest.param({}, secret({**GOOD, "receivers": GOOD["receivers"][1:]}), "receiver null is gone", id="null-gone"),
        pytest.param(
            {"monitoring_values": {"alertmanager": {"config": {"receivers": []}}}},
            secret({**GOOD, "receivers": GOOD["receivers"][1:]}),
            None,
            id="null-dropped-by-the-user",
        ),
    ],
)
def test_route_landed(extra, live, evidence):
    findings = monitoring_route({**INSTALL, **extra}, live, "alertmanager-kps-alertmanager")
    if evidence is None:
        assert findings == []
    else:
        assert ids(findings) == ["monitoring-remediation-route-not-landed"]
        assert findings[0]["object"] == {"kind": "Secret", "name": "alertmanager-kps-alertmanager"}
        assert any(evidence in e for e in findings[0]["evidence"]), findings[0]["evidence"]


def test_filters_refuse_bad_input():
    with pytest.raises(AnsibleFilterError):
        monitoring_route([], None, "x")
    with pytest.raises(AnsibleFilterError):
        monitoring_route(INSTALL, "secret", "x")
    with pytest.raises(AnsibleFilterError):
        monitoring_objects(ATTACH, [], {}, None, None, False, "alertmanagers")


@pytest.mark.parametrize(
    ("variables", "mode"),
    [
        ({"monitoring_mode": "install", "monitoring_remediation_webhook_url": URL}, "install"),
        ({"monitoring_mode": "attach", "monitoring_remediation_webhook_url": URL}, "attach"),
        ({"monitoring_remediation_webhook_url": URL}, "install"),  # the role's default mode
        ({"monitoring_mode": "install", "monitoring_remediation_webhook_url": ""}, ""),  # no webhook: no route
        ({"monitoring_mode": "attach"}, ""),
    ],
)
def test_route_mode_says_where_the_route_goes(variables, mode):
    assert _alertmanager.route_mode(variables) == mode
    # the built plan carries it: the validation's route check reads it there, not from a rule of its own
    role_variables = {**INSTALL, "monitoring_remediation_webhook_url": "", **variables}
    assert monitoring_objects(role_variables)["remediation_route"] == mode
