"""The AWX job templates of awx/job_templates.yml, run as AWX runs them: through ansible-runner, from the project
directory as AWX checks it out, with the template's job type, the survey's answers as extra vars and the credentials
injected as their credential types say (the kubeconfig as a file named by K8S_AUTH_KUBECONFIG and gpuops_kubeconfig,
the NGC key in the environment). Job slicing as AWX does it: slice k of n gets every n-th host of the inventory
ordered by name, the groups keeping only those hosts (awx/main/models/inventory.py, get_sliced_hosts). The job
events are the evidence: changed and failed counts per host, and no secret in any event.

The inventory as AWX builds it (issue 27): each inventory source of the file updated as an AWX inventory update runs
it (`ansible-inventory --list --export -i <project>/<source_path>` with AWX's environment for it and the source's
credential injected; awx 24.6.1 awx/main/tasks/jobs.py RunInventoryUpdate), the sources merged as the inventory keeps
them, handed to the job as the executable inventory script AWX writes (write_inventory_file). No hand-made
controller: the one the jobs run on comes from the file's sources."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import ansible_runner
import pytest
import yaml
from gpuops_lab.testing import dgx_and_l40s

REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "awx/job_templates.yml").read_text())
TEMPLATES = {t["name"]: t for t in CONFIG["job_templates"]}
CONTROLLER = {
    "localhost": {"ansible_connection": "local", "ansible_python_interpreter": str(REPO / ".venv/bin/python")}
}


CREDENTIALS = {c["name"]: c for c in CONFIG["credentials"]}
TYPES = {ct["name"]: ct for ct in CONFIG["credential_types"]}
# what an AWX inventory update sets for ansible-inventory (awx/main/constants.py, STANDARD_INVENTORY_UPDATE_ENV)
AWX_INVENTORY_UPDATE_ENV = {
    "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
    "ANSIBLE_INVENTORY_EXPORT": "True",
    "ANSIBLE_VERBOSE_TO_STDERR": "True",
    "ANSIBLE_HOST_PATTERN_MISMATCH": "error",
}


def injected(names: list[str], kubeconfig: Path) -> tuple[dict, dict]:
    """(environment, extra vars) of the credentials `names` as their types inject them; the kubeconfig file is the one
    AWX writes from the credential's input (`kubeconfig`, already written there)."""
    env: dict[str, str] = {}
    extra: dict[str, str] = {}
    for name in names:
        injectors = TYPES.get(CREDENTIALS[name]["credential_type"], {}).get("injectors", {})
        for where, out in (("env", env), ("extra_vars", extra)):
            for k, v in injectors.get(where, {}).items():
                out[k] = v.replace("{{ tower.filename.kubeconfig }}", str(kubeconfig)).replace("{{ context }}", "")
    return env, extra


def awx_inventory(tmp_path: Path, kubeconfig: Path) -> tuple[Path, dict]:
    """Every inventory source of the file updated as AWX updates it (a fresh HOME: an execution environment's), merged
    as the inventory keeps them (groups by name: hosts and children united, variables updated - each source reads the
    same group_vars; hosts' variables), written as AWX's inventory script. Returns (the script, its data)."""
    data: dict = {"all": {"vars": {}, "hosts": []}, "_meta": {"hostvars": {}}}
    for src in CONFIG["inventory_sources"]:
        path = REPO / src["source_path"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_INVENTORY", "K8S_AUTH"))}
        env.update(AWX_INVENTORY_UPDATE_ENV, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), HOME=str(tmp_path / "ee-home"))
        env.update(injected([src["credential"]] if src.get("credential") else [], kubeconfig)[0])
        argv = ["ansible-inventory", "--list", "--export", "-i", str(path)]
        argv += ["--playbook-dir", str(path if path.is_dir() else path.parent)]
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, check=False)
        assert r.returncode == 0, f"the inventory update of {src['name']!r} failed: {r.stderr[-3000:]}"
        out = json.loads(r.stdout)
        meta = out.pop("_meta")
        data["_meta"]["hostvars"].update(meta.get("hostvars", {}))
        if "profile" in meta:  # how ansible-inventory encoded the values (the script plugin decodes them so)
            data["_meta"]["profile"] = meta["profile"]
        data["all"]["vars"].update(out.pop("all", {}).get("vars", {}))
        data["all"]["hosts"] += out.pop("ungrouped", {}).get("hosts", [])
        for group, g in out.items():
            into = data.setdefault(group, {})
            for key in ("hosts", "children"):
                if g.get(key):
                    into[key] = sorted(set(into.get(key, [])) | set(g[key]))
            if g.get("vars"):
                into.setdefault("vars", {}).update(g["vars"])
    script = tmp_path / "awx-inventory" / "hosts"
    script.parent.mkdir()
    script.write_text(f"#! /usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint({json.dumps(data)!r})\n")
    script.chmod(0o700)
    return script, data


