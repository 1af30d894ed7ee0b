#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: helm_release_apply
short_description: Install, upgrade or uninstall one Helm release from a local chart copy, deterministically
version_added: 0.2.0
description:
  - Used by the internal C(gpuops.platform.helm_release) role, which pulls the pinned chart once and passes its
    unpacked directory as O(chart_path) (so the CRDs applied and the chart installed are the same bytes).
  - Decides without the helm-diff plugin whether the release must change. It reads the installed release once
    (C(helm get metadata) and C(helm get values)) and compares the release status, the chart name and version and
    the values. An unchanged release is not upgraded, so no new revision is made.
  - In diff mode the diff is the manifest of the deployed revision (C(helm get manifest)) against the manifest
    the local chart renders with the asked values (C(helm template --is-upgrade)). The same diff is shown in
    check mode, so C(--check --diff) on a values change shows what would change in each object.
  - Runs C(helm upgrade --install --skip-crds --wait) (the role applies the CRDs itself, subcharts' included) and
    C(helm uninstall --wait).
  - A failed C(helm upgrade) leaves a failed revision; the module then reports C(changed=true) and the next run
    upgrades again (a release whose last revision is not deployed is always upgraded).
author:
  - gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes.full_support
attributes:
  check_mode:
    details:
      - Reads the release and renders the chart locally; runs no C(helm upgrade) or C(helm uninstall).
  diff_mode:
    details:
      - The rendered manifests before and after. Templates that call C(lookup) render without cluster data in
        C(helm template), so such objects can show a difference that an upgrade would not make.
options:
  name:
    description: Release name.
    type: str
    required: true
  namespace:
    description: Release namespace (must exist).
    type: str
    required: true
  chart_path:
    description: Directory of the unpacked chart (with C(Chart.yaml)). Required with O(state=present).
    type: path
  values:
    description: The release values (the whole user-supplied set; Helm merges them over the chart's defaults).
    type: dict
    default: {}
  state:
    description: V(present) installs or upgrades, V(absent) uninstalls.
    type: str
    choices: [present, absent]
    default: present
  wait_timeout:
    description: Seconds Helm waits for the release's resources to be ready (or deleted).
    type: int
    default: 600
  kubeconfig:
    description: Kubeconfig file given to helm (C(--kubeconfig)).
    type: path
  context:
    description: Kubeconfig context given to helm (C(--kube-context)).
    type: str
  binary_path:
    description: The helm binary; by default C(helm) on the PATH.
    type: path
requirements:
  - helm 3.13 or later (C(helm get metadata)); tested with helm 4.3.1
"""

EXAMPLES = r"""
- name: Install the chart pulled into a temporary directory
  gpuops.platform.helm_release_apply:
    name: amd-gpu-operator
    namespace: kube-amd-gpu
    chart_path: "{{ tmp.path }}/gpu-operator-charts"
    values: "{{ values }}"
    kubeconfig: "{{ gpuops_kubeconfig }}"
  register: release
"""

RETURN = r"""
reasons:
  description: Why the release is (or would be) installed or upgraded; empty when it is unchanged.
  returned: always
  type: list
  elements: str
  sample: ["values differ at deviceConfig.spec.driver.enable"]
revision:
  description: The release revision after the run (before it in check mode); null when not installed.
  returned: always
  type: int
  sample: 2
status:
  description: The release status after the run (C(deployed), C(failed), ...); null when not installed.
  returned: always
  type: str
command:
  description: The helm command that changed the release (argv), when one ran.
  returned: when changed and not in check mode
  type: list
  elements: str
diff:
  description: The manifests before and after, in diff mode.
  returned: when changed and in diff mode
  type: dict
"""

import json  # noqa: E402 - after the documentation, as ansible-test expects
import os  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils import _helm_release  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._errors import GpuOpsError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._helm_cli import Helm  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._module import run_module  # noqa: E402

ARGUMENT_SPEC = {
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "chart_path": {"type": "path"},
    "values": {"type": "dict", "default": {}},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "wait_timeout": {"type": "int", "default": 600},
    "kubeconfig": {"type": "path"},
    "context": {"type": "str"},
    "binary_path": {"type": "path"},
}


def _values_file(ctx):
    path = os.path.join(ctx.module.tmpdir, "values.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(ctx.params["values"], f)
    return path


def _chart_meta(chart_path):
    import yaml  # a dependency of ansible-core

    path = os.path.join(chart_path, "Chart.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            meta = yaml.safe_load(f) or {}
    except OSError as exc:
        raise GpuOpsError(f"chart_path {chart_path} has no readable Chart.yaml ({exc.strerror})") from exc
    return str(meta.get("name")), str(meta.get("version"))


def present(ctx, helm, p):
    if not p["chart_path"]:
        raise GpuOpsError("chart_path is required with state=present (the unpacked chart directory)")
    chart, version = _chart_meta(p["chart_path"])
    installed = helm.metadata(p["name"])
    reasons = _helm_release.plan(installed, helm.values(p["name"]) if installed else None, chart, version, p["values"])
    result = {"changed": bool(reasons), "reasons": reasons}
    result["revision"] = installed.get("revision") if installed else None
    result["status"] = installed.get("status") if installed else None
    if not reasons:
        return result
    values_file = _values_file(ctx)
    if ctx.diff_mode:
        before = helm.run("get", "manifest", p["name"]).out if installed else ""
        upgrade = ["--is-upgrade"] if installed else []
        after = helm.run("template", p["name"], p["chart_path"], "--values", values_file, *upgrade).out
        result["diff"] = {
            "before": before.strip() + "\n" if before.strip() else "",
            "after": after.strip() + "\n",
            "before_header": f"release {p['namespace']}/{p['name']} (revision {result['revision']})"
            if installed
            else "(not installed)",
            "after_header": f"{chart}-{version} rendered with the asked values ({'; '.join(reasons)})",
        }
    if ctx.check_mode:
        return result
    argv = ["upgrade", "--install", p["name"], p["chart_path"], "--values", values_file, "--skip-crds"]
    argv += ["--wait", "--timeout", f"{p['wait_timeout']}s"]
    ctx.did(f"helm upgrade --install {p['name']} ({'; '.join(reasons)})")
    r = helm.run(*argv, mutating=True)
    after = helm.metadata(p["name"]) or {}
    result.update(command=r.argv, revision=after.get("revision"), status=after.get("status"))
    return result


def absent(ctx, helm, p):
    installed = helm.metadata(p["name"])
    result = {"changed": installed is not None, "reasons": [], "revision": None, "status": None}
    if installed is None:
        return result
    result["reasons"] = [f"release revision {installed.get('revision')} ({installed.get('status')}) is installed"]
    if ctx.diff_mode:
        result["diff"] = {"before": helm.run("get", "manifest", p["name"]).out, "after": ""}
    if ctx.check_mode:
        result.update(revision=installed.get("revision"), status=installed.get("status"))
        return result
    ctx.did(f"helm uninstall {p['name']}")
    r = helm.run("uninstall", p["name"], "--wait", "--timeout", f"{p['wait_timeout']}s", mutating=True)
    result["command"] = r.argv
    return result


def apply(ctx):
    p = ctx.params
    helm = Helm(ctx)
    return present(ctx, helm, p) if p["state"] == "present" else absent(ctx, helm, p)


def main():
    run_module(
        apply, argument_spec=ARGUMENT_SPEC, supports_check_mode=True, required_if=[("state", "present", ["chart_path"])]
    )


if __name__ == "__main__":
    main()
