# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The GPU fault policy, once: which fault class each GPU alert is and what the self-healing pipeline does about it.

The alert rules (:mod:`._gpu_alerts`) say *what* is wrong; this table says *what to do*, and the Event-Driven Ansible
rulebook ``extensions/eda/rulebooks/gpu_health.yml`` is generated from it (:func:`rulebook`, written by
``hack/eda_rulebook.py``), so that the rulebook's conditions and the alert rules cannot drift apart.

- :data:`FAULT_CLASSES`: fault class -> (action, why). Actions: ``quarantine`` (fatal hardware faults: the node is
  cordoned, drained and repaired), ``label`` (degradation: the node is labelled and a person notified, workloads
  keep running), ``none`` (nothing is done to the node; the rulebook logs the alert).
- :func:`alert_policies`: alert -> {fault_class, action, severity, why}. The XID alerts take their class from the
  ``xid_class`` label their rule carries (``_gpu_alerts.XID_CLASSES``); the other alerts from
  :data:`ALERT_CLASSES`.
- :func:`policy_findings`: the table checked against the alert rules (every alert has a policy, every class an
  action), as findings.
- :func:`remediation_event`: the event the remediation playbook receives for one Alertmanager alert (the contract;
  ``docs/remediation-events.md``), computed in Python; the rulebook computes the same in Jinja and a test runs both.
- :func:`rulebook`: the rulebook (a list of one rule set), ready to dump as YAML: ``gpu_health.yml`` runs the
  remediation playbook (``run_playbook``); ``gpu_health_controller.yml``, the same rules, launches the AWX /
  Automation Platform job template instead (``run_job_template``), for a rulebook activation of the EDA controller.

Facts (checked 2026-11-28):

- The node: dcgm-exporter's ``Hostname`` label is the ``NODE_NAME`` the GPU Operator sets from ``spec.nodeName``
  (``_gpu_alerts``' module doc), so it is the Kubernetes node name; every per-GPU alert keeps it (``_gpu_alerts.GPU``).
- Alertmanager's webhook payload (prometheus/alertmanager v0.35.0 ``notify/webhook/webhook.go``, ``template/
  template.go`` ``Data``/``Alert``): ``{version: "4", groupKey, truncatedAlerts, status, receiver, groupLabels,
  commonLabels, commonAnnotations, externalURL, alerts: [{status, labels, annotations, startsAt, endsAt,
  generatorURL, fingerprint}]}``; ``status`` is ``firing`` or ``resolved``.
- ansible-rulebook 1.3.2 (PyPI): action arguments are rendered with a Jinja2 ``NativeEnvironment`` and
  ``StrictUndefined`` (``ansible_rulebook/util.py`` ``render_string``), so ``"{{ event.alert.labels }}"`` passes a
  mapping and a missing label needs ``default``; ``run_playbook`` takes ``name`` (a path or a collection playbook
  ``namespace.collection.name``, found under the collection's ``playbooks/``), ``extra_vars`` and ``lock`` (actions
  holding the same lock run one at a time); a rule set's ``match_multiple_rules`` defaults to false.
