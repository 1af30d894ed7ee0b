from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import (
    InvalidInput,
    NotFound,
    Unsupported,
    WaitTimeout,
)
from ansible_collections.gpuops.platform.plugins.module_utils.common._fs import HostFS
from ansible_collections.gpuops.platform.plugins.module_utils.host import _sriov


@pytest.mark.parametrize(
    "current, desired, writes",
    [(0, 0, []), (0, 8, [8]), (8, 8, []), (8, 0, [0]), (8, 4, [0, 4]), (4, 8, [0, 8])],
)
def test_plan_writes_goes_through_zero(current, desired, writes):
    assert _sriov.plan_writes(current, desired) == writes


@pytest.fixture
def pf_host(host):
    host.pci("0000:3b:00.0", "15b3", "101d", "020000", driver="mlx5_core", sriov=(8, 0))
    host.netdev("0000:3b:00.0", "ens1f0np0")
    host.pci("0000:3c:00.0", "8086", "1593", "020000", driver="ice")  # no SR-IOV attributes
    host.netdev("0000:3c:00.0", "eno1")
    host.p("/sys/devices/virtual/net/lo").mkdir(parents=True)
    host.rel_link("/sys/class/net/lo", "/sys/devices/virtual/net/lo")
    return host


@pytest.mark.parametrize(
    "pf, expected",
    [("ens1f0np0", "0000:3b:00.0"), ("0000:3b:00.0", "0000:3b:00.0"), ("3B:00.0", "0000:3b:00.0")],
)
def test_resolve_pf(pf_host, pf, expected):
    assert _sriov.resolve_pf(HostFS(), pf) == expected


@pytest.mark.parametrize(
    "pf, error, match",
    [
        ("eth0;reboot", InvalidInput, "neither a PCI address nor a valid interface name"),
        ("../../etc", InvalidInput, "neither"),
        ("a/b", InvalidInput, "neither"),
        ("$(id)", InvalidInput, "neither"),
        ("ens1 f0", InvalidInput, "neither"),
        ("..", InvalidInput, "neither"),
        ("averyveryverylongname", InvalidInput, "neither"),
        ("0000:3b:00", InvalidInput, "malformed PCI address"),
        ("eth9", NotFound, "unknown PF eth9:"),
        ("0000:99:00.0", NotFound, "0000:99:00.0 not found"),
        ("lo", Unsupported, "not backed by a PCI device"),
    ],
)
def test_resolve_pf_rejects(pf_host, pf, error, match):
    with pytest.raises(error, match=match):
        _sriov.resolve_pf(HostFS(), pf)


def test_not_sriov_capable(pf_host):
    with pytest.raises(Unsupported, match="not SR-IOV capable"):
        _sriov.read_state(HostFS(), "0000:3c:00.0")


@pytest.mark.parametrize(
    "num, error, match",
    [
        (-1, InvalidInput, "0 or more"),
        (
            9,
            Unsupported,
            r"num_vfs=9 is above the firmware limit of PF 0000:3b:00.0: sriov_totalvfs is 8.*mlxconfig -d 0000:3b:00.0",
        ),
    ],
)
def test_check_request(pf_host, num, error, match):
    state = _sriov.read_state(HostFS(), "0000:3b:00.0")
    with pytest.raises(error, match=match):
        _sriov.check_request(state, num)


def test_wait_times_out_without_sleeping(pf_host):
    now = [0.0]
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        now[0] += s

    with pytest.raises(WaitTimeout, match=r"0000:3b:00.0: 0 VF devices after 2s, 4 expected"):
        _sriov.wait_for_vfs(HostFS(), "0000:3b:00.0", 4, 2, clock=lambda: now[0], sleep=sleep)
    assert sum(sleeps) >= 2 and len(sleeps) == 8


_MATCH = 'ACTION=="add", SUBSYSTEM=="net", KERNELS=="%s", ATTR{device/sriov_numvfs}=="0", '
RULE_A = _MATCH % "0000:3b:00.0" + 'ATTR{device/sriov_numvfs}="%d"'
RULE_B = _MATCH % "0000:5e:00.0" + 'ATTR{device/sriov_numvfs}="4"'


@pytest.mark.parametrize(
    "before, num, after",
    [
        (None, 0, None),
        (None, 8, [RULE_A % 8]),
        (_sriov.RULES_HEADER + RULE_A % 4 + "\n", 8, [RULE_A % 8]),
        (_sriov.RULES_HEADER + RULE_A % 4 + "\n", 0, None),
        (_sriov.RULES_HEADER + RULE_B + "\n", 8, [RULE_A % 8, RULE_B]),
        (_sriov.RULES_HEADER + RULE_B + "\n" + RULE_A % 2 + "\n", 0, [RULE_B]),
    ],
)
def test_render_rules(before, num, after):
    text = _sriov.render_rules(before, "0000:3b:00.0", num)
    assert text == (None if after is None else _sriov.RULES_HEADER + "\n".join(after) + "\n")
