"""kwok configuration: the options of the lab and the default Stages shipped in kwok's Go module
(copied next to the binary by hack/cluster/build.sh), with one change: pods whose status the operator
simulator manages (annotation sim.gpuops.io/managed-status) are left alone by the pod-ready stage, so a
simulated failure (CrashLoopBackOff, stuck in Init) is not overwritten with Running/Ready; and a Job's pods annotated
sim.gpuops.io/run-until-deleted keep running (pod-complete skips them); and the pods of the programs the lab's
kubelet runs for real (kubelet.py: Kueue's controller-manager, Volcano's three, the Volcano admission-init hook Job's
pod) are left to it, which reports them Ready only while the controller runs and its readiness probe answers, and a
Job's pod Succeeded or Failed as its program ends."""

from __future__ import annotations

import yaml

from .config import LabConfig
from .errors import LabError

MANAGED_STATUS = "sim.gpuops.io/managed-status"
# A Job's pod with this annotation keeps running until it is deleted (a long training job), instead of completing at
# once (kwok's pod-complete stage): the batch tests hold quota with it.
RUN_UNTIL_DELETED = "sim.gpuops.io/run-until-deleted"
STAGES = (
    "node-initialize.yaml",
    "node-heartbeat-with-lease.yaml",
    "pod-ready.yaml",
    "pod-complete.yaml",
    "pod-delete.yaml",
)


def render(cfg: LabConfig) -> list[dict]:
    docs: list[dict] = [
        {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokConfiguration",
            "options": {
                "manageAllNodes": False,
                "manageNodesWithAnnotationSelector": "kwok.x-k8s.io/node=fake",
                "cidr": "10.244.0.0/16",
                "nodeIP": "127.0.0.1",
                "nodeLeaseDurationSeconds": 40,
                # the binary does not apply its defaults to a config file's options: set them here
                "podPlayStageParallelism": 4,
                "nodePlayStageParallelism": 4,
                "nodeLeaseParallelism": 4,
                "podsOnNodeSyncParallelism": 1,
                "enablePodsOnNodeSyncListPager": True,
                "enablePodsOnNodeSyncStreamWatch": False,
                "enableDebuggingHandlers": False,
                "enableProfilingHandler": False,
                "enableContentionProfiling": False,
            },
        }
    ]
    sdir = cfg.bindir("kwok") / "stages"
    for name in STAGES:
        path = sdir / name
        if not path.is_file():
            raise LabError(f"kwok stage {path} is missing: rebuild kwok with hack/cluster/build.sh kwok")
        stage = yaml.safe_load(path.read_text())
        if stage["metadata"]["name"] in ("pod-ready", "pod-complete"):
            exprs = stage["spec"]["selector"].setdefault("matchExpressions", [])
            exprs.append({"key": f'.metadata.annotations["{MANAGED_STATUS}"]', "operator": "DoesNotExist"})
        if stage["metadata"]["name"] in ("pod-ready", "pod-complete"):
            from .kubelet import kwok_exclusions

            for key, values in kwok_exclusions().items():
                exprs.append({"key": f'.metadata.labels["{key}"]', "operator": "NotIn", "values": values})
        if stage["metadata"]["name"] == "pod-complete":
            exprs.append({"key": f'.metadata.annotations["{RUN_UNTIL_DELETED}"]', "operator": "DoesNotExist"})
        docs.append(stage)
    return docs


def write_config(cfg: LabConfig) -> None:
    cfg.state.mkdir(parents=True, exist_ok=True)
    (cfg.state / "kwok.yaml").write_text(yaml.safe_dump_all(render(cfg), sort_keys=False))
