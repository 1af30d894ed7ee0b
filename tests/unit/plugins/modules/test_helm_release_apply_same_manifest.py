"""Issue 27 §7: a values change that renders the same manifest (a value no template reads) is still an upgrade (the
release records the new values: a new revision), and its diff must say so instead of two equal manifests."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuops.platform.plugins.modules import helm_release_apply

META = {"name": "r", "chart": "c", "version": "1.0.0", "revision": 1, "status": "deployed"}
SAME = "kind: Deployment\nspec:\n  replicas: 1\n"


@pytest.fixture
def chart(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    (d / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 1.0.0\n")
    return str(d)


@pytest.fixture
def helm(commands):
    commands.tools.add("helm")
    commands.on(r"^helm get metadata", (0, json.dumps(META), ""))
    commands.on(r"^helm get values", (0, json.dumps({"replicas": 1, "unused": "a"}), ""))
    commands.on(r"^helm get manifest", (0, SAME, ""))
    commands.on(r"^helm template", (0, SAME, ""))


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_values_change_with_the_same_manifest_shows_the_values_diff(run_module, commands, helm, chart, check_mode):
    args = {
        "name": "r",
        "namespace": "ns",
        "chart_path": chart,
        "kubeconfig": "/k",
        "values": {"replicas": 1, "unused": "b"},
    }
    result, failed = run_module(helm_release_apply, args, check_mode=check_mode)
    assert not failed and result["changed"] is True, result
    assert result["reasons"] == ["values differ at unused"]
    diff = result["diff"]
    assert diff["before"] != diff["after"], "changed with an empty diff"
    assert "unused" in diff["before"] and "unused" in diff["after"]
    assert "same" in diff["after_header"]  # says that the rendered manifest does not change
