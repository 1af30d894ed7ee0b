"""awx/job_templates.yml, the AWX objects as data: every template's playbook exists, every survey question sets a
variable a role's argument spec declares with a type and choices its answers pass, credential secrets reach the job
only through files and the environment, sliced templates run host-plane plays only, the workflow's nodes and the
inventory source name what exists, and every key is an option of the awx.awx module that applies it.

The awx.awx collection is not installable here (Galaxy only, no network): its modules' option names for the objects
used are a table below, from ansible/awx ``awx_collection/plugins/modules/*.py`` at tag 24.6.1 (the last 24.x, commit
94e5795d), with the options each module or the AWX API requires.

Issue 27: the inventory is built here as an AWX inventory update builds it (``ansible-inventory --list --export -i
<project>/<source_path>`` per source, with AWX's environment for it): it must hold the one cluster controller and the
site's group_vars (the inventory of the GPU nodes' source alone had neither, and every job ended green having done
nothing); the templates name credentials the file creates (not credential types), and those with host plays a Machine
credential."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "awx/job_templates.yml").read_text())
TEMPLATES = {t["name"]: t for t in CONFIG["job_templates"]}

# awx.awx 24.6.1 module options (awx_collection/plugins/modules/<module>.py, argument_spec), those this file may use
AWX_OPTIONS = {
    "credential_type": {"name", "description", "kind", "inputs", "injectors", "new_name", "state"},
    "credential": {"name", "description", "organization", "credential_type", "inputs", "update_secrets", "state"},
    "project": {"name", "description", "scm_type", "scm_url", "scm_branch", "scm_update_on_launch", "scm_clean",
                "credential", "organization", "default_environment", "state"},
    "inventory": {"name", "description", "organization", "variables", "state"},
    "inventory_source": {"name", "description", "source", "source_project", "source_path", "credential",
                         "update_on_launch", "overwrite", "overwrite_vars", "inventory", "execution_environment",
                         "state"},
    "job_template": {"name", "playbook", "job_type", "credentials", "diff_mode", "ask_tags_on_launch",
                     "job_slice_count", "survey_enabled", "survey_spec", "project", "inventory",
                     "execution_environment", "organization", "ask_variables_on_launch", "ask_limit_on_launch",
                     "allow_simultaneous", "job_tags", "state"},
    "workflow_job_template": {"name", "workflow_nodes", "organization", "inventory", "state"},
}  # fmt: skip
# required=True in those argument specs, and what the AWX API requires besides (a job template's project, playbook
# and inventory; a project's organization)
AWX_REQUIRED = {
    "credential_type": {"name", "kind"},
    "credential": {"name", "credential_type", "organization"},
    "project": {"name", "organization", "scm_type", "scm_url"},
    "inventory": {"name", "organization"},
    "inventory_source": {"name", "inventory", "source"},
    "job_template": {"name", "playbook", "project", "inventory", "job_type"},
}
CREDENTIAL_TYPE_KINDS = {"ssh", "vault", "net", "scm", "cloud", "insights"}  # credential_type.py KIND_CHOICES
AWX_MANAGED_TYPES = {"Machine"}  # AWX's own credential types the file may name
# what an AWX inventory update sets for ansible-inventory (awx/main/constants.py, STANDARD_INVENTORY_UPDATE_ENV)
AWX_INVENTORY_UPDATE_ENV = {
    "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
    "ANSIBLE_INVENTORY_EXPORT": "True",
    "ANSIBLE_VERBOSE_TO_STDERR": "True",
    "ANSIBLE_HOST_PATTERN_MISMATCH": "error",
}
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


def _objects():
    yield from (("credential_type", ct) for ct in CONFIG["credential_types"])
    yield from (("credential", c) for c in CONFIG["credentials"])
    yield "project", CONFIG["project"]
    yield "inventory", CONFIG["inventory"]
    yield from (("inventory_source", src) for src in CONFIG["inventory_sources"])
    yield from (("job_template", t) for t in CONFIG["job_templates"])
    yield "workflow_job_template", CONFIG["workflow"]


def test_every_key_is_an_option_of_its_awx_module_and_the_required_ones_are_set():
    for module, obj in _objects():
        assert set(obj) <= AWX_OPTIONS[module], (module, obj["name"], set(obj) - AWX_OPTIONS[module])
        assert AWX_REQUIRED.get(module, {"name"}) <= set(obj), (module, obj["name"])
    assert {ct["kind"] for ct in CONFIG["credential_types"]} <= CREDENTIAL_TYPE_KINDS
    for src in CONFIG["inventory_sources"]:
        assert src["inventory"] == CONFIG["inventory"]["name"] and src["source"] == "scm"
    for t in CONFIG["job_templates"]:
        assert (t["project"], t["inventory"]) == (CONFIG["project"]["name"], CONFIG["inventory"]["name"])


CREDENTIALS = {c["name"]: c for c in CONFIG["credentials"]}
TYPES = {ct["name"]: ct for ct in CONFIG["credential_types"]}


def test_every_credential_is_of_a_type_that_exists():
    for c in CONFIG["credentials"]:
        assert c["credential_type"] in TYPES or c["credential_type"] in AWX_MANAGED_TYPES, c
    assert "inputs" not in str(CONFIG["credentials"]), "secrets are given when the file is applied (docs/awx.md)"


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_the_playbook_exists_and_the_credentials_are_defined(name):
    """awx.awx.job_template resolves `credentials` as names of credentials (not of credential types): each one is a
    credential of this file, at most one of each type (AWX refuses two of one type)."""
    t = TEMPLATES[name]
    assert (REPO / t["playbook"]).is_file(), t["playbook"]
    assert t["job_type"] in ("run", "check")
    unknown = set(t.get("credentials", [])) - set(CREDENTIALS)
    assert not unknown, f"{name}: {sorted(unknown)} are not credentials of the file (credential types: {sorted(TYPES)})"
    types = [CREDENTIALS[c]["credential_type"] for c in t.get("credentials", [])]
    assert len(types) == len(set(types)), (name, types)


def _host_play_groups(playbook: Path) -> set[str]:
    """The groups of the plays that connect to hosts other than the controller."""
    return {p["hosts"] for p in plays(playbook)} - {"cluster_controller", "localhost", "all", "all:localhost"}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_a_template_with_host_plays_attaches_a_machine_credential(name):
    t = TEMPLATES[name]
    machine = [c for c in t.get("credentials", []) if CREDENTIALS[c]["credential_type"] == "Machine"]
    assert bool(machine) is bool(_host_play_groups(REPO / t["playbook"])), (
        name,
        _host_play_groups(REPO / t["playbook"]),
    )
    kube = [c for c in t.get("credentials", []) if CREDENTIALS[c]["credential_type"] == "gpuops kubeconfig"]
    assert bool(kube) is any(p["hosts"] == "cluster_controller" for p in plays(REPO / t["playbook"])), name


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


def test_the_inventory_sources_are_files_of_the_project():
    """The GPU nodes (the gpu_nodes plugin, with the kubeconfig credential) and the controller, from the project."""
    plugin = []
    for src in CONFIG["inventory_sources"]:
        assert src["source_project"] == CONFIG["project"]["name"]
        doc = yaml.safe_load((REPO / src["source_path"]).read_text())
        if "plugin" in doc:
            assert doc["plugin"] == "gpuops.platform.gpu_nodes" and src["source_path"].endswith("gpu_nodes.yml")
            assert CREDENTIALS[src["credential"]]["credential_type"] == "gpuops kubeconfig"
            plugin.append(src["name"])
    assert len(plugin) == 1, plugin


def awx_inventory_update(source: dict, env: dict | None = None) -> dict:
    """`ansible-inventory --list --export -i <project>/<source_path>` as an AWX inventory update runs it (jobs.py,
    RunInventoryUpdate.build_args; the environment of STANDARD_INVENTORY_UPDATE_ENV), from the project directory."""
    path = REPO / source["source_path"]
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_INVENTORY")}
    run_env.update(AWX_INVENTORY_UPDATE_ENV, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), **(env or {}))
    argv = ["ansible-inventory", "--list", "--export", "-i", str(path)]
    argv += ["--playbook-dir", str(path if path.is_dir() else path.parent)]
    r = subprocess.run(argv, capture_output=True, text=True, env=run_env, cwd=REPO, check=False)
    assert r.returncode == 0, f"the update of {source['name']!r} failed: {r.stderr[-3000:]}"
    return json.loads(r.stdout)


def test_the_controller_and_the_site_variables_come_from_an_inventory_source():
    """Every source that needs no cluster, updated as AWX updates it: together exactly one cluster_controller host
    (local connection) and the site's group_vars (the GPU nodes' source, updated against the lab, is in
    tests/integration/test_awx_jobs.py)."""
    static = [s for s in CONFIG["inventory_sources"] if "plugin" not in (REPO / s["source_path"]).read_text()]
    assert static, "no inventory source brings the cluster controller (only the GPU nodes' plugin)"
    controllers, all_vars = [], {}
    for src in static:
        out = awx_inventory_update(src)
        controllers += (out.get("cluster_controller") or {}).get("hosts", [])
        all_vars.update((out.get("all") or {}).get("vars") or {})
        hostvars = out["_meta"]["hostvars"]
    assert controllers == ["localhost"], controllers
    assert hostvars["localhost"]["ansible_connection"] == "local"
    assert "gpuops_kubeconfig" in all_vars  # inventories/cluster/group_vars/all.yml


def test_the_upgrade_survey_offers_only_versions_the_compatibility_table_knows():
    from ansible_collections.gpuops.platform.plugins.module_utils.release import _upgrade

    (question,) = [
        q for q in TEMPLATES["gpuops - upgrade"]["survey_spec"]["spec"] if q["variable"] == "gpu_operator_chart_version"
    ]
    assert set(question["choices"]) <= set(_upgrade.GPU_OPERATOR), question["choices"]
    assert question["default"] in question["choices"]


def _task_tags(tasks: list[dict]) -> set[str]:
    out: set[str] = set()
    for task in tasks:
        out |= set(task.get("tags") or [])
        out |= _task_tags(task.get("block") or []) | _task_tags(task.get("rescue") or [])
    return out


@pytest.mark.parametrize("name", sorted(n for n, t in TEMPLATES.items() if t.get("job_tags")))
def test_a_templates_tags_select_tasks_of_its_playbook(name):
    """A template that runs one step (job_tags) names tags its playbook's tasks carry: a misspelt tag would run the
    playbook's `always` tasks only and end green having done nothing."""
    t = TEMPLATES[name]
    tags = {tag for p in plays(REPO / t["playbook"]) for tag in _task_tags(p.get("tasks") or [])}
    assert set(t["job_tags"].split(",")) <= tags, (name, sorted(tags))
