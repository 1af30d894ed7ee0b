# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The objects the network_operator role owns, once: pure functions (no I/O).

- :data:`OWNER_LABELS` mark every IPPool and network the role applies (the NicClusterPolicy has the one name the
  operator reconciles and is never pruned); :func:`owned` adds them to a built object.
- :data:`PRUNE`: gpuops.platform.k8s_apply's ``prune`` option of the role's apply - the live objects carrying those
  labels that the variables no longer ask for go, in delete order (networks before the IPPools they use). Objects
  without the labels (made by hand, or by another tool) are never touched.
- :func:`landing_findings`: every value the role asked for (each leaf of a built object's ``spec`` and its
  labels) must be the live object's value; one finding per object with one evidence line per field, naming the
  field, the wanted and the live value (a field the CRD does not know is pruned by the API server, silently).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

Finding = dict[str, Any]
Obj = dict[str, Any]

OWNER_LABELS = _owned.owner_labels("network_operator")
OWNER_SELECTOR = _owned.selector(OWNER_LABELS)
# Delete order: the networks first (their NetworkAttachmentDefinitions name the pools), then the IPPools.
PRUNABLE = (
    ("mellanox.com/v1alpha1", "MacvlanNetwork"),
    ("mellanox.com/v1alpha1", "HostDeviceNetwork"),
    ("mellanox.com/v1alpha1", "IPoIBNetwork"),
    ("nv-ipam.nvidia.com/v1alpha1", "IPPool"),
)
# k8s_apply's prune option: the networks and pools the role labelled that the variables dropped
PRUNE = _owned.prune_spec(OWNER_LABELS, [(api, kind, None) for api, kind in PRUNABLE])


def owned(obj: Mapping[str, Any]) -> Obj:
    """A copy of ``obj`` with the role's owner labels added (its own labels kept)."""
    return _owned.owned(obj, OWNER_LABELS)


def landing_findings(wanted: Sequence[Mapping[str, Any]], live: Iterable[Mapping[str, Any]]) -> list[Finding]:
    """One finding per wanted object that is missing or whose ``spec`` / labels differ from the live object's
    (``network-object-not-landed``, error), evidence ``<field>: wanted <json>, live <json>`` per field."""
    return _owned.landing_findings(
        wanted,
        live,
        "network-object-not-landed",
        "upgrade the CRDs to the chart's (network_operator_chart_version), or find the other writer "
        "(kubectl get --show-managed-fields)",
    )
