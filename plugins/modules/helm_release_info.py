#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: helm_release_info
short_description: Say whether one installed Helm release already is the pinned chart with the asked values
version_added: 0.3.0
description:
  - Read-only. Used first by the internal C(gpuops.platform.helm_release) role, so that an unchanged release costs
    one task; the role takes the release's Lease, pulls the chart, applies CRDs and upgrades only when
    RV(reasons) is not empty.
  - Reads the installed release (C(helm get metadata), C(helm get values)) and compares its status, chart name
    and version and user values with O(chart_name), O(chart_version) and O(values), with the same rules as
    M(gpuops.platform.helm_release_apply) (so both agree on what "unchanged" means). With O(namespace_labels),
    the release namespace must carry those labels too.
  - With O(state=absent) it says whether the release is already gone (not installed and, with O(namespace_gone),
    its namespace deleted too), so that a removed release costs one task on every later run.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes.info_module
options:
  caller:
    description:
      - The role that calls the internal C(gpuops.platform.helm_release) role. With it, the module first checks
        O(name) as a Helm release name (53 characters at most) and O(namespace) as a DNS-1123 label, and fails
        naming the role, the variable, the value and the fix before it reads anything. Empty is refused, as the
        internal role is used only by the operator roles.
    type: str
  require_deployed:
    description:
      - Fail unless the release is installed, its last revision is C(deployed) and it runs O(chart_name) at
        O(chart_version) (the values are not compared), the read-only check a role's validation ends with. The
        message names the release, its status and chart, and C(helm history) for why a revision failed.
    type: bool
    default: false
  name:
    description: Release name.
    type: str
    required: true
  namespace:
    description: Release namespace.
    type: str
    required: true
  chart_name:
    description: The chart the release must come from (the name in its C(Chart.yaml)).
    type: str
    required: true
  chart_version:
    description: The pinned chart version the release must run.
    type: str
    required: true
  values:
    description: The user-supplied values the deployed revision must hold.
    type: dict
    default: {}
  state:
    description:
      - V(present) - whether the release is deployed as asked. V(absent) - whether it is gone (O(chart_name),
        O(chart_version), O(values) and O(namespace_labels) are then not compared).
    type: str
    choices: [present, absent]
    default: present
  namespace_gone:
    description:
      - With O(state=absent), the release namespace must not exist either (the C(helm_release) role's purge deletes
        it last, after the release and its CRDs, so a namespace still there means the removal is unfinished).
    type: bool
    default: false
  namespace_labels:
    description:
      - Labels the release namespace must carry (for example the Pod Security labels). A missing namespace or a
        label with another value is a reason to run the release path. Not read when omitted.
    type: dict
  lock_namespace:
    description:
      - Namespace of the release's Lease (M(gpuops.platform.helm_release_lock)). A Lease still there (a run is
        changing the release, or a killed run left it) is a reason to run the release path, which takes it over
        and gives it back. Not read when omitted.
    type: str
  temp_prefix:
    description:
      - Prefix of the release's chart copies in the temporary directory. A copy left by a killed run is a reason to
        run the release path, whose Lease lets it remove the copy. Not looked for when omitted.
    type: str
  kubeconfig:
    description: Kubeconfig file given to helm (C(--kubeconfig)) and used to read the namespace.
    type: path
  context:
    description: Kubeconfig context given to helm (C(--kube-context)) and used to read the namespace.
    type: str
  binary_path:
    description: The helm binary; by default C(helm) on the PATH.
    type: path
requirements:
  - helm 3.13 or later (C(helm get metadata)); tested with helm 4.3.1
  - kubernetes (the Python client), with O(namespace_labels)
seealso:
  - module: gpuops.platform.helm_release_apply
"""

EXAMPLES = r"""
- name: Is the release already what is asked for?
  gpuops.platform.helm_release_info:
    name: gpu-operator
    namespace: gpu-operator
    chart_name: gpu-operator
    chart_version: v26.7.0
    values: "{{ values }}"
    namespace_labels: {pod-security.kubernetes.io/enforce: privileged}
  register: release

- name: Upgrade only when something differs
  ansible.builtin.debug:
    msg: "{{ release.reasons }}"
  when: not release.up_to_date
"""

RETURN = r"""
changed:
  description: Always false (read-only); present so that the result can stand for an unchanged release.
  returned: always
  type: bool
  sample: false
up_to_date:
  description:
    - True when the release is deployed from the pinned chart with the asked values (and namespace labels); with
      O(state=absent), when it is not installed (and, with O(namespace_gone), its namespace does not exist).
  returned: always
  type: bool
reasons:
  description: Why the release path must run; empty when O(name) is up to date.
  returned: always
  type: list
  elements: str
  sample: ["chart gpu-operator-v26.3.1 is installed, gpu-operator-v26.7.0 is asked for"]
revision:
  description: The installed revision; null when not installed.
  returned: always
  type: int
  sample: 3
chart:
  description: The installed chart as C(<name>-<version>); null when not installed.
  returned: always
  type: str
  sample: gpu-operator-v26.7.0
release:
  description: The release read, as C(<namespace>/<name>) (so a later task can tell which release this result is of).
  returned: always
  type: str
  sample: gpu-operator/gpu-operator