- ansible-rulebook 1.3.2 ``run_job_template`` (``action/run_job_template.py``, ``job_template_runner.py``): ``name``
  and ``organization`` (required) find the template through ``GET api/v2/unified_job_templates/?name=`` (type
  ``job_template``, ``summary_fields.organization.name``); ``job_args`` is the launch body (``POST`` to the template's
  ``related.launch``: ``extra_vars``, and ``limit`` = the rule set's hosts unless given); the action waits for the job
  by polling ``api/v2/jobs/?id__in=``. A rulebook with a controller action does not start without a controller
  (``--controller-url`` and ``--controller-token`` or username/password, or ``EDA_CONTROLLER_URL``/
  ``EDA_CONTROLLER_TOKEN``...; ``app.py`` ``validate_actions`` raises ControllerNeededException, then ``GET
  api/v2/config/``), which is why the controller rulebook is a second file and not a condition in the first.
  AWX drops ``extra_vars`` a template does not prompt for (``ask_variables_on_launch`` or a survey), so the
  remediation templates ask for them (``awx/job_templates.yml``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils import _gpu_alerts

Finding = dict[str, Any]

ACTIONS = ("quarantine", "label", "none")

# fault class -> (action, why)
FAULT_CLASSES: dict[str, tuple[str, str]] = {
    "bus": ("quarantine", "the GPU fell off the bus: every job on it failed and only a reset or power cycle helps"),
    "memory": ("quarantine", "uncorrectable memory error or failed row remap: results computed on it are suspect"),
    "nvlink": ("quarantine", "an NVLink link failed: multi-GPU jobs across it fail or hang"),
    "hardware": ("quarantine", "the GPU or its firmware hit a fatal fault that NVIDIA's Xid catalog resets"),
    "thermal": ("label", "thermal throttling slows the GPU but it still computes correctly: label and notify"),
    "power": ("label", "power throttling slows the GPU but it still computes correctly: label and notify"),
    "interconnect": ("label", "NVLink or PCIe errors are retried: degraded, not failed; label and notify"),
    "application": ("none", "an application XID is the program's fault; the GPU stays usable"),
    "capacity": ("none", "the device plugin already withholds the unhealthy GPUs; their own fault alerts act"),
    "exporter": ("none", "the GPU metrics are missing: no fault is known, and acting blind is unsafe"),
    "utilisation": ("none", "an idle allocated GPU is a workload's matter, not a node fault"),
}

# The alerts whose rule carries no xid_class label (the hardware XID alerts do): alert -> fault class.
ALERT_CLASSES: dict[str, str] = {
    "GPUXidApplicationError": "application",  # the XIDs of _gpu_alerts.XID_CLASSES["application"]
    "GPUUncorrectableECCError": "memory",
    "GPURowRemapFailure": "memory",
    "GPUFallenOffBus": "bus",
    "GPUThermalThrottling": "thermal",
    "GPUPowerThrottling": "power",
    "GPUNVLinkErrors": "interconnect",
    "GPUPCIeReplayStorm": "interconnect",
    "GPUNodeAdvertisesFewerGPUs": "capacity",
    "GPUExporterDown": "exporter",
    "GPUExporterAbsent": "exporter",
    "GPUAllocatedButIdle": "utilisation",
}

NODE_LABEL = "Hostname"  # the alert label naming the Kubernetes node (dcgm-exporter's NODE_NAME)
PLAYBOOK = "gpuops.platform.remediate"  # playbooks/remediate.yml of this collection
LOCK = "gpuops-remediation"  # one remediation run at a time: the circuit breaker counts what the last one did
JOB_TEMPLATE = "gpuops - remediate"  # awx/job_templates.yml: playbooks/remediate.yml, the whole pipeline
ORGANIZATION = "Default"  # awx/job_templates.yml's organization
DEFAULT_MODE = "dry_run"  # what the rulebook passes when its gpuops_remediation_mode variable is not set
SOURCE = "gpuops.platform.alertmanager"
SOURCE_DEFAULTS: dict[str, Any] = {"host": "127.0.0.1", "port": 5050}


def _rules_by_alert() -> dict[str, Mapping[str, Any]]:
    return {r["alert"]: r for g in _gpu_alerts.rule_groups() for r in g["rules"]}


def alert_policies() -> dict[str, dict[str, str]]:
    """Alert -> {fault_class, action, severity, why}, for every alert of the collection's rules, in their order.
    KeyError when an alert has no fault class (policy_findings says which)."""
    out = {}
    for alert, rule in _rules_by_alert().items():
        labels = rule.get("labels") or {}
        fault_class = labels.get("xid_class") or ALERT_CLASSES[alert]
        action, why = FAULT_CLASSES[fault_class]
        out[alert] = {"fault_class": fault_class, "action": action, "severity": labels.get("severity", ""), "why": why}
    return out


def _finding(fid: str, name: str, evidence: str, cause: str, fix: str) -> Finding:
    return {
        "id": fid,
        "severity": "error",
        "object": {"kind": "alert", "name": name},
        "evidence": [evidence],
        "cause": cause,
        "fix": fix,
    }


def policy_findings() -> list[Finding]:
    """The fault table checked against the alert rules: every alert of ``_gpu_alerts.ALERTS`` has a rule and a fault
    class, every XID class and fault class an action, and no policy names an alert that does not exist."""
    out: list[Finding] = []
    rules = _rules_by_alert()
    where = "plugins/module_utils/_fault_policy.py"
    for alert in _gpu_alerts.ALERTS:
        xid_class = ((rules.get(alert) or {}).get("labels") or {}).get("xid_class")
        fault_class = xid_class or ALERT_CLASSES.get(alert)
        if alert not in rules:
            out.append(
                _finding(
                    "fault-policy-no-rule",
                    alert,
                    "rule_groups(): no rule",
                    "ALERTS names an alert that no rule defines.",
                    "Add its rule to _gpu_alerts or drop it from ALERTS.",
                )
            )
        if fault_class is None:
            out.append(
                _finding(
                    "fault-policy-unclassified",
                    alert,
                    f"{where}: ALERT_CLASSES has no {alert}",
                    "The alert has no fault class, so the rulebook would not know what to do with it.",
                    "Add it to ALERT_CLASSES (or give its rule an xid_class label).",
                )
            )
        elif fault_class not in FAULT_CLASSES:
            out.append(
                _finding(
                    "fault-policy-class-unknown",
                    alert,
                    f"fault class: {fault_class}",
                    "The alert's fault class has no action.",
                    "Add the class to FAULT_CLASSES.",
                )
            )
    for alert in sorted(set(ALERT_CLASSES) - set(_gpu_alerts.ALERTS)):
        out.append(
            _finding(
                "fault-policy-alert-unknown",
                alert,
                f"{where}: ALERT_CLASSES[{alert!r}]",
                "The policy names an alert the rules do not define.",
                "Remove it or fix its name.",
            )
        )
    for xid_class in _gpu_alerts.XID_CLASSES:
        if xid_class not in FAULT_CLASSES:
            out.append(
                _finding(
                    "fault-policy-class-unknown",
                    xid_class,
                    f"XID class: {xid_class}",
                    "An XID class has no action.",
                    "Add the class to FAULT_CLASSES.",
                )
            )
    for fault_class, (action, _why) in FAULT_CLASSES.items():
        if action not in ACTIONS:
            out.append(
                _finding(
                    "fault-policy-action-unknown",
                    fault_class,
                    f"action: {action}",
                    f"The action is not one of {', '.join(ACTIONS)}.",
                    "Use one of those.",
                )
            )
    return out


def remediation_event(alert: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``gpuops_remediation_event`` the remediation playbook gets for one alert of an Alertmanager webhook payload,
    or None when the policy does nothing for it (an action ``none``, an alert of no rule here, no node label)."""
    labels = alert.get("labels") or {}
    policy = alert_policies().get(labels.get("alertname", ""))
    if policy is None or policy["action"] == "none" or NODE_LABEL not in labels:
        return None
    return {
        "node": labels[NODE_LABEL],
        "alert": labels["alertname"],
        "fault_class": policy["fault_class"],
        "action": policy["action"],
        "severity": labels.get("severity", ""),
        "gpu": {
            "uuid": labels.get("UUID", ""),
            "pci_bus_id": labels.get("pci_bus_id", ""),
            "index": int(labels["gpu"]) if str(labels.get("gpu", "")).isdigit() else None,
        },
        "starts_at": alert.get("startsAt", ""),
        "fingerprint": alert.get("fingerprint", ""),
        "labels": dict(labels),
        "annotations": dict(alert.get("annotations") or {}),
        "status": alert.get("status", ""),
    }


# --- the rulebook ------------------------------------------------------------------------------------------------

_L = "event.alert.labels"


def _event_vars(fault_class: str, action: str) -> dict[str, Any]:
    """remediation_event() in the rulebook's Jinja (a NativeEnvironment: a lone expression keeps its type)."""
    return {
        "node": f"{{{{ {_L}.{NODE_LABEL} }}}}",
        "alert": f"{{{{ {_L}.alertname }}}}",
        "fault_class": fault_class,
        "action": action,
        "severity": f'{{{{ {_L}.severity | default("") }}}}',
        "gpu": {
            "uuid": f'{{{{ {_L}.UUID | default("") }}}}',
            "pci_bus_id": f'{{{{ {_L}.pci_bus_id | default("") }}}}',
            "index": f'{{{{ {_L}.gpu | int if ({_L}.gpu | default("")).isdigit() else none }}}}',
        },
        "starts_at": '{{ event.alert.startsAt | default("") }}',
        "fingerprint": '{{ event.alert.fingerprint | default("") }}',
        "labels": f"{{{{ {_L} }}}}",
        "annotations": "{{ event.alert.annotations | default({}) }}",
        "status": '{{ event.alert.status | default("") }}',
    }


def _in(alerts: list[str]) -> str:
    return "[" + ", ".join(f'"{a}"' for a in alerts) + "]"


def _remediation_action(controller: bool, fault_class: str, action: str) -> dict[str, Any]:
    """The action of a rule that acts: the remediation playbook, or its AWX job template, with the same extra vars."""
    extra_vars = {
        "gpuops_remediation_mode": f'{{{{ gpuops_remediation_mode | default("{DEFAULT_MODE}") }}}}',
        "gpuops_remediation_event": _event_vars(fault_class, action),
    }
    if controller:
        return {
            "run_job_template": {
                "name": f'{{{{ gpuops_remediation_job_template | default("{JOB_TEMPLATE}") }}}}',
                "organization": f'{{{{ gpuops_remediation_organization | default("{ORGANIZATION}") }}}}',
                "lock": LOCK,
                "job_args": {"extra_vars": extra_vars},
            }
        }
    return {
        "run_playbook": {
            "name": f'{{{{ gpuops_remediation_playbook | default("{PLAYBOOK}") }}}}',
            "lock": LOCK,
            "extra_vars": extra_vars,
        }
    }


def rulebook(controller: bool = False) -> list[dict[str, Any]]:
    """The rulebook ``gpu_health.yml`` (``gpu_health_controller.yml`` with ``controller``): one rule per alert that acts
    (quarantine or label), passing the alert to the remediation playbook (its AWX job template); the alerts that do
    nothing, the acting alerts without a node label and every other alert are logged. Rulebook variables
    (``--vars``/``--env-vars``, or an activation's variables): ``gpuops_eda_host``, ``gpuops_eda_port`` (where the
    source listens), ``gpuops_remediation_mode`` (passed on; default dry_run), ``gpuops_remediation_playbook`` (the
    playbook run; default the collection's remediate playbook) or, with ``controller``,
    ``gpuops_remediation_job_template`` and ``gpuops_remediation_organization`` (the job template launched; default
    ``gpuops - remediate`` in ``Default``)."""
    policies = alert_policies()
    acting = [a for a, p in policies.items() if p["action"] != "none"]
    idle = [a for a, p in policies.items() if p["action"] == "none"]
    rules: list[dict[str, Any]] = []
    for alert in acting:
        p = policies[alert]
        rules.append(
            {
                "name": f"{alert}: {p['action']} ({p['fault_class']})",
                "condition": f'{_L}.alertname == "{alert}" and {_L}.{NODE_LABEL} is defined',
                "action": _remediation_action(controller, p["fault_class"], p["action"]),
            }
        )
    for alert in idle:
        p = policies[alert]
        rules.append(
            {
                "name": f"{alert}: no action ({p['fault_class']})",
                "condition": f'{_L}.alertname == "{alert}"',
                "action": {
                    "debug": {
                        "msg": f"{{{{ {_L}.alertname }}}} {{{{ event.alert.status }}}} on "
                        f'{{{{ {_L}.{NODE_LABEL} | default("-") }}}}: no action, {p["why"]}'
                    }
                },
            }
        )
    rules += [
        {
            "name": "GPU alerts without a node",
            "condition": f"{_L}.alertname in {_in(acting)} and {_L}.{NODE_LABEL} is not defined",
            "action": {
                "debug": {
                    "msg": f"{{{{ {_L}.alertname }}}} has no {NODE_LABEL} label: no node to act on, ignored "
                    "(labels: {{ " + _L + " }})"
                }
            },
        },
        {
            "name": "Alerts of other rules",
            "condition": f"{_L}.alertname not in {_in(acting + idle)}",
            "action": {"debug": {"msg": f"{{{{ {_L}.alertname }}}} is not a GPU alert of gpuops.platform: ignored"}},
        },
    ]
    return [
        {
            "name": "GPU health: alerts to remediation" + (" (AWX job template)" if controller else ""),
            "hosts": "all",
            "sources": [
                {
                    "name": "alertmanager",
                    SOURCE: {
                        "host": f'{{{{ gpuops_eda_host | default("{SOURCE_DEFAULTS["host"]}") }}}}',
                        "port": f"{{{{ gpuops_eda_port | default({SOURCE_DEFAULTS['port']}) }}}}",
                    },
                }
            ],
            "rules": rules,
        }
    ]
