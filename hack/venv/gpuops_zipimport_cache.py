"""A bytecode cache for modules that Python imports from zip files, for the dev/test virtualenv only.

Ansible runs every module task as an AnsiballZ payload: a zip of the module and its module_utils
(``ansible.module_utils.basic`` and friends, kubernetes.core's and ours) that the interpreter imports with
``zipimport``. ``zipimport`` never writes bytecode, so every task compiled the same few hundred kilobytes of
source again: about 0.25 s of CPU per task, a fifth of the CPU of a ``site.yml`` re-run
(benchmarks/README.md). ``make venv`` copies this file into the virtualenv's site-packages with a ``.pth``
line that imports it, so only that virtualenv's interpreter (the one the lab and the tests run modules
with) uses it; what a module does is unchanged.

The cache key is the source text and the interpreter's bytecode magic number, so an edited file is compiled
afresh and a stale entry is never used. The file name of the compiled code is set to the path of this
import (each payload has its own temporary path), so tracebacks name the real file. Entries are written
atomically; any error reading or writing the cache falls back to compiling, as Python would.
"""

from __future__ import annotations

import marshal
import os
import sys
import types
import zipimport

CACHE_DIR = os.environ.get("GPUOPS_ZIPIMPORT_CACHE") or os.path.join(
    sys.prefix, "zipimport-cache", sys.implementation.cache_tag or "python"
)
_compile_source = zipimport._compile_source  # type: ignore[attr-defined]  # pylint: disable=protected-access


def _with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(_with_filename(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def cached_compile(pathname: str, source: bytes) -> types.CodeType:
    """``zipimport._compile_source`` with a cache keyed by the source and the bytecode magic number."""
    # imported here, not when the interpreter starts: every start of the virtualenv's Python imports this file
    import hashlib  # noqa: PLC0415
    import importlib.util  # noqa: PLC0415

    path = os.path.join(CACHE_DIR, hashlib.sha256(importlib.util.MAGIC_NUMBER + source).hexdigest())
    try:
        with open(path, "rb") as f:
            return _with_filename(marshal.loads(f.read()), pathname)
    except (OSError, ValueError, EOFError, TypeError):
        pass
    code = _compile_source(pathname, source)
    try:
        os.makedirs(CACHE_DIR, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(marshal.dumps(code))
        os.replace(tmp, path)
    except OSError:
        pass
    return code


zipimport._compile_source = cached_compile  # type: ignore[attr-defined]  # pylint: disable=protected-access
