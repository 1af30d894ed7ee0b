from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common import _fs
from ansible_collections.gpuops.platform.plugins.module_utils.common._runner import Runner
from ansible_collections.gpuops.platform.plugins.module_utils.host import _service
from ansible_collections.gpuops.platform.plugins.module_utils.host._service import Systemd

NO_SYSTEMD = "System has not been booted with systemd as init system (PID 1). Can't operate.\n"


@pytest.mark.parametrize(
    "verb, answer, expected",
    [
        ("is-active", (0, "active\n", ""), True),
        ("is-active", (3, "inactive\n", ""), False),
        ("is-active", (3, "failed\n", ""), False),
        ("is-active", (1, "", NO_SYSTEMD), None),
        ("is-active", (1, "", "Failed to connect to bus: No such file or directory\n"), None),
        ("is-active", (0, "", ""), None),
        ("is-enabled", (0, "enabled\n", ""), True),
        ("is-enabled", (0, "static\n", ""), True),
        ("is-enabled", (1, "disabled\n", ""), False),
        ("is-enabled", (1, "masked\n", ""), False),
        ("is-enabled", (4, "not-found\n", ""), False),
        ("is-enabled", (1, "", "Failed to get unit file state for x.service: No such file or directory\n"), False),
        ("is-enabled", (1, "", NO_SYSTEMD), None),
    ],
)
def test_unanswered_query_is_unknown(commands, verb, answer, expected):
    commands.tools |= {"systemctl"}
    commands.on(rf"^systemctl {verb} x.service$", answer)
    systemd = Systemd(Runner(module=None))
    query = systemd.is_active if verb == "is-active" else systemd.is_enabled
    assert query("x.service") is expected
    if expected is None:
        assert systemd.last_error["x.service"].startswith(f"systemctl {verb} x.service (rc={answer[0]}): ")


def test_status_without_systemctl_is_unknown(commands):
    assert Systemd(Runner(module=None)).status("x.service") == {"active": None, "enabled": None}


def test_booted_is_sd_booted(host):
    """systemd as PID 1 makes /run/systemd/system (sd_booted(3)); a file of that name, or none, is not systemd."""
    assert _service.booted(_fs.HostFS()) is False
    host.file("/run/systemd/system", "")
    assert _service.booted(_fs.HostFS()) is False
    host.p("/run/systemd/system").unlink()
    host.p("/run/systemd/system").mkdir()
    assert _service.booted(_fs.HostFS()) is True
