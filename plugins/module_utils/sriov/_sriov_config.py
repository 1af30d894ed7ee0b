# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""SR-IOV Network Operator (k8snetworkplumbingwg v1.6.0): the SriovOperatorConfig ``default`` (the only one the
operator reconciles) from the sriov_network_operator role's variables, as pure functions (no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.sriov._sriov_policy import (
    API_VERSION,
    CONFIG_KEYS,
    CONFIG_NAME,
    CONFIGURATION_MODES,
    DISABLE_PLUGINS,
    VAR_CONFIG,
    Finding,
    Obj,
    _bad,
    _is_int,
    _label_map,
    _raise_on,
    _unknown_keys,
)


# -- SriovOperatorConfig "default" -----------------------------------------------------------------------------
def _operator_config(cfg: Any, var: str) -> tuple[Obj, list[Finding]]:
    cfg = {} if cfg is None else cfg
    if not isinstance(cfg, Mapping):
        return {}, [_bad("sriov-config-invalid", var, cfg, f"{var} must be a mapping.", "fix it.")]
    out = _unknown_keys(cfg, CONFIG_KEYS, var)
    # defaults as the upstream chart renders them (sriovOperatorConfig.* and admissionControllers.enabled false)
    spec: dict[str, Any] = {
        "enableInjector": False,
        "enableOperatorWebhook": False,
        "logLevel": 2,
        "disableDrain": False,
        "configurationMode": "daemon",
    }
    for key in ("enable_injector", "enable_operator_webhook", "disable_drain", "use_cdi", "enable_ovs_offload"):
        if key not in cfg:
            continue
        if isinstance(cfg[key], bool):
            spec[CONFIG_KEYS[key]] = cfg[key]
        else:
            out.append(
                _bad("sriov-config-invalid", f"{var}.{key}", cfg[key], f"{key} must be true or false.", "fix it.")
            )
    if "log_level" in cfg:
        if _is_int(cfg["log_level"]) and 0 <= cfg["log_level"] <= 2:
            spec["logLevel"] = cfg["log_level"]
        else:
            out.append(
                _bad(
                    "sriov-config-invalid",
                    f"{var}.log_level",
                    cfg["log_level"],
                    "log_level must be 0, 1 or 2.",
                    "fix it.",
                )
            )
    if "configuration_mode" in cfg:
        if cfg["configuration_mode"] in CONFIGURATION_MODES:
            spec["configurationMode"] = cfg["configuration_mode"]
        else:
            out.append(
                _bad(
                    "sriov-config-invalid",
                    f"{var}.configuration_mode",
                    cfg["configuration_mode"],
                    "configuration_mode must be daemon or systemd.",
                    "fix it.",
                )
            )
    if cfg.get("config_daemon_node_selector"):
        selector = _label_map(cfg["config_daemon_node_selector"])
        if selector is None:
            out.append(
                _bad(
                    "sriov-config-invalid",
                    f"{var}.config_daemon_node_selector",
                    cfg["config_daemon_node_selector"],
                    "config_daemon_node_selector must be a mapping of node labels.",
                    "fix it.",
                )
            )
        else:
            spec["configDaemonNodeSelector"] = selector
    plugins = cfg.get("disable_plugins")
    if plugins:
        if isinstance(plugins, list) and all(p in DISABLE_PLUGINS for p in plugins):
            spec["disablePlugins"] = list(plugins)
        else:
            out.append(
                _bad(
                    "sriov-config-invalid",
                    f"{var}.disable_plugins",
                    plugins,
                    "disable_plugins is a list whose only allowed entry is mellanox.",
                    "fix it.",
                )
            )
    gates = cfg.get("feature_gates")
    if gates:
        if isinstance(gates, Mapping) and all(isinstance(v, bool) for v in gates.values()):
            spec["featureGates"] = {str(k): v for k, v in gates.items()}
        else:
            out.append(
                _bad(
                    "sriov-config-invalid",
                    f"{var}.feature_gates",
                    gates,
                    "feature_gates maps gate names to true or false.",
                    "fix it.",
                )
            )
    obj = {"apiVersion": API_VERSION, "kind": "SriovOperatorConfig", "metadata": {"name": CONFIG_NAME}, "spec": spec}
    return obj, out


def operator_config(cfg: Mapping[str, Any] | None, namespace: str | None = None, var: str = VAR_CONFIG) -> Obj:
    """The SriovOperatorConfig, always named default: the operator reconciles no other name (its webhook refuses
    them) and reconciles no policy before it exists. Without config_daemon_node_selector the operator configures
    the nodes labelled node-role.kubernetes.io/worker="" and kubernetes.io/os=linux."""
    obj, findings = _operator_config(cfg, var)
    _raise_on(findings)
    if namespace:
        obj["metadata"]["namespace"] = namespace
    return obj
