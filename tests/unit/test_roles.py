"""Every role's public interface: prefixed variables, typed argument specs, defaults in one place."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())


def _spec(role: str) -> dict:
    return yaml.safe_load((REPO / "roles" / role / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]


def _defaults(role: str) -> dict:
    return yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text()) or {}


def test_there_are_roles():
    assert ROLES


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_argument_spec_name_the_same_variables(role):
    spec = _spec(role)["options"]
    assert set(spec) == set(_defaults(role)), "defaults/main.yml and meta/argument_specs.yml differ"


@pytest.mark.parametrize("role", ROLES)
def test_variables_are_prefixed_typed_and_described(role):
    for name, opt in _spec(role)["options"].items():
        assert name.startswith(f"{role}_"), name
        assert "type" in opt and opt.get("description"), name
        # defaults live once, in defaults/main.yml (argument-spec defaults are not applied at runtime)
        assert "default" not in opt, f"{name}: keep the default in defaults/main.yml only"


@pytest.mark.parametrize("role", ROLES)
def test_default_values_match_the_declared_choices_and_types(role):
    types = {"str": str, "bool": bool, "int": int, "list": list, "dict": dict}
    defaults = _defaults(role)
    for name, opt in _spec(role)["options"].items():
        value = defaults[name]
        if opt["type"] in types:
            assert isinstance(value, types[opt["type"]]), f"{name}={value!r} is not {opt['type']}"
        if "choices" in opt:
            assert value in opt["choices"], f"{name}={value!r} not in {opt['choices']}"


@pytest.mark.parametrize("role", ROLES)
def test_validate_tasks_exist(role):
    assert (REPO / "roles" / role / "tasks/validate.yml").is_file()
