"""The fixture Helm charts under tests/fixtures/charts, without a cluster: helm lint and helm template of every chart
version, the ClusterPolicy / DeviceConfig / NodeFeatureRule they render checked field by field and against the
chart's own CRD schema (a small structural-schema check: unknown fields, types, enums, required, patterns, bounds), the
upstream chart validations, the CRD difference between the two gpu-operator versions, and the layout rules
(headers, one CRD per file, templates as .tpl, vendored NFD copies identical to each other). The NFD chart itself is
upstream's (the lab serves it from the build cache: tests/unit/charts/test_upstream_charts.py); the NFD copies the
parent fixtures vendor stay ours."""

from __future__ import annotations

import base64
import functools
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
CHARTS = REPO / "tests" / "fixtures" / "charts"
GPU_OP = {v: CHARTS / "gpu-operator" / v for v in ("v26.3.1", "v26.7.0")}
# The NFD subchart the gpu-operator v26.7.0 fixture vendors (0.19.0): the reference the other vendored copies are
# checked against (issue 27 §6: the NFD chart the nfd role installs is upstream's, not a fixture).
NFD = GPU_OP["v26.7.0"] / "charts" / "node-feature-discovery"
AMD = CHARTS / "amd-gpu-operator" / "v1.5.1"
HEADER = "gpuops.platform test fixture; mirrors the interface of"
# (driver, driver-manager, toolkit, device-plugin, dcgm-exporter, mig-manager) per upstream values.yaml
VERSIONS = {
    "v26.3.1": ("580.126.20", "v0.10.0", "v1.19.0", "v0.19.0", "4.5.1-4.8.0-distroless", "v0.14.0"),
    "v26.7.0": ("595.91.07", "v0.12.0", "v1.20.0", "v0.20.0", "4.6.0-4.8.3-distroless", "v0.15.0"),
}
KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]


def _own_charts() -> list[Path]:
    """Every chart version directory, not the vendored subcharts under charts/."""
    return sorted(p.parent for p in CHARTS.glob("**/Chart.yaml") if "charts" not in p.relative_to(CHARTS).parts[:-1])


def _helm() -> str:
    try:
        from gpuops_lab.config import LabConfig

        path = LabConfig.load().binary("helm")
        if path.exists():
            return str(path)
    except Exception:  # noqa: BLE001 - fall back to PATH when the lab config is not usable
        pass
    found = shutil.which("helm")
    assert found, "helm not found (run hack/cluster/build.sh or put .venv/bin on PATH)"
    return found


@functools.cache
def _template(chart: Path, values: str = "{}", release: str = "rel") -> subprocess.CompletedProcess[str]:
    """helm template with values given as JSON (hashable, so renders are cached across tests)."""
    return subprocess.run(
        [_helm(), "template", release, str(chart), "--namespace", "ns", "--values", "-"],
        input=values,
        capture_output=True,
        text=True,
        check=False,
    )


def render(chart: Path, release: str = "rel", **values) -> list[dict]:
    r = _template(chart, json.dumps(values, sort_keys=True), release)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def render_error(chart: Path, **values) -> str:
    r = _template(chart, json.dumps(values, sort_keys=True))
    assert r.returncode != 0, "expected the chart to refuse these values"
    return r.stderr


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind}/{name}: {[d['metadata']['name'] for d in found]}"
    return found[0]


