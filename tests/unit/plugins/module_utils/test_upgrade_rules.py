from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network
from ansible_collections.gpuops.platform.plugins.module_utils.release import _upgrade

PLAN = [
    # (current, target, kubernetes, driver, extra kwargs, expected finding ids, expected driver_to)
    ("v26.3.1", "v26.7.0", "v1.34.4", "", {}, [], "595.91.07"),  # the issue's path, the chart's default driver
    ("v26.3.1", "v26.7.0", "v1.34.4", "580.173.02", {}, [], "580.173.02"),  # a listed driver kept
    ("v26.3.1", "v26.7.0", "v1.34.4", "580.126.20", {}, ["upgrade-driver-unsupported"], "580.126.20"),  # dropped
    ("v26.3.1", "v26.7.0", "v1.32.9", "", {}, ["upgrade-kubernetes-unsupported"], "595.91.07"),  # 26.7: 1.33+
    ("v26.3.1", "v26.3.2", "v1.36.0", "", {}, [], "580.126.20"),  # 26.3.2 added 1.36
    ("v26.3.0", "v26.3.1", "v1.36.0", "", {}, ["upgrade-kubernetes-unsupported"], "580.126.20"),
    ("v26.3.1", "v26.7.0", "v1.33.5-eks-4f4795d", "", {}, [], "595.91.07"),  # a vendor suffix
    ("v26.3.1", "v26.7.0", "", "", {}, ["upgrade-kubernetes-unsupported"], "595.91.07"),  # not read: refused
    ("v26.7.0", "v26.3.1", "v1.34.4", "", {}, ["upgrade-downgrade"], "580.126.20"),
    ("v26.3.1", "v26.9.0", "v1.34.4", "", {}, ["upgrade-version-unknown", "upgrade-path-unknown"], ""),
    ("v25.10.1", "v26.7.0", "v1.34.4", "", {}, ["upgrade-path-skips-release"], "595.91.07"),
    ("v25.10.1", "v26.3.1", "v1.34.4", "", {}, [], "580.126.20"),  # the next line
    ("main-latest", "v26.7.0", "v1.34.4", "", {}, ["upgrade-version-unknown"], "595.91.07"),
    (None, "v26.7.0", "v1.34.4", "", {}, [], "595.91.07"),  # not installed: the checks of the target only
    (
        "v26.3.1",
        "v26.7.0",
        "v1.34.4",
        "",
        {"network_operator_version": "26.4.1", "rdma": True},
        [],
        "595.91.07",
    ),
    (
        "v26.3.1",
        "v26.7.0",
        "v1.36.1",
        "",
        {"network_operator_version": "26.4.1"},
        ["upgrade-network-kubernetes-unsupported"],
        "595.91.07",
    ),
    (
        "v26.3.1",
        "v26.7.0",
        "v1.34.4",
        "",
        {"network_operator_version": "25.1.0"},
        ["upgrade-network-operator-unknown"],
        "595.91.07",
    ),
    (  # the DOCA driver its release ships: nothing to say
        "v26.3.1",
        "v26.7.0",
        "v1.34.4",
        "",
        {"network_operator_version": "26.4.1", "doca_driver": "doca3.4.1-26.04-1.1.0.0-1"},
        [],
        "595.91.07",
    ),
    (  # an older DOCA driver kept through the upgrade: a combination NVIDIA did not release
        "v26.3.1",
        "v26.7.0",
        "v1.34.4",
        "",
        {"network_operator_version": "network-operator-26.4.1", "doca_driver": "doca3.1.0-25.07-0.9.7.0-0"},
        ["upgrade-doca-driver-untested"],
        "595.91.07",
    ),
    (  # no Network Operator: a DOCA driver variable left in the inventory is not judged
        "v26.3.1",
        "v26.7.0",
        "v1.34.4",
        "",
        {"doca_driver": "doca3.1.0-25.07-0.9.7.0-0"},
        [],
        "595.91.07",
    ),
]


@pytest.mark.parametrize(("current", "target", "k8s", "driver", "extra", "ids", "driver_to"), PLAN)
def test_plan(current, target, k8s, driver, extra, ids, driver_to):
    got = _upgrade.plan(current, target, k8s, driver_version=driver, current_driver="580.126.20", **extra)
    assert [f["id"] for f in got["findings"]] == ids
    assert got["driver_to"] == driver_to
    for f in got["findings"]:
        assert f["evidence"] and f["cause"] and f["fix"] and f["severity"] in ("error", "warning")


def test_the_issue_path_is_a_driver_bump():
    got = _upgrade.plan("v26.3.1", "v26.7.0", "v1.34.4", current_driver="580.126.20")
    assert got["driver_bump"] and (got["driver_from"], got["driver_to"]) == ("580.126.20", "595.91.07")
    assert not _upgrade.plan("v26.3.1", "v26.3.2", "v1.34.4", current_driver="580.126.20")["driver_bump"]


def test_errors_name_the_fix():
    (f,) = _upgrade.plan("v25.10.1", "v26.7.0", "v1.34.4")["findings"]
    assert "26.3" in f["evidence"][0] and "newest 26.3.x first" in f["fix"]
    (f,) = _upgrade.plan("v26.3.1", "v26.7.0", "v1.34.4", driver_version="580.126.20")["findings"]
    assert "recommended 595.91.07" in f["fix"] and "610.57.04" in f["evidence"][0]


