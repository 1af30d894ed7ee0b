# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Plain data from what a filter plugin is given: pure functions (no I/O).

A role variable reaches a filter as ansible-core's lazy container (a list or dict that templates its items when
read, holding the templar that does it). ``copy.deepcopy`` of one copies that templar, its Jinja environment and
plugin loaders: slow, and ansible-core 2.21 warns about it ("Instantiating filter PluginLoader with aliases is
deprecated", once per run of site.yml). :func:`plain` renders the value once and returns plain JSON data - a copy
that shares nothing with its source, for values that are JSON (role variables, Kubernetes objects)."""

from __future__ import annotations

import json
from typing import Any


def plain(value: Any) -> Any:
    """``value`` as plain dicts, lists, strings, numbers, booleans and None (tuples become lists)."""
    return json.loads(json.dumps(value))
