"""The dra-driver-nvidia-gpu kubelet plugin in the simulator (handlers/dra.py): a ResourceSlice per node running
the plugin's pod, one device per GPU, gone with the pod; nodes of other instances untouched."""

from __future__ import annotations

from gpuops_lab import profiles
from gpuops_lab.simulator.fakeclient import FakeKubeClient, make_pod
from gpuops_lab.simulator.framework import Simulator
from gpuops_lab.simulator.handlers import BUILTIN_HANDLERS
from gpuops_lab.simulator.handlers.dra import DRIVER, PLUGIN_LABELS, DraKubeletPluginHandler, slice_name
from gpuops_lab.simulator.handlers.nvidia import INSTANCE_LABEL

RS = ("resource.k8s.io/v1", "ResourceSlice")


def make_lab(handler: DraKubeletPluginHandler | None = None) -> tuple[FakeKubeClient, Simulator]:
    client = FakeKubeClient(cluster_scoped={RS})
    return client, Simulator(client, [handler or DraKubeletPluginHandler()])


def node(client: FakeKubeClient, name: str, profile: str, labels: dict | None = None) -> None:
    manifest = profiles.node_manifest(name, profiles.load(profile))
    manifest["metadata"]["labels"].update(labels or {})
    client.add(manifest)


def settle(sim: Simulator) -> None:
    for _round in range(3):
        sim.sync()
        sim.process_pending()


def test_slice_per_plugin_node():
    client, sim = make_lab()
    node(client, "h0", "dgx-h100")
    node(client, "l0", "pcie-l40s")
    node(client, "x0", "dgx-h100", {INSTANCE_LABEL: "other"})
    ds = client.add(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": "dra-driver-nvidia-gpu-kubelet-plugin",
                "namespace": "dra",
                "labels": {"app.kubernetes.io/name": "dra-driver-nvidia-gpu"},
            },
            "spec": {},
        }
    )
    client.add({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "other", "namespace": "dra"}})
    for n in ("h0", "x0"):
        client.add(make_pod(f"plugin-{n}", "dra", n, owner=ds, labels=PLUGIN_LABELS, containers=("gpus",)))
    settle(sim)
    assert set(k.name for k in client.objects.get(RS, {})) == {slice_name("h0")}
    rs = client.obj(*RS, slice_name("h0"))
    spec = rs["spec"]
    assert (spec["driver"], spec["nodeName"], spec["pool"]["name"]) == (DRIVER, "h0", "h0")
    assert [d["name"] for d in spec["devices"]] == [f"gpu-{i}" for i in range(8)]
    dev = spec["devices"][0]
    assert dev["attributes"]["type"] == {"string": "gpu"}
    assert dev["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert dev["attributes"]["uuid"]["string"].startswith("GPU-")
    # semver 2.0.0: the API server refuses 570.124.06
    assert dev["attributes"]["driverVersion"] == {"version": "570.124.6"}
    assert dev["capacity"]["memory"] == {"value": "81559Mi"}
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Node"
    # a deleted slice is republished
    client.delete(*RS, slice_name("h0"))
    settle(sim)
    assert client.obj(*RS, slice_name("h0")) is not None
    # the plugin pod goes (release uninstalled, node deselected): the slice goes
    client.delete("apps/v1", "DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin", "dra")  # its pods go with it
    settle(sim)
    assert client.objects.get(RS, {}) == {}


def test_registered_builtin():
    assert DraKubeletPluginHandler in BUILTIN_HANDLERS