def crd_schema(path: Path) -> dict:
    return yaml.safe_load(path.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def schema_errors(obj, schema: dict, path: str = "") -> list[str]:
    """What a structural CRD schema rejects in obj (unknown fields, type, enum, required, pattern, bounds)."""
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(obj, int | str) and not isinstance(obj, bool)
        return [] if ok else [f"{path}: not int-or-string"]
    errors: list[str] = []
    kind = schema.get("type")
    expect = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int}.get(kind)
    if expect and (not isinstance(obj, expect) or (kind == "integer" and isinstance(obj, bool))):
        return [f"{path}: expected {kind}, got {type(obj).__name__}"]
    if "enum" in schema and obj not in schema["enum"]:
        errors.append(f"{path}: {obj!r} not in {schema['enum']}")
    if "pattern" in schema and isinstance(obj, str) and not re.search(schema["pattern"], obj):
        errors.append(f"{path}: {obj!r} does not match {schema['pattern']}")
    size = len(obj) if isinstance(obj, str | list) else obj if isinstance(obj, int | float) else None
    low, high = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems")}.get(
        kind, ("minimum", "maximum")
    )
    if size is not None and low in schema and size < schema[low]:
        errors.append(f"{path}: {obj!r} below {low} {schema[low]}")
    if size is not None and high in schema and size > schema[high]:
        errors.append(f"{path}: {obj!r} above {high} {schema[high]}")
    if kind == "array":
        for i, item in enumerate(obj):
            errors += schema_errors(item, schema.get("items", {}), f"{path}[{i}]")
    if kind == "object" and path != ".metadata":
        props = schema.get("properties", {})
        errors += [f"{path}: missing {k}" for k in schema.get("required", []) if k not in obj]
        for key, value in obj.items():
            if key in props:
                errors += schema_errors(value, props[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += schema_errors(value, schema["additionalProperties"], f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{path}.{key}: unknown field")
    return errors


def schema_paths(schema: dict, path: str = "") -> set[str]:
    out = {path}
    for key, sub in schema.get("properties", {}).items():
        out |= schema_paths(sub, f"{path}.{key}")
    if "items" in schema:
        out |= schema_paths(schema["items"], f"{path}[]")
    return out


# ---------------------------------------------------------------------------------------------- layout and lint


def test_chart_versions_present():
    names = {(yaml.safe_load((c / "Chart.yaml").read_text())["name"], c.name) for c in _own_charts()}
    assert {
        ("gpu-operator", "v26.3.1"),
        ("gpu-operator", "v26.7.0"),
        ("gpu-operator-charts", "v1.5.1"),
    } <= names


@pytest.mark.parametrize("chart", _own_charts(), ids=lambda p: str(p.relative_to(CHARTS)))
def test_helm_lint(chart):
    r = subprocess.run([_helm(), "lint", str(chart)], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and "0 chart(s) failed" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("chart", _own_charts(), ids=lambda p: str(p.relative_to(CHARTS)))
def test_chart_version_matches_directory(chart):
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    if chart.parent != CHARTS:  # <chart>/<version>/ layout
        # appVersion as upstream spells it: the same, or with a v (network-operator 26.4.1 has v26.4.1)
        assert meta["version"] == chart.name and meta["appVersion"] in (chart.name, f"v{chart.name}")


def test_files_follow_the_fixture_rules():
    for path in CHARTS.rglob("*"):
        if not path.is_file():
            continue
        text = path.read_text()
        assert "copyright" not in text.lower(), path
        rel = path.relative_to(CHARTS)
        if "templates" in rel.parts:
            assert path.suffix == ".tpl", f"{rel}: templates must use .tpl"
        elif path.name == "values.schema.json":  # JSON has no comments: the header is its "$comment"
            assert HEADER in json.loads(text)["$comment"], f"{rel}: header missing from $comment"
        else:
            assert path.suffix in (".yaml", ".tpl"), rel
        assert HEADER in text, f"{rel}: header comment missing"
        if "crds" in rel.parts:
            assert len([d for d in yaml.safe_load_all(text) if d]) == 1, f"{rel}: one CRD per file"


# The NFD version each parent depends on upstream (its Chart.yaml at the tag): gpu-operator v26.3.1 and ROCm v1.5.1
# depend on 0.18.3, gpu-operator v26.7.0 on 0.19.0.
VENDORED_NFD = {
    GPU_OP["v26.3.1"]: "0.18.3",
    GPU_OP["v26.7.0"]: "0.19.0",
    AMD: "0.18.3",
    # upstream vendors its own NFD build (0.2.1, repository ''); the fixture copies our NFD subchart at 0.19.0
    CHARTS / "network-operator" / "26.4.1": "0.19.0",
}


def nfd_fixture_as(version: str) -> dict[str, str]:
    """The NFD subchart fixture's files (relative path -> text) as a copy mirroring NFD `version`. 0.18.3 differs
    from 0.19.0 (deployment/helm/node-feature-discovery at v0.18.3 vs v0.19.0), for what the fixture mirrors, only
    in its version and its default featureGates ({NodeFeatureGroupAPI: false}; 0.19.0: {}): the same CRDs, and the
    same values keys for what the roles and the parent charts set (enable flags, tolerations, worker/master config,
    gc). 0.19.0 adds keys none of them sets (hostUsers, initContainers, networkPolicy, checksumValuesOnly,
    worker.ownerRefs) and a values.schema.json, which the fixture does not carry. The copies keep
    global.imagePullSecrets: [] in values.yaml (0.18.3 has no global key there; its templates read
    global.imagePullSecrets the same way)."""
    files = {p.relative_to(NFD).as_posix(): p.read_text() for p in sorted(NFD.rglob("*")) if p.is_file()}
    if version == "0.19.0":
        return files
    files = {rel: text.replace("0.19.0", version) for rel, text in files.items()}
    assert "featureGates: {}\n" in files["values.yaml"]
    files["values.yaml"] = files["values.yaml"].replace(
        "featureGates: {}\n", "featureGates:\n  NodeFeatureGroupAPI: false\n"
    )
    return files


@pytest.mark.parametrize("parent", VENDORED_NFD, ids=lambda p: str(p.relative_to(CHARTS)))
def test_vendored_nfd_is_the_nfd_fixture(parent):
    """charts/node-feature-discovery is the NFD subchart fixture, as the NFD version the parent depends on upstream."""
    vendored = parent / "charts" / "node-feature-discovery"
    copy = {p.relative_to(vendored).as_posix(): p.read_text() for p in sorted(vendored.rglob("*")) if p.is_file()}
    assert copy == nfd_fixture_as(VENDORED_NFD[parent]), f"re-copy {vendored} from nfd_fixture_as()"
    (dep,) = [
        d
        for d in yaml.safe_load((parent / "Chart.yaml").read_text())["dependencies"]
        if d["name"] == "node-feature-discovery"
    ]
    assert dep["version"].lstrip("v") == VENDORED_NFD[parent]


# ---------------------------------------------------------------------------------------------- gpu-operator


@pytest.mark.parametrize("version", GPU_OP)
def test_gpu_operator_defaults(version):
    docs = render(GPU_OP[version])
    driver, manager, toolkit, plugin, exporter, mig_manager = VERSIONS[version]
    cp = one(docs, "ClusterPolicy", "cluster-policy")
    assert cp["apiVersion"] == "nvidia.com/v1"
    spec = cp["spec"]
    assert spec["mig"] == {"strategy": "single"}
    assert spec["driver"]["enabled"] is True and spec["driver"]["version"] == driver
    assert spec["driver"]["kernelModuleType"] == "auto" and spec["driver"]["manager"]["version"] == manager
    assert spec["driver"]["rdma"] == {"enabled": False, "useHostMofed": False}
    assert spec["driver"]["upgradePolicy"]["podDeletion"] == {
        "force": False,
        "timeoutSeconds": 300,
        "deleteEmptyDir": False,
    }
    assert "gpuPodDeletion" not in spec["driver"]["upgradePolicy"]
    assert spec["driver"]["upgradePolicy"]["autoUpgrade"] is True
    assert spec["driver"]["licensingConfig"] == {"secretName": "", "nlsEnabled": True}
    assert spec["toolkit"]["version"] == toolkit and spec["devicePlugin"]["version"] == plugin
    assert "config" not in spec["devicePlugin"]
    assert spec["dcgmExporter"]["version"] == exporter and spec["migManager"]["version"] == mig_manager
    assert spec["migManager"]["config"] == {"default": "all-disabled"}
    assert spec["dcgmExporter"]["serviceMonitor"]["enabled"] is (version == "v26.7.0")
    assert spec["daemonsets"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert spec["daemonsets"]["priorityClassName"] == "system-node-critical"
    assert spec["validator"]["version"] == version and spec["validator"]["plugin"] == {"env": []}
    assert spec["cdi"] == {"enabled": True} and spec["psa"] == {"enabled": False}
    assert spec["nodeStatusExporter"] == {
        "enabled": False,
        "repository": "nvcr.io/nvidia",
        "image": "gpu-operator",
        "imagePullPolicy": "IfNotPresent",
        "version": version,
    }
    assert one(docs, "ConfigMap", "node-feature-discovery-worker-conf")  # and no other ConfigMap, no NVIDIADriver
    assert [d["metadata"]["name"] for d in docs if d["kind"] in ("ConfigMap", "NVIDIADriver")] == [
        "node-feature-discovery-master-conf",
        "node-feature-discovery-worker-conf",
    ]

    operator = one(docs, "Deployment", "gpu-operator")
    pod = operator["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == f"nvcr.io/nvidia/gpu-operator:{version}"
    assert pod["serviceAccountName"] == "gpu-operator" and one(docs, "ServiceAccount", "gpu-operator")
    assert pod["tolerations"][0]["key"] == "node-role.kubernetes.io/control-plane"
    assert ("nodeSelector" in pod) is (version == "v26.7.0")

    worker = one(docs, "ConfigMap", "node-feature-discovery-worker-conf")
    pci = yaml.safe_load(worker["data"]["nfd-worker.conf"])["sources"]["pci"]
    assert pci == {"deviceClassWhitelist": ["02", "0200", "0207", "0300", "0302"], "deviceLabelFields": ["vendor"]}
    master = one(docs, "ConfigMap", "node-feature-discovery-master-conf")
    assert yaml.safe_load(master["data"]["nfd-master.conf"]) == {"extraLabelNs": ["nvidia.com"]}
    for name in ("node-feature-discovery-master", "node-feature-discovery-gc"):
        assert one(docs, "Deployment", name)["spec"]["template"]["spec"]["priorityClassName"] == "system-node-critical"
    gc_pod = one(docs, "Deployment", "node-feature-discovery-gc")["spec"]["template"]["spec"]
    assert gc_pod["serviceAccountName"] == "node-feature-discovery"
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"} == {
        "node-feature-discovery",
        "gpu-operator",
    }


@pytest.mark.parametrize("version", GPU_OP)
def test_gpu_operator_representative_values(version):
    docs = render(
        GPU_OP[version],
        mig={"strategy": "mixed"},
        driver={"enabled": False, "kernelModuleType": "open", "upgradePolicy": {"gpuPodDeletion": {"force": True}}},
        devicePlugin={"config": {"name": "time-slicing", "default": "any"}},
        migManager={"config": {"name": "custom-mig", "default": ""}},
        operator={"tolerations": KWOK, "imagePullSecrets": ["ngc"], "version": "v9.9.9"},
        daemonsets={"tolerations": KWOK},
        nfd={"enabled": False},
    )
    spec = one(docs, "ClusterPolicy")["spec"]
    assert spec["mig"]["strategy"] == "mixed"
    assert spec["driver"]["enabled"] is False and spec["driver"]["kernelModuleType"] == "open"
    assert spec["driver"]["upgradePolicy"]["podDeletion"]["force"] is True
    assert spec["devicePlugin"]["config"] == {"name": "time-slicing", "default": "any"}
    assert spec["migManager"]["config"] == {"name": "custom-mig", "default": ""}
    assert spec["daemonsets"]["tolerations"] == KWOK
    pod = one(docs, "Deployment", "gpu-operator")["spec"]["template"]["spec"]
    assert pod["tolerations"] == KWOK and pod["imagePullSecrets"] == [{"name": "ngc"}]
    assert pod["containers"][0]["image"] == "nvcr.io/nvidia/gpu-operator:v9.9.9"
    assert spec["validator"]["version"] == version  # the validator follows the chart, not operator.version
    assert not [d for d in docs if "node-feature-discovery" in d["metadata"]["name"]]  # nfd.enabled=false
    assert (
        schema_errors(one(docs, "ClusterPolicy"), crd_schema(GPU_OP[version] / "crds/nvidia.com_clusterpolicies.yaml"))
        == []
    )


@pytest.mark.parametrize("version", GPU_OP)
def test_gpu_operator_creates_config_maps(version):
    data = {"default": "version: v1\nflags:\n  migStrategy: none\n"}
    docs = render(
        GPU_OP[version],
        devicePlugin={"config": {"create": True, "name": "plugin-cfg", "default": "default", "data": data}},
        migManager={"config": {"create": True, "name": "mig-cfg", "data": {"config.yaml": "version: v1\n"}}},
        dcgmExporter={"config": {"create": True, "name": "metrics", "data": "DCGM_FI_DEV_GPU_UTIL, gauge, util\n"}},
    )
    assert one(docs, "ConfigMap", "plugin-cfg")["data"] == data
    assert one(docs, "ConfigMap", "mig-cfg")["data"] == {"config.yaml": "version: v1\n"}
    assert one(docs, "ConfigMap", "metrics")["data"]["dcgm-metrics.csv"].startswith("DCGM_FI_DEV_GPU_UTIL")
    spec = one(docs, "ClusterPolicy")["spec"]
    assert spec["dcgmExporter"]["config"] == {"name": "metrics"}
    assert spec["devicePlugin"]["config"] == {"name": "plugin-cfg", "default": "default"}


@pytest.mark.parametrize("version", GPU_OP)
def test_gpu_operator_renders_valid_cluster_policies(version):
    schema = crd_schema(GPU_OP[version] / "crds/nvidia.com_clusterpolicies.yaml")
    for values in (
        {},
        {"driver": {"nvidiaDriverCRD": {"enabled": True}}},
        {"sandboxWorkloads": {"enabled": True, "defaultWorkload": "vm-passthrough"}, "vgpuManager": {"enabled": True}},
        {"driver": {"rdma": {"enabled": True, "useHostMofed": True}, "env": [{"name": "A", "value": "1"}]}},
        {"cdi": {"enabled": True, "nriPluginEnabled": True}, "psa": {"enabled": True}, "gds": {"enabled": True}},
    ):
        cp = one(render(GPU_OP[version], **values), "ClusterPolicy")
        assert schema_errors(cp, schema) == [], values


@pytest.mark.parametrize("version", GPU_OP)
def test_gpu_operator_nvidia_driver_crd_mode(version):
    docs = render(GPU_OP[version], driver={"nvidiaDriverCRD": {"enabled": True}})
    nvd = one(docs, "NVIDIADriver", "default")
    assert nvd["spec"]["driverType"] == "gpu" and nvd["spec"]["version"] == VERSIONS[version][0]
    assert ("default" in nvd["spec"]) is (version == "v26.7.0")
    assert schema_errors(nvd, crd_schema(GPU_OP[version] / "crds/nvidia.com_nvidiadrivers.yaml")) == []
    driver = one(docs, "ClusterPolicy")["spec"]["driver"]
    assert driver["useNvidiaDriverCRD"] is True
    assert ("version" in driver) is (version == "v26.3.1")  # v26.7.0 leaves the driver fields to the NVIDIADriver


@pytest.mark.parametrize("version", GPU_OP)
def test_gpu_operator_node_feature_rules(version):
    docs = render(GPU_OP[version], nfd={"nodefeaturerules": True})
    rule = one(docs, "NodeFeatureRule", "nvidia-kernel-modules")
    assert [r["labels"] for r in rule["spec"]["rules"]] == [
        {"nvidia.com/gdrcopy.capable": "true"},
        {"nvidia.com/gds.capable": "true"},
        {"nvidia.com/peermem.capable": "true"},
    ]
    assert schema_errors(rule, crd_schema(NFD / "crds/nodefeaturerules.yaml")) == []


def test_gpu_operator_v26_7_0_deploy_cr_switch():
    assert not [d for d in render(GPU_OP["v26.7.0"], clusterPolicy={"deployCR": False}) if d["kind"] == "ClusterPolicy"]
    err = render_error(GPU_OP["v26.7.0"], gpuCluster={"deployCR": True})
    assert "clusterPolicy.deployCR and gpuCluster.deployCR cannot both be true; only one CR can exist" in err
    err = render_error(GPU_OP["v26.7.0"], clusterPolicy={"deployCR": False}, gpuCluster={"deployCR": True})
    assert "the NVIDIADriver CRD must be enabled when deploying a GPUCluster CR" in err


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"create": True, "name": "cfg"}, "devicePlugin.config.data cannot be empty when devicePlugin.config.create"),
        (
            {"create": True, "data": {"a": "b"}},
            "devicePlugin.config.name cannot be empty when devicePlugin.config.create",
        ),
    ],
)
def test_gpu_operator_v26_7_0_device_plugin_config_validation(config, message):
    assert message in render_error(GPU_OP["v26.7.0"], devicePlugin={"config": config})


def test_gpu_operator_v26_3_1_has_no_device_plugin_config_validation():
    """Upstream added these checks in v26.7.0; v26.3.1 renders (and skips the ConfigMap without data)."""
    docs = render(GPU_OP["v26.3.1"], devicePlugin={"config": {"create": True, "name": "cfg"}})
    assert not [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "cfg"]


@pytest.mark.parametrize("version", GPU_OP)
def test_gpu_operator_nri_needs_cdi(version):
    err = render_error(GPU_OP[version], cdi={"enabled": False, "nriPluginEnabled": True})
    assert "the NRI Plugin cannot be enabled when CDI is disabled" in err


def test_gpu_operator_crd_difference_between_versions():
    """v26.7.0 adds fields to the ClusterPolicy schema; Helm does not upgrade CRDs, so the v26.7.0 chart's default
    ClusterPolicy does not fit the v26.3.1 CRD until the new CRDs are applied."""
    old = crd_schema(GPU_OP["v26.3.1"] / "crds/nvidia.com_clusterpolicies.yaml")
    new = crd_schema(GPU_OP["v26.7.0"] / "crds/nvidia.com_clusterpolicies.yaml")
    added = schema_paths(new) - schema_paths(old)
    assert schema_paths(old) <= schema_paths(new)
    assert {p for p in added if not p.startswith(".spec.operator.metrics.")} == {
        ".spec.hostPaths.kubeletRootDir",
        ".spec.operator.metrics",
        ".spec.dcgmExporter.annotations",
        ".spec.dcgmExporter.enablePodLabels",
        ".spec.dcgmExporter.enablePodUID",
        ".spec.dcgmExporter.podLabelAllowlistRegex",
        ".spec.dcgmExporter.podLabelAllowlistRegex[]",
        ".spec.dcgmExporter.serviceMonitor.scrapeTimeout",
    }
    cp = one(render(GPU_OP["v26.7.0"]), "ClusterPolicy")
    assert schema_errors(cp, old) == [".spec.dcgmExporter.serviceMonitor.scrapeTimeout: unknown field"]
    assert schema_errors(cp, new) == []
    old_nvd = crd_schema(GPU_OP["v26.3.1"] / "crds/nvidia.com_nvidiadrivers.yaml")
    new_nvd = crd_schema(GPU_OP["v26.7.0"] / "crds/nvidia.com_nvidiadrivers.yaml")
    assert ".spec.default" in schema_paths(new_nvd) - schema_paths(old_nvd)
    assert ".spec.upgradePolicy.podDeletion" in schema_paths(new_nvd) - schema_paths(old_nvd)


@pytest.mark.parametrize("version", GPU_OP)
def test_cluster_policy_crd_shape(version):
    crd = yaml.safe_load((GPU_OP[version] / "crds/nvidia.com_clusterpolicies.yaml").read_text())
    assert crd["metadata"]["name"] == "clusterpolicies.nvidia.com" and crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["kind"] == "ClusterPolicy" and crd["spec"]["group"] == "nvidia.com"
    (v1,) = crd["spec"]["versions"]
    assert v1["name"] == "v1" and v1["subresources"] == {"status": {}}
    assert v1["additionalPrinterColumns"][0] == {"jsonPath": ".status.state", "name": "Status", "type": "string"}
    schema = v1["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    assert spec["required"] == [
        "daemonsets",
        "dcgm",
        "dcgmExporter",
        "devicePlugin",
        "driver",
        "gfd",
        "nodeStatusExporter",
        "operator",
        "toolkit",
    ]
    props = spec["properties"]
    assert props["mig"]["properties"]["strategy"]["enum"] == ["none", "single", "mixed"]
    assert props["driver"]["properties"]["kernelModuleType"]["enum"] == ["auto", "open", "proprietary"]
    assert props["migManager"]["properties"]["config"]["properties"]["default"]["enum"] == ["all-disabled", ""]
    assert schema["properties"]["status"]["properties"]["state"]["enum"] == ["ignored", "ready", "notReady"]
    assert "x-kubernetes-preserve-unknown-fields" not in json.dumps(schema)
    bad = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {}, "spec": {"mig": {"strategy": "all"}}}
    errors = schema_errors(bad, schema)
    assert (
        ".spec.mig.strategy: 'all' not in ['none', 'single', 'mixed']" in errors and ".spec: missing driver" in errors
    )


