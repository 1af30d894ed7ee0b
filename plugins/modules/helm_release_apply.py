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
  - With O(lock) (the run's Lease, taken by M(gpuops.platform.helm_release_lock)), the Lease is checked to be still
    this run's before any change and renewed every quarter of its duration while helm runs. When the run that took
    it has ended (its controller process, when this module runs on the controller, is gone; a C(kill -9) leaves the
    module and helm running as orphans), helm is stopped with SIGTERM (Helm marks the release failed), the Lease is
    given back and the module fails; the next run finishes the job.
  - A release left C(pending-install), C(pending-upgrade) or C(pending-rollback) by a run that died (Helm refuses
    any other operation on it) is, when O(lock.found) shows that no live run holds the release, rolled back to its
    last deployed revision (C(helm rollback --wait)) or uninstalled when no revision was ever deployed, and then
    installed or upgraded; the module reports C(changed) and a warning saying what it recovered. Without such a
    Lease, a pending release fails naming its revision and the command that undoes it.
author: gpuops.platform contributors (@gpuops)
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
    description:
      - V(present) installs or upgrades, V(absent) uninstalls.
      - Before C(helm uninstall), the release's ClusterRoles that aggregate others (C(aggregationRule)) are deleted
        alone and waited on. Uninstalled together with the roles they aggregate, kube-controller-manager's
        clusterrole-aggregation controller often creates them again without Helm's labels (its apply carries no UID
        precondition), so C(helm uninstall --wait) would wait its whole timeout and the next install would refuse them.
    type: str
    choices: [present, absent]
    default: present
  wait_timeout:
    description: Seconds Helm waits for the release's resources to be ready (or deleted).
    type: int
    default: 600
  uninstall_hooks:
    description:
      - Run the chart's delete hooks when C(helm uninstall) runs (on O(state=absent), and when a release a dead run
        left pending is uninstalled). V(false) passes C(--no-hooks) - for a caller that has already done what the
        hook does, where the hook's pod may not be schedulable (the SR-IOV Network Operator chart's pre-delete Job
        takes no tolerations).
    type: bool
    default: true
  kubeconfig:
    description: Kubeconfig file given to helm (C(--kubeconfig)).
    type: path
  context:
    description: Kubeconfig context given to helm (C(--kube-context)).
    type: str
  binary_path:
    description: The helm binary; by default C(helm) on the PATH.
    type: path
  lock:
    description:
      - The run's Lease on this release, as M(gpuops.platform.helm_release_lock) took it (the role passes it).
    type: dict
    suboptions:
      holder:
        description: The run's identity in the Lease (O(gpuops.platform.helm_release_lock#module:holder)).
        type: str
        required: true
      namespace:
        description: Namespace of the Lease.
        type: str
        default: kube-system
      duration:
        description: Seconds the Lease lasts after each renewal (it is renewed every quarter of it while helm runs).
        type: int
        default: 60
      found:
        description:
          - How the Lease was found when this run took it (RV(gpuops.platform.helm_release_lock#module:found)).
            V(absent), V(released) or V(expired) - no live run worked on the release - let a pending release be
            recovered.
        type: str
        choices: [absent, released, expired, ours]
        default: ours
      previous_holder:
        description: The holder found before (named in the warning when a pending release is recovered).
        type: str
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
recovered:
  description: What was done to a release a dead run left pending (V(rollback) or V(uninstall)); null otherwise.
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

import contextlib  # noqa: E402 - after the documentation, as ansible-test expects
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator, Mapping  # noqa: E402
from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import CommandFailed, GpuOpsError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.release import (  # noqa: E402
    _helm_release,
    _lease,
)
from ansible_collections.gpuops.platform.plugins.module_utils.release._helm_cli import Helm  # noqa: E402

ARGUMENT_SPEC = {
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "chart_path": {"type": "path"},
    "values": {"type": "dict", "default": {}},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "wait_timeout": {"type": "int", "default": 600},
    "uninstall_hooks": {"type": "bool", "default": True},
    "kubeconfig": {"type": "path"},
    "context": {"type": "str"},
    "binary_path": {"type": "path"},
    "lock": {
        "type": "dict",
        "options": {
            "holder": {"type": "str", "required": True},
            "namespace": {"type": "str", "default": "kube-system"},
            "duration": {"type": "int", "default": 60},
            "found": {"type": "str", "choices": ["absent", "released", "expired", "ours"], "default": "ours"},
            "previous_holder": {"type": "str"},
        },
    },
}


def _chart_meta(chart_path: str) -> tuple[str, str]:
    import yaml  # a dependency of ansible-core

    path = os.path.join(chart_path, "Chart.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            meta = yaml.safe_load(f) or {}
    except OSError as exc:
        raise GpuOpsError(f"chart_path {chart_path} has no readable Chart.yaml ({exc.strerror})") from exc
    return str(meta.get("name")), str(meta.get("version"))


def present(ctx: Any, helm: Any, p: Mapping[str, Any]) -> dict[str, Any]:
    if not p["chart_path"]:
        raise GpuOpsError("chart_path is required with state=present (the unpacked chart directory)")
    chart, version = _chart_meta(p["chart_path"])
    installed = helm.metadata(p["name"])
    recovery = _recovery(helm, p, installed)
    have_values = helm.values(p["name"]) if installed else None
    reasons = _helm_release.plan(installed, have_values, chart, version, p["values"])
    if recovery[0] != "apply":
        reasons = [_recovery_reason(p, installed, recovery), *reasons]
    result: dict[str, Any] = {"changed": bool(reasons), "reasons": reasons, "recovered": None}
    result["revision"] = installed.get("revision") if installed else None
    result["status"] = installed.get("status") if installed else None
    if not reasons:
        return result
    # the values reach helm on its standard input (--values -), never in a file: they may hold what a user put
    # there, and a killed run would leave a file behind
    values = json.dumps(p["values"])
    if ctx.diff_mode:
        before = helm.run("get", "manifest", p["name"]).out if installed else ""
        upgrade = ["--is-upgrade"] if installed else []
        after = helm.run("template", p["name"], p["chart_path"], "--values", "-", *upgrade, data=values).out
        result["diff"] = {
            "before": before.strip() + "\n" if before.strip() else "",
            "after": after.strip() + "\n",
            "before_header": f"release {p['namespace']}/{p['name']} (revision {result['revision']})"
            if installed
            else "(not installed)",
            "after_header": f"{chart}-{version} rendered with the asked values ({'; '.join(reasons)})",
        }
        if installed and before.strip() == after.strip():
            # a values change that no template reads: the upgrade records the values (a new revision) and changes no
            # object, so the diff is the values, not two equal manifests
            result["diff"].update(
                before=json.dumps(have_values or {}, indent=2, sort_keys=True) + "\n",
                after=json.dumps(p["values"] or {}, indent=2, sort_keys=True) + "\n",
                before_header=f"release {p['namespace']}/{p['name']} values (revision {result['revision']})",
                after_header=f"the asked values; the rendered manifest is the same ({'; '.join(reasons)})",
            )
    if ctx.check_mode:
        return result
    with _kept(ctx, p):
        if recovery[0] != "apply":
            _recover(ctx, helm, p, installed, recovery)
            result["recovered"] = recovery[0]
            installed = helm.metadata(p["name"])
            have = helm.values(p["name"]) if installed else None
            reasons = _helm_release.plan(installed, have, chart, version, p["values"])
            if not reasons:
                result.update(revision=installed.get("revision"), status=installed.get("status"))
                return result
        argv = ["upgrade", "--install", p["name"], p["chart_path"], "--values", "-", "--skip-crds"]
        argv += ["--wait", "--timeout", f"{p['wait_timeout']}s"]
        ctx.did(f"helm upgrade --install {p['name']} ({'; '.join(reasons)})")
        r = helm.run(*argv, mutating=True, data=values)
    after = helm.metadata(p["name"]) or {}
    result.update(command=r.argv, revision=after.get("revision"), status=after.get("status"))
    return result


def _recovery(helm: Any, p: Mapping[str, Any], installed: Any) -> tuple[str, Any]:
    """("apply", None) unless the release is pending (see _helm_release.pending_recovery); a pending release that no
    Lease shows to be a dead run's fails here, naming it, before anything is changed."""
    status = (installed or {}).get("status")
    if status not in _helm_release.PENDING:
        return ("apply", None)
    history = helm.history(p["name"])
    found = p["lock"]["found"] if p["lock"] else None
    recovery = _helm_release.pending_recovery(status, history, found)
    if recovery[0] == "refuse":
        rev = _helm_release.last_deployed_revision(history)
        undo = (
            f"helm rollback -n {p['namespace']} {p['name']} {rev}"
            if rev
            else f"helm uninstall -n {p['namespace']} {p['name']}"
        )
        raise GpuOpsError(
            f"release {p['namespace']}/{p['name']} is {status} (revision {installed.get('revision')}): "
            "a Helm operation is in progress (or a process that is not a run of this collection stopped during one) "
            "and no expired Lease of this collection shows it is over. Fix: if no helm command is running on it, "
            f"undo it ({undo}) and rerun.",
            status=status,
        )
    return recovery


def _recovery_reason(p: Mapping[str, Any], installed: Mapping[str, Any], recovery: Any) -> str:
    lock = p["lock"]
    whose = (
        f"{lock['previous_holder']}; its Lease {lock['found']}"
        if lock["previous_holder"]
        else f"no Lease ({lock['found']})"
    )
    what = (
        f"roll back to revision {recovery[1]}"
        if recovery[0] == "rollback"
        else "uninstall it (no revision was ever deployed)"
    )
    return (
        f"revision {installed.get('revision')} is {installed.get('status')}, left by a run that ended ({whose}): {what}"
    )


def _no_hooks(p: Mapping[str, Any]) -> list[str]:
    """`helm uninstall`'s flag when the caller turned the chart's delete hooks off (uninstall_hooks false)."""
    return [] if p["uninstall_hooks"] else ["--no-hooks"]


def _recover(ctx: Any, helm: Any, p: Mapping[str, Any], installed: Mapping[str, Any], recovery: Any) -> None:
    timeout = ["--wait", "--timeout", f"{p['wait_timeout']}s"]
    where = (
        f"release {p['namespace']}/{p['name']} was {installed.get('status')} at revision {installed.get('revision')}"
    )
    lock = p["lock"]
    whose = (
        f"left by {lock['previous_holder']}, whose Lease {lock['found']}"
        if lock["previous_holder"]
        else "no Lease held it"
    )
    if recovery[0] == "rollback":
        ctx.did(
            f"helm rollback {p['name']} {recovery[1]} "
            f"(from {installed.get('status')} revision {installed.get('revision')})"
        )
        helm.run("rollback", p["name"], str(recovery[1]), *timeout, mutating=True)
        done = f"rolled back to revision {recovery[1]}"
    else:
        ctx.did(f"helm uninstall {p['name']} (a {installed.get('status')} release that never deployed)")
        helm.run("uninstall", p["name"], *timeout, *_no_hooks(p), mutating=True)
        done = "no revision was ever deployed: uninstalled it"
    ctx.warn(f"{where} ({whose}; a run that was killed or interrupted): {done}, then applied the release.")


@contextlib.contextmanager
def _kept(ctx: Any, p: Mapping[str, Any]) -> Iterator[Any]:
    """While the block runs helm: the run's Lease checked (still ours) and renewed, the run's process watched."""
    lock = p["lock"]
    if not lock:
        yield None
        return
    _k8s.require_client(ctx.module)
    name = _helm_release.lease_name(p["name"], p["namespace"])
    leases = _lease.Leases(_k8s.new_api_client(p), lock["namespace"])
    where = f"{lock['namespace']}/{name}"
    try:
        ours = leases.renew(name, lock["holder"], lock["duration"])
    except _k8s.ApiException as exc:
        raise GpuOpsError(f"cannot renew Lease {where}: HTTP {exc.status} {exc.reason}", lease=where) from exc
    if not ours:
        raise GpuOpsError(
            f"this run ({lock['holder']}) no longer holds the Lease {where}: it expired (a step took longer than "
            f"{lock['duration']}s without renewal) and another run may have taken it. Nothing was changed by this "
            "task. Fix: rerun.",
            lease=where,
        )
    keeper = _lease.Keeper(
        lambda: leases.renew(name, lock["holder"], lock["duration"]),
        lock["duration"] / 4,
        _lease.run_alive_check(lock["holder"]),
    )
    ctx.runner.on_popen = keeper.track
    try:
        with keeper:
            try:
                yield keeper
            except CommandFailed:
                if not keeper.run_died:
                    raise
    finally:
        ctx.runner.on_popen = None
    if keeper.errors:
        ctx.warn(f"renewing Lease {where} failed {len(keeper.errors)} time(s): {keeper.errors[-1]}")
    if keeper.lost:
        ctx.warn(
            f"Lease {where} was taken by another run while helm ran (renewal stopped for over {lock['duration']}s)"
        )
    if keeper.run_died:
        gave_back = leases.give_back(name, lock["holder"])
        raise GpuOpsError(
            f"the run that took the release's Lease ({lock['holder']}) has ended while helm ran: helm was stopped "
            f"(SIGTERM; Helm marks the revision failed){' and the Lease given back' if gave_back else ''}, so the "
            "next run does not wait for an orphan. Fix: rerun; it finishes the job.",
            lease=where,
        )


def absent(ctx: Any, helm: Any, p: Mapping[str, Any]) -> dict[str, Any]:
    installed = helm.metadata(p["name"])
    result: dict[str, Any] = {"changed": installed is not None, "reasons": [], "revision": None, "status": None}
    if installed is None:
        return result
    reasons = [f"release revision {installed.get('revision')} ({installed.get('status')}) is installed"]
    result["reasons"] = reasons
    manifest = helm.run("get", "manifest", p["name"]).out
    if ctx.diff_mode:
        result["diff"] = {"before": manifest, "after": ""}
    if ctx.check_mode:
        result.update(revision=installed.get("revision"), status=installed.get("status"))
        return result
    aggregated = _helm_release.aggregated_cluster_roles(manifest)
    if aggregated:
        _k8s.require_client(ctx.module)
        ctx.did(f"delete the release's aggregated ClusterRoles first ({', '.join(aggregated)})")
        deleted = _delete_cluster_roles(_rbac(p), aggregated, p["name"], p["namespace"])
        if deleted:
            reasons.append(
                f"deleted its aggregated ClusterRoles before the rest ({', '.join(deleted)}): uninstalled with the "
                "roles they aggregate, kube-controller-manager creates them again"
            )
    ctx.did(f"helm uninstall {p['name']}")
    with _kept(ctx, p):
        r = helm.run(
            "uninstall", p["name"], "--wait", "--timeout", f"{p['wait_timeout']}s", *_no_hooks(p), mutating=True
        )
    result["command"] = r.argv
    return result


def _rbac(p: Mapping[str, Any]) -> Any:
    from kubernetes import client

    return client.RbacAuthorizationV1Api(_k8s.new_api_client(p))


def _delete_cluster_roles(
    rbac: Any, names: list[str], release: str, namespace: str, timeout: float = 30.0
) -> list[str]:
    """Delete the ClusterRoles of ``names`` that release ``namespace/release`` owns (UID precondition) and wait until
    they are gone; returns those deleted."""
    deleted = []
    for name in names:
        try:
            role = rbac.read_cluster_role(name)
        except _k8s.ApiException as exc:
            if exc.status == 404:
                continue
            raise GpuOpsError(f"cannot read ClusterRole {name}: HTTP {exc.status} {exc.reason}") from exc
        meta = {"annotations": role.metadata.annotations or {}}
        if not _helm_release.owned_by_release(meta, release, namespace):
            continue
        body = {"preconditions": {"uid": role.metadata.uid}}
        try:
            rbac.delete_cluster_role(name, body=body)
        except _k8s.ApiException as exc:
            if exc.status not in (404, 409):  # 409: replaced meanwhile (the precondition): not ours to delete
                raise GpuOpsError(f"cannot delete ClusterRole {name}: HTTP {exc.status} {exc.reason}") from exc
            continue
        deleted.append(name)
    deadline = time.monotonic() + timeout
    for name in deleted:
        while True:
            try:
                rbac.read_cluster_role(name)
            except _k8s.ApiException as exc:
                if exc.status == 404:
                    break
                raise GpuOpsError(f"cannot read ClusterRole {name}: HTTP {exc.status} {exc.reason}") from exc
            if time.monotonic() > deadline:
                raise GpuOpsError(f"ClusterRole {name} was deleted but is still there after {timeout:.0f}s")
            time.sleep(0.2)
    return deleted


def apply(ctx: Any) -> dict[str, Any]:
    p = ctx.params
    helm = Helm(ctx)
    return present(ctx, helm, p) if p["state"] == "present" else absent(ctx, helm, p)


def main() -> None:
    run_module(
        apply, argument_spec=ARGUMENT_SPEC, supports_check_mode=True, required_if=[("state", "present", ["chart_path"])]
    )


if __name__ == "__main__":
    main()
