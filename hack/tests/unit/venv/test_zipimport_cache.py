"""hack/venv/gpuops_zipimport_cache.py: a module imported from a zip is compiled once per source text; a new
payload path is what tracebacks name; an edited source or a damaged entry is compiled afresh."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

HACK_VENV = Path(__file__).resolve().parents[3] / "venv"

# -S: no site-packages, so no .pth imports the installed copy; the file under test is imported by path
PROBE = """
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
import gpuops_zipimport_cache as c
calls = []
real = c._compile_source
c._compile_source = lambda p, s: calls.append(p) or real(p, s)
sys.path.insert(0, sys.argv[2])
import payload_mod
try:
    payload_mod.boom()
except RuntimeError:
    where = traceback.extract_tb(sys.exc_info()[2])[-1].filename
print(json.dumps({"compiled": len(calls), "value": payload_mod.VALUE, "where": where}))
"""


def _zip(path: Path, value: int) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("payload_mod.py", f"VALUE = {value}\n\ndef boom():\n    raise RuntimeError('x')\n")
    return path


def _run(cache: Path, payload: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-S", "-c", PROBE, str(HACK_VENV), str(payload)],
        env={"GPUOPS_ZIPIMPORT_CACHE": str(cache)},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def test_second_import_uses_the_cache_and_names_its_own_path(tmp_path, cache):
    first = _run(cache, _zip(tmp_path / "a.zip", 1))
    second = _run(cache, _zip(tmp_path / "b.zip", 1))
    assert first == {"compiled": 1, "value": 1, "where": str(tmp_path / "a.zip" / "payload_mod.py")}
    assert second == {"compiled": 0, "value": 1, "where": str(tmp_path / "b.zip" / "payload_mod.py")}
    assert len(list(cache.iterdir())) == 1


def test_an_edited_source_is_compiled_again(tmp_path, cache):
    _run(cache, _zip(tmp_path / "a.zip", 1))
    edited = _run(cache, _zip(tmp_path / "b.zip", 2))
    assert edited["compiled"] == 1 and edited["value"] == 2
    assert len(list(cache.iterdir())) == 2


def test_a_damaged_entry_is_compiled_again(tmp_path, cache):
    _run(cache, _zip(tmp_path / "a.zip", 1))
    (entry,) = cache.iterdir()
    entry.write_bytes(b"\x00garbage")
    again = _run(cache, _zip(tmp_path / "b.zip", 1))
    assert again["compiled"] == 1 and again["value"] == 1


def test_an_unwritable_cache_still_imports(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = _run(blocker / "cache", _zip(tmp_path / "a.zip", 3))
    # nothing cached: zipimport compiles the module for each lookup of its code (twice for one import)
    assert out["compiled"] >= 1 and out["value"] == 3
