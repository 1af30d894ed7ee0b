#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: role_plan
short_description: A role's plan in one task - its cluster reads, its rules and the verdict
version_added: 0.9.0
description:
  - Reads what the role's rules need from the API server in one M(gpuops.platform.cluster_objects_info) run, builds
    what the role will apply and its findings with the role's rules (the collection's private module_utils), and
    judges the findings as M(gpuops.platform.judge) does - failing, before the role changes anything, when one is an
    error, naming the object, the evidence, the cause and the fix.
  - The roles' preflight calls it, and so does the run's plan (C(roles/gpuops/tasks/preflight.yml)), with
    O(planning) set there.
  - C(kueue) reads the nodes and the CRDs' names and returns the flavors, queues, chart values and namespaces
    (C(_kueue.plan)); C(nfd) reads NFD worker DaemonSets anywhere in the cluster and refuses a second NFD
    (C(_cluster_rules.nfd_plan)); C(monitoring) reads the role's namespace, the Prometheus to attach to, the
    ClusterPolicy, the Network Operator's namespace and an attached remediation route's Alertmanager, and returns the
    ServiceMonitors, alert rules, dashboards and chart values (C(monitoring/_plan.py)); its phase C(release), after
    the kube-prometheus-stack release, plans again from the release's live Prometheus.
  - The findings that do not fail are shown as the run's warnings, one line each, severity first (the result holds
    the whole plan, too much to show); a failure returns the verdict and the findings only.
  - An action plugin; the read runs as a module on the controller. Changes nothing.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes.info_module
  - gpuops.platform._k8s_auth
options:
  role:
    description: The role whose plan to make.
    type: str
    required: true
    choices: [kueue, monitoring, nfd]
  phase:
    description:
      - C(preflight) - before the role changes anything. C(release) (C(monitoring) only) - after its release, in
        install mode from the live Prometheus; otherwise O(previous) stands and nothing is judged again.
    type: str
    choices: [preflight, release]
    default: preflight
  previous:
    description: The preflight's plan (its registered result); phase C(release) keeps it when nothing is rebuilt.
    type: dict
  variables:
    description: The role's variables (its C(<role>_*) names and values).
    type: dict
    required: true
  planning:
    description:
      - The run's plan before its first change, or check mode - what an earlier layer of the run will create (the GPU
        product labels, for C(kueue)) is a warning, and the role judges it again before it changes anything.
    type: bool
    default: false
  stop:
    description: What the failure message ends with - what the run did not do because of it.
    type: str
    default: Nothing was changed.
  quiet:
    description: Do not show the findings that did not fail (they are still returned).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan Kueue's flavors, teams and quotas (errors stop the run before any change)
  gpuops.platform.role_plan:
    role: kueue
    kubeconfig: "{{ kueue_kubeconfig }}"
    variables: "{{ dict(_names | zip(q('ansible.builtin.vars', *_names))) }}"
    planning: "{{ ansible_check_mode }}"
  vars:
    _names: "{{ q('ansible.builtin.varnames', '^kueue_') }}"
  register: _kueue_built
"""

RETURN = r"""
findings:
  description: The findings of the role's rules (C({id, severity, object, evidence, cause, fix})); none for a role whose
    state is absent.
  returned: always
  type: list
  elements: dict
msg:
  description: The verdict (M(gpuops.platform.judge)'s message).
  returned: always
  type: str
counts:
  description: The number of findings per severity (C(error), C(warning), C(info)).
  returned: always
  type: dict
  sample: {error: 0, warning: 1, info: 0}
resource_flavors:
  description: C(kueue) - the ResourceFlavors to apply.
  returned: role is kueue
  type: list
  elements: dict
cluster_queues:
  description: C(kueue) - the ClusterQueues to apply.
  returned: role is kueue
  type: list
  elements: dict
local_queues:
  description: C(kueue) - the LocalQueues to apply.
  returned: role is kueue
  type: list
  elements: dict
chart_values:
  description: C(kueue), C(monitoring) - the chart values the role renders.
  returned: role is kueue or monitoring
  type: dict
crds_present:
  description: C(kueue) - whether the API server serves Kueue's ClusterQueue CRD.
  returned: role is kueue
  type: bool
objects:
  description: C(monitoring) - the ServiceMonitors, PrometheusRule and dashboard ConfigMaps to apply.
  returned: role is monitoring
  type: list
  elements: dict
rebuilt:
  description: C(monitoring), phase C(release) - whether the plan was made again from the release's live Prometheus.
  returned: role is monitoring and phase is release
  type: bool
"""
