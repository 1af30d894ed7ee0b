"""Every role's README.md is what hack/role_readmes.py generates from its argument spec and defaults: a changed
variable, type, choice, default or description needs `make role-readmes` in the same commit."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("role_readmes", REPO / "hack/role_readmes.py")
assert _SPEC and _SPEC.loader
role_readmes = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(role_readmes)

ROLES = sorted(path.parents[1].name for path in REPO.glob("roles/*/meta/argument_specs.yml"))


def test_every_role_has_an_argument_spec_and_is_rendered():
    assert ROLES and ROLES == sorted(path.name for path in REPO.glob("roles/*") if path.is_dir())
    assert [path.name for path in role_readmes.role_dirs()] == ROLES


@pytest.mark.parametrize("role", ROLES)
def test_committed_readme_is_the_generated_one(role):
    readme = REPO / "roles" / role / "README.md"
    assert readme.exists(), f"{readme} is missing: run make role-readmes"
    assert readme.read_text() == role_readmes.render(REPO / "roles" / role), (
        f"{readme} differs from its argument spec and defaults: run make role-readmes"
    )


@pytest.mark.parametrize("role", ROLES)
def test_readme_lists_every_variable_with_its_type(role):
    specs = yaml.safe_load((REPO / "roles" / role / "meta/argument_specs.yml").read_text())["argument_specs"]
    text = role_readmes.render(REPO / "roles" / role)
    for name, option in specs["main"].get("options", {}).items():
        assert f"| `{name}` | {role_readmes._type(option)} |" in text, name
    for entry in specs:
        if entry != "main":
            assert f"### `{entry}`" in text, entry


def test_markup_becomes_markdown():
    text = "O(a_b=c) and C(x | y), V(1), M(gpuops.platform.m), I(it), B(bold), U(https://e.x), L(text, https://e.x)"
    assert role_readmes.markdown(text) == (
        "`a_b=c` and `x | y`, `1`, `gpuops.platform.m`, *it*, **bold**, <https://e.x>, [text](https://e.x)"
    )


def test_long_defaults_point_to_the_defaults_file_and_jinja_stays_as_written():
    assert role_readmes._default({"k": "v" * 80}) == "see [defaults/main.yml](defaults/main.yml)"
    assert role_readmes._default("{{ a | default('b') }}") == "`{{ a \\| default('b') }}`"
    assert role_readmes._default("") == "`''`"
    assert role_readmes._default(True) == "`true`"


def test_check_mode_writes_nothing_and_reports_a_difference(tmp_path, monkeypatch):
    role = tmp_path / "roles" / "demo"
    (role / "meta").mkdir(parents=True)
    (role / "defaults").mkdir()
    (role / "meta/argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    short_description: Demo\n    description: [A role.]\n"
        "    options:\n      demo_x:\n        type: int\n        description: X.\n"
    )
    (role / "defaults/main.yml").write_text("demo_x: 3\n")
    monkeypatch.setattr(role_readmes, "REPO", tmp_path)
    assert role_readmes.main(["--check"]) == 1
    assert not (role / "README.md").exists()
    assert role_readmes.main([]) == 0
    assert "| `demo_x` | int | `3` |" in (role / "README.md").read_text()
    assert role_readmes.main(["--check"]) == 0
