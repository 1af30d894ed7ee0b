"""Small Kubernetes helpers shared by the lab, its tests and the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .errors import LabError


def wait_for(pred: Callable[[], Any], timeout: float = 60.0, interval: float = 0.5) -> Any:
    """Poll pred() until it returns something truthy (returned) or the timeout passes (the last value)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(interval)
    return pred()


def ensure_crd(api_client: Any, path: Path, timeout: float = 30.0) -> str:
    """Install the CRD in `path` unless the cluster has it, then wait until it is Established and served.
    The CRD is left in place: deleting a CRD deletes every custom resource of that kind, other tests' too.
    Returns the CRD name; raises LabError naming the file or the CRD when that cannot be done."""
    if not path.is_file():
        raise LabError(f"no CRD fixture at {path}")
    return ensure_crd_manifest(api_client, yaml.safe_load(path.read_text()), timeout, str(path))


def ensure_crd_manifest(api_client: Any, manifest: dict, timeout: float = 30.0, where: str = "") -> str:
    """ensure_crd() of one CRD manifest already read (`where`: the file it came from, for the error)."""
    from kubernetes import client

    name = manifest["metadata"]["name"]
    ext = client.ApiextensionsV1Api(api_client)
    try:
        ext.read_custom_resource_definition(name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        try:
            ext.create_custom_resource_definition(manifest)
        except client.ApiException as exc2:
            if exc2.status != 409:  # created meanwhile by someone else
                raise

    def established() -> bool:
        crd = ext.read_custom_resource_definition(name)
        return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or ())

    spec = manifest["spec"]
    group, version, plural = spec["group"], spec["versions"][0]["name"], spec["names"]["plural"]
    custom = client.CustomObjectsApi(api_client)

    def served() -> bool:  # the REST path can lag behind Established
        try:
            if spec["scope"] == "Cluster":
                custom.list_cluster_custom_object(group, version, plural, limit=1)
            else:
                custom.list_custom_object_for_all_namespaces(group, version, plural, limit=1)
        except client.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    if not (wait_for(established, timeout) and wait_for(served, timeout)):
        raise LabError(f"CRD {name} (from {where or 'a manifest'}) not established and served within {timeout:.0f}s")
    return name
