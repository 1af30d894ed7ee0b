"""Every plugin's DOCUMENTATION, EXAMPLES and RETURN (and the doc fragments' strings) parse as YAML. ansible-doc and
ansible-lint read them at run time; an unparsable one is printed as an error by ansible-lint, which still passes
(stop 36: a ': ' inside a plain scalar of planned_roles' and helm_release_info's descriptions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOC_NAMES = {"DOCUMENTATION", "EXAMPLES", "RETURN"}


def doc_strings(path: Path) -> list[tuple[str, str]]:
    """(name, text) of each documentation string of ``path``: module-level DOCUMENTATION, EXAMPLES and RETURN, and in
    a doc fragment every string the ModuleDocFragment class holds."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        name = node.targets[0].id
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            if name in DOC_NAMES or "doc_fragments" in path.parts:
                out.append((name, value.value))
    return out


FILES = sorted(p for p in (REPO / "plugins").rglob("*.py") if "module_utils" not in p.parts and p.name != "__init__.py")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_documentation_parses_as_yaml(path):
    docs = doc_strings(path)
    for name, text in docs:
        try:
            yaml.safe_load(text)
        except yaml.YAMLError as exc:
            pytest.fail(f"{path.relative_to(REPO)} {name} is not YAML: {exc}")
    if "doc_fragments" not in path.parts and path.parent.name in ("modules", "filter", "lookup", "inventory"):
        assert "DOCUMENTATION" in {name for name, _text in docs}, f"{path.relative_to(REPO)} has no DOCUMENTATION"


def test_the_check_finds_a_colon_in_a_plain_scalar(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        'DOCUMENTATION = r"""\ndescription:\n  - The module checks the name\n    first. Empty is refused: the X.\n"""\n'
    )
    (doc,) = doc_strings(bad)
    assert doc[0] == "DOCUMENTATION"
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(doc[1])
