"""The upstream Kueue and Volcano charts (hack/cluster/build.sh kueue-chart / volcano-chart copy them out of their Go
module zips into the lab's build cache; a missing one fails, naming the build step), rendered with the real helm: the
kueue and volcano roles' values land where upstream reads them, and the interface of each chart the lab's kubelet
serves (kubelet.py: container ports, probes, Services, volumes, Volcano's hook Job) is pinned, so a version that changes
it shows up as a failing test."""

from __future__ import annotations

import copy
import functools
import json
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "charts"
KWOK = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}


def _lab():
    from gpuops_lab.config import LabConfig

    return LabConfig.load()


def _chart(name: str) -> Path:
    cfg = _lab()
    chart = cfg.upstream_chart_dir(name)
    if not (chart / "Chart.yaml").is_file() or not cfg.binary("helm").is_file():
        # a failure, never a skip: `make test` builds it first, and a skip would hide what the tests check against
        pytest.fail(f"the upstream {name} chart is not in {chart}: run `make build` (build.sh {name}-chart)")
    return chart


@pytest.fixture(scope="module")
def kueue_chart() -> Path:
    return _chart("kueue")


@pytest.fixture(scope="module")
def volcano_chart() -> Path:
    return _chart("volcano")


def _render(chart: Path, release: str, namespace: str, values: dict) -> list[dict]:
    return copy.deepcopy(_rendered(chart, release, namespace, json.dumps(values, sort_keys=True)))


@functools.cache
def _rendered(chart: Path, release: str, namespace: str, values: str) -> list[dict]:
    """helm template, once per chart and values (upstream Kueue's takes seconds: its CRDs and webhooks are large)."""
    argv = [str(_lab().binary("helm")), "template", release, str(chart), "--namespace", namespace, "--values", "-"]
    r = subprocess.run(argv, input=values, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.load_all(r.stdout, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]


def _one(docs: list[dict], kind: str, name: str) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def _names(docs: list[dict], kind: str) -> set[str]:
    return {d["metadata"]["name"] for d in _kind(docs, kind)}


def _defaults(role: str) -> dict:
    return yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text())


# ------------------------------------------------------------------------------------------------------------ Kueue
def _kueue_values(**variables) -> dict:
    """The kueue role's chart values (plugins/module_utils/batch/_kueue.py) with the lab inventory's user values merged
    over them, as roles/kueue/tasks/main.yml merges kueue_values (combine recursive)."""
    from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue

    values = _kueue.chart_values({**_defaults("kueue"), **variables})
    values["controllerManager"]["tolerations"] = [KWOK]
    return values


def _manager_config(docs: list[dict]) -> dict:
    return yaml.safe_load(_one(docs, "ConfigMap", "kueue-manager-config")["data"]["controller_manager_config.yaml"])


def test_kueue_chart_is_the_role_pin_and_served(kueue_chart):
    """Upstream's Chart.yaml in git carries the release's version (its Makefile stamps the tag): the role's pin and the
    lab's Kueue controller (versions.env KUEUE_VERSION) agree with it; the lab's repository serves it, no fixture."""
    from gpuops_lab.config import UPSTREAM_CHARTS

    meta = yaml.safe_load((kueue_chart / "Chart.yaml").read_text())
    assert (meta["name"], meta["version"], meta["appVersion"]) == ("kueue", "0.19.2", "v0.19.2")
    assert _defaults("kueue")["kueue_chart_version"] == _lab().upstream_chart_version("kueue") == meta["version"]
    assert UPSTREAM_CHARTS["kueue"] == "KUEUE_VERSION" and not (FIXTURES / "kueue").exists()


def test_kueue_role_merges_over_upstream_manager_configuration(kueue_chart):
    """The chart takes the manager's Configuration as one string: the role's base is upstream's default of the pinned
    chart (the API client's qps 300 / burst 500 and the reconcilers' concurrency stay)."""
    from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue

    upstream = yaml.safe_load(
        yaml.safe_load((kueue_chart / "values.yaml").read_text())["managerConfig"]["controllerManagerConfigYaml"]
    )
    assert upstream == _kueue.UPSTREAM_MANAGER_CONFIG


