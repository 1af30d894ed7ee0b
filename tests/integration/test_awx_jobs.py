"""The AWX job templates of awx/job_templates.yml, run as AWX runs them: through ansible-runner, from the project
directory as AWX checks it out, with the template's job type, the survey's answers as extra vars and the credentials
injected as their credential types say (the kubeconfig as a file named by K8S_AUTH_KUBECONFIG and gpuops_kubeconfig,
the NGC key in the environment). Job slicing as AWX does it: slice k of n gets every n-th host of the inventory
ordered by name, the groups keeping only those hosts (awx/main/models/inventory.py, get_sliced_hosts). The job
events are the evidence: changed and failed counts per host, and no secret in any event."""

from __future__ import annotations

import base64
import json
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


def run(tmp_path: Path, name: str, inventory: dict, extravars: dict | None = None, envvars: dict | None = None):
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
    """The diagnose template with the kubeconfig credential (a file, K8S_AUTH_KUBECONFIG, gpuops_kubeconfig) and the
    NGC key (NGC_API_KEY): the job reads the cluster through the injected file; neither secret is in any event."""
    content, key = inline_kubeconfig
    ngc = "nvapi-" + "s3cr3t" * 8
    (kube,) = [ct for ct in CONFIG["credential_types"] if ct["name"] == "gpuops kubeconfig"]
    path = tmp_path / "kubeconfig"  # AWX writes the file injector's template to a private file of the job
    path.write_text(content)
    path.chmod(0o600)
    env = {k: v.replace("{{ tower.filename.kubeconfig }}", str(path)) for k, v in kube["injectors"]["env"].items()}
    extra = {
        k: v.replace("{{ tower.filename.kubeconfig }}", str(path)).replace("{{ context }}", "")
        for k, v in kube["injectors"]["extra_vars"].items()
    }
    inv = {"all": {"children": {"cluster_controller": {"hosts": CONTROLLER}, "gpu_nodes": {"hosts": {}}}}}
    r = run(tmp_path, "gpuops - diagnose", inv, extra, {**env, "NGC_API_KEY": ngc})
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
