#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: helm_release_lock
short_description: Take or release the cluster-side lock of one Helm release for a run
version_added: 0.2.0
description:
  - One C(coordination.k8s.io/v1) Lease per release, named C(gpuops-helm-<namespace>.<release>) in
    O(lease_namespace), holds the run's identity (O(holder)), the time it was taken and a duration.
  - With O(state=acquired), a Lease held by another run that has not expired is waited for, up to O(wait)
    seconds; then the module fails naming the holder, since when and when the Lease expires (instead of
    Helm's "another operation is in progress"). A released or expired Lease is taken over. Taking and
    renewing use the Lease's resourceVersion, so two runs cannot both take it.
  - The Lease is short (O(duration), 60 seconds by default) and is renewed while the run lives, by
    M(gpuops.platform.helm_release_apply) while Helm runs. A run that dies (SIGKILL, SIGINT, a lost controller)
    stops renewing, so its Lease expires within O(duration) seconds and the next run takes it over.
  - RV(found) says how the Lease was found. After V(absent), V(released) or V(expired) no live run works on the
    release, so M(gpuops.platform.helm_release_apply) may undo a pending Helm operation that a dead run left.
  - Once the Lease is taken, the directories named O(temp_prefix)* in the temporary directory (the chart copies of
    this release's earlier runs that died before their cleanup) are removed.
  - With O(state=released), the Lease is deleted when this run holds it.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._k8s_auth
  - gpuops.platform._attributes.full_support
attributes:
  check_mode:
    details:
      - Reads the Lease and reports who holds it (a warning); takes or deletes nothing.
  diff_mode:
    details:
      - The Lease holder before and after.
options:
  release:
    description: Release name.
    type: str
    required: true
  namespace:
    description: Release namespace.
    type: str
    required: true
  holder:
    description:
      - Identity of this run, the same for every task of it. The role uses
        C(gpuops.platform <user>@<host> pid <controller pid> started <UTC time>) (the
        P(gpuops.platform.run_holder#lookup) lookup), which names the process, so a dead run's Lease can be traced.
    type: str
    required: true
  state:
    description: V(acquired) takes (or renews) the lock, V(released) gives it back.
    type: str
    choices: [acquired, released]
    default: acquired
  lease_namespace:
    description:
      - Namespace of the Lease (it must exist). Not the release namespace, which O(state=absent) deletes.
    type: str
    default: kube-system
  duration:
    description:
      - Seconds the Lease is valid for after it is taken or renewed; a run that dies leaves it until then.
    type: int
    default: 60
  wait:
    description: Seconds to wait for another run's Lease to be released or to expire (0 fails at once).
    type: int
    default: 0
  temp_prefix:
    description:
      - With O(state=acquired), once the Lease is taken (not in check mode), remove the directories whose name starts
        with this prefix in the system temporary directory (C(TMPDIR)), which runs of this release that died left.
        The prefix must name the release and the cluster (the role uses
        C(gpuops-chart-<cluster>-<namespace>.<release>_), C(<cluster>) a short hash of the kubeconfig path).
    type: str
requirements:
  - kubernetes (Python client)
"""

EXAMPLES = r"""
- name: Take the release's lock (wait up to 5 minutes for another run)
  gpuops.platform.helm_release_lock:
    release: gpu-operator
    namespace: gpu-operator
    holder: "{{ run_id }}"
    wait: 300
"""

RETURN = r"""
lease:
  description: C(namespace/name) of the Lease.
  returned: always
  type: str
  sample: kube-system/gpuops-helm-gpu-operator.gpu-operator
holder:
  description: Holder of the Lease after the run (before it in check mode); null when nobody holds it.
  returned: always
  type: str
found:
  description:
    - How the Lease was found when it was taken (O(state=acquired)) - V(absent), V(released), V(expired) (held by a
      run that stopped renewing it) or V(ours) (this run held it already).
  returned: when state=acquired and the Lease was taken
  type: str
  sample: expired
previous_holder:
  description: The holder found in the Lease before this run took it (a dead run's, when RV(found=expired)).
  returned: when state=acquired and the Lease was taken
  type: str
  sample: gpuops.platform alice@bastion pid 4242 started 2026-11-27T10:00:00Z
removed:
  description: The directories O(temp_prefix) removed (would remove, in check mode).
  returned: when state=acquired and the Lease was taken
  type: list
  elements: str
"""

import glob  # noqa: E402 - after the documentation, as ansible-test expects
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.release import (  # noqa: E402
    _helm_release,
    _lease,
)

ARGUMENT_SPEC = {
    **_k8s.auth_argument_spec(),
    "release": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "holder": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["acquired", "released"], "default": "acquired"},
    "lease_namespace": {"type": "str", "default": "kube-system"},
    "duration": {"type": "int", "default": 60},
    "wait": {"type": "int", "default": 0},
    "temp_prefix": {"type": "str"},
}
POLL = 2.0
_now = _lease.now


def _left_copies(prefix: str) -> list[str]:
    """Directories named <prefix>* in the temporary directory (the prefix names one release)."""
    if not prefix or os.sep in prefix:
        return []
    pattern = os.path.join(tempfile.gettempdir(), glob.escape(prefix) + "*")
    return sorted(p for p in glob.glob(pattern) if os.path.isdir(p) and not os.path.islink(p))


def lock(ctx: Any) -> dict[str, Any]:
    _k8s.require_client(ctx.module)
    p = ctx.params
    name = _helm_release.lease_name(p["release"], p["namespace"])
    leases = _lease.Leases(_k8s.new_api_client(p), p["lease_namespace"])
    result: dict[str, Any] = {"changed": False, "lease": f"{p['lease_namespace']}/{name}"}
    deadline = time.monotonic() + max(p["wait"], 0)
    spec: Any  # the Lease spec; set whenever lease_decision says "wait"
    try:
        while True:
            obj, spec = leases.read(name)
            holder = (spec or {}).get("holderIdentity")
            result["holder"] = holder
            if p["state"] == "released":
                if holder == p["holder"]:
                    result["changed"] = True
                    if not ctx.check_mode:
                        leases.delete(name, obj)
                        result["holder"] = None
                return result
            decision = _helm_release.lease_decision(spec, p["holder"], _now())
            if decision == "wait" and ctx.check_mode:
                ctx.warn(_helm_release.lease_holder_message(name, p["lease_namespace"], spec, _now()))
                return result
            if decision == "wait":
                if time.monotonic() >= deadline:
                    raise GpuOpsError(
                        f"release {p['namespace']}/{p['release']} is being changed by another run: "
                        f"{_helm_release.lease_holder_message(name, p['lease_namespace'], spec, _now())}. Waited "
                        f"{p['wait']}s. Fix: let that run finish and rerun; if it died, delete the Lease "
                        f"(kubectl -n {p['lease_namespace']} delete lease {name}) or wait until it expires.",
                        lease=result["lease"],
                        holder=holder,
                    )
                time.sleep(POLL)
                continue
            result["changed"] = decision != "renew"
            result["found"] = _helm_release.lease_found(decision, spec)
            result["previous_holder"] = holder or None
            result["removed"] = _left_copies(p["temp_prefix"])
            if ctx.diff_mode:
                result["diff"] = {"before": {"holder": holder}, "after": {"holder": p["holder"]}}
            if not ctx.check_mode:
                try:
                    leases.write(name, p["holder"], p["duration"], obj)
                except _k8s.ApiException as exc:
                    if exc.status == 409:  # another run took or created it between read and write: look again
                        continue
                    raise
                result["holder"] = p["holder"]
                for path in result["removed"]:  # the Lease is ours: no live run of this release uses them
                    shutil.rmtree(path, ignore_errors=True)
            return result
    except _k8s.ApiException as exc:
        raise GpuOpsError(
            f"cannot {'take' if p['state'] == 'acquired' else 'release'} Lease {result['lease']}: "
            f"HTTP {exc.status} {exc.reason}. Fix: the user needs get/create/update/delete on "
            f"leases.coordination.k8s.io in namespace {p['lease_namespace']} (or set helm_release_lock_namespace).",
            lease=result["lease"],
        ) from exc


def main() -> None:
    run_module(lock, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