@pytest.mark.parametrize(
    ("variables", "frameworks", "without_queue"),
    [
        ({}, ["batch/job"], False),
        ({"kueue_integrations": ["batch/job", "pod"], "kueue_manage_jobs_without_queue_name": True}, None, True),
    ],
)
def test_kueue_role_values_render_on_the_upstream_chart(kueue_chart, variables, frameworks, without_queue):
    docs = _render(kueue_chart, "kueue", "kueue-system", _kueue_values(**variables))
    config = _manager_config(docs)
    assert config["clientConnection"] == {"qps": 300, "burst": 500}
    assert config["controller"]["groupKindConcurrency"]["Workload.kueue.x-k8s.io"] == 10
    assert config["integrations"]["frameworks"] == (frameworks or variables["kueue_integrations"])
    assert config["manageJobsWithoutQueueName"] is without_queue
    # the chart adds its internal certificate management where the Configuration names none
    assert config["internalCertManagement"] == {
        "enable": True,
        "webhookServiceName": "kueue-webhook-service",
        "webhookSecretName": "kueue-webhook-server-cert",
    }
    pod = _one(docs, "Deployment", "kueue-controller-manager")["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "registry.k8s.io/kueue/kueue:v0.19.2"
    assert pod["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert pod["tolerations"] == [KWOK]


def test_kueue_chart_interface_the_labs_kubelet_serves(kueue_chart):
    """What the lab's kubelet relies on to run Kueue for the chart's pod (hack/gpuops_lab/kubelet.py, kueue.py): the
    manager container's ports (each routed to a lab port), its readiness probe, its --config file mounted from the
    manager ConfigMap and the webhook certificate Secret volume; the Services the webhooks, the CRDs' conversion and the
    visibility APIServices name, each selecting the pod on a port the kubelet routes; and the selector labels."""
    from gpuops_lab import kubelet
    from gpuops_lab import kueue as lab_kueue

    docs = _render(kueue_chart, "kueue", "kueue-system", _kueue_values())
    deploy = _one(docs, "Deployment", "kueue-controller-manager")
    pod = {"metadata": {"labels": deploy["spec"]["template"]["metadata"]["labels"]}, **deploy["spec"]["template"]}
    assert lab_kueue.WORKLOAD.selector.items() <= pod["metadata"]["labels"].items()
    manager = kubelet.container(pod, lab_kueue.WORKLOAD.container)
    assert {p["containerPort"] for p in manager["ports"]} | {8081} == set(lab_kueue.CONTAINER_PORTS)
    ports = {port: 30000 + port for port in lab_kueue.CONTAINER_PORTS}
    assert kubelet.probe_url(manager, ports) == "http://127.0.0.1:38081/readyz"
    assert "--config=/controller_manager_config.yaml" in manager["args"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in manager["volumeMounts"]}
    assert mounts["/controller_manager_config.yaml"]["configMap"]["name"] == "kueue-manager-config"
    assert mounts[lab_kueue.DEFAULT_CERT_DIR]["secret"]["secretName"] == "kueue-webhook-server-cert"
    assert lab_kueue.VISIBILITY_CERT_DIR in mounts
    services = {d["metadata"]["name"]: d for d in _kind(docs, "Service")}
    routed = {name: kubelet.service_routes(svc, pod, manager, ports) for name, svc in services.items()}
    assert routed["kueue-webhook-service"] == [(443, 39443)]
    assert routed["kueue-visibility-server"] == [(443, 38082)]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for doc in _kind(docs, kind):
            assert {h["clientConfig"]["service"]["name"] for h in doc["webhooks"]} == {"kueue-webhook-service"}
    crds = {d["spec"]["names"]["plural"]: d["spec"] for d in _kind(docs, "CustomResourceDefinition")}
    converted = {name for name, spec in crds.items() if "conversion" in spec}
    assert len(crds) == 11 and {"clusterqueues", "localqueues", "workloads", "cohorts"} <= converted
    for name in converted:
        assert crds[name]["conversion"]["webhook"]["clientConfig"]["service"]["name"] == "kueue-webhook-service"
    assert {d["spec"]["service"]["name"] for d in _kind(docs, "APIService")} == {"kueue-visibility-server"}
    # the batch admin and user roles aggregate others: helm_release_apply deletes them first on uninstall
    from ansible_collections.gpuops.platform.plugins.module_utils.release import _helm_release

    manifest = yaml.safe_dump_all(docs)
    assert sorted(_helm_release.aggregated_cluster_roles(manifest)) == [
        "kueue-batch-admin-role",
        "kueue-batch-user-role",
    ]


# ---------------------------------------------------------------------------------------------------------- Volcano
def _volcano_values(**variables) -> dict:
    """The volcano role's chart values (plugins/module_utils/batch/_volcano.py) with the molecule scenario's user
    values."""
    from ansible_collections.gpuops.platform.plugins.module_utils.batch import _volcano

    values = _volcano.chart_values({**_defaults("volcano"), **variables})
    values["custom"]["default_tolerations"] = [KWOK]
    return values


def test_volcano_chart_is_the_role_pin_and_served(volcano_chart):
    """The role's pin, the lab's Volcano binaries (versions.env VOLCANO_VERSION) and the chart agree; the lab's
    repository serves upstream's chart, no fixture."""
    from gpuops_lab.config import UPSTREAM_CHARTS

    meta = yaml.safe_load((volcano_chart / "Chart.yaml").read_text())
    assert (meta["name"], str(meta["version"]), str(meta["appVersion"])) == ("volcano", "1.15.1", "1.15.1")
    assert _defaults("volcano")["volcano_chart_version"] == _lab().upstream_chart_version("volcano") == "1.15.1"
    assert UPSTREAM_CHARTS["volcano"] == "VOLCANO_VERSION" and not (FIXTURES / "volcano").exists()


@pytest.mark.parametrize(
    "queues", [[], [{"name": "p", "deserved": {"cpu": 8}}, {"name": "a", "parent": "p", "deserved": {"cpu": 4}}]]
)
def test_volcano_role_values_render_on_the_upstream_chart(volcano_chart, queues):
    from ansible_collections.gpuops.platform.plugins.module_utils.batch import _volcano

    variables = {"volcano_queues": queues}
    docs = _render(volcano_chart, "volcano", "volcano-system", _volcano_values(**variables))
    # the Deployments the role's validate waits for, by name
    assert _names(docs, "Deployment") == set(_volcano.deployments(_defaults("volcano")))
    conf = _one(docs, "ConfigMap", "volcano-scheduler-configmap")["data"]["volcano-scheduler.conf"]
    assert conf == _volcano.scheduler_config(queues)
    for name in _names(docs, "Deployment"):
        pod = _one(docs, "Deployment", name)["spec"]["template"]["spec"]
        assert pod["tolerations"] == [KWOK]
        assert pod["containers"][0]["image"].endswith(":v1.15.1")
        assert "--scheduler-name=volcano" in pod["containers"][0]["args"]
    admission = _one(docs, "Deployment", "volcano-admission")["spec"]["template"]["spec"]["containers"][0]
    assert f"--enabled-admission={','.join(_defaults('volcano')['volcano_enabled_admissions'])}" in admission["args"]
    off = _render(volcano_chart, "volcano", "volcano-system", _volcano_values(volcano_admission_enable=False))
    assert _names(off, "Deployment") == {"volcano-scheduler", "volcano-controllers"}
    assert not [d for d in off if d["kind"].endswith("WebhookConfiguration") or d["kind"] == "Job"]


def test_volcano_role_default_configuration_is_upstreams(volcano_chart):
    """The role's configuration without hierarchical queues is the chart's default (config/volcano-scheduler.conf)."""
    from ansible_collections.gpuops.platform.plugins.module_utils.batch import _volcano

    upstream = yaml.safe_load((volcano_chart / "config/volcano-scheduler.conf").read_text())
    assert yaml.safe_load(_volcano.scheduler_config([])) == upstream


def _mount(pod: dict, container: dict, path: str) -> dict:
    """The volume mounted at `path` in the container."""
    (name,) = [m["name"] for m in container["volumeMounts"] if m["mountPath"] == path]
    (volume,) = [v for v in pod["volumes"] if v["name"] == name]
    return volume


def test_volcano_chart_interface_the_labs_kubelet_serves(volcano_chart):
    """What the lab's kubelet relies on (hack/gpuops_lab/volcano.py): each Deployment's pods by their `app` label, the
    Services' target ports, the files its arguments name inside the pod's ConfigMap, Secret and emptyDir volumes, the
    hook Job's name and command, and every Volcano CRD a template of the release (so the controllers find their
    kinds). A chart version that changes one of them fails here, not in the lab."""
    from gpuops_lab import volcano as lab_volcano

    docs = _render(volcano_chart, "volcano", "volcano-system", _volcano_values())
    workloads = {w.name: w for w in lab_volcano.WORKLOADS}
    for deployment, workload in (
        ("volcano-scheduler", "volcano-scheduler"),
        ("volcano-controllers", "volcano-controller"),
        ("volcano-admission", "volcano-admission"),
    ):
        d = _one(docs, "Deployment", deployment)
        assert d["spec"]["selector"]["matchLabels"] == workloads[workload].selector
        assert d["spec"]["template"]["metadata"]["labels"]["app"] == workloads[workload].selector["app"]
    services = {
        "volcano-scheduler-service": lab_volcano.SCHEDULER_PORTS,
        "volcano-controllers-service": lab_volcano.CONTROLLER_PORTS,
        "volcano-admission-service": lab_volcano.ADMISSION_PORTS,
    }
    for name, ports in services.items():
        assert [p["targetPort"] for p in _one(docs, "Service", name)["spec"]["ports"]] == list(ports)
    # the scheduler: its configuration file in the ConfigMap volume, its klog socket directory an emptyDir
    pod = _one(docs, "Deployment", "volcano-scheduler")["spec"]["template"]["spec"]
    (sched,) = pod["containers"]
    assert "--scheduler-conf=/volcano.scheduler/volcano-scheduler.conf" in sched["args"]
    assert _mount(pod, sched, "/volcano.scheduler")["configMap"]["name"] == "volcano-scheduler-configmap"
    assert {"name": "DEBUG_SOCKET_DIR", "value": "/tmp/klog-socks"} in sched["env"]
    assert "emptyDir" in _mount(pod, sched, "/tmp/klog-socks")
    # the webhook: its certificate files in the hook's Secret, its configuration in a ConfigMap, its port the Service's
    pod = _one(docs, "Deployment", "volcano-admission")["spec"]["template"]["spec"]
    (adm,) = pod["containers"]
    certs = "/admission.local.config/certificates"
    for flag, key in (
        ("--tls-cert-file", "tls.crt"),
        ("--tls-private-key-file", "tls.key"),
        ("--ca-cert-file", "ca.crt"),
    ):
        assert f"{flag}={certs}/{key}" in adm["args"]
    assert _mount(pod, adm, certs)["secret"]["secretName"] == "volcano-admission-secret"
    assert "--port=8443" in adm["args"] and "--webhook-service-name=volcano-admission-service" in adm["args"]
    assert "--admission-conf=/admission.local.config/configmap/volcano-admission.conf" in adm["args"]
    # the hook Job whose pod the kubelet runs (by its job-name label): the admission image's script, into that Secret
    job = _one(docs, "Job", f"{lab_volcano.RELEASE}-admission-init")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    (init,) = job["spec"]["template"]["spec"]["containers"]
    assert init["command"] == [
        f"./{lab_volcano.SECRET_SCRIPT}",
        "--service",
        "volcano-admission-service",
        "--namespace",
        "volcano-system",
        "--secret",
        "volcano-admission-secret",
    ]
    hooks = [h for d in docs if d["kind"].endswith("WebhookConfiguration") for h in d["webhooks"]]
    assert len(hooks) == 7
    for hook in hooks:  # no caBundle: vc-webhook-manager injects its CA
        assert hook["failurePolicy"] == "Fail" and set(hook["clientConfig"]) == {"service"}
        assert hook["clientConfig"]["service"] == {
            "name": "volcano-admission-service",
            "namespace": "volcano-system",
            "path": hook["clientConfig"]["service"]["path"],
            "port": 443,
        }
    specs = [c["spec"] for c in _kind(docs, "CustomResourceDefinition")]
    assert {f"{spec['group']}/{spec['names']['plural']}" for spec in specs} >= {
        "scheduling.volcano.sh/queues",
        "scheduling.volcano.sh/podgroups",
        "batch.volcano.sh/jobs",
        "bus.volcano.sh/commands",
        "topology.volcano.sh/hypernodes",
        "nodeinfo.volcano.sh/numatopologies",
        "flow.volcano.sh/jobflows",
    }
