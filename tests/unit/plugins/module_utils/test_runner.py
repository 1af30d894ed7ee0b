from __future__ import annotations

import os

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import CommandFailed, ToolNotFound
from ansible_collections.gpuops.platform.plugins.module_utils.common._fs import HostFS
from ansible_collections.gpuops.platform.plugins.module_utils.common._runner import Runner


class FakeModule:
    def __init__(self, bins, results):
        self.bins, self.results, self.calls = bins, list(results), []

    def get_bin_path(self, tool, required=False, opt_dirs=None):
        assert "/usr/sbin" in opt_dirs and not required
        return self.bins.get(tool)

    def run_command(self, argv, environ_update=None, check_rc=False):
        assert isinstance(argv, list) and check_rc is False
        self.calls.append((argv, environ_update))
        return self.results.pop(0)


@pytest.mark.parametrize(
    "check_mode, mutating, ran",
    [(False, False, True), (False, True, True), (True, False, True), (True, True, False)],
)
def test_check_mode_skips_only_mutating_calls(check_mode, mutating, ran):
    mod = FakeModule({"modprobe": "/usr/sbin/modprobe"}, [(0, "", "")])
    runner = Runner(mod, check_mode=check_mode)
    res = runner.run("modprobe", ["-r", "nouveau"], mutating=mutating)
    assert res.argv == ["/usr/sbin/modprobe", "-r", "nouveau"] and res.rc == 0
    assert bool(mod.calls) is ran and res.skipped is not ran
    if ran:
        assert mod.calls[0][1] == {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
    else:
        assert runner.skipped == [["/usr/sbin/modprobe", "-r", "nouveau"]]


def test_failure_keeps_exact_argv_and_output():
    mod = FakeModule({"dracut": "/usr/bin/dracut"}, [(1, "", "dracut: cannot write\n")])
    with pytest.raises(CommandFailed) as exc:
        Runner(mod).run("dracut", ["--force", "--regenerate-all"], mutating=True)
    assert exc.value.details == {
        "cmd": ["/usr/bin/dracut", "--force", "--regenerate-all"],
        "rc": 1,
        "stdout": "",
        "stderr": "dracut: cannot write\n",
    }
    assert "rc=1" in str(exc.value) and "dracut: cannot write" in str(exc.value)


def test_check_false_returns_failures_and_env_is_merged():
    mod = FakeModule({"apt-get": "/usr/bin/apt-get"}, [(100, "", "E: nope")])
    res = Runner(mod).run("apt-get", ["install", "x"], check=False, env={"DEBIAN_FRONTEND": "noninteractive"})
    assert res.rc == 100 and not res.ok
    assert mod.calls[0][1]["DEBIAN_FRONTEND"] == "noninteractive" and mod.calls[0][1]["LC_ALL"] == "C"


def test_missing_tool_names_the_package():
    with pytest.raises(ToolNotFound, match="required command setpci not found.*install pciutils"):
        Runner(FakeModule({}, [])).run("setpci", ["-s", "0000:00:01.0"])


def test_realpath_keeps_absolute_links_inside_the_root(tmp_path):
    (tmp_path / "usr/src/linux-headers-6.8.0").mkdir(parents=True)
    (tmp_path / "lib/modules/6.8.0").mkdir(parents=True)
    os.symlink("/usr/src/linux-headers-6.8.0", tmp_path / "lib/modules/6.8.0/build")
    os.symlink("../../lib", tmp_path / "usr/src/lib-link")
    fs = HostFS(str(tmp_path))
    assert fs.realpath("/lib/modules/6.8.0/build") == "/usr/src/linux-headers-6.8.0"
    assert fs.realpath("/usr/src/lib-link/modules/../modules/6.8.0") == "/lib/modules/6.8.0"
    os.symlink("loop", tmp_path / "loop")
    with pytest.raises(OSError, match="too many levels"):
        fs.realpath("/loop")


def test_remembered_reads_run_once_and_are_shared_with_the_check_mode_probe():
    """remember_reads (gpu_host_preflight): a read repeated with the same argv and environment answers from the first
    run, in the probe runner too; other argv, other environments and mutating calls always run; a failed read is
    remembered with its rc and still raises where check is asked."""
    bins = {"systemctl": "/usr/bin/systemctl", "modinfo": "/usr/sbin/modinfo"}
    mod = FakeModule(bins, [(0, "active\n", ""), (1, "", "not found"), (0, "enabled\n", ""), (0, "", "")])
    runner = Runner(mod)
    runner.remember_reads()
    assert runner.run("systemctl", ["is-active", "fm"]).out == "active\n"
    assert runner.run("modinfo", ["nvidia"], check=False).rc == 1
    probe = runner.checking()
    assert probe.run("systemctl", ["is-active", "fm"]).out == "active\n"  # remembered
    with pytest.raises(CommandFailed):
        probe.run("modinfo", ["nvidia"])  # remembered rc 1, check asked
    assert probe.run("systemctl", ["is-enabled", "fm"]).out == "enabled\n"
    assert probe.run("systemctl", ["is-active", "fm"], env={"X": "1"}).rc == 0  # another environment: runs
    assert probe.run("systemctl", ["restart", "fm"], mutating=True).skipped  # mutating in check mode: not run
    assert [c[0][1:] for c in mod.calls] == [["is-active", "fm"], ["nvidia"], ["is-enabled", "fm"], ["is-active", "fm"]]


def test_reads_are_not_remembered_by_default():
    mod = FakeModule({"systemctl": "/usr/bin/systemctl"}, [(0, "active\n", ""), (0, "inactive\n", "")])
    runner = Runner(mod)
    assert runner.run("systemctl", ["is-active", "fm"]).out == "active\n"
    assert runner.run("systemctl", ["is-active", "fm"]).out == "inactive\n" and len(mod.calls) == 2
