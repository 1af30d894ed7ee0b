# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The Alertmanager route of the GPU alerts to the remediation rulebook's webhook, once: pure functions (no I/O).
Facts checked against kube-prometheus-stack 88.5.3 (values.yaml ``alertmanager.config``,
``alertmanager.alertmanagerSpec.secrets``, templates/alertmanager/secret.yaml) and prometheus-operator's
``monitoring.coreos.com/v1alpha1`` AlertmanagerConfig (pkg/apis/monitoring/v1alpha1/alertmanager_config_types.go).

- **The route**: the GPU alerts (``alertname=~"GPU.+"``) to the receiver ``gpuops-remediation``, first among the
  top-level routes and with ``continue: true`` so they still reach every receiver they reach without it; one group
  per GPU (``alertname``, ``Hostname``, ``UUID``) sent at once (``group_wait: 1s``); resolved alerts sent too.
- **install** (:func:`chart_values`): the route and receiver land in the chart's ``alertmanager.config``, which the
  chart renders into the Secret ``alertmanager-<fullname>-alertmanager`` (key ``alertmanager.yaml``). Helm replaces
  lists, so the lists the role writes keep what they would hold without it: the user's own
  ``monitoring_values.alertmanager.config`` routes and receivers, else the chart's defaults (the ``null`` receiver
  and the Watchdog route). With a token Secret, the Secret is mounted by ``alertmanagerSpec.secrets`` (at
  ``/etc/alertmanager/secrets/<name>/<key>``) and the webhook reads it as its bearer ``credentials_file``: the token
  is never a chart value.
- **attach** (:func:`config_object`): an AlertmanagerConfig object in the Alertmanager's namespace. The Prometheus
  Operator adds a ``namespace="<object namespace>"`` matcher to its routes under the Alertmanager's default
  ``alertmanagerConfigMatcherStrategy`` (``OnNamespace``), and the GPU alerts carry no ``namespace`` label, so the
  route would match nothing: :func:`alertmanager_findings` wants the strategy
  ``OnNamespaceExceptForAlertmanagerNamespace`` or ``None``, and the object's labels are the fewest the
  Alertmanager's ``alertmanagerConfigSelector`` selects.
- **Landed** (:func:`route_findings`): the Alertmanager configuration read back (install: the rendered Secret) holds
  the receiver with the URL and, first among the top-level routes, the route to it.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring._monitoring_spec import (
    OWNER_LABELS,
    Finding,
    Obj,
    finding,
)
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring._placement import satisfying_labels

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

RECEIVER = "gpuops-remediation"
CONFIG_NAME = RECEIVER  # the AlertmanagerConfig object (attach)
MATCHER = ("alertname", "=~", "GPU.+")
GROUP_BY = ["alertname", "Hostname", "UUID"]
TIMING = {"group_wait": "1s", "group_interval": "5s", "repeat_interval": "1h"}
SECRETS_DIR = "/etc/alertmanager/secrets"  # where the operator mounts alertmanagerSpec.secrets
CONFIG_KEY = "alertmanager.yaml"
API_VERSION = "monitoring.coreos.com/v1alpha1"
# the strategies under which a route of an AlertmanagerConfig in the Alertmanager's own namespace matches alerts
# without a namespace label (Alertmanager CRD: alertmanagerConfigMatcherStrategy.type; default OnNamespace)
STRATEGIES_OK = ("OnNamespaceExceptForAlertmanagerNamespace", "None")
# kube-prometheus-stack 88.5.3 values.yaml alertmanager.config: the lists the role writes, as the chart has them
CHART_ROUTES: list[dict[str, Any]] = [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}]
CHART_RECEIVERS: list[dict[str, Any]] = [{"name": "null"}]


def route_mode(variables: Mapping[str, Any]) -> str:
    """Where the route to the remediation webhook goes: ``install`` (the chart's values), ``attach`` (an
    AlertmanagerConfig in the Alertmanager's namespace), or "" (no webhook: no route)."""
    return str(variables.get("monitoring_mode") or "install") if webhook(variables)["url"] else ""


def webhook(variables: Mapping[str, Any]) -> dict[str, str]:
    """The webhook asked for: ``{url, token_secret, token_key}``; url empty when the route is off."""
    return {
        "url": str(variables.get("monitoring_remediation_webhook_url") or ""),
        "token_secret": str(variables.get("monitoring_remediation_token_secret") or ""),
        "token_key": str(variables.get("monitoring_remediation_token_key") or "token"),
    }