def test_the_doca_driver_finding_names_both_tags():
    got = _upgrade.plan(
        "v26.3.1", "v26.7.0", "v1.34.4", network_operator_version="26.4.1", doca_driver="doca3.1.0-25.07-0.9.7.0-0"
    )
    (f,) = got["findings"]
    assert f["severity"] == "warning" and f["object"]["name"] == "nic-cluster-policy"
    assert "doca3.1.0-25.07-0.9.7.0-0" in f["evidence"][0] and "doca3.4.1-26.04-1.1.0.0-1" in f["fix"]


def test_the_network_rows_agree_with_the_network_role():
    """The pinned Network Operator release's DOCA driver is the one the network_operator role defaults to."""
    row = _upgrade.NETWORK_OPERATOR[_network.RELEASE["version"].removeprefix("network-operator-v")]
    assert row["doca_driver"] == _network.RELEASE["ofed_version"]


def test_every_row_is_consistent():
    for version, row in _upgrade.GPU_OPERATOR.items():
        assert _upgrade.parse(version), version
        assert row["default"] in row["drivers"] and row["recommended"] in row["drivers"], version
        low, high = row["kubernetes"]
        assert low <= high
        assert f"{_upgrade.parse(version)[0]}.{_upgrade.parse(version)[1]}" in _upgrade.RELEASE_LINES


@pytest.mark.parametrize(
    ("nodes", "parallel", "unavailable", "expected"),
    [
        (4, 1, "25%", 1),
        (8, 0, "25%", 2),  # no parallel limit: maxUnavailable caps it (8 x 25 %)
        (5, 0, "25%", 2),  # rounded up
        (4, 3, 2, 2),
        (4, 0, "100%", 4),
        (2, 4, 10, 2),  # never more than the nodes
        (3, 2, 0, 0),
    ],
)
def test_max_in_progress(nodes, parallel, unavailable, expected):
    assert _upgrade.max_in_progress(nodes, parallel, unavailable) == expected


def _node(name, state=None, skip=False):
    labels = {}
    if state is not None:
        labels[_upgrade.STATE_LABEL] = state
    if skip:
        labels[_upgrade.SKIP_LABEL] = "true"
    return {"metadata": {"name": name, "labels": labels}}


def test_progress_reads_the_state_label():
    nodes = [
        _node("a", "upgrade-done"),
        _node("b", "drain-required"),
        _node("c", "upgrade-required"),
        _node("d", "upgrade-failed"),
        _node("e", skip=True),
        _node("cpu"),  # no driver here: not in the upgrade
    ]
    got = _upgrade.progress(nodes)
    assert (got["done"], got["in_progress"], got["pending"], got["failed"], got["skipped"]) == (
        ["a"],
        ["b"],
        ["c"],
        ["d"],
        ["e"],
    )
    assert not got["complete"]
    (f,) = got["findings"]
    assert f["id"] == "driver-upgrade-failed" and f["object"]["name"] == "d"


def test_progress_complete_and_driver_nodes():
    assert _upgrade.progress([_node("a", "upgrade-done"), _node("b", "upgrade-done")])["complete"]
    # a driver node the controller has not labelled yet is pending, not forgotten
    got = _upgrade.progress([_node("a", "upgrade-done"), _node("b")], driver_nodes=["a", "b"])
    assert got["pending"] == ["b"] and not got["complete"]
    assert not _upgrade.progress([])["complete"]  # nothing labelled: nothing proven


@pytest.mark.parametrize(
    ("chart", "expected"),
    [
        ("gpu-operator-v26.3.1", "v26.3.1"),
        ("network-operator-26.4.1", "26.4.1"),
        ("v26.7.0", "v26.7.0"),
        ("gpu-operator-main-latest", "gpu-operator-main-latest"),  # not a release: kept, the plan names it
        (None, ""),
    ],
)
def test_chart_version(chart, expected):
    assert _upgrade.chart_version(chart) == expected


def test_plan_takes_the_release_chart_as_helm_shows_it():
    got = _upgrade.plan(
        "gpu-operator-v26.3.1", "v26.7.0", "v1.34.4", network_operator_version="network-operator-26.4.1"
    )
    assert got["from"] == "v26.3.1" and got["findings"] == []
    assert _upgrade.plan("", "v26.7.0", "v1.34.4")["from"] is None


def _pod(node, tag):
    return {"spec": {"nodeName": node, "containers": [{"image": f"nvcr.io/nvidia/driver:{tag}"}]}}


def test_progress_names_the_nodes_whose_driver_pod_runs_another_version():
    nodes = [_node("a", "upgrade-done"), _node("b", "upgrade-done"), _node("c", "upgrade-done")]
    pods = [_pod("a", "595.91.07-ubuntu22.04"), _pod("b", "595.91.07"), _pod("c", "580.126.20-ubuntu22.04")]
    got = _upgrade.progress(nodes, ["a", "b", "c"], driver_pods=pods, driver_version="595.91.07")
    assert got["stale"] == ["c"] and not got["complete"]
    assert _upgrade.progress(nodes, ["a", "b", "c"], driver_pods=pods[:2], driver_version="595.91.07")["complete"]
    assert _upgrade.progress(nodes)["stale"] == []  # no pods given: states only
