#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_apply
short_description: kubernetes.core.k8s, with check mode that tells the truth on a first install
version_added: 0.4.0
description:
  - Runs M(kubernetes.core.k8s) with the task's options, unchanged (an action plugin on the controller; the options
    are those of M(kubernetes.core.k8s), passed through as given).
  - In check mode, an object of O(definition) whose namespace does not exist yet - a namespace the same run creates
    first, which check mode only plans - is reported as would-create (changed, method C(create), its diff from
    nothing with C(--diff)) instead of failing the API server's dry run with C(namespaces "x" not found). The other
    objects are dry-run by the API server as M(kubernetes.core.k8s) does. One extra read (the namespaces) in check
    mode when an object names a namespace; none otherwise.
  - The roles apply the objects they own with it (the ConfigMaps, custom resources and queues that live in a
    namespace the run may create).
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes
attributes:
  check_mode:
    support: full
    details:
      - The API server's dry run for objects whose namespace exists; a planned creation for the others.
  diff_mode:
    support: full
    details:
      - M(kubernetes.core.k8s)'s diff; for a planned creation the object against nothing.
  idempotent:
    support: full
    details:
      - As M(kubernetes.core.k8s) (server-side apply of an unchanged object is no change).
options:
  definition:
    description:
      - The object or objects (a dict, a list, or YAML text), as M(kubernetes.core.k8s) takes them. Every other option
        of M(kubernetes.core.k8s) (kubeconfig, context, state, apply, server_side_apply, namespace, wait, ...) is
        accepted and passed on.
    type: raw
  namespace:
    description: The namespace of objects of O(definition) that name none.
    type: str
  state:
    description:
      - As M(kubernetes.core.k8s); with V(absent) nothing is planned (deleting from a missing namespace is no
        change).
    type: str
    default: present
  webhook_wait:
    description:
      - Seconds to keep trying the apply while it fails because the API server cannot call an admission webhook
        (C(failed calling webhook) - its Service has no endpoint yet, or its server does not answer yet), every 2
        seconds; any other failure, a refusal included, ends it at once. V(0) tries once.
    type: int
    default: 0
  prune:
    description:
      - After the apply, delete the objects of O(prune.kinds) that carry every label of O(prune.labels) and that
        O(definition) does not hold - a role's objects its variables dropped - in the order of O(prune.kinds), each
        waited on until gone. Objects without the labels (made by hand or by another tool) are never touched; a kind
        the API server does not serve has none. One read (M(gpuops.platform.cluster_objects_info)) and, when something
        is stale, one M(kubernetes.core.k8s) deletion; in check mode the deletions are named and nothing is deleted.
      - An empty O(definition) with O(prune) deletes every object of those kinds the role labelled.
      - Needs O(state=present) and the objects in O(definition).
    type: dict
    suboptions:
      labels:
        description: The owner labels (never empty).
        type: dict
        required: true
      kinds:
        description: The kinds to prune, in delete order; C(namespace) limits the read to one namespace.
        type: list
        elements: dict
        required: true
      wait_timeout:
        description: Seconds to wait for each deleted object to be gone.
        type: int
        default: 120
notes:
  - Objects given by C(src) or a template are passed on without the check-mode planning.
seealso:
  - module: kubernetes.core.k8s
"""

EXAMPLES = r"""
- name: Device-plugin ConfigMap in the operator's namespace (the GPU Operator's release creates it in the same run)
  gpuops.platform.k8s_apply:
    kubeconfig: "{{ gpuops_kubeconfig }}"
    apply: true
    server_side_apply: {field_manager: gpuops-gpu-sharing, force_conflicts: true}
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: gpuops-device-plugin, namespace: gpu-operator}
      data: {any: "version: v1"}

- name: Apply the role's queues and delete those it labelled that the variables dropped, in one task
  gpuops.platform.k8s_apply:
    kubeconfig: "{{ gpuops_kubeconfig }}"
    apply: true
    server_side_apply: {field_manager: gpuops-kueue, force_conflicts: true}
    definition: "{{ queues }}"
    prune:
      labels: {app.kubernetes.io/managed-by: gpuops.platform, gpuops.platform/role: kueue}
      kinds:
        - {api_version: kueue.x-k8s.io/v1beta2, kind: LocalQueue}
        - {api_version: kueue.x-k8s.io/v1beta2, kind: ClusterQueue}
"""

RETURN = r"""
pruned:
  description: With O(prune), the objects deleted (or, in check mode, that would be), C(Kind namespace/name) each.
  returned: with prune
  type: list
  elements: str
  sample: [LocalQueue team-a/team-a]
result:
  description:
    - One object - M(kubernetes.core.k8s)'s result, or for a planned creation the object as it would be sent. Several
      objects - C(results), one M(kubernetes.core.k8s) result per object (planned creations last).
  returned: success
  type: dict
method:
  description: C(create) for a planned creation (one object); otherwise as M(kubernetes.core.k8s).
  returned: one object
  type: str
  sample: create
diff:
  description: With C(--diff), the object's difference (for several objects, a list of them).
  returned: diff mode and a change
  type: raw
"""
