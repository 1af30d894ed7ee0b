# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The former path of ``k8s/_owned.py``: the names _kai, _volcano, _queue_tree,
_kueue import from here, and nothing else.

Remove this file once they import ``module_utils.k8s._owned``.
"""

from __future__ import annotations

from ansible_collections.gpuops.platform.plugins.module_utils.k8s._owned import (
    finding,
    landing_findings,
    owned,
    owner_labels,
    prune_objects,
    selector,
)

__all__ = ["finding", "landing_findings", "owned", "owner_labels", "prune_objects", "selector"]
