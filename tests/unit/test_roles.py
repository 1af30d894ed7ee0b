"""Every role's public interface and the properties the developers' guide promises of it, checked on the files:
defaults and argument specs agree (names, types, choices - judged by the same Python rules the roles run on user
input), variables are prefixed, validate.yml is read-only (judged by the modules it reaches), every role with
inputs is in the run's inputs preflight, and every collection-wide variable is declared once and documented."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml
from ansible.playbook.task import Task

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".state" / "collections"))
_link = REPO / ".state" / "collections" / "ansible_collections" / "gpuops" / "platform"
if not _link.exists():
    _link.parent.mkdir(parents=True, exist_ok=True)
    _link.symlink_to(REPO)

from ansible_collections.gpuops.platform.plugins.action.role_inputs import chart_role_args  # noqa: E402
from ansible_collections.gpuops.platform.plugins.filter import planned_roles  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.inputs import (  # noqa: E402
    _inputs,
    _inputs_roles,
)

ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())
KEYWORDS = set(Task.fattributes) | {"block", "rescue", "always", "local_action"}
# Roles without a validate.yml, and why: they own no state of their own to validate.
NO_VALIDATE = {"gpuops": "collection-wide variables and the inputs preflight only; no state of its own"}
# Modules that cannot change anything. gpuops.platform modules are judged by their documentation (the
# info_module attributes fragment); kubernetes.core by name (the *_info modules and k8s_cluster_info).
BUILTIN_READ_ONLY = {"assert", "debug", "set_fact", "fail"}
FOLLOWED = {"import_tasks", "include_tasks", "include_role", "import_role"}
# gpuops_* names that are not collection-wide role inputs: per-host inventory variables, playbook switches, and
# facts or results the collection sets itself. docs/variables.md lists the first two kinds.
HOST_VARIABLES = {"gpuops_node_name", "gpuops_hardware_profile"}
# the playbooks' own inputs (playbooks/diagnose.yml; playbooks/remediate.yml checks its event, mode and policies
# itself, docs/remediation.md)
PLAYBOOK_VARIABLES = {
    "gpuops_diagnose_host_facts",
    "gpuops_allow_reboot",
    "gpuops_remediation_break_fix_webhook",
    "gpuops_remediation_breaker",
    "gpuops_remediation_drain",
    "gpuops_remediation_event",
    "gpuops_remediation_ladder",
    "gpuops_remediation_mode",
    "gpuops_remediation_namespace",
    "gpuops_remediation_reboot_timeout",
    "gpuops_remediation_repair",
    "gpuops_remediation_taint",
}
SET_BY_THE_COLLECTION = {"gpuops_host", "gpuops_diagnosis", "gpuops_onboard_status", "gpuops_onboarding"}


def _spec(role: str, entry: str = "main") -> dict:
    return yaml.safe_load((REPO / "roles" / role / "meta/argument_specs.yml").read_text())["argument_specs"][entry]


def _defaults(role: str) -> dict:
    return yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text()) or {}


def _tasks(path: Path) -> list[dict]:
    return yaml.safe_load(path.read_text()) or []


def _flat(tasks: list[dict]) -> list[dict]:
    """The tasks, those in blocks (block, rescue, always) in their place."""
    out: list[dict] = []
    for task in tasks:
        out.append(task)
        for part in ("block", "rescue", "always"):
            out += _flat(task.get(part) or [])
    return out


def _action(task: dict) -> str:
    (action,) = [k for k in task if k not in KEYWORDS] or ["<none>"]
    return action


def _module_is_read_only(action: str) -> bool:
    ns, _dot, name = action.rpartition(".")
    if action.startswith("ansible.builtin."):
        return name in BUILTIN_READ_ONLY
    if ns == "kubernetes.core":
        return name.endswith("_info") or name == "k8s_cluster_info"
    if ns == "gpuops.platform":
        doc = (REPO / "plugins/modules" / f"{name}.py").read_text()
        return "gpuops.platform._attributes.info_module" in doc
    return False


def _reached_modules(path: Path, seen: set[Path] | None = None) -> list[tuple[str, str]]:
    """(file, action) of every task that validate.yml reaches, following task files and include_role into the
    collection's roles (only with tasks_from: a role's main would run its changes)."""
    seen = seen if seen is not None else set()
    if path in seen:
        return []
    seen.add(path)
    out: list[tuple[str, str]] = []
    stack = list(_tasks(path))
    while stack:
        task = stack.pop()
        if any(k in task for k in ("block", "rescue", "always")):
            for k in ("block", "rescue", "always"):
                stack.extend(task.get(k) or [])
            continue
        action = _action(task)
        short = action.rpartition(".")[2]
        where = f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path.name}: {task.get('name', action)}"
        if action.startswith("ansible.builtin.") and short in FOLLOWED:
            arg = task[action]
            if short.endswith("_tasks"):
                file = arg if isinstance(arg, str) else arg.get("file")
                out += _reached_modules(path.parent / file, seen)
            elif isinstance(arg, dict) and arg.get("tasks_from") and arg["name"].startswith("gpuops.platform."):
                role = arg["name"].rpartition(".")[2]
                out += _reached_modules(REPO / "roles" / role / "tasks" / f"{arg['tasks_from']}.yml", seen)
            else:
                out.append((where, f"{action} without tasks_from"))
            continue
        out.append((where, action))
    return out


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_argument_spec_name_the_same_variables(role):
    spec = _spec(role)["options"]
    assert set(spec) == set(_defaults(role)), "defaults/main.yml and meta/argument_specs.yml differ"


@pytest.mark.parametrize("role", ROLES)
def test_variables_are_prefixed_typed_and_described(role):
    for name, opt in _spec(role)["options"].items():
        assert name.startswith(f"{role}_"), name
        assert "type" in opt and opt.get("description"), name
        # defaults live once, in defaults/main.yml (argument-spec defaults are not applied at runtime); the one
        # exception is default: null, which declares the option nullable ("unset: decided for you") and must match
        if "default" in opt:
            assert opt["default"] is None and _defaults(role).get(name) is None, (
                f"{name}: keep the default in defaults/main.yml only (default: null only declares a nullable option)"
            )


@pytest.mark.parametrize("role", ROLES)
def test_defaults_pass_the_roles_own_input_rules(role):
    """The defaults are judged by the Python rules that judge user input (plugins/module_utils/inputs/):
    a default of the wrong type or outside its choices fails here. Templated defaults are judged at run time."""
    options = _spec(role)["options"]
    literal = {k: v for k, v in _defaults(role).items() if not (isinstance(v, str) and "{{" in v)}
    findings = _inputs_roles.argument_types(options, literal)
    assert findings == [], [_inputs.message(f) for f in findings]
    # and strictly: what Ansible would convert (a "30" for an int) is not written as a default
    strict = {"str": str, "bool": bool, "int": int, "list": list, "dict": dict}
    for name, value in literal.items():
        kind = options[name]["type"]
        if value is None and "default" in options[name]:
            continue  # declared nullable
        if kind in strict:
            assert isinstance(value, strict[kind]), f"{name}={value!r} is not {kind}"


def test_the_input_rules_catch_a_wrong_default():
    """The check above can fail: a wrong type and a value outside the choices are findings."""
    options = {"r_state": {"type": "str", "choices": ["present", "absent"]}, "r_timeout": {"type": "int"}}
    found = _inputs_roles.argument_types(options, {"r_state": "installed", "r_timeout": "soon"})
    assert sorted(f["object"]["name"] for f in found) == ["r_state", "r_timeout"]


@pytest.mark.parametrize("role", [r for r in ROLES if r not in NO_VALIDATE])
def test_validate_is_read_only(role):
    """tasks/validate.yml, and everything it reaches, only uses modules that cannot change anything, so it can
    run alone with --check (or without) on a live cluster."""
    reached = _reached_modules(REPO / "roles" / role / "tasks/validate.yml")
    assert reached, "validate.yml has no tasks"
    writers = [f"{where}: {action}" for where, action in reached if not _module_is_read_only(action)]
    assert writers == [], "validate.yml reaches modules that can change state"


def test_the_read_only_judge_can_fail(tmp_path):
    bad = tmp_path / "validate.yml"
    bad.write_text(
        yaml.safe_dump(
            [
                {"name": "a", "kubernetes.core.k8s_info": {"kind": "Node"}},
                {"name": "b", "block": [{"name": "c", "kubernetes.core.k8s": {"state": "present"}}]},
                {"name": "d", "ansible.builtin.include_role": {"name": "gpuops.platform.nfd"}},
                {"name": "e", "gpuops.platform.sriov_vfs": {"pf": "x"}},
            ]
        )
    )
    bad_actions = [a for _task, a in _reached_modules(bad) if not _module_is_read_only(a)]
    assert sorted(bad_actions) == [
        "ansible.builtin.include_role without tasks_from",
        "gpuops.platform.sriov_vfs",
        "kubernetes.core.k8s",
    ]


def _roles_with_inputs() -> list[str]:
    # host_prep checks its inputs on each host (gpu_host_preflight needs the host's facts)
    return [r for r in ROLES if (REPO / "roles" / r / "tasks/inputs.yml").is_file() and r != "host_prep"]


@pytest.mark.parametrize("role", _roles_with_inputs())
def test_role_inputs_are_in_the_run_preflight_and_checked_by_the_python_rules(role):
    preflight = _flat(_tasks(REPO / "roles/gpuops/tasks/preflight.yml"))
    # one looped include of every enabled role's inputs; with every switch on, the loop (planned_roles) holds the role
    (looped,) = [t for t in preflight if t.get("ansible.builtin.include_role", {}).get("tasks_from") == "inputs"]
    assert looped["ansible.builtin.include_role"]["name"] == "gpuops.platform.{{ _gpuops_role }}"
    assert looped["loop_control"] == {"loop_var": "_gpuops_role"}
    assert "gpuops.platform.planned_roles(enabled=" in looped["loop"] and looped["loop"].startswith("{{ ['all'] |")
    every_switch_on = {f"gpuops_{r}_managed": True for r in planned_roles.ROLES}
    every_switch_on["gpuops_batch_schedulers"] = list(planned_roles.BATCH)
    assert role in planned_roles.planned_roles(["all"], enabled=every_switch_on)
    inputs = _tasks(REPO / "roles" / role / "tasks/inputs.yml")
    # role_inputs tasks; a role may add its own rules' findings (network_operator: _network through a filter)
    checks = [t["gpuops.platform.role_inputs"] for t in inputs if "gpuops.platform.role_inputs" in t]
    # a chart role's task as its action plugin completes it (prefix, options, the standard checks)
    checks = [
        chart_role_args(c, [], lambda _name: None, str(REPO / "roles" / role)) if c.get("chart_role") else c
        for c in checks
    ]
    assert any(c.get("prefix") == f"{role}_" and "options" in c for c in checks), "no type/unknown-variable check"
    deps = (yaml.safe_load((REPO / "roles" / role / "meta/main.yml").read_text()) or {}).get("dependencies") or []
    assert {"role": "gpuops.platform.gpuops"} in deps, "the collection-wide variables come from the gpuops role"
    # every release and namespace variable of the role is checked by name
    rules = {c["var"]: c["rule"] for task in checks for c in task.get("checks", [])}
    for name in _spec(role)["options"]:
        if name.endswith("_release_name"):
            assert rules.get(name) == "release_name", name
        if name.endswith("namespace"):
            assert rules.get(name) == "dns1123_label", name
        if name.endswith("chart_version"):
            assert rules.get(name) == "chart_version", name


def test_site_checks_every_input_before_the_first_change():
    site = _tasks(REPO / "playbooks/site.yml")
    # first, and tagged always: a run limited to one layer (--tags) still checks every input first
    # and with the plan of the roles the run applies (charts published, the rules that read the cluster)
    want = {
        "name": site[0]["name"],
        "ansible.builtin.import_playbook": "preflight.yml",
        "vars": {"_gpuops_plan": True},
        "tags": ["always"],
    }
    assert site[0] == want
    operators = _tasks(REPO / "playbooks/operators.yml")
    assert operators[0] == {**want, "name": operators[0]["name"]}


def _referenced_gpuops_names() -> set[str]:
    names: set[str] = set()
    files = [*REPO.glob("roles/**/*.yml"), *REPO.glob("roles/**/*.j2"), *REPO.glob("playbooks/**/*.yml")]
    for path in files:
        text = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
        names |= set(re.findall(r"(?<![\w.&*])gpuops_[a-z0-9_]+", text))
    return names


def test_collection_wide_variables_are_declared_once_and_documented():
    declared = set(_spec("gpuops")["options"])
    unknown = _referenced_gpuops_names() - declared - HOST_VARIABLES - PLAYBOOK_VARIABLES - SET_BY_THE_COLLECTION
    assert unknown == set(), "declare these in roles/gpuops (defaults + argument spec) or list them here"
    for role in ROLES:
        if role != "gpuops":
            assert not [v for v in _defaults(role) if v.startswith("gpuops_")], f"{role} defines a gpuops_ variable"
    docs = (REPO / "docs/variables.md").read_text()
    defaults = _defaults("gpuops")
    for name in sorted(declared):
        row = re.search(rf"^\| `{name}` \|([^|]*)\|([^|]*)\|", docs, re.M)
        assert row, f"{name} is not in the table of docs/variables.md"
        assert row.group(1).strip() == _spec("gpuops")["options"][name]["type"], f"{name}: type"
        assert row.group(2).strip().strip("`") == yaml.safe_dump(defaults[name]).strip().removesuffix("...").strip()
    for name in HOST_VARIABLES | PLAYBOOK_VARIABLES:
        assert f"`{name}`" in docs, f"{name} is not documented in docs/variables.md"
    for role in ROLES:
        assert f"roles/{role}/meta/argument_specs.yml" in docs, f"docs/variables.md has no link to {role}'s variables"


def test_the_collection_wide_check_knows_every_gpuops_name_that_is_not_an_input():
    """roles/gpuops reports a gpuops_* variable it does not know (gpuops_nfd_manged); the names that are not inputs
    but may be set where the controller sees them are its outputs, and exactly the ones listed here."""
    (task,) = [t for t in _tasks(REPO / "roles/gpuops/tasks/main.yml") if "gpuops.platform.role_inputs" in t]
    args = task["gpuops.platform.role_inputs"]
    assert args["prefix"] == "gpuops_"
    variables = task["vars"]["_names"]
    assert "varnames" in variables and "^gpuops_" in variables
    listed = HOST_VARIABLES | PLAYBOOK_VARIABLES | SET_BY_THE_COLLECTION - {"gpuops_onboarding"}  # a group name
    assert set(args["outputs"]) == listed


# --- values that land nowhere ------------------------------------------------------------------------------
# Each role's values template, rendered with the role's defaults, may only set keys the pinned chart has
# (the fixture charts mirror upstream's values.yaml, subcharts under their name): a key the chart does not have
# is stored in the release and ignored - as gpu_operator_node_selector's daemonsets.nodeSelector was.
VALUES_TEMPLATES = {
    "gpu_operator": "tests/fixtures/charts/gpu-operator/v26.7.0",
    "amd_gpu_operator": "tests/fixtures/charts/amd-gpu-operator/v1.5.1",
}


def _render_values(role: str, overrides: dict | None = None) -> dict:
    import jinja2
    from ansible.module_utils.parsing.convert_bool import boolean

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters.update({"bool": lambda v: boolean(v, strict=False), "to_json": __import__("json").dumps})
    env.globals["lookup"] = lambda *_args, **kwargs: repr(kwargs.get("default", ""))  # no NGC_API_KEY set: '' (YAML)
    variables: dict = {**_defaults("gpuops"), **_defaults(role), **(overrides or {})}
    for _round in range(3):  # templated defaults refer to other variables
        variables = {
            k: yaml.safe_load(env.from_string(v).render(variables)) if isinstance(v, str) and "{{" in v else v
            for k, v in variables.items()
        }
    text = (REPO / "roles" / role / "templates/values.yml.j2").read_text()
    return yaml.safe_load(env.from_string(text).render(variables))


def _chart_values(chart: Path) -> dict:
    values = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    for sub in sorted((chart / "charts").glob("*/values.yaml")):
        values.setdefault(sub.parent.name, {})
        for key, value in (yaml.safe_load(sub.read_text()) or {}).items():
            values[sub.parent.name].setdefault(key, value)
    return values


def _template_reads(chart: Path) -> set[str]:
    """The values paths the chart's own templates read (``.Values.a.b.c``): a key values.yaml leaves commented out
    (the GPU Operator's ``dcgmExporter.config``) still lands when a template reads it."""
    templates = [t for t in chart.glob("templates/**/*") if t.is_file()]  # upstream Kueue's are in subdirectories
    return {m for tpl in templates for m in re.findall(r"\.Values\.([A-Za-z0-9_.]+)", tpl.read_text())}


def _landing_nowhere(
    rendered: dict, chart: dict, path: tuple = (), reads: set[str] | frozenset = frozenset()
) -> list[str]:
    out = []
    for key, value in rendered.items():
        here = (*path, key)
        dotted = ".".join(here)
        if key not in chart:
            if not any(r == dotted or r.startswith(dotted + ".") for r in reads):
                out.append(dotted)
            elif isinstance(value, dict):
                out += _landing_nowhere(value, {}, here, reads)
        elif isinstance(value, dict) and isinstance(chart[key], dict) and chart[key]:
            out += _landing_nowhere(value, chart[key], here, reads)
    return out


@pytest.mark.parametrize("role", sorted(VALUES_TEMPLATES))
def test_every_value_the_role_sets_is_a_key_of_the_chart(role):
    chart_dir = REPO / VALUES_TEMPLATES[role]
    assert _landing_nowhere(_render_values(role), _chart_values(chart_dir), reads=_template_reads(chart_dir)) == []


def test_every_value_the_nfd_role_sets_is_a_key_of_the_upstream_chart():
    """The nfd role's values (nfd_default_values) against upstream's NFD chart, which the lab serves from its build
    cache (issue 27 §6; a failure where hack/cluster/build.sh has not fetched it). Its master.config and worker.config
    are commented out in values.yaml, so they land as keys the templates read (into nfd-master.conf and
    nfd-worker.conf)."""
    from gpuops_lab.config import LabConfig

    chart_dir = LabConfig.load().upstream_chart_dir("node-feature-discovery")
    if not (chart_dir / "values.yaml").is_file():
        # a failure, never a skip: `make test` builds it first, and a skip would hide the chart the lab serves
        pytest.fail(f"the upstream NFD chart is not in {chart_dir}: run `make build` (hack/cluster/build.sh nfd-chart)")
    values = _defaults("nfd")["nfd_default_values"]
    assert _landing_nowhere(values, _chart_values(chart_dir), reads=_template_reads(chart_dir)) == []
    assert _landing_nowhere({"worker": {"confg": {}}}, _chart_values(chart_dir), reads=_template_reads(chart_dir)) == [
        "worker.confg"
    ]


def test_every_value_the_sriov_network_operator_role_sets_is_a_key_of_the_upstream_chart():
    """The sriov_network_operator role's chart values (plugins/filter/sriov_network_operator_objects.py) and the user
    values the molecule scenario sets (operator.tolerations) against upstream's SR-IOV chart, which the lab serves
    from its build cache (issue 27 §6; a failure where hack/cluster/build.sh has not fetched it)."""
    from ansible_collections.gpuops.platform.plugins.filter.sriov_network_operator_objects import (
        sriov_network_operator_objects,
    )
    from gpuops_lab.config import LabConfig

    chart_dir = LabConfig.load().upstream_chart_dir("sriov-network-operator-chart")
    if not (chart_dir / "values.yaml").is_file():
        # a failure, never a skip: `make test` builds it first, and a skip would hide the chart the lab serves
        pytest.fail(f"the upstream SR-IOV chart is not in {chart_dir}: run `make build` (build.sh sriov-chart)")
    built = sriov_network_operator_objects({"sriov_network_operator_namespace": "sriov-network-operator"})
    chart, reads = _chart_values(chart_dir), _template_reads(chart_dir)
    assert built["chart_values"] == {"sriovOperatorConfig": {"deploy": False}}
    assert _landing_nowhere(built["chart_values"], chart, reads=reads) == []
    scenario = yaml.safe_load((REPO / "molecule/sriov_network_operator/molecule.yml").read_text())
    user = scenario["provisioner"]["inventory"]["host_vars"]["controller"]["sriov_network_operator_values"]
    assert _landing_nowhere(user, chart, reads=reads) == []
    # what resource_prefix() reads, and a misspelt key caught
    assert _landing_nowhere({"operator": {"resourcePrefix": "acme.io"}}, chart, reads=reads) == []
    assert _landing_nowhere({"sriovOperatorConfig": {"deploi": False}}, chart, reads=reads) == [
        "sriovOperatorConfig.deploi"
    ]


@pytest.mark.parametrize(
    ("role", "module", "misspelt"), [("kueue", "_kueue", "managerConfg"), ("volcano", "_volcano", "custm")]
)
def test_every_value_the_kueue_and_volcano_roles_set_is_a_key_of_the_upstream_chart(role, module, misspelt):
    """The kueue and volcano roles' chart values, and the user values the lab inventory and the roles' molecule
    scenarios set (the kwok tolerations), against upstream's charts (fetched into the build cache for the tests; the
    lab serves the fixtures, tests/unit/charts/test_checked_charts.py): every key is one upstream reads, so the roles'
    unknown value key check passes on upstream's chart."""
    import importlib

    from gpuops_lab.config import LabConfig

    chart_dir = LabConfig.load().upstream_chart_dir(role)
    if not (chart_dir / "values.yaml").is_file():
        # a failure, never a skip: `make test` builds it first, and a skip would hide what the roles are checked against
        pytest.fail(f"the upstream {role} chart is not in {chart_dir}: run `make build` (build.sh {role}-chart)")
    rules = importlib.import_module(f"ansible_collections.gpuops.platform.plugins.module_utils.batch.{module}")
    chart, reads = _chart_values(chart_dir), _template_reads(chart_dir)
    assert _landing_nowhere(rules.chart_values(_defaults(role)), chart, reads=reads) == []
    inventory = yaml.safe_load((REPO / "inventories/local/group_vars/cluster_controller.yml").read_text())
    scenario = yaml.safe_load((REPO / f"molecule/{role}/molecule.yml").read_text())
    controller = scenario["provisioner"]["inventory"]["host_vars"]["controller"]
    assert controller[f"{role}_values"], f"molecule/{role} sets no {role}_values"
    for values in (inventory.get(f"{role}_values") or {}, controller[f"{role}_values"]):
        assert _landing_nowhere(values, chart, reads=reads) == []
    assert _landing_nowhere({misspelt: {}}, chart, reads=reads) == [misspelt]


def test_a_key_only_a_template_reads_lands_and_its_unknown_children_do_not():
    reads = {"dcgmExporter.config.name"}
    chart = {"dcgmExporter": {"enabled": True}}
    assert _landing_nowhere({"dcgmExporter": {"config": {"name": "x"}}}, chart, reads=reads) == []
    assert _landing_nowhere({"dcgmExporter": {"config": {"nam": "x"}}}, chart, reads=reads) == [
        "dcgmExporter.config.nam"
    ]


def test_a_value_that_lands_nowhere_is_caught():
    chart = _chart_values(REPO / VALUES_TEMPLATES["gpu_operator"])
    rendered = {"daemonsets": {"tolerations": [], "nodeSelector": {"pool": "a"}}, "driver": {"enabled": True}}
    assert _landing_nowhere(rendered, chart) == ["daemonsets.nodeSelector"]


def _chart_tolerations_keys(chart: Path, skip_subcharts: set[str]) -> set[str]:
    """Every values path a Deployment/DaemonSet template of the chart reads tolerations from."""
    keys = set()
    for tpl in chart.glob("templates/*.tpl"):
        keys |= set(re.findall(r"\.Values\.([A-Za-z0-9_.]*[tT]olerations)", tpl.read_text()))
    for sub in chart.glob("charts/*/templates"):
        if sub.parent.name not in skip_subcharts:
            for tpl in sub.glob("*.tpl"):
                found = re.findall(r"\.Values\.([A-Za-z0-9_.]*[tT]olerations)", tpl.read_text())
                keys |= {f"{sub.parent.name}.{k}" for k in found}
    return keys


def test_every_amd_operator_deployment_gets_the_operator_tolerations():
    """On a cluster whose nodes are all tainted the install only converges when each of the chart's own
    Deployments (controller manager, KMM controller, KMM webhook server) tolerates the taints: each has its own
    tolerations key. The bundled NFD subchart is off when the nfd role manages NFD (gpuops_nfd_managed)."""
    marker = [{"key": "example.com/all-nodes", "operator": "Exists", "effect": "NoSchedule"}]
    rendered = _render_values("amd_gpu_operator", {"amd_gpu_operator_operator_tolerations": marker})
    keys = _chart_tolerations_keys(REPO / VALUES_TEMPLATES["amd_gpu_operator"], {"node-feature-discovery"})
    assert len(keys) >= 3, keys
    for key in sorted(keys):
        value: object = rendered
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        assert value == marker, f"{key} does not get amd_gpu_operator_operator_tolerations"
    assert rendered["node-feature-discovery"]["enabled"] is False


def test_every_amd_operand_gets_the_operand_tolerations():
    marker = [{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    spec = _render_values("amd_gpu_operator", {"amd_gpu_operator_tolerations": marker})["deviceConfig"]["spec"]
    assert spec["driver"]["tolerations"] == marker
    assert spec["devicePlugin"]["devicePluginTolerations"] == marker
    assert spec["devicePlugin"]["nodeLabellerTolerations"] == marker
    assert spec["metricsExporter"]["tolerations"] == marker
