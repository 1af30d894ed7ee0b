# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Whole-role input rules, once: the table of rules by name (:data:`RULES`), a role's argument types, option
findings, integer bounds, fields and unknown variables, and :func:`check`, what the ``role_inputs`` module runs.
Findings ``{id, severity, object, evidence, cause, fix}`` whose object is the variable (see ``_inputs``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible.module_utils.common.validation import (
    check_type_bool,
    check_type_dict,
    check_type_float,
    check_type_int,
    check_type_list,
    check_type_path,
    check_type_str,
)
from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs import (
    Finding,
    a,
    kind_of,
    show,
    variable_finding,
)
from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs_choices import RULES
from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs_secrets import (
    masked,
    secret_values,
    secret_variables,
)

_CONVERT: dict[str, Callable[[Any], Any]] = {
    "str": check_type_str,
    "bool": check_type_bool,
    "int": check_type_int,
    "float": check_type_float,
    "list": check_type_list,
    "dict": check_type_dict,
    "path": check_type_path,
}


def _converts(kind: str, value: Any) -> tuple[bool, Any]:
    conv = _CONVERT.get(kind)
    if conv is None:  # raw and unknown kinds accept anything
        return True, value
    if kind == "str" and (isinstance(value, bool) or not isinstance(value, (str, int, float))):
        return False, value
    if kind == "dict" and isinstance(value, str) and not value.lstrip().startswith("{"):
        return False, value  # Ansible would read "a=b" as {a: b}: for chart values that is always a mistake
    try:
        return True, conv(value)
    except (TypeError, ValueError):
        return False, value


def argument_types(options: Mapping[str, Mapping[str, Any]], variables: Mapping[str, Any]) -> list[Finding]:
    """Each variable against its argument-spec entry (type, elements, choices, and field by field the suboptions of
    a dict or of a list of dicts), converting as Ansible's role argument validation does, so what passes here passes
    there - but before the run changes anything. Stricter than Ansible in two ways: null passes only for an option
    that declares ``default: null`` (a documented "unset"), and a field a structured value's spec does not name is an
    error with the nearest field's name (a ``quotsa`` in a Kueue team would otherwise be ignored without a word)."""
    out = []
    for var, value in variables.items():
        opt = options.get(var)
        if opt is None:
            continue
        if value is None and "default" in opt and opt["default"] is None and not opt.get("required"):
            continue  # declared nullable (default: null): unset means "decide for me", as Ansible accepts it
        out += _option_findings(var, opt, value)
    return out


def _option_findings(var: str, opt: Mapping[str, Any], value: Any) -> list[Finding]:
    """One value against one argument-spec entry; ``var`` is the path shown (``kueue_teams[0].quotas``)."""
    kind = opt.get("type", "str")
    ok, converted = _converts(kind, value)
    if not ok:
        return [
            variable_finding(
                "variable-type",
                var,
                value,
                f"The value is {a(kind_of(value))}; the role needs {a(kind)}.",
                f"set {var} to {a(kind)} (see the role variables in docs/variables.md).",
            )
        ]
    if kind == "list" and opt.get("elements"):
        bad = [e for e in converted if not _converts(opt["elements"], e)[0]]
        if bad:
            return [
                variable_finding(
                    "variable-type",
                    var,
                    value,
                    f"Element(s) {', '.join(show(b) for b in bad)} are not {opt['elements']}s.",
                    f"make every element of {var} a {opt['elements']}.",
                )
            ]
    if kind == "int":
        out = _int_bounds(var, value, converted)
        if out:
            return out
    choices = opt.get("choices")
    if choices and converted not in choices:
        near = difflib.get_close_matches(str(converted), [str(c) for c in choices], n=1)
        return [
            variable_finding(
                "variable-choice",
                var,
                value,
                f"The value is not one of: {', '.join(map(str, choices))}.",
                f"set {var} to {near[0] if near else 'one of them'}.",
            )
        ]
    fields = opt.get("options")
    if not fields:
        return []
    if kind == "dict" and isinstance(converted, Mapping):
        return _fields_findings(var, fields, converted)
    if kind == "list" and opt.get("elements") == "dict":
        out = []
        for i, item in enumerate(converted):
            if isinstance(item, Mapping):
                out += _fields_findings(f"{var}[{i}]", fields, item)
        return out
    return []


# The bounds of int options and fields by their name, which the argument spec cannot say: (name pattern, lowest,
# highest, what the value is). A negative wait, count or port would reach a module, Helm or the API server as nonsense.
INT_BOUNDS: tuple[tuple[re.Pattern[str], int, int | None, str], ...] = (
    (re.compile(r".*_timeout\Z"), 1, None, "a number of seconds to wait"),
    (re.compile(r".*_port\Z"), 1, 65535, "a TCP port"),
    (re.compile(r"(maxParallelUpgrades|timeoutSeconds)\Z"), 0, None, "a count or number of seconds (0: no limit)"),
)


def _int_bounds(var: str, value: Any, number: int) -> list[Finding]:
    name = re.split(r"[.\]]", var)[-1]
    for pattern, low, high, what in INT_BOUNDS:
        if not pattern.match(name):
            continue
        if number < low or (high is not None and number > high):
            span = f"from {low} to {high}" if high is not None else f"{low} or more"
            return [
                variable_finding(
                    "variable-range",
                    var,
                    value,
                    f"The value is out of range: {name} is {what}, {span}.",
                    f"set {var} to a number {span}.",
                )
            ]
        return []
    return []


def _fields_findings(var: str, fields: Mapping[str, Mapping[str, Any]], item: Mapping[str, Any]) -> list[Finding]:
    """A structured value's fields against its suboptions: unknown fields (with the nearest known one), required
    fields that are missing, and each field's own type, choices and suboptions."""
    label = f"{var} ({item['name']})" if isinstance(item.get("name"), str) else var
    out = []
    for key in item:
        if key in fields:
            continue
        near = difflib.get_close_matches(str(key), sorted(fields), n=1)
        hint = f"did you mean {near[0]}? Rename it" if near else "remove it"
        out.append(
            {
                "id": "variable-field-unknown",
                "severity": "error",
                "object": {"kind": "variable", "name": f"{var}.{key}"},
                "evidence": [f"{label} has a field {key}: {show(item[key])}"],
                "cause": f"{var} has no field {key}; its value would be ignored. Its fields: {', '.join(fields)}.",
                "fix": f"{hint} (see the role variables in docs/variables.md).",
            }
        )
    for key, sub in fields.items():
        if key not in item:
            if sub.get("required"):
                out.append(
                    {
                        "id": "variable-field-missing",
                        "severity": "error",
                        "object": {"kind": "variable", "name": f"{var}.{key}"},
                        "evidence": [f"{label}: {show(item)}"],
                        "cause": f"The field {key} is required and missing.",
                        "fix": f"set {key} in {var}.",
                    }
                )
            continue
        if item[key] is None and not sub.get("required"):
            continue  # an unset field: the role's default applies
        out += _option_findings(f"{var}.{key}", sub, item[key])
    return out


def unknown_variables(
    prefix: str, known: Iterable[str], present: Iterable[str], removed: Mapping[str, str] | None = None
) -> list[Finding]:
    """Variables with the role's prefix that the role does not have: a typo or a removed variable, whose value
    would otherwise be ignored without a word."""
    known = set(known)
    removed = removed or {}
    out = []
    for var in sorted(set(present)):
        if not var.startswith(prefix) or var in known:
            continue
        if var in removed:
            cause, fix = "The role no longer has this variable; its value would be ignored.", removed[var]
        else:
            near = difflib.get_close_matches(var, sorted(known), n=1)
            cause = "The role has no such variable; its value would be ignored."
            fix = f"did you mean {near[0]}? Rename it, or remove it." if near else "remove it (see the role variables)."
        out.append(
            {
                "id": "variable-unknown",
                "severity": "error",
                "object": {"kind": "variable", "name": var},
                "evidence": [f"{var} is set"],
                "cause": cause,
                "fix": fix,
            }
        )
    return out


def _walk(role: Any, user: Any, path: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], Any, Any]]:
    if isinstance(role, Mapping) and isinstance(user, Mapping):
        for key, sub in user.items():
            if key in role:
                yield from _walk(role[key], sub, (*path, str(key)))
        return
    yield path, role, user


