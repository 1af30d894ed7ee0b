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
"""

RETURN = r"""
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
