#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: role_inputs
short_description: Check a role's input variables before the run changes anything
version_added: 0.1.0
description:
  - Checks one role's variables (or the collection-wide C(gpuops_*) ones) and returns findings, each with an
    C(id), a C(severity), the C(object) (the variable), the C(evidence) (its value), the C(cause) and the C(fix).
  - "Rules: every variable against its argument-spec entry (O(options): type, list elements, choices, and field
    by field the suboptions of a dict or of a list of dicts, unknown fields named with the nearest known one)
    converted as Ansible's role argument validation converts; ints in range by their name (C(*_timeout) 1 or more,
    C(*_port) 1 to 65535, C(maxParallelUpgrades) and C(timeoutSeconds) 0 or more); variables with the role's
    O(prefix) that the role does not have (typos, removed variables - O(removed)); the value rules of O(checks); and
    the user chart values of O(values) against the kinds of the values the role renders for the same keys."
  - "Value rules: V(dns1123_label) (namespaces), V(release_name) (Helm release names, 53 characters at most),
    V(chart_version) (one exact version), V(nvidia_driver_version), V(amd_driver_version) (versions only, shell
    metacharacters named), V(url), V(duration) (a Prometheus duration such as V(30s)), V(non_empty_mapping),
    V(kubeconfig) (the file exists, is a kubeconfig and has the context asked for), V(readable_file) (a CA bundle
    that exists), V(nfd_sources) (never two Node Feature Discoveries: the nfd role and an operator chart's bundled
    one, or two bundled ones) and V(batch_schedulers) (known batch schedulers with a role, no two answering to one
    scheduler name or to kube-scheduler's, no KAI Scheduler version that watches Kueue's v1alpha1 Topology next to
    Kueue)."
  - Used by the roles' C(tasks/inputs.yml) and by the preflight play that starts C(playbooks/site.yml).
  - Fails when a finding is an error, naming each variable, its value and the fix; warns for the others (a user chart
    value whose key names a credential).
  - The value of a variable that O(options) marks C(no_log) is never shown; its findings say its kind, and the module
    masks it in everything it returns.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes.info_module
