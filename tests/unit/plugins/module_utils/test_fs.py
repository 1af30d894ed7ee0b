"""HostFS.write_file names the file asked for when it fails (issue 27: a read-only folder named the temporary
file), and HostFS.writable answers as access(2) does for the folder that will hold the file."""

from __future__ import annotations

import errno
import os

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common import _fs
from ansible_collections.gpuops.platform.plugins.module_utils.common._fs import HostFS


@pytest.mark.parametrize("fail", ["mkstemp", "replace"])
def test_a_failed_write_names_the_target_not_the_temp_file(host, monkeypatch, fail):
    target = "/etc/udev/rules.d/70-gpuops-sriov.rules"
    host.p("/etc/udev/rules.d").mkdir(parents=True)

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(host.p("/etc/udev/rules.d/.gpuops-q1w2e3")))

    monkeypatch.setattr(_fs.tempfile if fail == "mkstemp" else _fs.os, fail, refuse)
    with pytest.raises(OSError) as exc:
        HostFS().write_file(target, "x\n")
    assert exc.value.errno == errno.EROFS and exc.value.filename == target
    assert os.listdir(host.p("/etc/udev/rules.d")) == []  # no temporary file left behind


def test_writable_looks_at_the_folder_or_its_nearest_existing_parent(host, monkeypatch):
    host.p("/etc").mkdir()
    denied = str(host.p("/etc"))
    real = _fs.os.access
    monkeypatch.setattr(_fs.os, "access", lambda p, m: False if str(p) == denied else real(p, m))
    assert HostFS().writable("/etc/udev/rules.d/70-gpuops-sriov.rules") is False  # write_file would make udev/
    host.p("/etc/udev/rules.d").mkdir(parents=True)
    assert HostFS().writable("/etc/udev/rules.d/70-gpuops-sriov.rules") is True