def sliced(groups: dict[str, dict], number: int, count: int) -> dict:
    """The inventory AWX hands slice `number` (1-based) of `count`: every count-th host by name."""
    every = sorted({h for hosts in groups.values() for h in hosts})
    keep = set(every[number - 1 :: count])
    return {
        "all": {
            "children": {g: {"hosts": {h: v for h, v in hosts.items() if h in keep}} for g, hosts in groups.items()}
        }
    }


@pytest.fixture(autouse=True)
def ansible_own_strategy(monkeypatch):
    """AWX runs a job with Ansible's own strategy: not hack/run-tests.sh's Mitogen strategy."""
    monkeypatch.delenv("ANSIBLE_STRATEGY", raising=False)
    monkeypatch.delenv("ANSIBLE_STRATEGY_PLUGINS", raising=False)


def run(tmp_path: Path, name: str, inventory: dict | str, extravars: dict | None = None, envvars: dict | None = None):
    template = TEMPLATES[name]
    pdd = tmp_path / f"pdd-{len(list(tmp_path.glob('pdd-*')))}"
    pdd.mkdir()
    return ansible_runner.run(
        private_data_dir=str(pdd),
        project_dir=str(REPO),
        playbook=template["playbook"],
        inventory=inventory,
        extravars=extravars or {},
        envvars={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), **(envvars or {})},
        cmdline="--check" if template["job_type"] == "check" else None,
        quiet=True,
    )


