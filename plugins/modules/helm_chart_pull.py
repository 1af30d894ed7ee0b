#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: helm_chart_pull
short_description: Pull one pinned Helm chart from an OCI registry (oci://) and unpack it
version_added: 0.4.0
description:
  - Read-only (it writes the chart into O(destination), and helm its own download cache, nothing else), so it also
    runs in check mode. Used by the internal
    C(gpuops.platform.helm_release) role when the chart repository (or C(gpuops_chart_repo_mirror)) is an
    C(oci://) URL; C(https://) repositories keep the role's index read and download.
  - Runs the real helm registry client, C(helm pull oci://<host>/<path>/<chart> --version <version> --untar
    --destination <destination>), as an argv list under C(timeout) so a silent registry fails after O(timeout)
    seconds, and checks that the unpacked chart is O(chart_name) at O(chart_version).
  - A failed pull names the reference, the reason (registry unreachable or too slow, untrusted TLS certificate,
    access refused, no such version) and the fix, and says that nothing was changed. When the version is
    missing, the versions the registry has are listed from its tag list (OCI distribution API, anonymous token
    when the registry asks for one) when that answers within the timeout.
  - Credentials are helm's own (C(helm registry login) on the host running the module); the module takes none.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes.info_module
options:
  repo_url:
    description: The C(oci://) repository, C(oci://<host>[:<port>][/<path>]), without the chart name.
    type: str
    required: true
  chart_name:
    description: The chart name (the last part of the reference and the name in its C(Chart.yaml)).
    type: str
    required: true
  chart_version:
    description: The pinned chart version (the registry tag; C(+) is looked up as C(_), as helm stores it).
    type: str
    required: true
  destination:
    description: An existing directory; the chart is unpacked into C(<destination>/<chart_name>).
    type: path
    required: true
  ca_file:
    description: CA bundle that signs the registry's TLS certificate (helm C(--ca-file)), for a private registry.
    type: path
  timeout:
    description: Seconds the pull (and the tag list read after a missing version) may take before it fails.
    type: int
    default: 30
  caller:
    description: The role on whose behalf the chart is pulled; it starts the error message.
    type: str
    default: ""
  binary_path:
    description: The helm binary; by default C(helm) on the PATH.
    type: path
requirements:
  - helm 3.8 or later (OCI support); tested with helm 4.3.1
  - timeout (coreutils)
seealso:
  - module: gpuops.platform.helm_release_apply
"""

EXAMPLES = r"""
- name: Pull the SR-IOV Network Operator chart from its upstream registry
  gpuops.platform.helm_chart_pull:
    repo_url: oci://ghcr.io/k8snetworkplumbingwg
    chart_name: sriov-network-operator-chart
    chart_version: 1.6.0
    destination: "{{ tmp.path }}"
  register: pulled

- name: From a mirror with a private CA
  gpuops.platform.helm_chart_pull:
    repo_url: oci://registry.example.com/charts
    chart_name: gpu-operator
    chart_version: v26.7.0
    destination: "{{ tmp.path }}"
    ca_file: /etc/pki/mirror-ca.pem
"""

RETURN = r"""
chart_path:
  description: The unpacked chart directory.
  returned: success
  type: str
  sample: /tmp/gpuops-chart-x1y2/sriov-network-operator-chart
ref:
  description: The chart reference pulled.
  returned: always
  type: str
  sample: oci://ghcr.io/k8snetworkplumbingwg/sriov-network-operator-chart
version:
  description: The chart version pulled.
  returned: always
  type: str
  sample: 1.6.0
reason:
  description: >-
    Why the pull failed: C(timeout), C(tls), C(plain_http), C(auth), C(unreachable), C(not_found), C(helm_failed)
    or C(invalid).
  returned: failure
  type: str
  sample: not_found
tags:
  description: The tags the registry has for the chart, when the version was missing and the list could be read.
  returned: failure
  type: list
  elements: str
  sample: [1.5.0, 1.6.0]
"""

import os  # noqa: E402
from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.release import (  # noqa: E402
    _chart_index,
    _helm_oci,
)

ARGUMENT_SPEC = {
    "repo_url": {"type": "str", "required": True},
    "chart_name": {"type": "str", "required": True},
    "chart_version": {"type": "str", "required": True},
    "destination": {"type": "path", "required": True},
    "ca_file": {"type": "path"},
    "timeout": {"type": "int", "default": 30},
    "caller": {"type": "str", "default": ""},
    "binary_path": {"type": "path"},
}


_get_json = _chart_index.get_json  # a name of this module: the tests give it fake registries


def list_tags(ref: str, ca_file: str | None, timeout: float) -> list[str]:
    """The registry's tags of ``ref`` (module_utils/release/_chart_index.py, with the anonymous token a registry
    asks for)."""
    return _chart_index.oci_tags(ref, ca_file, int(timeout), _get_json)


def _read_chart_yaml(path: str) -> dict[str, Any]:
    meta = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.partition(":")
            if sep and key in ("name", "version"):
                meta[key] = value.strip().strip("'\"")
    return meta


def pull(ctx: Any) -> dict[str, Any]:
    p = ctx.params
    caller, version, timeout = p["caller"], p["chart_version"], p["timeout"]
    try:
        ref = _helm_oci.chart_ref(p["repo_url"], p["chart_name"])
    except ValueError as exc:
        ref = f"{p['repo_url']}/{p['chart_name']}"
        msg = _helm_oci.failure_message(caller, ref, version, str(exc), "set an oci://<host>/<path> URL")
        return {"failed": True, "msg": msg, "ref": ref, "version": version, "reason": "invalid", "changed": False}
    if p["ca_file"] and not os.access(p["ca_file"], os.R_OK):
        reason = f"the CA bundle {p['ca_file']} is not a readable file"
        msg = _helm_oci.failure_message(caller, ref, version, reason, "fix gpuops_chart_repo_ca_file")
        return {"failed": True, "msg": msg, "ref": ref, "version": version, "reason": "invalid", "changed": False}
    helm = ctx.runner.require(p["binary_path"] or "helm")
    args = ["--kill-after=5", str(timeout), helm]
    args += _helm_oci.pull_argv(ref, _helm_oci.version_tag(version), p["destination"], p["ca_file"])
    r = ctx.runner.run("timeout", args, check=False)
    chart_dir = os.path.join(p["destination"], p["chart_name"])
    if r.rc == 0:
        meta = _read_chart_yaml(os.path.join(chart_dir, "Chart.yaml"))
        if meta.get("name") == p["chart_name"] and meta.get("version") == version:
            return {"changed": False, "chart_path": chart_dir, "ref": ref, "version": version, "cmd": r.argv}
        reason, rid = f"it holds chart {meta.get('name')} {meta.get('version')}", "helm_failed"
        msg = _helm_oci.failure_message(caller, ref, version, reason, "check what was pushed under this reference")
        return {"failed": True, "msg": msg, "ref": ref, "version": version, "reason": rid, "changed": False}
    rid, reason, fix = _helm_oci.classify(r.rc, r.err + r.out, timeout)
    detail, tags = (r.err or r.out).strip()[-500:], None
    if rid == "not_found":
        try:
            tags = list_tags(ref, p["ca_file"], min(timeout, 10))
            detail = f"it has: {', '.join(tags) or 'no versions'}"
        except Exception as exc:  # pylint: disable=broad-exception-caught
            detail = f"its tag list could not be read: {exc}"
    msg = _helm_oci.failure_message(caller, ref, version, reason, fix, detail)
    return {"failed": True, "msg": msg, "ref": ref, "version": version, "reason": rid, "tags": tags, "cmd": r.argv}


def main() -> None:
    run_module(pull, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
