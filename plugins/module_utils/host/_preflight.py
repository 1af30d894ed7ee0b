# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""gpu_host_preflight: gather (or take) the gpuops_host facts, work out host_prep's plan, run the host rules
(_host_rules) and turn their findings into the module result. The rules themselves live in _host_rules."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError
from ansible_collections.gpuops.platform.plugins.module_utils.host import (
    _acs,
    _driver_rules,
    _fabricmanager,
    _host_findings,
    _hostfacts,
    _nouveau,
    _sriov,
)
from ansible_collections.gpuops.platform.plugins.module_utils.host import _host_rules as rules

# gpu_host_preflight's options (also what validation_params fills with their defaults).
ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "facts": {"type": "dict"},
    "node_name": {"type": "str"},
    "stage": {"type": "str", "choices": ["preflight", "validate"], "default": "preflight"},
    "checks": {"type": "list", "elements": "str", "choices": list(_host_findings.CONCERNS)},
    "nvidia_driver": {"type": "str", "choices": ["none", "host", "container"], "default": "none"},
    "exclude_host_driver_nodes": {"type": "bool", "default": False},
    "driver_build": {"type": "bool", "default": False},
    "ofed": {"type": "str", "choices": ["none", "host", "operator"], "default": "none"},
    "rdma": {"type": "bool", "default": False},
    "use_host_mofed": {"type": "bool", "default": False},
    "gpudirect": {"type": "raw", "default": False},
    "sriov": {
        "type": "list",
        "elements": "dict",
        "options": {"pf": {"type": "str", "required": True}, "num_vfs": {"type": "int", "required": True}},
    },
    "unsigned_modules": {"type": "bool", "default": False},
    "fix": {
        "type": "dict",
        "options": {
            "nouveau": {"type": "str", "choices": ["auto", "blacklist", "remove", "skip"], "default": "skip"},
            "acs": {"type": "str", "choices": ["auto", "disable", "enable", "skip"], "default": "skip"},
            "acs_devices": {"type": "list", "elements": "str", "default": []},
            "fabricmanager": {"type": "str", "choices": ["auto", "present", "skip"], "default": "skip"},
        },
    },
    "planned_fixes": {"type": "list", "elements": "str", "choices": list(_host_findings.FIXES), "default": []},
    "reboot_pending": {"type": "bool", "default": False},
    "fail_on": {"type": "str", "choices": ["error", "warning", "never"], "default": "error"},
    "probe": {
        "type": "dict",
        "options": {
            "acs_persist": {"type": "bool", "default": False},
            "sriov_persist": {"type": "bool", "default": False},
            "validate": {"type": "bool", "default": False},
        },
    },
    "hosts": {
        "type": "list",
        "elements": "dict",
        "options": {
            "node_name": {"type": "str", "required": True},
            "facts": {"type": "dict", "required": True},
            "planned_fixes": {"type": "list", "elements": "str", "choices": list(_host_findings.FIXES), "default": []},
        },
    },
    # the action plugin turns it into O(hosts) on the controller (plugins/action/gpu_host_preflight.py)
    "inventory_hosts": {"type": "list", "elements": "str"},
}
# O(hosts) evaluates several hosts whose facts are known, each with its own name and facts: not with these.
MUTUALLY_EXCLUSIVE = [
    ("hosts", "facts", "inventory_hosts"),
    ("hosts", "node_name", "inventory_hosts"),
    ("hosts", "probe", "inventory_hosts"),
]

# Re-exported for callers that used them from here.
SEVERITIES = _host_findings.SEVERITIES
summarize = rules.summarize
failing = rules.failing

INTENT_KEYS = (
    "nvidia_driver",
    "exclude_host_driver_nodes",
    "driver_build",
    "ofed",
    "rdma",
    "use_host_mofed",
    "unsigned_modules",
    "reboot_pending",
)


