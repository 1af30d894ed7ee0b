"""awx/job_templates.yml, the AWX objects as data: every template's playbook exists, every survey question sets a
variable a role's argument spec declares with a type and choices its answers pass, credential secrets reach the job
only through files and the environment, sliced templates run host-plane plays only, the workflow's nodes and the
inventory source name what exists, and every key is an option of the awx.awx module that applies it.

The awx.awx collection is not installable here (Galaxy only, no network): its modules' option names for the objects
used are a table below, from ansible/awx ``awx_collection/plugins/modules/*.py`` (24.6.1)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "awx/job_templates.yml").read_text())
TEMPLATES = {t["name"]: t for t in CONFIG["job_templates"]}

# awx.awx 24.6.1 module options (awx_collection/plugins/modules/<module>.py, argument_spec), those this file may use
AWX_OPTIONS = {
    "credential_type": {"name", "description", "kind", "inputs", "injectors", "new_name", "state"},
    "project": {"name", "description", "scm_type", "scm_url", "scm_branch", "scm_update_on_launch", "scm_clean",
                "credential", "organization", "default_environment", "state"},
    "inventory_source": {"name", "source", "source_project", "source_path", "credential", "update_on_launch",
                         "overwrite", "overwrite_vars", "inventory", "execution_environment", "state"},
    "job_template": {"name", "playbook", "job_type", "credentials", "diff_mode", "ask_tags_on_launch",
                     "job_slice_count", "survey_enabled", "survey_spec", "project", "inventory",
                     "execution_environment", "organization", "ask_variables_on_launch", "ask_limit_on_launch",
                     "allow_simultaneous", "state"},
    "workflow_job_template": {"name", "workflow_nodes", "organization", "inventory", "state"},
}  # fmt: skip
SURVEY_TYPES = {"text": "str", "textarea": "str", "password": "str", "integer": "int", "float": "float",
                "multiplechoice": None, "multiselect": "list"}  # fmt: skip


def argument_specs() -> dict[str, dict]:
    """Every option of every role's argument specs (all entry points), by name."""
    out: dict[str, dict] = {}
    for path in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        for entry in (yaml.safe_load(path.read_text())["argument_specs"] or {}).values():
            out.update(entry.get("options") or {})
    return out


SPECS = argument_specs()


def plays(playbook: Path) -> list[dict]:
    """The plays of a playbook, import_playbook followed."""
    out = []
    for item in yaml.safe_load(playbook.read_text()):
        target = item.get("ansible.builtin.import_playbook") or item.get("import_playbook")
        out += plays(playbook.parent / target) if target else [item]
    return out


def test_every_key_is_an_option_of_its_awx_module():
    for ct in CONFIG["credential_types"]:
        assert set(ct) <= AWX_OPTIONS["credential_type"], ct["name"]
    assert set(CONFIG["project"]) <= AWX_OPTIONS["project"]
    assert set(CONFIG["inventory"]["source"]) <= AWX_OPTIONS["inventory_source"]
    for t in CONFIG["job_templates"]:
        assert set(t) <= AWX_OPTIONS["job_template"], t["name"]
    assert set(CONFIG["workflow"]) <= AWX_OPTIONS["workflow_job_template"]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_the_playbook_exists_and_the_credentials_are_defined(name):
    t = TEMPLATES[name]
    assert (REPO / t["playbook"]).is_file(), t["playbook"]
    assert t["job_type"] in ("run", "check")
    known = {ct["name"] for ct in CONFIG["credential_types"]}
    assert set(t.get("credentials", [])) <= known


def _questions():
    for t in CONFIG["job_templates"]:
        for q in (t.get("survey_spec") or {}).get("spec", []):
            yield pytest.param(q, id=f"{t['name']}:{q['variable']}")


@pytest.mark.parametrize("question", list(_questions()))
def test_a_survey_answer_sets_a_declared_variable_of_a_compatible_type(question):
    spec = SPECS.get(question["variable"])
    assert spec is not None, f"{question['variable']} is declared in no role's argument spec"
    kind = SURVEY_TYPES[question["type"]]
    if question["type"] == "multiplechoice":
        if spec["type"] == "bool":
            assert set(question["choices"]) <= {"true", "false"}  # AWX answers strings; the bool spec takes them
        else:
            assert set(question["choices"]) <= set(spec.get("choices") or question["choices"])
    else:
        assert spec["type"] == kind, (question["variable"], spec["type"], kind)
    if "default" in question and question["type"] == "integer":
        assert question["min"] <= question["default"] <= question["max"]


