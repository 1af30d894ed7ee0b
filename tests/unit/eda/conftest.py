"""The Event-Driven Ansible parts: the event source plugin is loaded from its file, as ansible-rulebook loads it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "extensions" / "eda" / "plugins" / "event_source" / "alertmanager.py"


@pytest.fixture(scope="session")
def source() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpuops_eda_alertmanager", SOURCE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