_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+\Z")  # a Secret's data key (k8s.io/apimachinery IsConfigMapKey)


def key_findings(variables: Mapping[str, Any]) -> list[Finding]:
    """The token's key names a Secret data key (the URL and the Secret's name are the role inputs' url and
    dns1123_label rules)."""
    hook = webhook(variables)
    if not hook["token_secret"] or _SECRET_KEY.match(hook["token_key"]):
        return []
    return [
        finding(
            "monitoring-remediation-token-key",
            "error",
            "variable",
            "monitoring_remediation_token_key",
            [f"monitoring_remediation_token_key is {hook['token_key']!r}"],
            "a Secret's key is letters, digits, '-', '_' and '.'",
            "set the key of the token in monitoring_remediation_token_secret, for example token",
        )
    ]


def _matcher_string() -> str:
    name, op, value = MATCHER
    return f'{name}{op}"{value}"'


def route() -> dict[str, Any]:
    """The top-level route, in Alertmanager's configuration file form."""
    return {
        "receiver": RECEIVER,
        "matchers": [_matcher_string()],
        "group_by": list(GROUP_BY),
        **TIMING,
        "continue": True,
    }


def receiver(hook: Mapping[str, str]) -> dict[str, Any]:
    """The webhook receiver, in Alertmanager's configuration file form (bearer token read from the mounted Secret)."""
    config: dict[str, Any] = {"url": hook["url"], "send_resolved": True}
    if hook["token_secret"]:
        path = f"{SECRETS_DIR}/{hook['token_secret']}/{hook['token_key']}"
        config["http_config"] = {"authorization": {"type": "Bearer", "credentials_file": path}}
    return {"name": RECEIVER, "webhook_configs": [config]}


def _named(items: Any, key: str) -> list[Any]:
    return [
        i for i in (items if isinstance(items, list) else []) if not (isinstance(i, Mapping) and i.get(key) == RECEIVER)
    ]