def test_the_uninstall_confirmation_accepts_only_the_word():
    (q,) = [
        q for q in TEMPLATES["gpuops - uninstall"]["survey_spec"]["spec"] if q["variable"] == "gpuops_uninstall_confirm"
    ]
    assert q["required"] and q["min"] == q["max"] == len("uninstall")
    assert "default" not in q  # the operator types it


@pytest.mark.parametrize("ct", CONFIG["credential_types"], ids=lambda ct: ct["name"])
def test_injectors_use_their_inputs_and_never_put_a_secret_in_extra_vars(ct):
    fields = {f["id"]: f for f in ct["inputs"]["fields"]}
    files = {k.split(".", 1)[1] for k in ct["injectors"].get("file", {})}
    for where, values in ct["injectors"].items():
        for value in values.values():
            for ref in re.findall(r"{{\s*([\w.]+)\s*}}", value):
                if ref.startswith("tower.filename."):
                    assert ref.split(".", 2)[2] in files, ref
                else:
                    assert ref in fields, ref
                    if where == "extra_vars":
                        assert not fields[ref].get("secret"), f"{ct['name']}: secret {ref} in extra vars"


def test_the_ngc_key_reaches_the_role_through_the_environment():
    (ngc,) = [ct for ct in CONFIG["credential_types"] if "ngc_api_key" in str(ct["inputs"])]
    assert ngc["injectors"] == {"env": {"NGC_API_KEY": "{{ ngc_api_key }}"}}
    defaults = (REPO / "roles/gpu_operator/defaults/main.yml").read_text()
    assert "lookup('ansible.builtin.env', 'NGC_API_KEY'" in defaults
    assert SPECS["gpu_operator_ngc_api_key"].get("no_log") is True


@pytest.mark.parametrize("name", sorted(n for n, t in TEMPLATES.items() if t.get("job_slice_count", 1) > 1))
def test_a_sliced_template_runs_host_plane_plays_only(name):
    """Each slice gets a share of the inventory's hosts: a cluster-plane play (cluster_controller) would run in the
    one slice that holds the controller, judging only that slice's GPU hosts; so sliced templates have none."""
    for play in plays(REPO / TEMPLATES[name]["playbook"]):
        assert play["hosts"] == "gpu_nodes", (name, play["name"], play["hosts"])


def test_the_workflow_names_templates_and_nodes_that_exist():
    nodes = {n["identifier"]: n for n in CONFIG["workflow"]["workflow_nodes"]}
    for node in nodes.values():
        assert node["unified_job_template"]["name"] in TEMPLATES
        for kind in ("success_nodes", "failure_nodes"):
            for ref in node.get("related", {}).get(kind, []):
                assert ref["identifier"] in nodes
    assert TEMPLATES[nodes["prepare"]["unified_job_template"]["name"]].get("job_slice_count", 1) > 1
    assert TEMPLATES[nodes["validate"]["unified_job_template"]["name"]]["job_type"] == "check"


def test_the_inventory_source_is_a_gpu_nodes_file_of_the_project():
    src = CONFIG["inventory"]["source"]
    assert src["source_project"] == CONFIG["project"]["name"]
    doc = yaml.safe_load((REPO / src["source_path"]).read_text())
    assert doc["plugin"] == "gpuops.platform.gpu_nodes" and src["source_path"].endswith("gpu_nodes.yml")


def test_the_upgrade_survey_offers_only_versions_the_compatibility_table_knows():
    from ansible_collections.gpuops.platform.plugins.module_utils import _upgrade

    (question,) = [
        q for q in TEMPLATES["gpuops - upgrade"]["survey_spec"]["spec"] if q["variable"] == "gpu_operator_chart_version"
    ]
    assert set(question["choices"]) <= set(_upgrade.GPU_OPERATOR), question["choices"]
    assert question["default"] in question["choices"]
