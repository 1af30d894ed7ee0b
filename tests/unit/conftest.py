"""Unit tests: the collection's import path (ansible_collections.gpuops.platform -> this repository), for the plugin
tests and for the chart tests that render what a role's rules build."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / ".state" / "collections"
_link = COLLECTIONS / "ansible_collections" / "gpuops" / "platform"
if not _link.exists():
    _link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(REPO, _link)
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))