def by_host(runner, event: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in runner.events:
        if e.get("event") == event:
            host = e["event_data"].get("host")
            out[host] = out.get(host, 0) + 1
    return out


def test_a_survey_answer_the_argument_spec_rejects_stops_the_job_before_any_change(cluster, tmp_path):
    """The onboarding survey's reboot answer must be a boolean: "maybe" is refused by the collection's argument spec
    in the job's first task, naming the variable; no task changed anything."""
    inv = {"all": {"children": {"cluster_controller": {"hosts": CONTROLLER}, "gpu_nodes": {"hosts": {"gpu-x": {}}}}}}
    answers = {
        "gpuops_onboard_host": "gpu-x",
        "gpuops_allow_reboot": "maybe",
        "gpuops_onboard_timeout": 600,
        "gpuops_kubeconfig": cluster.kubeconfig,  # the kubeconfig credential's extra var
    }
    r = run(tmp_path, "gpuops - onboard a node", inv, answers)
    assert r.status == "failed" and r.rc != 0
    out = r.stdout.read()
    assert "gpuops_allow_reboot" in out and "bool" in out, out[-3000:]
    assert by_host(r, "runner_on_ok") == {} or all(
        not e["event_data"].get("res", {}).get("changed") for e in r.events if e.get("event") == "runner_on_ok"
    )
    # the answers the survey allows pass the same spec
    ok = run(
        tmp_path,
        "gpuops - onboard a node",
        inv,
        {**answers, "gpuops_allow_reboot": "false", "gpuops_onboard_host": "nope"},
    )
    assert "is not a host of the inventory's gpu_nodes group" in ok.stdout.read()


def test_sliced_host_preparation_touches_every_host_exactly_once(tmp_path):
    """The prepare template (job_slice_count from awx/job_templates.yml) over an inventory of two GPU hosts and the
    controller: each GPU host is prepared in exactly one slice, the controller in none (no cluster-plane play)."""
    hv = dgx_and_l40s(tmp_path / "hosts")[1]
    groups = {"gpu_nodes": hv, "cluster_controller": CONTROLLER}
    count = TEMPLATES["gpuops - prepare hosts"]["job_slice_count"]
    seen: dict[str, list[int]] = {}
    for number in range(1, count + 1):
        r = run(tmp_path, "gpuops - prepare hosts", sliced(groups, number, count))
        hosts = set(by_host(r, "runner_on_ok")) | set(by_host(r, "runner_on_failed"))
        assert not by_host(r, "runner_on_failed"), r.stdout.read()[-3000:]
        assert r.status in ("successful",) or not hosts, (number, r.status)
        for h in hosts:
            seen.setdefault(h, []).append(number)
    assert {h: len(s) for h, s in seen.items()} == {"dgx": 1, "l40s": 1}, seen


@pytest.fixture
def inline_kubeconfig(cluster, tmp_path) -> tuple[str, str]:
    """The lab's kubeconfig with the client key inline (the secret an AWX credential holds), and that secret."""
    doc = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    user = doc["users"][0]["user"]
    key = base64.b64encode(Path(user.pop("client-key")).read_bytes()).decode()
    user["client-key-data"] = key
    user["client-certificate-data"] = base64.b64encode(Path(user.pop("client-certificate")).read_bytes()).decode()
    for c in doc["clusters"]:
        ca = c["cluster"].pop("certificate-authority", None)
        if ca:
            c["cluster"]["certificate-authority-data"] = base64.b64encode(Path(ca).read_bytes()).decode()
    return yaml.safe_dump(doc), key


def test_credentials_are_injected_as_their_types_say_and_never_echoed(cluster, tmp_path, inline_kubeconfig):
    """The diagnose template on the inventory AWX builds from the file's sources, with its credentials (the kubeconfig:
    a file, K8S_AUTH_KUBECONFIG, gpuops_kubeconfig) and the NGC key (NGC_API_KEY) injected: the job reads the cluster
    through the injected file; neither secret is in any event."""
    content, key = inline_kubeconfig
    ngc = "nvapi-" + "s3cr3t" * 8
    path = tmp_path / "kubeconfig"  # AWX writes the file injector's template to a private file of the job
    path.write_text(content)
    path.chmod(0o600)
    inventory = awx_inventory(tmp_path, path)[0]
    env, extra = injected(TEMPLATES["gpuops - diagnose"]["credentials"], path)
    extra["gpuops_diagnose_host_facts"] = False  # the simulated nodes have no SSH (AWX: the Machine credential's)
    r = run(tmp_path, "gpuops - diagnose", str(inventory), extra, {**env, "NGC_API_KEY": ngc})
    read = [
        e
        for e in r.events
        if e.get("event") == "runner_on_ok"
        and e["event_data"].get("resolved_action", e["event_data"].get("task_action"))
        in ("gpuops.platform.gpu_cluster_status", "gpu_cluster_status")
    ]
    assert read, r.stdout.read()[-3000:]  # the cluster was read with the injected kubeconfig
    events = json.dumps(list(r.events))
    assert ngc not in events and key not in events
    assert ngc not in r.stdout.read()


def test_the_jobs_run_on_the_controller_of_the_inventory_awx_builds(cluster, add_nodes, tmp_path):
    """Issue 27: with the GPU nodes' source alone the inventory had no cluster_controller, and "gpuops - diagnose"
    (site, operators, upgrade, uninstall, validate alike) skipped every play ("Could not match supplied host pattern")
    and ended successful. Built from the file's sources, the inventory holds the one controller, the cluster's GPU
    nodes and the site's group_vars, and the job's cluster plays run on that controller."""
    (dgx,) = add_nodes("dgx-h100", 1)
    inventory, data = awx_inventory(tmp_path, Path(cluster.kubeconfig))
    assert data.get("cluster_controller", {}).get("hosts") == ["localhost"], json.dumps(data, indent=1)[:3000]
    assert dgx in data.get("gpu_nodes", {}).get("hosts", [])  # the plugin's source, through the credential
    assert "gpuops_kubeconfig" in data["all"]["vars"]  # inventories/cluster/group_vars/all.yml
    assert data["gpu_nodes"]["vars"]["ansible_become"] is True  # inventories/cluster/group_vars/gpu_nodes.yml

    env, extra = injected(TEMPLATES["gpuops - diagnose"]["credentials"], Path(cluster.kubeconfig))
    extra["gpuops_diagnose_host_facts"] = False  # the simulated nodes have no SSH (AWX: the Machine credential's)
    r = run(tmp_path, "gpuops - diagnose", str(inventory), extra, env)
    out = r.stdout.read()
    assert "Could not match supplied host pattern" not in out, out[-3000:]
    ran = {
        (e["event_data"].get("host"), e["event_data"].get("task"))
        for e in r.events
        if e.get("event") in ("runner_on_ok", "runner_on_failed")
    }
    assert ("localhost", "Read the cluster status") in ran, out[-3000:]