# ---------------------------------------------------------------------------------------------- AMD gpu-operator


def test_amd_defaults():
    docs = render(AMD, release="amd-gpu-operator")
    dc = one(docs, "DeviceConfig", "default")
    assert dc["apiVersion"] == "amd.com/v1alpha1"
    assert dc["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    spec = dc["spec"]
    assert spec["selector"] == {"feature.node.kubernetes.io/amd-gpu": "true"}
    assert spec["driver"]["enable"] is False and spec["driver"]["version"] == "30.20.1"
    assert spec["driver"]["blacklist"] is False
    assert spec["devicePlugin"]["enableDevicePlugin"] is True and spec["devicePlugin"]["enableNodeLabeller"] is True
    assert spec["devicePlugin"]["devicePluginImage"] == "rocm/k8s-device-plugin:latest"
    assert spec["metricsExporter"]["enable"] is True and spec["metricsExporter"]["port"] == 5000
    assert spec["metricsExporter"]["prometheus"]["serviceMonitor"]["enable"] is False
    assert schema_errors(dc, crd_schema(AMD / "crds/deviceconfig-crd.yaml")) == []
    rule = one(docs, "NodeFeatureRule", "amd-gpu-label-nfd-rule")
    assert {"feature.node.kubernetes.io/amd-gpu": "true"} in [r["labels"] for r in rule["spec"]["rules"]]
    assert schema_errors(rule, crd_schema(NFD / "crds/nodefeaturerules.yaml")) == []
    manager = one(docs, "Deployment", "amd-gpu-operator-gpu-operator-charts-controller-manager")
    assert manager["spec"]["template"]["spec"]["containers"][0]["image"] == "docker.io/rocm/amd-gpu-operator:v1.5.1"
    worker = one(docs, "DaemonSet", "node-feature-discovery-worker")["spec"]["template"]["spec"]
    assert [t["key"] for t in worker["tolerations"]] == ["amd-dcm", "amd-gpu-unhealthy"]


def test_amd_representative_values():
    docs = render(
        AMD,
        release="amd-gpu-operator",
        installdefaultNFDRule=False,
        controllerManager={"manager": {"tolerations": KWOK}},
        deviceConfig={
            "spec": {
                "driver": {"enable": True, "version": "6.4", "blacklist": True},
                "devicePlugin": {"enableNodeLabeller": False, "devicePluginTolerations": KWOK},
                "metricsExporter": {
                    "serviceType": "NodePort",
                    "port": 5001,
                    "prometheus": {"serviceMonitor": {"enable": True}},
                },
            }
        },
        **{"node-feature-discovery": {"enabled": False}},
    )
    spec = one(docs, "DeviceConfig")["spec"]
    assert (
        spec["driver"]["enable"] is True and spec["driver"]["version"] == "6.4" and spec["driver"]["blacklist"] is True
    )
    assert (
        spec["devicePlugin"]["enableNodeLabeller"] is False and spec["devicePlugin"]["devicePluginTolerations"] == KWOK
    )
    assert spec["metricsExporter"]["serviceType"] == "NodePort" and spec["metricsExporter"]["port"] == 5001
    assert schema_errors(one(docs, "DeviceConfig"), crd_schema(AMD / "crds/deviceconfig-crd.yaml")) == []
    pod = one(docs, "Deployment", "amd-gpu-operator-gpu-operator-charts-controller-manager")["spec"]["template"]["spec"]
    assert pod["tolerations"][0]["key"] == "amd-gpu-unhealthy" and pod["tolerations"][1:] == KWOK
    assert not [d for d in docs if d["kind"] == "NodeFeatureRule" or "node-feature-discovery" in d["metadata"]["name"]]
    assert not [d for d in render(AMD, crds={"defaultCR": {"install": False}}) if d["kind"] == "DeviceConfig"]


def test_amd_subcharts_kmm_and_workflow_controller():
    """Upstream's kmm subchart (CRDs, controller and webhook Deployments with their own tolerations keys) and the
    remediation workflow controller (Argo CRDs; tolerations fixed in the template) are part of the fixture."""
    crds = sorted(p.relative_to(AMD).as_posix() for p in AMD.glob("charts/*/crds/*.yaml"))
    assert [c for c in crds if "node-feature-discovery" not in c] == [
        "charts/kmm/crds/module-crd.yaml",
        "charts/kmm/crds/nodemodulesconfig-crd.yaml",
        "charts/remediation-crds/crds/workflow-crd.yaml",
        "charts/remediation-crds/crds/workflowtemplate-crd.yaml",
    ]
    docs = render(
        AMD,
        release="amd-gpu-operator",
        kmm={
            "controller": {"manager": {"tolerations": KWOK}},
            "webhookServer": {"webhookServer": {"tolerations": KWOK}},
        },
    )
    for name in ("amd-gpu-operator-kmm-controller", "amd-gpu-operator-kmm-webhook-server"):
        pod = one(docs, "Deployment", name)["spec"]["template"]["spec"]
        assert pod["tolerations"][1:] == KWOK, name
    workflow = one(docs, "Deployment", "amd-gpu-operator-workflow-controller")["spec"]["template"]["spec"]
    assert workflow["tolerations"] == [{"key": "amd-gpu-unhealthy", "operator": "Exists", "effect": "NoSchedule"}]
    names = {d["metadata"]["name"] for d in render(AMD, kmm={"enabled": False}, remediation={"enabled": False})}
    assert not names & {"rel-kmm-controller", "rel-kmm-webhook-server", "amd-gpu-operator-workflow-controller"}


def test_amd_crd_shape():
    crd = yaml.safe_load((AMD / "crds/deviceconfig-crd.yaml").read_text())
    assert crd["metadata"]["name"] == "deviceconfigs.amd.com" and crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert (crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"]) == (
        "amd.com",
        "v1alpha1",
        "DeviceConfig",
    )
    assert version["subresources"] == {"status": {}}
    assert "x-kubernetes-preserve-unknown-fields" not in json.dumps(version)
    bad = {"spec": {"metricsExporter": {"serviceType": "LoadBalancer"}, "driver": {"enabel": True}}}
    assert sorted(schema_errors(bad, version["schema"]["openAPIV3Schema"])) == [
        ".spec.driver.enabel: unknown field",
        ".spec.metricsExporter.serviceType: 'LoadBalancer' not in ['ClusterIP', 'NodePort']",
    ]


# ---------------------------------------------------------------------------------------------- node-feature-discovery


def test_nfd_defaults_and_values():
    docs = render(NFD, release="nfd")
    assert {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] in ("Deployment", "DaemonSet")} == {
        ("Deployment", "node-feature-discovery-master"),
        ("Deployment", "node-feature-discovery-gc"),
        ("DaemonSet", "node-feature-discovery-worker"),
    }
    gc = one(docs, "Deployment", "node-feature-discovery-gc")["spec"]["template"]["spec"]
    assert (
        gc["containers"][0]["args"] == ["-gc-interval=1h"] and gc["serviceAccountName"] == "node-feature-discovery-gc"
    )
    docs = render(
        NFD,
        featureGates={"NodeFeatureGroupAPI": True},
        gc={"enable": False},
        master={"tolerations": KWOK, "config": {"extraLabelNs": ["nvidia.com"]}},
        worker={"tolerations": KWOK},
    )
    assert not [d for d in docs if d["metadata"]["name"].endswith("-gc")]
    master = one(docs, "Deployment", "node-feature-discovery-master")["spec"]["template"]["spec"]
    assert master["tolerations"] == KWOK
    assert "-feature-gates=NodeFeatureGroupAPI=true" in master["containers"][0]["args"]
    conf = one(docs, "ConfigMap", "node-feature-discovery-master-conf")["data"]["nfd-master.conf"]
    assert yaml.safe_load(conf) == {"extraLabelNs": ["nvidia.com"]}


