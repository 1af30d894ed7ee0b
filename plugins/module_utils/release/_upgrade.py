# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Upgrades of the GPU Operator (issue 12): the compatibility table, the rules that decide before an upgrade
changes anything, and the reading of the driver upgrade controller's per-node state. Findings are
``{id, severity, object, evidence, cause, fix}`` as everywhere in the collection.

Every row of the table names its source; a version the table does not know is refused, never guessed.

Sources (read 2026-11-26):

- [GO-K8S] NVIDIA/cloud-native-docs ``gpu-operator/platform-support.rst``: upstream Kubernetes 1.32-1.35 at the
  26.3.0 docs commit (adfe9224), 1.32-1.36 at 26.3.2 (de99f9d3, release notes: "Added support for Kubernetes
  1.36"), 1.33-1.36 at 26.7.0 (HEAD 52dcb7b8; Ubuntu 26.04/22.04, RHEL 8/9/10 rows).
- [GO-DRV] the same repository, ``gpu-operator/life-cycle-policy.rst``: the driver matrix per release (D = default,
  R = recommended); the chart's ``driver.version`` default (NVIDIA/gpu-operator ``deployments/gpu-operator/
  values.yaml``: 580.126.20 at v26.3.0-v26.3.3, 595.91.07 at v26.7.0).
- [GO-PATH] ``life-cycle-policy.rst``: "Upgrades are only supported within a major release or to the next major
  release" (a major release is a YY.M line: 25.10, 26.3, 26.7).
- [UPG] NVIDIA/gpu-operator v26.7.0 vendors NVIDIA/k8s-operator-libs ``pkg/upgrade`` (consts.go): the node label
  ``nvidia.com/gpu-driver-upgrade-state`` (``UpgradeStateLabelKeyFmt`` with driver name ``gpu``), its values, the
  skip label ``nvidia.com/gpu-driver-upgrade.skip`` (``"true"`` skips the node); common_manager.go
  ``GetUpgradesAvailable``: at most maxParallelUpgrades nodes in progress (0 = no limit), capped by maxUnavailable
  (scaled from a percentage of the managed nodes, rounded up); a node in ``upgrade-failed`` counts as in progress.
- [NO] Mellanox/network-operator v26.4.1 ``hack/release.yaml``: DOCA driver ``doca3.4.1-26.04-1.1.0.0-1``;
  network-operator-docs ``platform-support.rst`` (26.4 docs): Kubernetes 1.31-1.35, and "NVIDIA GPU Operator
  v25.3.x or newer - required for workloads that use NVIDIA GPUs and GPUDirect RDMA".
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._judge import line

Finding = dict[str, Any]

_V326_DRIVERS = (
    "595.71.05",
    "595.58.03",
    "590.48.01",
    "580.173.02",
    "580.167.08",
    "580.159.04",
    "580.159.03",
    "580.126.20",
    "570.211.01",
    "535.309.01",
    "535.288.01",
)

# GPU Operator release -> what it supports. kubernetes: (lowest minor, highest minor) of upstream Kubernetes 1.x.
GPU_OPERATOR: dict[str, dict[str, Any]] = {
    "v26.3.0": {"kubernetes": (32, 35), "drivers": _V326_DRIVERS, "default": "580.126.20", "recommended": "580.173.02"},
    "v26.3.1": {"kubernetes": (32, 35), "drivers": _V326_DRIVERS, "default": "580.126.20", "recommended": "580.173.02"},
    "v26.3.2": {"kubernetes": (32, 36), "drivers": _V326_DRIVERS, "default": "580.126.20", "recommended": "580.173.02"},
    "v26.3.3": {
        "kubernetes": (32, 36),
        "drivers": ("610.57.04", "595.91.07", "580.178.04", *_V326_DRIVERS),
        "default": "580.126.20",
        "recommended": "580.178.04",
    },
    "v26.7.0": {
        "kubernetes": (33, 36),
        "drivers": ("610.57.04", "595.91.07", "580.173.02", "535.309.01"),
        "default": "595.91.07",
        "recommended": "595.91.07",
    },
}
# The release lines in order [GO-PATH]: an upgrade stays on its line or goes to the next one.
RELEASE_LINES = ("25.3", "25.10", "26.3", "26.7")

NETWORK_OPERATOR: dict[str, dict[str, Any]] = {
    "26.4.1": {"kubernetes": (31, 35), "doca_driver": "doca3.4.1-26.04-1.1.0.0-1", "gpu_operator_min": "v25.3.0"},
}

