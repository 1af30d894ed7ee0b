from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.host import _fabricmanager, _pkg


@pytest.mark.parametrize(
    "mgr, version, name",
    [
        ("apt", "570.124.06", "nvidia-fabricmanager-570"),
        ("apt", "535.230.02", "nvidia-fabricmanager-535"),
        ("apt", "580.95.05", "nvidia-fabricmanager-580"),
        ("apt", "590.48.01", "nvidia-fabricmanager"),
        ("dnf", "570.124.06", "nvidia-fabric-manager"),
    ],
)
def test_package_name(mgr, version, name):
    assert _fabricmanager.package_name(mgr, version) == name


@pytest.mark.parametrize(
    "version, upstream",
    [
        ("570.124.06-1", "570.124.06"),
        ("570.124.06-0ubuntu0.22.04.1", "570.124.06"),
        ("1:570.124.06-1", "570.124.06"),
        ("570.124.06", "570.124.06"),
        (None, None),
    ],
)
def test_upstream_version(version, upstream):
    assert _pkg.upstream_version(version) == upstream
