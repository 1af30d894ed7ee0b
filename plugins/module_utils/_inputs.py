# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The former path of ``inputs/_inputs.py``: the names _sharing import from here, and nothing else.

Remove this file once they import ``module_utils.inputs._inputs``.
"""

from __future__ import annotations

from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs import a, kind_of, variable_finding
from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs_choices import batch_schedulers

__all__ = ["a", "batch_schedulers", "kind_of", "variable_finding"]