# [UPG] the driver upgrade controller's node label and its states, in the order a node goes through them
STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
STATES = (
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "drain-required",
    "node-maintenance-required",
    "post-maintenance-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    "upgrade-done",
    "upgrade-failed",
)
DONE = "upgrade-done"
FAILED = "upgrade-failed"
REQUIRED = "upgrade-required"

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)\Z")


_CHART = re.compile(r"^(?:[a-z0-9-]+-)?(v?\d+\.\d+\.\d+)\Z")


def chart_version(chart: str | None) -> str:
    """The version of a Helm release's chart as ``helm list`` shows it (``gpu-operator-v26.3.1`` -> ``v26.3.1``); a
    bare version is returned as it is, anything else too (the plan then names it)."""
    text = str(chart or "").strip()
    m = _CHART.match(text)
    return m.group(1) if m else text


def parse(version: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(str(version or "").strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _line(version: tuple[int, int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def kubernetes_minor(git_version: str) -> int | None:
    """The minor of a Kubernetes server version (``v1.34.4``, ``v1.33.5-eks-1234``), None if not 1.x."""
    m = re.match(r"^v?1\.(\d+)", str(git_version or "").strip())
    return int(m.group(1)) if m else None


def _finding(fid: str, severity: str, obj: Mapping[str, str], evidence: list[str], cause: str, fix: str) -> Finding:
    return {"id": fid, "severity": severity, "object": dict(obj), "evidence": evidence, "cause": cause, "fix": fix}


def plan(
    current: str | None,
    target: str,
    kubernetes_version: str,
    driver_version: str = "",
    current_driver: str = "",
    network_operator_version: str = "",
    rdma: bool = False,
    release: str = "gpu-operator",
    namespace: str = "gpu-operator",
    doca_driver: str = "",
) -> dict[str, Any]:
    """Decide an upgrade of the GPU Operator release ``namespace/release`` from ``current`` (None: not installed; a
    version, or the release's chart as ``<name>-<version>``) to ``target`` before anything changes.
    ``driver_version`` empty means the target chart's default driver. ``doca_driver``: the DOCA driver container tag
    the Network Operator is given (network_operator_ofed_driver_version; empty: its release's own).

    Returns ``{findings, from, to, driver_from, driver_to, driver_bump, kubernetes_minor}``."""
    obj = {"kind": "HelmRelease", "namespace": namespace, "name": release}
    findings: list[Finding] = []
    current = chart_version(current) or None
    network_operator_version = chart_version(network_operator_version)
    row = GPU_OPERATOR.get(target)
    known = ", ".join(GPU_OPERATOR)
    if row is None:
        findings.append(
            _finding(
                "upgrade-version-unknown",
                "error",
                obj,
                [f"target GPU Operator {target}; the compatibility table knows {known}"],
                "the playbook upgrades only to a version whose Kubernetes range and driver matrix it has from NVIDIA's "
                "platform support and life-cycle pages; it never guesses them",
                "pin a version the table knows (gpu_operator_chart_version), or add its row with its sources to "
                "plugins/module_utils/_upgrade.py",
            )
        )
    to_v, from_v = parse(target), parse(current or "")
    if current and from_v is None:
        findings.append(
            _finding(
                "upgrade-version-unknown",
                "error",
                obj,
                [f"installed chart version {current!r} is not a release version"],
                "the installed release's chart version cannot be placed on a release line",
                "check `helm list -n " + namespace + "`; reinstall a released version first",
            )
        )
    if to_v and from_v:
        if to_v < from_v:
            findings.append(
                _finding(
                    "upgrade-downgrade",
                    "error",
                    obj,
                    [f"installed {current}, asked for {target}"],
                    "an older chart's CRDs and driver do not undo what the newer operator wrote; upgrade.yml only "
                    "moves forward",
                    f"keep {current}, or roll back with `helm rollback {release} <revision> -n {namespace}` as the "
                    "failed-upgrade message of upgrade.yml says",
                )
            )
        else:
            lines = list(RELEASE_LINES)
            a, b = _line(from_v), _line(to_v)
            if a in lines and b in lines and lines.index(b) - lines.index(a) > 1:
                skipped = lines[lines.index(a) + 1 : lines.index(b)]
                findings.append(
                    _finding(
                        "upgrade-path-skips-release",
                        "error",
                        obj,
                        [f"{current} -> {target} skips the release line(s) {', '.join(skipped)}"],
                        "NVIDIA supports upgrades within a release line or to the next one only (life-cycle policy)",
                        f"upgrade to the newest {skipped[0]}.x first, then to {target}",
                    )
                )
            elif a not in lines or b not in lines:
                findings.append(
                    _finding(
                        "upgrade-path-unknown",
                        "warning",
                        obj,
                        [f"{current} -> {target}: release line {a if a not in lines else b} is not in the table"],
                        "whether this path is supported is not known to the playbook",
                        "check NVIDIA's life-cycle policy for this path before going on",
                    )
                )
    minor = kubernetes_minor(kubernetes_version)
    if row is not None:
        low, high = row["kubernetes"]
        if minor is None or not low <= minor <= high:
            findings.append(
                _finding(
                    "upgrade-kubernetes-unsupported",
                    "error",
                    {"kind": "Cluster", "namespace": "", "name": "kubernetes"},
                    [f"API server {kubernetes_version or 'unknown'}; GPU Operator {target} supports 1.{low}-1.{high}"],
                    "the operator and its operands are tested and supported on those Kubernetes minors only",
                    f"upgrade Kubernetes into 1.{low}-1.{high} first, or choose a GPU Operator release that "
                    "supports this minor",
                )
            )
    driver_to = driver_version or (row["default"] if row else "")
    if row is not None and driver_to and driver_to not in row["drivers"]:
        findings.append(
            _finding(
                "upgrade-driver-unsupported",
                "error",
                {"kind": "ClusterPolicy", "namespace": "", "name": "cluster-policy"},
                [f"driver {driver_to}; GPU Operator {target} supports {', '.join(row['drivers'])}"],
                "the driver container of a version the operator release does not list is not supported with it",
                f"set gpu_operator_driver_version to one of them (recommended {row['recommended']}), or leave it "
                f"empty for the chart's default {row['default']}",
            )
        )
    if network_operator_version:
        nrow = NETWORK_OPERATOR.get(network_operator_version.lstrip("v"))
        if nrow is None:
            findings.append(
                _finding(
                    "upgrade-network-operator-unknown",
                    "warning",
                    {"kind": "HelmRelease", "namespace": "", "name": "network-operator"},
                    [f"Network Operator {network_operator_version}; the table knows {', '.join(NETWORK_OPERATOR)}"],
                    "its Kubernetes range and GPU Operator requirement are not known to the playbook",
                    "check the Network Operator's platform support page before going on",
                )
            )
        else:
            low, high = nrow["kubernetes"]
            if minor is not None and not low <= minor <= high:
                findings.append(
                    _finding(
                        "upgrade-network-kubernetes-unsupported",
                        "warning",
                        {"kind": "HelmRelease", "namespace": "", "name": "network-operator"},
                        [
                            f"API server {kubernetes_version}; Network Operator {network_operator_version} supports "
                            f"1.{low}-1.{high}"
                        ],
                        "the Network Operator is not supported on this Kubernetes minor",
                        "plan the Network Operator's upgrade with this one",
                    )
                )
            if doca_driver and doca_driver != nrow["doca_driver"]:
                findings.append(
                    _finding(
                        "upgrade-doca-driver-untested",
                        "warning",
                        {"kind": "NicClusterPolicy", "namespace": "", "name": "nic-cluster-policy"},
                        [
                            f"DOCA driver {doca_driver} with Network Operator {network_operator_version}, which ships "
                            f"and is released with {nrow['doca_driver']}"
                        ],
                        "each Network Operator release is tested with the DOCA driver of its release manifest; "
                        "another one is not a combination NVIDIA released",
                        f"leave network_operator_ofed_driver_version empty (its release's {nrow['doca_driver']}), "
                        "or confirm this combination in the Network Operator's release notes",
                    )
                )
            need = parse(nrow["gpu_operator_min"])
            if rdma and to_v and need and to_v < need:
                findings.append(
                    _finding(
                        "upgrade-network-gpu-operator-too-old",
                        "error",
                        obj,
                        [
                            f"GPUDirect RDMA on; Network Operator {network_operator_version} needs GPU Operator "
                            f"{nrow['gpu_operator_min']} or newer, asked for {target}"
                        ],
                        "GPUDirect RDMA needs both operators at versions that support each other",
                        f"upgrade the GPU Operator to {nrow['gpu_operator_min']} or newer",
                    )
                )
    return {
        "findings": findings,
        "from": current,
        "to": target,
        "driver_from": current_driver,
        "driver_to": driver_to,
        "driver_bump": bool(driver_to and current_driver and driver_to != current_driver),
        "kubernetes_minor": minor,
    }


def max_in_progress(nodes: int, max_parallel: int, max_unavailable: int | str) -> int:
    """How many nodes the upgrade controller lets be in progress at once [UPG]: maxParallelUpgrades (0 = no limit)
    capped by maxUnavailable (a count, or a percentage of the managed nodes rounded up)."""
    if isinstance(max_unavailable, str) and max_unavailable.endswith("%"):
        cap = math.ceil(nodes * int(max_unavailable[:-1]) / 100)
    else:
        cap = int(max_unavailable)
    parallel = nodes if int(max_parallel) == 0 else int(max_parallel)
    return max(0, min(parallel, cap, nodes))


def progress(
    nodes: Sequence[Mapping[str, Any]],
    driver_nodes: Sequence[str] | None = None,
    namespace: str = "gpu-operator",
    driver_pods: Sequence[Mapping[str, Any]] | None = None,
    driver_version: str = "",
) -> dict[str, Any]:
    """The driver upgrade across ``nodes`` (Node objects) as the controller's state label says.

    ``driver_nodes``: the names of the nodes the driver runs on (None: every node that has the label).
    ``driver_pods`` with ``driver_version``: the driver pods, whose image tag must be that version (``595.91.07``,
    or with the OS suffix the driver images carry, ``595.91.07-ubuntu22.04``); the nodes whose pod is not are
    ``stale``.
    Returns ``{states: {node: state}, done, in_progress, pending, failed, skipped, stale, complete, findings, summary,
    why}`` (``summary``: the counts in words; ``why``: each finding's line, each followed by `` || ``);
    complete when every driver node is ``upgrade-done`` (or skipped) and none is stale, a failed node is an error
    finding. The controller counts a failed node against maxParallelUpgrades too: in_progress + failed is what it
    limits."""
    states: dict[str, str] = {}
    skipped: list[str] = []
    for node in nodes:
        meta = node.get("metadata") or {}
        name, labels = meta.get("name") or "", meta.get("labels") or {}
        if driver_nodes is not None and name not in driver_nodes:
            continue
        if labels.get(SKIP_LABEL) == "true":
            skipped.append(name)
            continue
        if STATE_LABEL in labels or driver_nodes is not None:
            states[name] = labels.get(STATE_LABEL, "")
    stale: list[str] = []
    if driver_pods is not None and driver_version:
        tag = re.compile(r":" + re.escape(driver_version) + r"($|-)")
        for pod in driver_pods:
            spec = pod.get("spec") or {}
            image = ((spec.get("containers") or [{}])[0]).get("image") or ""
            if not tag.search(image):
                stale.append(spec.get("nodeName") or (pod.get("metadata") or {}).get("name") or "")
    done = sorted(n for n, s in states.items() if s == DONE)
    failed = sorted(n for n, s in states.items() if s == FAILED)
    pending = sorted(n for n, s in states.items() if s in ("", REQUIRED))
    in_progress = sorted(n for n, s in states.items() if s not in ("", REQUIRED, DONE, FAILED))
    findings = [
        _finding(
            "driver-upgrade-failed",
            "error",
            {"kind": "Node", "namespace": "", "name": n},
            [f"{STATE_LABEL}={FAILED}"],
            "the driver upgrade controller could not cordon, evict or drain the node, or the new driver pod kept "
            "restarting or did not validate in time",
            f"find the driver pod on {n} (`kubectl -n {namespace} get pods -l app=nvidia-driver-daemonset "
            f"--field-selector spec.nodeName={n}`) and read its log (`kubectl -n {namespace} logs <pod>`); the "
            "controller retries once the driver pod is in sync; to roll back, see the message of upgrade.yml",
        )
        for n in failed
    ]
    return {
        "states": dict(sorted(states.items())),
        "done": done,
        "in_progress": in_progress,
        "pending": pending,
        "failed": failed,
        "skipped": sorted(skipped),
        "stale": sorted(stale),
        "complete": bool(states) and len(done) == len(states) and not stale,
        "findings": findings,
        "summary": f"done {done}, in progress {in_progress}, pending {pending}, failed {failed}; driver "
        f"{driver_version} not running on {sorted(stale)}",
        "why": "".join(f"{line(f)} || " for f in findings),
    }