verified:
  description:
    - C(<namespace>/<name>) when the release is deployed from the pinned chart with the asked values (O(state=present)
      and RV(up_to_date)), otherwise empty; a later validation of the same release in the run takes it as its evidence.
  returned: always
  type: str
  sample: gpu-operator/gpu-operator
state:
  description: The state compared against (O(state)), so a later task can tell what RV(up_to_date) says.
  returned: always
  type: str
  sample: present
status:
  description: The status of the installed revision (C(deployed), C(failed), ...); null when not installed.
  returned: always
  type: str
  sample: deployed
"""

from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common import _judge  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.inputs import _inputs  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.release import _helm_release  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.release._helm_cli import Helm  # noqa: E402

ARGUMENT_SPEC = {
    "caller": {"type": "str"},
    "require_deployed": {"type": "bool", "default": False},
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "chart_name": {"type": "str", "required": True},
    "chart_version": {"type": "str", "required": True},
    "values": {"type": "dict", "default": {}},
    "namespace_labels": {"type": "dict"},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "namespace_gone": {"type": "bool", "default": False},
    "lock_namespace": {"type": "str"},
    "temp_prefix": {"type": "str"},
    "kubeconfig": {"type": "path"},
    "context": {"type": "str"},
    "binary_path": {"type": "path"},
}


def _namespace_labels(ctx: Any) -> dict[str, Any] | None:
    """The release namespace's labels; None when it does not exist."""
    _k8s.require_client(ctx.module)
    obj = _k8s.new_reader(ctx.params).namespace(ctx.params["namespace"])
    return None if obj is None else dict((obj.get("metadata") or {}).get("labels") or {})


def _lease_holder(ctx: Any, name: str) -> tuple[bool, Any]:
    """(exists, holder) of the release's Lease in lock_namespace."""
    _k8s.require_client(ctx.module)
    ns = ctx.params["lock_namespace"]
    obj = _k8s.new_reader(ctx.params).get_optional(
        f"lease {ns}/{name}", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}"
    )
    return (obj is not None, ((obj or {}).get("spec") or {}).get("holderIdentity"))


def _leftovers(ctx: Any) -> list[str]:
    """What a run that was killed left of this release: its chart copies, its Lease."""
    import glob
    import os
    import tempfile

    p, out = ctx.params, []
    if p["temp_prefix"] and os.sep not in p["temp_prefix"]:
        for path in sorted(glob.glob(os.path.join(tempfile.gettempdir(), glob.escape(p["temp_prefix"]) + "*"))):
            if os.path.isdir(path):
                out.append(f"a chart copy that a stopped run left: {path}")
    if p["lock_namespace"]:
        name = _helm_release.lease_name(p["name"], p["namespace"])
        exists, holder = _lease_holder(ctx, name)
        if exists:
            out.append(
                f"Lease {p['lock_namespace']}/{name} is held by {holder or 'nobody'} (a run changing the release, "
                "or one that was killed)"
            )
    return out


def _check_names(ctx: Any) -> None:
    """With O(caller): the release name and namespace, judged before anything is read."""
    p = ctx.params
    if not p["caller"]:
        ctx.module.fail_json(
            msg="gpuops.platform.helm_release is internal (caller is empty): use the nfd, gpu_operator, "
            "amd_gpu_operator, network_operator, sriov_network_operator, gpu_sharing, kueue, volcano, kai_scheduler or "
            "monitoring role, which call it."
        )
    findings = _inputs.release_name("helm_release_name", p["name"])
    findings += _inputs.dns1123_label("helm_release_namespace", p["namespace"])
    judged = _judge.verdict(p["caller"], findings)
    if judged["failed"]:
        ctx.module.fail_json(msg=judged["msg"], findings=findings)


def info(ctx: Any) -> dict[str, Any]:
    p = ctx.params
    if p["caller"] is not None:
        _check_names(ctx)
    helm = Helm(ctx)
    installed = helm.metadata(p["name"])
    if p["require_deployed"] and _helm_release.deployed_reasons(installed, p["chart_name"], p["chart_version"]):
        ctx.module.fail_json(
            msg=_helm_release.not_deployed_message(
                p["caller"] or "helm_release_info",
                p["namespace"],
                p["name"],
                installed,
                p["chart_name"],
                p["chart_version"],
            ),
            status=installed.get("status") if installed else None,
        )
    if p["state"] == "absent":
        reasons = _helm_release.absent_reasons(
            p["namespace"], p["name"], installed, _namespace_labels(ctx) is not None if p["namespace_gone"] else False
        )
    else:
        have = helm.values(p["name"]) if installed else None
        reasons = _helm_release.plan(installed, have, p["chart_name"], p["chart_version"], p["values"])
    if p["namespace_labels"] is not None and p["state"] == "present":
        reasons += _helm_release.namespace_label_reasons(p["namespace"], _namespace_labels(ctx), p["namespace_labels"])
    reasons += _leftovers(ctx)
    return {
        "changed": False,
        "up_to_date": not reasons,
        "reasons": reasons,
        "revision": installed.get("revision") if installed else None,
        "status": installed.get("status") if installed else None,
        "chart": f"{installed.get('chart')}-{installed.get('version')}" if installed else None,
        "release": f"{p['namespace']}/{p['name']}",
        "verified": f"{p['namespace']}/{p['name']}" if not reasons and p["state"] == "present" else "",
        "state": p["state"],
    }


def main() -> None:
    run_module(info, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