options:
  role:
    description: The role whose inputs these are (used in the message).
    type: str
    required: true
  variables:
    description: The variables to check, name to value (normally every variable with the role's prefix).
    type: dict
    required: true
  options:
    description: The role's C(meta/argument_specs.yml) options of its main entry point; no type check when omitted.
    type: dict
  prefix:
    description: With O(options), report variables with this prefix that are not options of the role.
    type: str
  chart_role:
    description:
      - A chart role's inputs (its action plugin fills them in from the task's variables). Unless given, O(prefix) is
        V(<role>_), O(variables) every variable with that prefix, O(options) the role's C(meta/argument_specs.yml);
        O(chart) the role's pinned chart (C(<role>_chart_name), C(<role>_chart_version), C(gpuops_chart_repo_mirror)
        or C(<role>_chart_repo_url), C(gpuops_chart_repo_ca_file)) when the run's plan installs the role with
        C(<role>_state) V(present) and O(chart_when); and O(checks) gain the release name, namespace, chart version
        and chart repository URL checks first and the kubeconfig check (context C(gpuops_kubeconfig_context)) last.
    type: bool
    default: false
  chart_when:
    description: With O(chart_role), whether the chart is looked up at all (a role whose chart another one installs).
    type: bool
    default: true
  removed:
    description: Removed variables and the fix to give when one is still set.
    type: dict
    default: {}
  outputs:
    description:
      - The variables the role sets itself (facts and registered results with its prefix, such as C(<role>_status)).
        With O(prefix), they are not reported as unknown when a second run of the role in one play sees them.
    type: list
    elements: str
    default: []
  checks:
    description: Value rules to run.
    type: list
    elements: dict
    default: []
    suboptions:
      var:
        description: The variable.
        type: str
        required: true
      rule:
        description: The rule.
        type: str
        required: true
        choices: [amd_driver_version, batch_schedulers, chart_version, dns1123_label, duration, kubeconfig,
                  nfd_sources, non_empty_mapping, nvidia_driver_version, readable_file, release_name, url]
      value:
        description: The value; taken from O(variables) when omitted.
        type: raw
      allow_empty:
        description: Accept an empty value (rules V(nvidia_driver_version), V(amd_driver_version), V(url), V(duration)).
        type: bool
      context:
        description: Rule V(kubeconfig) - the context that must exist in the file (empty for its current context).
        type: str
      context_var:
        description: Rule V(kubeconfig) - the variable that names the context (for the message).
        type: str
      kai_version:
        description:
          - Rule V(batch_schedulers) - the KAI Scheduler chart version (versions up to v0.10.x and the retracted
            v0.20.x watch Kueue's v1alpha1 Topology and are refused next to Kueue).
        type: str
      volcano_scheduler_name:
        description: Rule V(batch_schedulers) - the name Volcano's scheduler answers to (default V(volcano)).
        type: str
      sharing_pools:
        description:
          - Rule V(batch_schedulers) - C(gpu_sharing_pools); a pool with model V(kai_fraction) needs V(kai_scheduler)
            among the batch schedulers.
        type: list
        elements: raw
      what:
        description:
          - Rule V(url) - what the URL points at, for the fix (default "the chart repository URL").
          - Rule V(readable_file) - what the file is, for the fix (default "a file").
        type: str
      gpu_operator:
        description: Rule V(nfd_sources) - C(gpuops_gpu_operator_managed).
        type: bool
      gpu_operator_nfd:
        description: Rule V(nfd_sources) - C(gpu_operator_nfd_enabled); unset for the role's default.
        type: bool
      amd_gpu_operator:
        description: Rule V(nfd_sources) - C(gpuops_amd_gpu_operator_managed).
        type: bool
      amd_gpu_operator_nfd:
        description: Rule V(nfd_sources) - C(amd_gpu_operator_nfd_enabled); unset for the role's default.
        type: bool
      network_operator:
        description: Rule V(nfd_sources) - C(gpuops_network_operator_managed).
        type: bool
      network_operator_nfd_managed:
        description: Rule V(nfd_sources) - C(network_operator_nfd_managed); unset for the role's default.
        type: bool
      example:
        description: Rule V(url) - an example URL for the fix.
        type: str
      schemes:
        description: Rule V(url) - the URL schemes the variable accepts (default V(http), V(https) and V(oci)).
        type: list
        elements: str
        choices: [http, https, oci]
  values:
    description: User chart values to check against what the role renders.
    type: list
    elements: dict
    default: []
    suboptions:
      var:
        description: The variable holding the user's chart values (in O(variables)).
        type: str
        required: true
      role_values:
        description: The values the role renders (before the user's values are merged over them).
        type: dict
        required: true
      instead:
        description:
          - Dotted chart value keys that hold a credential, each mapped to the role variable that keeps it in a
            Kubernetes Secret instead (for the warning's fix), for example C(grafana.adminPassword) to
            C(monitoring_grafana_admin_password).
          - Any user value whose key names a credential (password, token, API key) is warned about, named or not.
        type: dict
  chart:
    description:
      - The role's pinned chart - with no other finding on O(chart.var), the module reads the repository (an
        C(http(s)://) repository's C(index.yaml), an C(oci://) registry's tag list) and reports a version it does not
        serve, naming the versions it has. An C(http(s)://) repository that cannot be read is an error too; an OCI
        tag list that cannot be read is a warning (helm's own registry login may still pull the chart).
      - Read-only, also in check mode; one request per repository (two for a registry that wants a token).
    type: dict
    suboptions:
      var:
        description: The variable that pins the version (for the message).
        type: str
        required: true
      name:
        description: The chart's name in the repository.
        type: str
        required: true
      repo_url:
        description: The repository (C(gpuops_chart_repo_mirror) when set, else the role's own).
        type: str
        required: true
      ca_file:
        description: A CA bundle for the repository's TLS certificate.
        type: str
      timeout:
        description: Seconds to wait for the repository.
        type: int
        default: 30
"""

EXAMPLES = r"""
- name: Check the GPU Operator's inputs
  gpuops.platform.role_inputs:
    role: gpu_operator
    prefix: gpu_operator_
    variables: "{{ dict(q('ansible.builtin.varnames', '^gpu_operator_')
                        | zip(q('ansible.builtin.vars', *q('ansible.builtin.varnames', '^gpu_operator_')))) }}"
    options: "{{ (lookup('ansible.builtin.file', role_path ~ '/meta/argument_specs.yml') | from_yaml)
                 .argument_specs.main.options }}"
    checks:
      - {var: gpu_operator_namespace, rule: dns1123_label}
      - {var: gpu_operator_chart_version, rule: chart_version}
    chart:
      var: gpu_operator_chart_version
      name: gpu-operator
      repo_url: https://helm.ngc.nvidia.com/nvidia

- name: Check the kubeconfig
  gpuops.platform.role_inputs:
    role: gpuops
    variables: {gpuops_kubeconfig: "{{ gpuops_kubeconfig }}"}
    checks:
      - {var: gpuops_kubeconfig, rule: kubeconfig, context: "{{ gpuops_kubeconfig_context }}"}
"""

RETURN = r"""
findings:
  description: One per problem; empty when every input is right.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: The rule, for example V(chart-version-unpinned), V(variable-type), V(kubeconfig-malformed).
      type: str
    severity:
      description: V(error) (the module fails) or V(warning) (a credential in user chart values).
      type: str
    object:
      description: C(kind) V(variable) and C(name), the variable (a dotted path for chart values).
      type: dict
    evidence:
      description: The value as set.
      type: list
      elements: str
    cause:
      description: Why it is wrong.
      type: str
    fix:
      description: What to set.
      type: str
  sample:
    - id: driver-version-invalid
      severity: error
      object: {kind: variable, name: amd_gpu_operator_driver_version}
      evidence: ['amd_gpu_operator_driver_version: "30.20.1; reboot"']
      cause: The value contains shell metacharacter(s) ;, space; ...
      fix: set amd_gpu_operator_driver_version to a version such as 30.20.1.
report:
  description: One line per finding - the variable, its value, the cause and the fix.
  returned: always
  type: list
  elements: str
"""

from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.inputs import (  # noqa: E402
    _inputs,
    _inputs_choices,
    _inputs_roles,
    _inputs_secrets,
)
from ansible_collections.gpuops.platform.plugins.module_utils.release import _chart_index  # noqa: E402

ARGUMENT_SPEC = {
    "role": {"type": "str", "required": True},
    "variables": {"type": "dict", "required": True},
    "options": {"type": "dict"},
    "prefix": {"type": "str"},
    "chart_role": {"type": "bool", "default": False},  # its action plugin's (it fills the arguments in)
    "chart_when": {"type": "bool", "default": True},
    "removed": {"type": "dict", "default": {}},
    "outputs": {"type": "list", "elements": "str", "default": []},
    "checks": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "var": {"type": "str", "required": True},
            "rule": {"type": "str", "required": True, "choices": sorted(_inputs_choices.RULES)},
            "value": {"type": "raw"},
            "allow_empty": {"type": "bool"},
            "context": {"type": "str"},
            "context_var": {"type": "str"},
            "kai_version": {"type": "str"},
            "volcano_scheduler_name": {"type": "str"},
            "sharing_pools": {"type": "list", "elements": "raw"},
            "what": {"type": "str"},
            "gpu_operator": {"type": "bool"},
            "gpu_operator_nfd": {"type": "bool"},
            "amd_gpu_operator": {"type": "bool"},
            "amd_gpu_operator_nfd": {"type": "bool"},
            "network_operator": {"type": "bool"},
            "network_operator_nfd_managed": {"type": "bool"},
            "example": {"type": "str"},
            "schemes": {"type": "list", "elements": "str", "choices": ["http", "https", "oci"]},
        },
    },
    "values": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "var": {"type": "str", "required": True},
            "role_values": {"type": "dict", "required": True},
            "instead": {"type": "dict"},
        },
    },
    "chart": {
        "type": "dict",
        "options": {
            "var": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "repo_url": {"type": "str", "required": True},
            "ca_file": {"type": "str"},
            "timeout": {"type": "int", "default": 30},
        },
    },
}


def run(ctx: Any) -> dict[str, Any]:
    p = ctx.params
    checks = []
    for item in p["checks"]:
        given = {k: v for k, v in item.items() if v is not None}
        if item["value"] is None and item["var"] not in p["variables"]:
            given["value"] = None  # the variable is unset: check null, not a missing key
        checks.append(given)
    findings = _inputs_roles.check(
        checks,
        p["variables"],
        options=p["options"],
        prefix=p["prefix"],
        removed=p["removed"],
        outputs=p["outputs"],
        values=p["values"],
    )
    chart = p["chart"]  # read only when every other input is right (a wrong URL or version says so itself)
    if chart and not any(f["severity"] == "error" for f in findings):
        version = p["variables"].get(chart["var"])
        if isinstance(version, str) and version:
            found = _chart_index.published_finding(
                chart["var"], chart["name"], version, chart["repo_url"], chart["ca_file"] or None, chart["timeout"]
            )
            findings += [found] if found else []
    # a secret's value never leaves the module: not in a finding (masked there), the invocation or any message
    for var in _inputs_secrets.secret_variables(p["options"]):
        ctx.module.no_log_values.update(
            s for s in _inputs_secrets.secret_strings(p["variables"].get(var)) if len(s) >= 3
        )
    report = [_inputs.message(f) for f in findings]
    result: dict[str, Any] = {"changed": False, "findings": findings, "report": report}
    errors = [_inputs.message(f) for f in findings if f["severity"] == "error"]
    for f in findings:
        if f["severity"] != "error":
            ctx.warn(_inputs.message(f))
    if errors:
        result["msg"] = "{}: {} input error(s), nothing was changed: {}".format(
            p["role"], len(errors), " || ".join(errors)
        )
        result["failed"] = True
    return result


def main() -> None:
    run_module(run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
