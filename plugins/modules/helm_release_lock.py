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
  - With O(state=released), the Lease is deleted when this run holds it.
author:
  - gpuops.platform contributors (@gpuops)
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
    description: Identity of this run (for example C(user@host pid 123 run <uuid>)), the same for every task of it.
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
    description: Seconds the Lease is valid for after it is taken; a run that dies leaves it until then.
    type: int
    default: 900
  wait:
    description: Seconds to wait for another run's Lease to be released or to expire (0 fails at once).
    type: int
    default: 0
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
"""

import time  # noqa: E402 - after the documentation, as ansible-test expects
from datetime import datetime, timezone  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils import _helm_release, _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._errors import GpuOpsError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._module import run_module  # noqa: E402

ARGUMENT_SPEC = {
    **_k8s.auth_argument_spec(),
    "release": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "holder": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["acquired", "released"], "default": "acquired"},
    "lease_namespace": {"type": "str", "default": "kube-system"},
    "duration": {"type": "int", "default": 900},
    "wait": {"type": "int", "default": 0},
}
POLL = 2.0


def _now() -> datetime:
    return datetime.now(timezone.utc)  # noqa: UP017 - modules run on Python < 3.11 too


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Leases:
    def __init__(self, api_client, namespace):
        from kubernetes import client

        self.api = client.CoordinationV1Api(api_client)
        self.ns = namespace

    def read(self, name):
        try:
            obj = self.api.read_namespaced_lease(name, self.ns)
        except _k8s.ApiException as exc:
            if exc.status == 404:
                return None, None
            raise
        return obj, self.api.api_client.sanitize_for_serialization(obj.spec) or {}

    def write(self, name, holder, duration, current):
        now = _stamp(_now())
        spec = {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": now, "renewTime": now}
        if current is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}, "spec": spec}
            self.api.create_namespaced_lease(self.ns, body)
        else:
            body = {"metadata": {"name": name, "resourceVersion": current.metadata.resource_version}, "spec": spec}
            self.api.replace_namespaced_lease(name, self.ns, body)

    def delete(self, name, current):
        from kubernetes import client

        pre = client.V1Preconditions(resource_version=current.metadata.resource_version)
        self.api.delete_namespaced_lease(name, self.ns, body=client.V1DeleteOptions(preconditions=pre))


def lock(ctx):
    _k8s.require_client(ctx.module)
    p = ctx.params
    name = _helm_release.lease_name(p["release"], p["namespace"])
    leases = Leases(_k8s.new_api_client(p), p["lease_namespace"])
    result = {"changed": False, "lease": f"{p['lease_namespace']}/{name}"}
    deadline = time.monotonic() + max(p["wait"], 0)
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
            return result
    except _k8s.ApiException as exc:
        raise GpuOpsError(
            f"cannot {'take' if p['state'] == 'acquired' else 'release'} Lease {result['lease']}: "
            f"HTTP {exc.status} {exc.reason}. Fix: the user needs get/create/update/delete on "
            f"leases.coordination.k8s.io in namespace {p['lease_namespace']} (or set helm_release_lock_namespace).",
            lease=result["lease"],
        ) from exc


def main():
    run_module(lock, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
