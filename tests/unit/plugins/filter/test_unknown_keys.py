from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.unknown_keys import unknown_keys

CHART = {"driver": {"enabled": True, "rdma": {"enabled": False}}, "mig": {"strategy": "single"}, "nodeSelector": {}}


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ({}, []),
        ({"driver": {"enabled": False}}, []),
        ({"driver": {"rdma": {"enabeld": True}}}, ["driver.rdma.enabeld"]),
        ({"migg": {"strategy": "mixed"}}, ["migg"]),
        ({"nodeSelector": {"anything": "goes"}}, []),
        ({"mig": {"strategy": "mixed"}, "toolkit": {}}, ["toolkit"]),
    ],
)
def test_unknown_keys(user, expected):
    assert unknown_keys(user, CHART) == expected


def test_bad_input():
    with pytest.raises(AnsibleFilterError):
        unknown_keys([], CHART)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (["driver", "rdma", "enabled"], False),
        (["driver", "enabled"], True),
        (["driver", "missing"], None),
        (["mig", "strategy", "deeper"], None),
        ([], CHART),
    ],
)
def test_dig(path, expected):
    from ansible_collections.gpuops.platform.plugins.module_utils.release._helm_release import dig

    assert dig(CHART, path) == expected