def test_nfd_crds():
    scopes = {}
    for path in sorted((NFD / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        scopes[crd["spec"]["names"]["kind"]] = (
            crd["spec"]["group"],
            crd["spec"]["versions"][0]["name"],
            crd["spec"]["scope"],
        )
    assert scopes == {
        "NodeFeature": ("nfd.k8s-sigs.io", "v1alpha1", "Namespaced"),
        "NodeFeatureGroup": ("nfd.k8s-sigs.io", "v1alpha1", "Namespaced"),
        "NodeFeatureRule": ("nfd.k8s-sigs.io", "v1alpha1", "Cluster"),
    }
    group = {
        "spec": {
            "featureGroupRules": [
                {
                    "name": "gpus",
                    "matchFeatures": [{"feature": "pci.device", "matchExpressions": {"vendor": {"op": "Any"}}}],
                }
            ]
        }
    }
    assert schema_errors(group, crd_schema(NFD / "crds/nodefeaturegroups.yaml")) == [
        ".spec.featureGroupRules[0].matchFeatures[0].matchExpressions.vendor.op: 'Any' not in ['In', 'NotIn', "
        "'InRegexp', 'Exists', 'DoesNotExist', 'Gt', 'Ge', 'Lt', 'Le', 'GtLt', 'GeLe', 'IsTrue', 'IsFalse']"
    ]


KAI = CHARTS / "kai-scheduler"


def test_kai_scheduler_renders_the_role_values_and_queues_fit_the_crd():
    from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kai

    built = _kai.build(
        {
            "kai_scheduler_queues": [
                {"name": "ml", "resources": {"gpu": {"quota": 8}, "cpu": {"quota": "64"}, "memory": {"quota": -1}}},
                {"name": "research", "parent": "ml", "priority": 50, "resources": {"gpu": {"quota": 0.5}}},
            ],
            "kai_scheduler_gpu_sharing": True,
        },
        [],
    )
    docs = render(KAI, release="kai-scheduler", **built["chart_values"])
    op = one(docs, "Deployment", "kai-operator")["spec"]["template"]
    assert op["spec"]["containers"][0]["image"] == "ghcr.io/kai-scheduler/kai-scheduler/operator:v0.17.0"
    assert op["metadata"]["annotations"]["gpuops.io/gpu-sharing"] == "true"
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"] == "Queue") == [
        "default-parent-queue",
        "default-queue",
    ]
    schema = crd_schema(KAI / "crds/scheduling.run.ai_queues.yaml")
    for obj in [*built["queues"], *(d for d in docs if d["kind"] == "Queue")]:
        assert schema_errors(obj, schema) == [], obj["metadata"]["name"]
    assert [d for d in render(KAI, defaultQueue={"createDefaultQueue": False}) if d["kind"] == "Queue"] == []


# ---------------------------------------------------------------------------------------------- network-operator
NETOP = CHARTS / "network-operator" / "26.4.1"


def _sriov_config_crd() -> Path:
    """The SriovOperatorConfig CRD of upstream's SR-IOV chart, which the lab serves from its build cache (issue 27 §6:
    the standalone chart is upstream's, not a fixture); a missing chart fails, never skips."""
    from gpuops_lab import sriov

    path = sriov.chart_dir() / "crds" / "sriovnetwork.openshift.io_sriovoperatorconfigs.yaml"
    if not path.is_file():
        pytest.fail(f"no upstream SR-IOV chart in the build cache ({path}): run `make build` (build.sh sriov-chart)")
    return path


def test_network_operator_bundled_sriov_renders_its_own_operator_config_unless_the_role_turns_it_off():
    """Upstream's network-operator 26.4.1 sets sriov-network-operator.sriovOperatorConfig.deploy: true, so the
    bundled SR-IOV operator comes with a chart-rendered SriovOperatorConfig "default", the object the
    sriov_network_operator role applies too (two owners; the next helm upgrade fails on .spec.logLevel). The role's
    values (plugins/module_utils/network/_network.py chart_values) turn the chart's copy off."""
    from ansible_collections.gpuops.platform.plugins.module_utils.network import _network

    docs = render(NETOP, sriovNetworkOperator={"enabled": True})
    config = one(docs, "SriovOperatorConfig", "default")
    assert config["metadata"]["namespace"] == "ns"
    assert config["spec"]["configDaemonNodeSelector"] == {
        "beta.kubernetes.io/os": "linux",
        "network.nvidia.com/operator.mofed.wait": "false",
    }
    assert schema_errors(config, crd_schema(_sriov_config_crd())) == []
    role = _network.chart_values({"mode": "sriov"})
    assert not [d for d in render(NETOP, **role) if d["kind"] == "SriovOperatorConfig"]
    one(render(NETOP, **role), "Deployment", "sriov-network-operator")  # the bundled operator itself still runs


# ---------------------------------------------------------------------------------------------- kube-prometheus-stack
KPS = CHARTS / "kube-prometheus-stack"


def _grafana_admin_refs(docs: list[dict]) -> set[tuple[str, str]]:
    dep = one(docs, "Deployment", "rel-grafana")
    (grafana,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "grafana"]
    return {(e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"]) for e in grafana["env"]}


def test_kube_prometheus_stack_grafana_admin_from_the_role_secret_not_the_values():
    """Upstream's default: the chart writes <release>-grafana from grafana.adminUser/adminPassword (prom-operator),
    values anyone who reads the release sees. With the role's values (a password given) the Deployment reads the
    Secret the role writes and the chart writes none."""
    from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _monitoring

    default = render(KPS)
    assert _grafana_admin_refs(default) == {("rel-grafana", "admin-user"), ("rel-grafana", "admin-password")}
    one(default, "Secret", "rel-grafana")
    role, findings = _monitoring.chart_values(
        {
            "monitoring_mode": "install",
            "monitoring_dashboard_labels": {"g": "1"},
            "monitoring_grafana_admin_password": "x",
        }
    )
    assert findings == []
    docs = render(KPS, **role)
    assert _grafana_admin_refs(docs) == {
        ("gpuops-grafana-admin", "admin-user"),
        ("gpuops-grafana-admin", "admin-password"),
    }
    # the chart writes no Grafana Secret; the one Secret is the Alertmanager configuration, as upstream renders it
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Secret"] == [
        "alertmanager-rel-kube-prometheus-stack-alertmanager"
    ]
    assert "pw-9f3Kq" not in json.dumps(role) + json.dumps(docs)


@pytest.mark.parametrize(
    "user",
    [
        pytest.param({}, id="chart-defaults"),
        pytest.param(
            {
                "alertmanager": {
                    "config": {"route": {"routes": [{"receiver": "pager"}]}, "receivers": [{"name": "pager"}]}
                }
            },
            id="user-lists",
        ),
    ],
)
def test_kube_prometheus_stack_remediation_route_lands_in_the_rendered_config(user):
    """The role's remediation route values over the fixture chart (values merged as the role merges them: the role's
    lists outrank the user's, which they hold): the rendered Secret passes the role's landing check, with the chart's
    or the user's routes after the route, and an unchanged chart renders a Secret the check refuses."""
    from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _alertmanager, _monitoring

    variables = {
        "monitoring_mode": "install",
        "monitoring_release_name": "rel",
        "monitoring_remediation_webhook_url": "https://rulebook.example:5050/alerts",
        "monitoring_remediation_token_secret": "rb-token",
        "monitoring_values": user,
        "monitoring_dashboards": True,
        "monitoring_dashboard_labels": {"grafana_dashboard": "1"},
    }
    built = _monitoring.build(variables, [])
    assert built["findings"] == []
    name = built["alertmanager_secret"]["name"]
    values = json.loads(json.dumps(user))
    values.setdefault("alertmanager", {}).update(built["alertmanager_values"]["alertmanager"])
    secret = one(render(KPS, **values), "Secret", name)
    assert _alertmanager.route_findings(variables, secret, name) == []
    config = yaml.safe_load(base64.b64decode(secret["data"]["alertmanager.yaml"]))
    kept = "pager" if user else "null"
    assert [r["receiver"] for r in config["route"]["routes"]] == ["gpuops-remediation", kept]
    plain = one(render(KPS, **user), "Secret", name)
    assert [f["id"] for f in _alertmanager.route_findings(variables, plain, name)] == [
        "monitoring-remediation-route-not-landed"
    ]


# ------------------------------------------------------------------------------------------- never looser than upstream
# A fixture CRD mirrors only the fields we use, but where an object is written (by a role, a chart it installs, the
# lab's controllers or simulator) the fixture must reject at least what upstream rejects. Each case is an object the
# upstream CRD rejects (at the tag named in the fixture file's header) and the error the fixture must report.
KPS_CRDS = CHARTS / "kube-prometheus-stack" / "crds"
KMM_CRDS = AMD / "charts" / "kmm" / "crds"
ARGO_CRDS = AMD / "charts" / "remediation-crds" / "crds"
_ENDPOINT = {"port": "metrics"}

_AMC_ROUTE = {"receiver": "r", "matchers": [{"name": "alertname", "value": "GPU.+", "matchType": "=~"}]}
UPSTREAM_REJECTS = {
    "AlertmanagerConfig: matchType": (
        KPS_CRDS / "monitoring.coreos.com_alertmanagerconfigs.yaml",
        {"spec": {"route": {**_AMC_ROUTE, "matchers": [{"name": "alertname", "matchType": "~"}]}}},
        ".spec.route.matchers[0].matchType: '~' not in",
    ),
    "AlertmanagerConfig: unknown route field": (
        KPS_CRDS / "monitoring.coreos.com_alertmanagerconfigs.yaml",
        {"spec": {"route": {**_AMC_ROUTE, "contiune": True}}},
        ".spec.route.contiune: unknown field",
    ),
    "AlertmanagerConfig: webhook URL": (
        KPS_CRDS / "monitoring.coreos.com_alertmanagerconfigs.yaml",
        {"spec": {"receivers": [{"name": "r", "webhookConfigs": [{"url": "rulebook:5050"}]}]}},
        ".spec.receivers[0].webhookConfigs[0].url: 'rulebook:5050' does not match",
    ),
    "AlertmanagerConfig: receiver name required": (
        KPS_CRDS / "monitoring.coreos.com_alertmanagerconfigs.yaml",
        {"spec": {"receivers": [{"webhookConfigs": []}]}},
        ".spec.receivers[0]: missing name",
    ),
    "kmm Module: unknown root field": (KMM_CRDS / "module-crd.yaml", {"spec": {}, "spek": {}}, ".spek: unknown field"),
    "kmm NodeModulesConfig: unknown root field": (
        KMM_CRDS / "nodemodulesconfig-crd.yaml",
        {"spec": {}, "stauts": {}},
        ".stauts: unknown field",
    ),
    "Argo Workflow: unknown root field": (
        ARGO_CRDS / "workflow-crd.yaml",
        {"metadata": {}, "spec": {}, "spek": {}},
        ".spek: unknown field",
    ),
    "Argo Workflow: spec required": (ARGO_CRDS / "workflow-crd.yaml", {"metadata": {}}, ": missing spec"),
    "Argo WorkflowTemplate: no status": (
        ARGO_CRDS / "workflowtemplate-crd.yaml",
        {"metadata": {}, "spec": {}, "status": {}},
        ".status: unknown field",
    ),
    "Argo WorkflowTemplate: spec required": (
        ARGO_CRDS / "workflowtemplate-crd.yaml",
        {"metadata": {}},
        ": missing spec",
    ),
    "NodeFeature: unknown feature type": (
        NFD / "crds/nodefeatures.yaml",
        {"spec": {"features": {"flag": {"kernel.loadedmodule": {"elements": {}}}}}},
        ".spec.features.flag: unknown field",
    ),
    "NodeFeature: attribute feature without elements": (
        NFD / "crds/nodefeatures.yaml",
        {"spec": {"features": {"attributes": {"cpu.model": {"vendor_id": "AMD"}}}}},
        ".spec.features.attributes.cpu.model: missing elements",
    ),
    "NodeFeature: instance without attributes": (
        NFD / "crds/nodefeatures.yaml",
        {"spec": {"features": {"instances": {"pci.device": {"elements": [{"vendor": "10de"}]}}}}},
        ".spec.features.instances.pci.device.elements[0]: missing attributes",
    ),
    "Prometheus: unknown toleration field": (
        KPS_CRDS / "monitoring.coreos.com_prometheuses.yaml",
        {"spec": {"tolerations": [{"key": "k", "operator": "Exists", "efect": "NoSchedule"}]}},
        ".spec.tolerations[0].efect: unknown field",
    ),
    "Prometheus: toleration seconds are an integer": (
        KPS_CRDS / "monitoring.coreos.com_prometheuses.yaml",
        {"spec": {"tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": "60"}]}},
        ".spec.tolerations[0].tolerationSeconds: expected integer",
    ),
    "Prometheus: unknown status field": (
        KPS_CRDS / "monitoring.coreos.com_prometheuses.yaml",
        {"spec": {}, "status": {"avaliableReplicas": 1}},
        ".status.avaliableReplicas: unknown field",
    ),
    "Prometheus: status condition without type": (
        KPS_CRDS / "monitoring.coreos.com_prometheuses.yaml",
        {"spec": {}, "status": {"conditions": [{"status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        ".status.conditions[0]: missing type",
    ),
    "KAI Queue: unknown status field": (
        KAI / "crds/scheduling.run.ai_queues.yaml",
        {"spec": {}, "status": {"allocatd": {"cpu": "1"}}},
        ".status.allocatd: unknown field",
    ),
    "ServiceMonitor: endpoint scheme": (
        KPS_CRDS / "monitoring.coreos.com_servicemonitors.yaml",
        {"spec": {"selector": {}, "endpoints": [{**_ENDPOINT, "scheme": "tcp"}]}},
        ".spec.endpoints[0].scheme: 'tcp' not in",
    ),
    "ServiceMonitor: relabeling action": (
        KPS_CRDS / "monitoring.coreos.com_servicemonitors.yaml",
        {"spec": {"selector": {}, "endpoints": [{**_ENDPOINT, "relabelings": [{"action": "rename"}]}]}},
        ".spec.endpoints[0].relabelings[0].action: 'rename' not in",
    ),
    "ServiceMonitor: metric relabeling action": (
        KPS_CRDS / "monitoring.coreos.com_servicemonitors.yaml",
        {"spec": {"selector": {}, "endpoints": [{**_ENDPOINT, "metricRelabelings": [{"action": "dropall"}]}]}},
        ".spec.endpoints[0].metricRelabelings[0].action: 'dropall' not in",
    ),
    "ServiceMonitor: interval pattern": (
        KPS_CRDS / "monitoring.coreos.com_servicemonitors.yaml",
        {"spec": {"selector": {}, "endpoints": [{**_ENDPOINT, "interval": "15 s"}]}},
        ".spec.endpoints[0].interval: '15 s' does not match",
    ),
    "ServiceMonitor: endpoints required": (
        KPS_CRDS / "monitoring.coreos.com_servicemonitors.yaml",
        {"spec": {"selector": {}}},
        ".spec: missing endpoints",
    ),
    "PrometheusRule: empty group name": (
        KPS_CRDS / "monitoring.coreos.com_prometheusrules.yaml",
        {"spec": {"groups": [{"name": "", "rules": []}]}},
        ".spec.groups[0].name: '' below minLength 1",
    ),
    "PrometheusRule: for pattern": (
        KPS_CRDS / "monitoring.coreos.com_prometheusrules.yaml",
        {"spec": {"groups": [{"name": "g", "rules": [{"expr": "up", "for": "5 min"}]}]}},
        ".spec.groups[0].rules[0].for: '5 min' does not match",
    ),
    "Prometheus: retention pattern": (
        KPS_CRDS / "monitoring.coreos.com_prometheuses.yaml",
        {"spec": {"retention": "10 days"}},
        ".spec.retention: '10 days' does not match",
    ),
}


@pytest.mark.parametrize("case", UPSTREAM_REJECTS)
def test_fixture_crds_reject_what_upstream_rejects(case):
    path, obj, error = UPSTREAM_REJECTS[case]
    errors = schema_errors(obj, crd_schema(path))
    assert [e for e in errors if e.startswith(error)], errors


UPSTREAM_ACCEPTS = {
    "NodeFeature as nfd-worker and the lab's simulator publish it": (
        NFD / "crds/nodefeatures.yaml",
        {
            "spec": {
                "features": {
                    "flags": {"kernel.loadedmodule": {"elements": {"nvidia": {}}}},
                    "attributes": {"cpu.model": {"elements": {"vendor_id": "AMD"}}},
                    "instances": {"pci.device": {"elements": [{"attributes": {"class": "0302", "vendor": "10de"}}]}},
                },
                "labels": {"nvidia.com/gpu.present": "true"},
            }
        },
    ),
    "Prometheus tolerations and status": (
        KPS_CRDS / "monitoring.coreos.com_prometheuses.yaml",
        {
            "spec": {
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]
            },
            "status": {
                "availableReplicas": 1,
                "replicas": 1,
                "paused": False,
                "conditions": [{"type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            },
        },
    ),
    "KAI Queue status": (
        KAI / "crds/scheduling.run.ai_queues.yaml",
        {"spec": {}, "status": {"allocated": {"nvidia.com/gpu": 2, "cpu": "500m"}, "childQueues": ["a"]}},
    ),
    "ServiceMonitor scheme and relabelings": (
        KPS_CRDS / "monitoring.coreos.com_servicemonitors.yaml",
        {
            "spec": {
                "selector": {},
                "endpoints": [
                    {
                        **_ENDPOINT,
                        "scheme": "https",
                        "relabelings": [{"action": "labeldrop", "regex": "pod"}],
                        "metricRelabelings": [{"action": "LabelKeep", "regex": "gpu"}],
                    }
                ],
            }
        },
    ),
}


@pytest.mark.parametrize("case", UPSTREAM_ACCEPTS)
def test_fixture_crds_accept_what_upstream_accepts(case):
    """The other side: closing a path did not close it further than upstream for what is written there."""
    path, obj = UPSTREAM_ACCEPTS[case]
    assert schema_errors(obj, crd_schema(path)) == []


# Where a fixture CRD may keep unknown fields, and why: nothing writes below these paths (the role only checks the CRD
# is served, or no role or lab code writes the kind at all); upstream's schema there is closed and large.
KEEPS_UNKNOWN_FIELDS = {
    "cert-manager/crds/certificates.yaml": {".spec", ".status"},
    "cert-manager/crds/issuers.yaml": {".spec", ".status"},
    "amd-gpu-operator/v1.5.1/charts/kmm/crds/module-crd.yaml": {".spec", ".status"},
    "amd-gpu-operator/v1.5.1/charts/kmm/crds/nodemodulesconfig-crd.yaml": {".spec", ".status"},
    "amd-gpu-operator/v1.5.1/charts/remediation-crds/crds/workflow-crd.yaml": {".spec", ".status"},
    "amd-gpu-operator/v1.5.1/charts/remediation-crds/crds/workflowtemplate-crd.yaml": {".spec"},
}


def _unknown_field_paths(schema: dict, path: str = "") -> set[str]:
    out = {path} if schema.get("x-kubernetes-preserve-unknown-fields") else set()
    for key, sub in schema.get("properties", {}).items():
        out |= _unknown_field_paths(sub, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out |= _unknown_field_paths(schema[key], f"{path}[]" if key == "items" else f"{path}{{}}")
    return out


@pytest.mark.parametrize("crd", sorted(CHARTS.glob("**/crds/*.yaml")), ids=lambda p: p.relative_to(CHARTS).as_posix())
def test_fixture_crds_keep_unknown_fields_only_where_nothing_writes(crd):
    rel = crd.relative_to(CHARTS).as_posix()
    versions = yaml.safe_load(crd.read_text())["spec"]["versions"]
    found = set().union(*(_unknown_field_paths(v["schema"]["openAPIV3Schema"]) for v in versions))
    assert found <= KEEPS_UNKNOWN_FIELDS.get(rel, set()), rel


@pytest.mark.parametrize(
    "chart",
    [p / "charts" / "node-feature-discovery" for p in VENDORED_NFD],
    ids=lambda p: str(p.relative_to(CHARTS)),
)
def test_nfd_values_have_no_enable_node_feature_api(chart):
    """enableNodeFeatureApi is in neither upstream chart we mirror (0.18.3, 0.19.0): the NodeFeature API is the only
    way since 0.17, so a fixture that still accepts the key hides a role setting a value upstream ignores."""
    assert "enableNodeFeatureApi" not in yaml.safe_load((chart / "values.yaml").read_text())


def test_amd_bundles_the_nfd_version_upstream_depends_on():
    """ROCm/gpu-operator v1.5.1 helm-charts-k8s/Chart.yaml depends on node-feature-discovery v0.18.3."""
    (dep,) = [
        d
        for d in yaml.safe_load((AMD / "Chart.yaml").read_text())["dependencies"]
        if d["name"] == "node-feature-discovery"
    ]
    vendored = yaml.safe_load((AMD / "charts/node-feature-discovery/Chart.yaml").read_text())
    assert (dep["version"], vendored["version"], vendored["appVersion"]) == ("v0.18.3", "0.18.3", "v0.18.3")


def test_monitoring_objects_and_the_rendered_prometheus_fit_the_stricter_crds():
    """What the monitoring role applies (its ServiceMonitors, the DOCA telemetry one, its PrometheusRule) and the
    Prometheus the kube-prometheus-stack fixture renders with the role's values and tolerations pass the CRDs."""
    from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _monitoring

    selector = {"matchLabels": {"release": "kps"}}
    prometheus = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": "kps-prometheus", "namespace": "monitoring"},
        "spec": {
            "serviceMonitorSelector": selector,
            "serviceMonitorNamespaceSelector": {},
            "ruleSelector": selector,
            "ruleNamespaceSelector": {},
        },
    }
    variables = {
        "monitoring_mode": "attach",
        "monitoring_namespace": "monitoring",
        "monitoring_nvidia": True,
        "monitoring_nvidia_namespace": "gpu-operator",
        "monitoring_amd": True,
        "monitoring_amd_namespace": "kube-amd-gpu",
        "monitoring_network": True,
        "monitoring_scrape_interval": "15s",
        "monitoring_alert_thresholds": {},
        "monitoring_dashboards": False,
    }
    built = _monitoring.build(variables, [prometheus], {}, None, True)
    assert [f for f in built["findings"] if f["severity"] == "error"] == []
    kinds = sorted(o["kind"] for o in built["objects"] if o["apiVersion"] == "monitoring.coreos.com/v1")
    assert kinds == ["PrometheusRule", "ServiceMonitor", "ServiceMonitor", "ServiceMonitor"]
    for obj in built["objects"]:
        if obj["apiVersion"] == "monitoring.coreos.com/v1":
            path = KPS_CRDS / f"monitoring.coreos.com_{obj['kind'].lower()}s.yaml"
            assert schema_errors(obj, crd_schema(path)) == [], obj["metadata"]["name"]
    values = _monitoring.chart_values({**variables, "monitoring_mode": "install"})[0]
    docs = render(
        CHARTS / "kube-prometheus-stack", release="kps", **values, prometheus={"prometheusSpec": {"tolerations": KWOK}}
    )
    rendered = one(docs, "Prometheus")
    assert rendered["spec"]["tolerations"] == KWOK
    assert schema_errors(rendered, crd_schema(KPS_CRDS / "monitoring.coreos.com_prometheuses.yaml")) == []
