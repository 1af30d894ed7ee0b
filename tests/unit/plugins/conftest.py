"""Unit tests of the collection's plugins: import path, host tree, fake commands, module runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ansible.module_utils.common import warnings as _ansible_warnings

# The collection's import path (ansible_collections.gpuops.platform) is set up by tests/unit/conftest.py.
sys.path.insert(0, str(Path(__file__).parent))

from ansible.module_utils.testing import patch_module_args  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common import (
    _fs,  # noqa: E402
    _runner,  # noqa: E402
)
from hostsim import FakeCommands, HostTree  # noqa: E402


@pytest.fixture
def host(tmp_path, monkeypatch):
    """An empty host tree; module_utils' ROOT points at it for the test."""
    root = tmp_path / "host"
    root.mkdir()
    monkeypatch.setattr(_fs, "ROOT", str(root))
    return HostTree(root)


@pytest.fixture
def commands(monkeypatch):
    fake = FakeCommands()
    monkeypatch.setattr(_runner.Runner, "_resolve", lambda self, tool: fake.resolve(tool))
    monkeypatch.setattr(_runner.Runner, "_exec", lambda self, argv, env, data=None: fake.execute(argv, env, data))
    return fake


@pytest.fixture
def run_module(capfd, monkeypatch):
    """run_module(module, args, check_mode=False, diff=True) -> (result dict, failed bool)."""
    # Modules run on the target, not in the controller: once a test imported a controller module (a filter
    # plugin does), ansible routes module warnings to the controller's display instead of the result.
    from ansible.module_utils import _internal as _ansible_internal

    monkeypatch.setattr(_ansible_internal, "is_controller", False)

    def _run(module, args, check_mode=False, diff=True):
        # a real module runs once per process; here many run in one, so start each with no warnings
        # (ansible keeps them in a process-wide dict and would drop a repeated one)
        _ansible_warnings._global_warnings.clear()
        _ansible_warnings._global_deprecations.clear()
        args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        with patch_module_args(args), pytest.raises(SystemExit) as exc:
            module.main()
        out = capfd.readouterr().out
        result = json.loads(out)
        return result, exc.value.code != 0

    return _run


@pytest.fixture
def four_step(host, commands, run_module):
    """check → real → check → real with diff: check predicts real, nothing written or run in check mode, the
    second real run is a no-op. Returns the four results."""

    def _run(module, args):
        results = []
        for check_mode in (True, False, True, False):
            snap, calls = host.snapshot(), len(commands.calls)
            result, failed = run_module(module, args, check_mode=check_mode)
            assert not failed, result
            if check_mode:
                assert host.snapshot() == snap, "check mode wrote to the host"
                assert not [c for c in commands.calls[calls:] if commands.MUTATING.search(c)], "check mode ran a change"
            results.append(result)
        assert results[0]["changed"] == results[1]["changed"]
        assert results[2]["changed"] is False and results[3]["changed"] is False
        return results

    return _run