def _same_kind(role: Any, user: Any) -> bool:
    r, u = kind_of(role), kind_of(user)
    if r == "null" or u == "null":
        return True
    if {r, u} <= {"int", "float"}:
        return True
    return r == u


def known_value_types(var: str, role_values: Mapping[str, Any], user_values: Any) -> list[Finding]:
    """User chart values (``<role>_values``) against the values the role itself renders: a key the role knows
    must keep its kind (a bool stays a bool, a list a list), or the chart fails with a raw template error (or
    worse, takes "false" as true)."""
    if not isinstance(user_values, Mapping):
        return [
            variable_finding(
                "variable-type",
                var,
                user_values,
                f"The value is {a(kind_of(user_values))}; chart values are a mapping.",
                f"set {var} to a mapping of chart values, for example {{driver: {{enabled: false}}}}.",
            )
        ]
    out = []
    for path, want, got in _walk(role_values, user_values, ()):
        if not _same_kind(want, got):
            where = ".".join(path)
            out.append(
                variable_finding(
                    "value-type",
                    f"{var}.{where}",
                    got,
                    f"The role sets {where} as {a(kind_of(want))} ({show(want)}); this value is {a(kind_of(got))}.",
                    f"give {var}.{where} {a(kind_of(want))} value.",
                )
            )
    return out


def check(
    checks: Iterable[Mapping[str, Any]],
    variables: Mapping[str, Any],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    prefix: str | None = None,
    removed: Mapping[str, str] | None = None,
    values: Iterable[Mapping[str, Any]] = (),
    outputs: Iterable[str] = (),
) -> list[Finding]:
    """Every input rule of one role: types and choices, unknown variables (``outputs``, the facts and results the
    role sets itself, are not unknown: a second run of the role in one play sees them), the value rules named in
    ``checks`` ({var, rule, value?, ...options}) and the user values' kinds (``values``: {var, role_values})."""
    out: list[Finding] = []
    if options is not None:
        out += argument_types(options, variables)
        if prefix:
            out += unknown_variables(prefix, [*options, *outputs], variables, removed)
    typed = {f["object"]["name"] for f in out}
    for item in checks:
        var = item["var"]
        if var in typed:
            continue  # one finding per variable: the type is wrong already
        rule = RULES[item["rule"]]
        extra = {k: v for k, v in item.items() if k not in ("var", "rule", "value")}
        value = item["value"] if "value" in item else variables.get(var)
        out += rule(var, value, **extra)
    for item in values:
        if item["var"] in typed:
            continue
        user = variables.get(item["var"], {})
        out += known_value_types(item["var"], item.get("role_values") or {}, user)
        if isinstance(user, Mapping):
            out += secret_values(item["var"], user, item.get("instead"))
    secrets = {v: variables[v] for v in secret_variables(options) if variables.get(v) not in (None, "")}
    return masked(out, secrets) if secrets else out