def intent_of(params: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    intent = {k: params[k] for k in INTENT_KEYS}
    intent["node"] = params.get("node_name")
    intent["stage"] = params["stage"]
    intent["gpudirect"] = rules.resolve_gpudirect(facts, params["gpudirect"])
    intent["sriov"] = params["sriov"] or []
    return intent


def evaluate(facts: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The whole decision as data: ``{intent, plan, findings, node_labels}`` (pure; no I/O)."""
    intent = intent_of(params, facts)
    the_plan = rules.plan(facts, params["fix"] or {}, intent)
    intent["nouveau"] = the_plan["nouveau"]
    intent["acs"] = the_plan["acs"]
    intent["fabricmanager"] = the_plan["fabricmanager"]
    validate = params["stage"] == "validate"
    planned = [] if validate else list(params["planned_fixes"] or []) + the_plan["fixes"]
    findings = rules.evaluate(
        facts,
        intent,
        checks=params["checks"] or _host_findings.CONCERNS,
        planned_fixes=planned,
        managed=the_plan["fixes"] if validate else None,
    )
    return {
        "intent": intent,
        "plan": the_plan,
        "findings": findings,
        "node_labels": _driver_rules.node_labels(facts, intent),
    }


class _ProbeContext:
    """What a fix module's action gets when the preflight asks it what it would change: the same host file system,
    a runner that does not run mutating calls, check mode, no change recorded, its warnings kept here (the module
    repeats them when it runs)."""

    def __init__(self, ctx: Any, params: dict[str, Any]) -> None:
        self.params = params
        self.check_mode = True
        self.diff_mode = False
        self.fs = ctx.fs
        self.runner = ctx.runner.checking()
        self.done: list[str] = []
        self.warnings: list[str] = []

    @property
    def changed(self) -> bool:
        return False

    def did(self, what: str) -> None:
        """Nothing is done in check mode."""

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)


def _probe(ctx: Any, action: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``{pending, reboot_required}``: whether the fix module's own action, run in check mode here, would change
    the host. A probe that fails (a tool missing, a device gone) counts as pending: the module then runs and reports
    the error itself, with its evidence and fix."""
    try:
        result = action(_ProbeContext(ctx, params))
    except (GpuOpsError, OSError) as exc:
        return {"pending": True, "reboot_required": False, "error": str(exc)}
    return {"pending": bool(result.get("changed")), "reboot_required": bool(result.get("reboot_required"))}


def pending(ctx: Any, the_plan: dict[str, Any], probe: dict[str, Any]) -> dict[str, Any]:
    """Per planned fix, what its module would do now (:func:`_probe`), with the parameters host_prep passes it. The
    decision stays the module's (the same action, in check mode): host_prep skips a fix module that has nothing to
    do, one module round trip less per fix on a host already prepared."""
    out: dict[str, Any] = {"nouveau": None, "acs": None, "fabricmanager": None, "sriov": {}}
    if the_plan["nouveau"]:
        out["nouveau"] = _probe(ctx, _nouveau.run, {"state": the_plan["nouveau"]})
    if the_plan["acs"]:
        acs = {
            "state": the_plan["acs"]["state"],
            "devices": the_plan["acs"]["devices"] or None,
            "persist": probe["acs_persist"],
        }
        out["acs"] = _probe(ctx, _acs.run, acs)
    for item in the_plan["sriov"]:
        vfs = {"pf": item["address"], "num_vfs": item["num_vfs"], "persist": probe["sriov_persist"], "timeout": 30}
        out["sriov"][item["address"]] = _probe(ctx, _sriov.run, vfs)
    if the_plan["fabricmanager"]:
        out["fabricmanager"] = _probe(ctx, _fabricmanager.run, {"package_name": None, "package_revision": "1"})
    # the PFs whose VFs would change, in plan order (host_prep's sriov loop)
    out["sriov_pending"] = [address for address, p in out["sriov"].items() if p["pending"]]
    probes = [p for p in (out["nouveau"], out["acs"], out["fabricmanager"], *out["sriov"].values()) if p]
    out["any"] = any(p["pending"] for p in probes)
    # whether the host needs a reboot even where nothing is pending (nouveau blacklisted but still loaded)
    out["reboot_required"] = any(p["reboot_required"] for p in probes)
    return out


def decide(facts: dict[str, Any], p: dict[str, Any], gathered: bool = False) -> dict[str, Any]:
    """The module's result for ``facts`` and the parameters ``p`` (ARGUMENT_SPEC's, defaults filled), without the
    probe: the findings, the report, the plan, the node labels, passed and msg (and ``failed`` when a finding is
    at or above ``fail_on``). Pure; run() adds the probe, and the probe's ``validate`` calls it again."""
    decision = evaluate(facts, p)
    findings = decision["findings"]
    node = p.get("node_name") or "host"
    # fail_on=never only keeps the module from failing: passed still says whether an error was found
    bad = failing(findings, "error" if p["fail_on"] == "never" else p["fail_on"])
    summary = summarize(findings)
    result: dict[str, Any] = {
        "changed": False,
        "node_name": node,
        "findings": findings,
        "report": [f"{node}: {f['severity']}: {rules.describe(f)}" for f in findings],
        "summary": summary,
        "plan": decision["plan"],
        "node_labels": decision["node_labels"],
        "passed": not bad,
    }
    if decision["node_labels"]:  # the Node patch that sets them, ready for one server-side apply of every node's
        result["node_patch"] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": decision["node_labels"]},
        }
    if gathered:  # the facts it read, for the tasks and roles after it (as gpu_host_facts sets them)
        result["ansible_facts"] = {"gpuops_host": facts}
    stage = "host validation" if p["stage"] == "validate" else "host preflight"
    if bad:
        level = "error" if p["fail_on"] == "never" else p["fail_on"]
        details = " || ".join(rules.describe(f) for f in bad)
        result["msg"] = f"{node}: {stage}: {len(bad)} finding(s) at or above {level}: {details}"
        if p["fail_on"] != "never":
            result["failed"] = True  # run_module turns this into fail_json, findings included
    else:
        counts = ", ".join(f"{n} {s}" for s, n in summary.items() if n) or "no finding"
        result["msg"] = f"{node}: {stage} passed ({counts})"
    return result


# The options host_prep's validation passes (roles/host_prep/tasks/validate.yml, besides stage, reboot_pending,
# fail_on and facts); the others keep their defaults there. The probe's `validate` answers with them.
VALIDATION_OPTIONS = ("node_name", "nvidia_driver", "gpudirect", "sriov", "fix")


def validation_params(p: dict[str, Any], reboot_pending: bool) -> dict[str, Any]:
    """The parameters of host_prep's validation (stage validate) from this call's: VALIDATION_OPTIONS kept, the
    reboot the probe found pending, fail_on error, every other option at its default."""
    out = {k: v.get("default") for k, v in ARGUMENT_SPEC.items()}
    out.update({k: p[k] for k in VALIDATION_OPTIONS})
    out.update(stage="validate", reboot_pending=reboot_pending, fail_on="error", facts=p["facts"])
    return out


def decide_hosts(p: dict[str, Any]) -> dict[str, Any]:
    """The result for O(hosts): :func:`decide` per host (its name, facts and planned fixes, with this call's other
    options), in order under ``hosts``; the findings and report lines of all of them, the summary summed, passed
    when every host passed, and ``failed`` when one of them would have failed alone. Pure."""
    results = []
    for host in p["hosts"]:
        planned = list(p["planned_fixes"] or []) + list(host["planned_fixes"] or [])
        one = dict(p, hosts=None, node_name=host["node_name"], facts=host["facts"], planned_fixes=planned)
        one_result = decide(host["facts"], one)
        one_result.pop("failed", None)  # failed implies not passed; whether this call fails is decided below
        results.append(one_result)
    bad = [r for r in results if not r["passed"]]
    summary = {s: sum(r["summary"].get(s, 0) for r in results) for s in SEVERITIES}
    result: dict[str, Any] = {
        "changed": False,
        "hosts": results,
        "findings": [f for r in results for f in r["findings"]],
        "report": [line for r in results for line in r["report"]],
        "summary": summary,
        "passed": not bad,
    }
    if bad:
        result["msg"] = " || ".join(r["msg"] for r in bad)
        if p["fail_on"] != "never":
            result["failed"] = True
    else:
        result["msg"] = f"{len(results)} host(s): every one passed"
    return result


def run(ctx: Any) -> dict[str, Any]:
    p = ctx.params
    if p.get("inventory_hosts") is not None:
        return {
            "failed": True,
            "changed": False,
            "msg": "inventory_hosts is read by the gpu_host_preflight action plugin on the controller, which passes "
            "hosts instead; call the module as gpuops.platform.gpu_host_preflight (its action runs first), or pass "
            "hosts",
        }
    if p.get("hosts") is not None:
        return decide_hosts(p)
    ctx.runner.remember_reads()  # the probes read what the gathering read a moment ago; nothing here changes it
    gathered = not p["facts"]
    facts = p["facts"] or _hostfacts.gather(ctx.fs, ctx.runner)
    result = decide(facts, p, gathered)
    if p.get("probe") is not None and p["stage"] == "preflight" and not result.get("failed"):
        result["pending"] = pending(ctx, result["plan"], p["probe"])
        if p["probe"]["validate"] and not result["pending"]["any"]:
            # nothing will change the host: the validation's answer on these same facts, no second module run
            validation = decide(facts, validation_params(p, result["pending"]["reboot_required"]))
            validation.pop("failed", None)  # host_prep asserts on passed
            result["validation"] = validation
    return result