def _dig(values: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(values, Mapping):
            return None
        values = values.get(key)
    return values


def chart_values(variables: Mapping[str, Any]) -> tuple[dict[str, Any], list[Finding]]:
    """install: the chart values that put the route and receiver in the release's Alertmanager - the whole lists
    (``alertmanager.config.route.routes``, ``alertmanager.config.receivers``, ``alertmanager.alertmanagerSpec.secrets``
    with a token Secret), the user's entries (``monitoring_values``) or else the chart's kept after the role's. These
    values outrank the user's (Helm would replace the lists). ``{}`` when the route is off."""
    hook = webhook(variables)
    if not hook["url"] or str(variables.get("monitoring_mode") or "install") != "install":
        return {}, []
    user = variables.get("monitoring_values") or {}
    if _dig(user, "alertmanager", "enabled") is False:
        return {}, [
            finding(
                "monitoring-remediation-no-alertmanager",
                "error",
                "variable",
                "monitoring_remediation_webhook_url",
                ["monitoring_values.alertmanager.enabled is false"],
                "the route goes in the release's Alertmanager, and the values turn it off",
                "remove alertmanager.enabled: false from monitoring_values, or empty "
                "monitoring_remediation_webhook_url",
            )
        ]
    if _dig(user, "alertmanager", "alertmanagerSpec", "useExistingSecret") is True:
        return {}, [
            finding(
                "monitoring-remediation-existing-secret",
                "error",
                "variable",
                "monitoring_remediation_webhook_url",
                ["monitoring_values.alertmanager.alertmanagerSpec.useExistingSecret is true"],
                "the chart then renders no configuration Secret, so alertmanager.config (where the route goes) is "
                "unused",
                "add the route to your own Alertmanager Secret (docs/remediation-events.md) and empty "
                "monitoring_remediation_webhook_url, or let the chart write the Secret",
            )
        ]
    routes = _dig(user, "alertmanager", "config", "route", "routes")
    receivers = _dig(user, "alertmanager", "config", "receivers")
    routes = copy.deepcopy(CHART_ROUTES) if routes is None else _named(routes, "receiver")
    receivers = copy.deepcopy(CHART_RECEIVERS) if receivers is None else _named(receivers, "name")
    out: dict[str, Any] = {
        "config": {"route": {"routes": [route(), *routes]}, "receivers": [*receivers, receiver(hook)]}
    }
    if hook["token_secret"]:
        secrets = _dig(user, "alertmanager", "alertmanagerSpec", "secrets") or []
        secrets = [s for s in secrets if s != hook["token_secret"]] if isinstance(secrets, list) else []
        out["alertmanagerSpec"] = {"secrets": [*secrets, hook["token_secret"]]}
    return {"alertmanager": out}, []


def config_object(variables: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> Obj:
    """attach: the AlertmanagerConfig (``monitoring.coreos.com/v1alpha1``) in the Alertmanager's namespace, owned
    by the role and carrying ``labels`` (what the Alertmanager's ``alertmanagerConfigSelector`` wants)."""
    hook = webhook(variables)
    name, op, value = MATCHER
    config: dict[str, Any] = {"url": hook["url"], "sendResolved": True}
    if hook["token_secret"]:
        config["httpConfig"] = {
            "authorization": {"type": "Bearer", "credentials": {"name": hook["token_secret"], "key": hook["token_key"]}}
        }
    obj = {
        "apiVersion": API_VERSION,
        "kind": "AlertmanagerConfig",
        "metadata": {"name": CONFIG_NAME, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "route": {
                "receiver": RECEIVER,
                "matchers": [{"name": name, "value": value, "matchType": op}],
                "groupBy": list(GROUP_BY),
                "groupWait": TIMING["group_wait"],
                "groupInterval": TIMING["group_interval"],
                "repeatInterval": TIMING["repeat_interval"],
                "continue": True,
            },
            "receivers": [{"name": RECEIVER, "webhookConfigs": [config]}],
        },
    }
    return _owned.owned(obj, OWNER_LABELS)


def _no_alertmanager(namespace: str, evidence: str, fix: str) -> Finding:
    return finding(
        "monitoring-remediation-no-alertmanager",
        "error",
        "Namespace",
        namespace,
        [evidence],
        "monitoring_remediation_webhook_url routes the GPU alerts through an AlertmanagerConfig, which the Prometheus "
        "Operator only merges into an Alertmanager object",
        fix,
    )


def alertmanager_findings(
    variables: Mapping[str, Any], alertmanagers: Sequence[Mapping[str, Any]], namespace: str, crd_served: bool
) -> tuple[dict[str, str] | None, list[Finding]]:
    """attach: the labels the AlertmanagerConfig needs, or the findings saying why the route cannot land - no
    AlertmanagerConfig CRD, no Alertmanager (or several, none named), a null ``alertmanagerConfigSelector``, or a
    matcher strategy under which the route matches nothing."""
    if not webhook(variables)["url"] or str(variables.get("monitoring_mode") or "install") != "attach":
        return None, []
    fix_ns = "set monitoring_alertmanager_namespace to the namespace of the Prometheus Operator's Alertmanager"
    if not crd_served:
        return None, [
            _no_alertmanager(
                namespace,
                "the cluster serves no alertmanagerconfigs.monitoring.coreos.com (v1alpha1)",
                "install the Prometheus Operator's AlertmanagerConfig CRD, or add the route to your Alertmanager by "
                "hand (docs/remediation-events.md) and empty monitoring_remediation_webhook_url",
            )
        ]
    wanted = str(variables.get("monitoring_alertmanager_name") or "")
    found = [a for a in alertmanagers if not wanted or (a.get("metadata") or {}).get("name") == wanted]
    names = sorted(str((a.get("metadata") or {}).get("name")) for a in alertmanagers)
    if len(found) != 1:
        what = f"no Alertmanager {wanted}" if wanted else "no Alertmanager object"
        evidence = f"{what} in namespace {namespace}" if not found else f"Alertmanagers {', '.join(names)}"
        fix = fix_ns if not found else "name one in monitoring_alertmanager_name"
        return None, [_no_alertmanager(namespace, evidence, fix)]
    spec = found[0].get("spec") or {}
    name = str(found[0]["metadata"].get("name"))
    out: list[Finding] = []
    strategy = str((spec.get("alertmanagerConfigMatcherStrategy") or {}).get("type") or "OnNamespace")
    if strategy not in STRATEGIES_OK:
        out.append(
            finding(
                "monitoring-remediation-matcher-strategy",
                "error",
                "Alertmanager",
                f"{namespace}/{name}",
                [f"spec.alertmanagerConfigMatcherStrategy.type is {strategy}"],
                "the Prometheus Operator then adds a namespace matcher to the AlertmanagerConfig's route, and the GPU "
                "alerts carry no namespace label: the route would match nothing",
                "set spec.alertmanagerConfigMatcherStrategy.type to OnNamespaceExceptForAlertmanagerNamespace (or "
                "None) on the Alertmanager object",
            )
        )
    labels, why = satisfying_labels(spec.get("alertmanagerConfigSelector"))
    if labels is None:
        out.append(
            finding(
                "monitoring-remediation-selector",
                "error",
                "Alertmanager",
                f"{namespace}/{name}",
                [f"spec.alertmanagerConfigSelector: {json.dumps(spec.get('alertmanagerConfigSelector'))}", why],
                "the Alertmanager merges only the AlertmanagerConfig objects its selector selects",
                "set spec.alertmanagerConfigSelector on the Alertmanager object to one a label set satisfies "
                "({} selects every object)",
            )
        )
    return (labels if not out else None), out


def _decode(secret: Mapping[str, Any] | None) -> tuple[Any, str]:
    data = (secret or {}).get("data") or {}
    if CONFIG_KEY not in data:
        return None, f"no key {CONFIG_KEY}"
    if yaml is None:  # pragma: no cover - PyYAML ships with ansible-core
        return None, f"{CONFIG_KEY} cannot be read: PyYAML is not installed for this Python"
    try:
        return yaml.safe_load(base64.b64decode(str(data[CONFIG_KEY]), validate=True)) or {}, ""
    except (binascii.Error, ValueError, yaml.YAMLError) as exc:
        return None, f"{CONFIG_KEY} is not YAML: {exc}"


def route_findings(variables: Mapping[str, Any], secret: Mapping[str, Any] | None, name: str) -> list[Finding]:
    """install: the Alertmanager configuration Secret ``name`` as read back holds the receiver with the webhook URL
    and, first among the top-level routes, the route to it with its matcher; the chart's routes and receivers kept."""
    hook = webhook(variables)
    if not hook["url"] or str(variables.get("monitoring_mode") or "install") != "install":
        return []
    if secret is None:
        evidence = ["the Secret does not exist"]
        config: Any = None
    else:
        config, why = _decode(secret)
        evidence = [why] if why else []
    if config is not None:
        if not isinstance(config, Mapping):
            evidence.append(f"{CONFIG_KEY} is not a mapping")
            config = {}
        receivers = {r.get("name"): r for r in config.get("receivers") or [] if isinstance(r, Mapping)}
        hooks = (receivers.get(RECEIVER) or {}).get("webhook_configs") or []
        if not any(isinstance(h, Mapping) and h.get("url") == hook["url"] for h in hooks):
            evidence.append(f"no receiver {RECEIVER} with webhook url {hook['url']}")
        routes = (config.get("route") or {}).get("routes") or []
        first = routes[0] if routes and isinstance(routes[0], Mapping) else {}
        if first.get("receiver") != RECEIVER or _matcher_string() not in (first.get("matchers") or []):
            evidence.append(f"the first route is not the one to {RECEIVER} ({_matcher_string()}): {json.dumps(first)}")
        elif not first.get("continue"):
            evidence.append("the route to the webhook does not continue: the alerts would reach no other receiver")
        missing = [r["name"] for r in CHART_RECEIVERS if r["name"] not in receivers]
        user = _dig(variables.get("monitoring_values") or {}, "alertmanager", "config", "receivers")
        if user is None and missing:
            evidence.append(f"the chart's receiver {', '.join(missing)} is gone")
    if not evidence:
        return []
    return [
        finding(
            "monitoring-remediation-route-not-landed",
            "error",
            "Secret",
            name,
            evidence,
            "the release's Alertmanager configuration does not route the GPU alerts to the remediation webhook",
            "run the monitoring role again (install mode writes alertmanager.config), and look for another writer of "
            "alertmanager.config or alertmanagerSpec.useExistingSecret in monitoring_values",
        )
    ]
