from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.driver_upgrade_progress import driver_upgrade_progress
from ansible_collections.gpuops.platform.plugins.filter.upgrade_plan import upgrade_plan


def test_upgrade_plan_passes_the_options_through():
    got = upgrade_plan("v26.3.1", "v26.7.0", "v1.34.4", current_driver="580.126.20")
    assert got["findings"] == [] and got["driver_bump"] and got["driver_to"] == "595.91.07"
    got = upgrade_plan("", "v26.7.0", "v1.34.4", driver_version="580.126.20", namespace="gpu")
    assert got["from"] is None and [f["id"] for f in got["findings"]] == ["upgrade-driver-unsupported"]


@pytest.mark.parametrize(
    ("args", "match"), [((7, "v26.7.0", "v1.34.4"), "installed chart version"), (("v26.3.1", "", "v1"), "target")]
)
def test_upgrade_plan_bad_input(args, match):
    with pytest.raises(AnsibleFilterError, match=match):
        upgrade_plan(*args)


def test_driver_upgrade_progress():
    nodes = [{"metadata": {"name": "a", "labels": {"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"}}}]
    got = driver_upgrade_progress(nodes, None, "gpu")
    assert got["failed"] == ["a"] and "kubectl -n gpu logs" in got["findings"][0]["fix"]
    assert got["summary"] == "done [], in progress [], pending [], failed ['a']; driver  not running on []"
    assert got["why"].startswith("[driver-upgrade-failed] Node a: nvidia.com/gpu-driver-upgrade-state=upgrade-failed.")
    assert got["why"].endswith(" || ") and got["why"].count(" || ") == 1
    with pytest.raises(AnsibleFilterError, match="Node objects"):
        driver_upgrade_progress({"a": 1})
    with pytest.raises(AnsibleFilterError, match="driver_nodes"):
        driver_upgrade_progress([], "a")


def test_driver_upgrade_progress_with_pods():
    nodes = [{"metadata": {"name": "a", "labels": {"nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}}}]
    pods = [{"spec": {"nodeName": "a", "containers": [{"image": "driver:580.126.20"}]}}]
    assert driver_upgrade_progress(nodes, ["a"], "gpu", pods, "595.91.07")["stale"] == ["a"]
    with pytest.raises(AnsibleFilterError, match="driver_pods"):
        driver_upgrade_progress(nodes, ["a"], "gpu", {"a": 1})
