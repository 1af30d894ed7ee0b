from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import HostStateError, Unsupported
from ansible_collections.gpuops.platform.plugins.module_utils.common._fs import HostFS
from ansible_collections.gpuops.platform.plugins.module_utils.host import _acs
from hostsim import dgx_like


@pytest.mark.parametrize(
    "state, capability, expected",
    [("disabled", 0x005F, 0), ("enabled", 0x005F, 0x001D), ("enabled", 0x007F, 0x001D), ("enabled", 0x0005, 0x0005)],
)
def test_desired_control(state, capability, expected):
    assert _acs.desired_control(state, capability) == expected


def test_read_write_roundtrip(host):
    host.bridge("0000:00:01.0", port_type="root_port", acs=0x001D)
    fs = HostFS()
    assert _acs.read_acs(fs, "0000:00:01.0") == {
        "address": "0000:00:01.0",
        "offset": 0x148,
        "capability": 0x5F,  # the lab's ports implement SV TB RR CR UF DT
        "control": 0x1D,
    }
    _acs.write_control(fs, "0000:00:01.0", 0x148, 0)
    assert host.acs_control("0000:00:01.0") == 0
    assert len(host.p(host.real("0000:00:01.0") + "/config").read_bytes()) == 4096  # not truncated


def test_errors_name_the_device(host):
    host.bridge("0000:00:01.0", port_type="root_port", acs=None)
    host.bridge("0000:00:02.0", port_type="root_port", config_size=64)
    with pytest.raises(Unsupported, match="0000:00:01.0 has no ACS extended capability"):
        _acs.read_acs(HostFS(), "0000:00:01.0")
    with pytest.raises(HostStateError, match="0000:00:02.0.*64 bytes.*become"):
        _acs.read_acs(HostFS(), "0000:00:02.0")


def test_default_targets_are_acs_bridges_above_gpus_and_rdma_nics(host):
    addrs = dgx_like(host)
    targets = _acs.default_targets(HostFS())
    # root ports and downstream ports of the 4 PCIe switches; upstream ports have no ACS; NVSwitch root ports excluded
    assert len(targets) == 12
    assert not set(targets) & set(addrs["gpus"] + addrs["nics"] + addrs["nvswitches"])
    assert "0000:00:10.0" not in targets


def test_render_unit():
    text = _acs.render_unit("/usr/bin/setpci", [("0000:00:01.0", 0), ("0000:16:02.0", 0x1D)], "disabled")
    assert "ExecStart=/usr/bin/setpci -s 0000:00:01.0 ECAP_ACS+0x6.w=0000\n" in text
    assert "ExecStart=/usr/bin/setpci -s 0000:16:02.0 ECAP_ACS+0x6.w=001d\n" in text
    assert "Type=oneshot" in text and "WantedBy=multi-user.target" in text
