"""The smoke_tests role's rules (_smoke) and its filters, as tables."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.smoke_plan import smoke_plan
from ansible_collections.gpuops.platform.plugins.filter.smoke_recorded import smoke_recorded
from ansible_collections.gpuops.platform.plugins.filter.smoke_results import smoke_results
from ansible_collections.gpuops.platform.plugins.module_utils.smoke import _smoke, _smoke_phases, _smoke_results

DIGEST = "@sha256:" + "a" * 64
H100 = "NVIDIA-H100-80GB-HBM3"
L40S = "NVIDIA-L40S"


def node(name, product=None, alloc=None, simulated=False, amd=None, unschedulable=False):
    labels = {"kubernetes.io/hostname": name}
    if product:
        labels["nvidia.com/gpu.product"] = product
    if amd:
        labels["amd.com/gpu.product-name"] = amd
    meta = {"name": name, "labels": labels}
    if simulated:
        meta["annotations"] = {"kwok.x-k8s.io/node": "fake"}
    return {
        "metadata": meta,
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"allocatable": {"cpu": "64", **{k: str(v) for k, v in (alloc or {}).items()}}},
    }


def variables(**kw):
    out = {
        "smoke_tests_tests": list(_smoke.TESTS),
        "smoke_tests_namespace": "smoke",
        "smoke_tests_timeout": 120,
        "smoke_tests_tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "smoke_tests_images": {
            "cuda": "nvcr.io/nvidia/k8s/cuda-sample" + DIGEST,
            "nccl": "public.ecr.aws/hpc-cloud/nccl-tests" + DIGEST,
            "ib_write_bw": "registry.example.com/perftest" + DIGEST,
            "rocm_smi": "docker.io/rocm/rocm-terminal" + DIGEST,
        },
        "smoke_tests_registry_mirror": "",
        "smoke_tests_nccl_busbw_gbps": {H100: 350},
        "smoke_tests_ib_write_bw_gbps": {"*": 180},
        "smoke_tests_rdma_resources": [],
        "smoke_tests_kai_queue": "",
    }
    out.update(kw)
    return out


CLUSTER = [
    node("dgx-0", H100, {"nvidia.com/gpu": 8, "rdma/ib": 8}),
    node("dgx-1", H100, {"nvidia.com/gpu": 8, "rdma/ib": 8}),
    node("dgx-2", H100, {"nvidia.com/gpu": 8}),  # a third of the product: not in the pair
    node("l40s-0", L40S + "-SHARED", {"nvidia.com/gpu": 16}),
    node("mig-0", H100 + "-MIG-1g.10gb", {"nvidia.com/mig-1g.10gb": 7}),
    node("dra-0", H100, {}),
    node("mi300x-0", None, {"amd.com/gpu": 8}, amd="AMD-Instinct-MI300X"),
    node("cpu-0"),
]
MODELS = [
    {"name": "l40s-0", "sharing": {"model": "time_slicing"}},
    {"name": "mig-0", "sharing": {"model": "mig"}},
    {"name": "dra-0", "sharing": {"model": "dra"}},
    {"name": "dgx-0", "sharing": {"model": "exclusive"}},
]


def ids(findings):
    return sorted(f["id"] for f in findings)


def by_test(built):
    return {e["test"]: e for e in built["tests"]}


def pod(built, name):
    (found,) = [p for p in built["pods"] if p["metadata"]["name"] == name]
    return found


def test_the_plan_requests_what_a_user_would():
    built = smoke_plan(variables(), CLUSTER, MODELS)
    assert built["findings"] == []
    assert "smoke-dra: claim smoke-dra" in built["table"]
    assert "smoke-sharing-mig: nvidia.com/mig-1g.10gb=1" in built["table"]
    assert sorted(by_test(built)) == [
        "cuda.nvidia-h100-80gb-hbm3",
        "dra",
        "ib_write_bw.ib",
        "nccl.nvidia-h100-80gb-hbm3",
        "rocm_smi.amd-instinct-mi300x",
        "sharing.mig",
        "sharing.time_slicing",
    ]
    cuda = pod(built, "smoke-cuda-nvidia-h100-80gb-hbm3")
    assert cuda["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "dgx-0", "nvidia.com/gpu.product": H100}
    assert cuda["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert cuda["spec"]["containers"][0]["image"] == "nvcr.io/nvidia/k8s/cuda-sample" + DIGEST
    assert cuda["spec"]["tolerations"] == variables()["smoke_tests_tolerations"]
    assert cuda["spec"]["restartPolicy"] == "Never" and cuda["spec"]["activeDeadlineSeconds"] == 120
    ts = pod(built, "smoke-sharing-time-slicing")
    assert ts["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert ts["spec"]["nodeSelector"]["nvidia.com/gpu.product"] == L40S + "-SHARED"
    mig = pod(built, "smoke-sharing-mig")
    assert mig["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    dra = pod(built, "smoke-dra")
    assert dra["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "smoke-dra"}]
    assert dra["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    (claim,) = built["claim_templates"]
    assert claim["spec"]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    ]
    nccl = by_test(built)["nccl.nvidia-h100-80gb-hbm3"]
    assert nccl["nodes"] == ["dgx-0", "dgx-1"] and nccl["threshold"] == 350
    rank0 = pod(built, "smoke-nccl-nvidia-h100-80gb-hbm3-0")
    assert rank0["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8", "rdma/ib": "1"}
    assert "-np 16" in rank0["spec"]["containers"][0]["command"][2]
    assert [s["metadata"]["name"] for s in built["services"]] == ["smoke-nccl-nvidia-h100-80gb-hbm3"]
    ib = pod(built, "smoke-ib-ib")
    assert ib["spec"]["containers"][0]["resources"]["limits"] == {"rdma/ib": "1"}
    assert by_test(built)["ib_write_bw.ib"]["threshold"] == 180
    rocm = pod(built, "smoke-rocm-amd-instinct-mi300x")
    assert rocm["spec"]["nodeSelector"] == {
        "kubernetes.io/hostname": "mi300x-0",
        "amd.com/gpu.product-name": "AMD-Instinct-MI300X",
    }
    assert rocm["spec"]["containers"][0]["resources"]["limits"] == {"amd.com/gpu": "1"}


@pytest.mark.parametrize(
    ("change", "finding", "severity"),
    [
        (
            {"smoke_tests_images": {"cuda": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"}},
            "smoke-image-not-pinned",
            "error",
        ),
        ({"smoke_tests_images": {"cuda": "cuda-sample@sha256:abc"}}, "smoke-image-not-pinned", "error"),
        ({"smoke_tests_registry_mirror": "https://mirror.local"}, "smoke-mirror-invalid", "error"),
        ({"smoke_tests_nccl_busbw_gbps": {H100: "fast"}}, "smoke-threshold-invalid", "error"),
        ({"smoke_tests_ib_write_bw_gbps": {"*": -1}}, "smoke-threshold-invalid", "error"),
        ({"smoke_tests_images": {"cuda": ""}}, "smoke-image-unset", "warning"),
        ({"smoke_tests_tests": ["cuda", "gpu_burn"]}, "smoke-test-unknown", "error"),
    ],
)
def test_input_findings(change, finding, severity):
    built = smoke_plan(variables(**change), CLUSTER, MODELS)
    assert (finding, severity) in [(f["id"], f["severity"]) for f in built["findings"]]


def test_an_unpinned_image_of_a_disabled_test_is_not_judged():
    v = variables(smoke_tests_tests=["cuda"], smoke_tests_images={"cuda": "x/cuda" + DIGEST, "nccl": "x/nccl:latest"})
    assert smoke_plan(v, CLUSTER, MODELS)["findings"] == []


@pytest.mark.parametrize(
    ("image", "mirror", "pulled"),
    [
        ("nvcr.io/nvidia/k8s/cuda-sample" + DIGEST, "", "nvcr.io/nvidia/k8s/cuda-sample" + DIGEST),
        (
            "nvcr.io/nvidia/k8s/cuda-sample" + DIGEST,
            "mirror.local:5000",
            "mirror.local:5000/nvidia/k8s/cuda-sample" + DIGEST,
        ),
        (
            "nvcr.io/nvidia/k8s/cuda-sample:v1" + DIGEST,
            "mirror.local/pfx/",
            "mirror.local/pfx/nvidia/k8s/cuda-sample" + DIGEST,
        ),
        ("rocm/rocm-terminal" + DIGEST, "mirror.local", "mirror.local/rocm/rocm-terminal" + DIGEST),
        ("busybox" + DIGEST, "mirror.local", "mirror.local/library/busybox" + DIGEST),
        ("localhost:5000/a/b" + DIGEST, "m.local", "m.local/a/b" + DIGEST),
    ],
)
def test_the_mirror_rewrites_the_registry_and_keeps_the_digest(image, mirror, pulled):
    assert _smoke.resolve_image(image, mirror) == pulled


def test_a_tag_next_to_the_digest_is_accepted():
    v = variables(
        smoke_tests_tests=["cuda"],
        smoke_tests_images={"cuda": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04" + DIGEST},
    )
    assert smoke_plan(v, CLUSTER, MODELS)["findings"] == []


@pytest.mark.parametrize(
    ("cluster", "models", "finding"),
    [
        ([node("dgx-0", H100, {"nvidia.com/gpu": 8})], [], "smoke-nccl-no-pair"),
        ([node("cpu-0")], [], "smoke-nothing-to-test"),
        (
            [node("k-0", H100, {"nvidia.com/gpu": 8})],
            [{"name": "k-0", "sharing": {"model": "kai_fraction"}}],
            "smoke-kai-queue-unset",
        ),
        (
            [node("ts-0", L40S, {})],
            [{"name": "ts-0", "sharing": {"model": "time_slicing"}}],
            "smoke-sharing-nothing-advertised",
        ),
    ],
)
def test_tests_that_cannot_run_are_warnings(cluster, models, finding):
    built = smoke_plan(variables(), cluster, models)
    assert finding in ids(built["findings"])
    assert all(f["severity"] == "warning" for f in built["findings"])


def test_kai_fraction_pod_names_the_scheduler_and_queue():
    cluster = [node("k-0", H100, {"nvidia.com/gpu": 8})]
    built = smoke_plan(
        variables(smoke_tests_kai_queue="research"), cluster, [{"name": "k-0", "sharing": {"model": "kai_fraction"}}]
    )
    kai = pod(built, "smoke-sharing-kai-fraction")
    assert kai["spec"]["schedulerName"] == "kai-scheduler"
    assert kai["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    assert kai["metadata"]["labels"]["kai.scheduler/queue"] == "research"
    assert "resources" not in kai["spec"]["containers"][0]


def test_cordoned_nodes_are_not_tested():
    cluster = [node("dgx-0", H100, {"nvidia.com/gpu": 8}, unschedulable=True)]
    assert smoke_plan(variables(smoke_tests_tests=["cuda"]), cluster, [])["tests"] == []


CORDON = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
QUARANTINE_TAINT = {"key": "gpuops.platform/quarantined", "value": "bus", "effect": "NoExecute"}


def quarantined(name, taints=(), ours=None):
    out = node(name, H100, {"nvidia.com/gpu": 8}, unschedulable=True)
    out["spec"]["taints"] = [dict(t) for t in taints]
    if ours:
        out["metadata"]["annotations"] = {"gpuops.platform/remediation.taint": ours}
    return out


@pytest.mark.parametrize(
    ("cluster", "pinned", "tested", "extra_tolerations", "finding"),
    [
        # a cordoned node named in smoke_tests_nodes: tested, its pod tolerates the cordon and nothing else
        ([quarantined("dgx-0"), node("dgx-1", H100, {"nvidia.com/gpu": 8})], ["dgx-0"], ["dgx-0"], [CORDON], None),
        # gpuops' quarantine taint (its annotation names it) is tolerated exactly; another taint of the node is not
        (
            [
                quarantined(
                    "dgx-0",
                    [QUARANTINE_TAINT, {"key": "other", "effect": "NoSchedule"}],
                    "gpuops.platform/quarantined=bus:NoExecute",
                )
            ],
            ["dgx-0"],
            ["dgx-0"],
            [
                CORDON,
                {"key": "gpuops.platform/quarantined", "operator": "Equal", "value": "bus", "effect": "NoExecute"},
            ],
            None,
        ),
        # a taint the annotation does not name (a person's) stays untolerated
        ([quarantined("dgx-0", [QUARANTINE_TAINT])], ["dgx-0"], ["dgx-0"], [CORDON], None),
        # a schedulable node named: tested, no extra toleration; the others are left alone
        (
            [node("dgx-0", H100, {"nvidia.com/gpu": 8}), node("dgx-1", L40S, {"nvidia.com/gpu": 8})],
            ["dgx-1"],
            ["dgx-1"],
            [],
            None,
        ),
        # a node the cluster does not have: an error before any change
        ([node("dgx-0", H100, {"nvidia.com/gpu": 8})], ["dgx-9"], [], [], "smoke-node-unknown"),
    ],
)
def test_smoke_tests_nodes_pins_the_tests_to_named_nodes(cluster, pinned, tested, extra_tolerations, finding):
    built = smoke_plan(variables(smoke_tests_tests=["cuda"], smoke_tests_nodes=pinned), cluster, [])
    assert sorted(n for e in built["tests"] for n in e["nodes"]) == tested
    for p in built["pods"]:
        assert p["spec"]["tolerations"] == variables()["smoke_tests_tolerations"] + extra_tolerations
        assert p["spec"]["nodeSelector"]["kubernetes.io/hostname"] in pinned
    assert [f["id"] for f in built["findings"] if f["severity"] == "error"] == ([finding] if finding else [])


def test_explicit_rail_resources():
    cluster = [node("dgx-0", H100, {"nvidia.com/gpu": 8, "rdma/ib": 8, "nvidia.com/rail1": 4})]
    built = smoke_plan(
        variables(smoke_tests_tests=["ib_write_bw"], smoke_tests_rdma_resources=["nvidia.com/rail1"]), cluster, []
    )
    assert [e["test"] for e in built["tests"]] == ["ib_write_bw.rail1"]


NCCL_OUT = """#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
  8589934592    2147483648     float     sum      -1    45123  190.37  356.94      0    45002  190.88  357.90      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 361.235
"""
IB_OUT = """---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      1901823          0.00               197.40               0.376508
---------------------------------------------------------------------------------------
"""
CUDA_OUT = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n[Vector addition of 50000 elements]\nTest PASSED\nDone\n"
ROCM_OUT = "GPU[0]\t\t: Card Series: \t\tAMD Instinct MI300X\nGPU[0]\t\t: GPU use (%): 0\n"


@pytest.mark.parametrize(
    ("kind", "text", "threshold", "result", "detail"),
    [
        ("nccl", NCCL_OUT, 350, "pass", "361.235 GB/s >= 350 GB/s"),
        ("nccl", NCCL_OUT, 400, "fail", "361.235 GB/s < 400 GB/s"),
        ("nccl", NCCL_OUT, None, "pass", "361.235 GB/s (no threshold set)"),
        ("nccl", "mpirun: ssh: connect refused", 350, "fail", "no bandwidth in the output of nccl"),
        ("ib_write_bw", IB_OUT, 180, "pass", "197.4 Gb/s >= 180 Gb/s"),
        ("ib_write_bw", IB_OUT, 390, "fail", "197.4 Gb/s < 390 Gb/s"),
        ("cuda", CUDA_OUT, None, "pass", "vectorAdd Test PASSED; nvidia-smi lists 1 GPU(s)"),
        ("cuda", "Test FAILED\n", None, "fail", "no 'Test PASSED'"),
        ("cuda", "Test PASSED\n", None, "fail", "nvidia-smi listed no GPU"),
        ("rocm_smi", ROCM_OUT, None, "pass", "rocm-smi lists 1 GPU(s)"),
        ("rocm_smi", "ERROR: no GPU", None, "fail", "rocm-smi listed no GPU"),
    ],
)
def test_parse(kind, text, threshold, result, detail):
    got = _smoke_results.parse(kind, text, threshold)
    assert got[:2] == (result, detail)


def live(name, node_name=None, phase="Pending", **status):
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node_name} if node_name else {},
        "status": {"phase": phase, **status},
    }


REAL = [
    node("dgx-0", H100, {"nvidia.com/gpu": 8}),
    node("dgx-1", H100, {"nvidia.com/gpu": 8}),
    node("sim-0", L40S, {"nvidia.com/gpu": 4}, simulated=True),
]
PLAN = smoke_plan(variables(smoke_tests_tests=["cuda", "nccl"]), REAL, [])
TERM = {"containerStatuses": [{"state": {"terminated": {"exitCode": 0, "message": CUDA_OUT}}}]}


def rows(out):
    return {r["test"]: (r["result"], r["detail"]) for r in out["results"]}


def test_simulated_nodes_measure_nothing_whatever_the_pod_printed():
    pods = [
        live("smoke-cuda-nvidia-l40s", "sim-0", "Succeeded", **TERM),
        live("smoke-cuda-nvidia-h100-80gb-hbm3", "dgx-0", "Running"),
        live("smoke-nccl-nvidia-h100-80gb-hbm3-0", "dgx-0", "Running"),
        live("smoke-nccl-nvidia-h100-80gb-hbm3-1", "dgx-1", "Running"),
    ]
    out = smoke_results(PLAN, pods)
    assert out["done"] is False
    assert rows(out)["cuda.nvidia-l40s"] == ("not-measured", "not-measured: simulated node")
    assert rows(out)["cuda.nvidia-h100-80gb-hbm3"][0] == "waiting"
    # a simulated node's result carries no number, in the result or its record
    (sim,) = [r for r in out["results"] if r["test"] == "cuda.nvidia-l40s"]
    assert sim["value"] is None
    (rec,) = [n for n in out["nodes"] if n["metadata"]["name"] == "sim-0"]
    assert rec["metadata"]["labels"] == {"gpuops.platform/smoke.cuda.nvidia-l40s": "not-measured"}


def test_finished_pods_are_parsed_from_their_logs_and_recorded():
    pods = [
        live("smoke-cuda-nvidia-l40s", "sim-0", "Running"),
        live("smoke-cuda-nvidia-h100-80gb-hbm3", "dgx-0", "Succeeded", **TERM),
        live("smoke-nccl-nvidia-h100-80gb-hbm3-0", "dgx-0", "Succeeded"),
        live("smoke-nccl-nvidia-h100-80gb-hbm3-1", "dgx-1", "Running"),
    ]
    out = smoke_results(PLAN, pods, {"smoke-nccl-nvidia-h100-80gb-hbm3-0": NCCL_OUT}, True, "2026-01-01T00:00:00Z")
    assert out["done"] is True
    assert "smoke-nccl-nvidia-h100-80gb-hbm3-0" in out["read_logs"]
    got = rows(out)
    assert got["cuda.nvidia-h100-80gb-hbm3"] == ("pass", "vectorAdd Test PASSED; nvidia-smi lists 1 GPU(s)")
    # the worker (sshd for mpirun) runs until deleted: the pair's result is rank 0's
    assert got["nccl.nvidia-h100-80gb-hbm3"] == ("pass", "361.235 GB/s >= 350 GB/s")
    assert "smoke-nccl-nvidia-h100-80gb-hbm3-1" not in out["read_logs"]
    recs = {n["metadata"]["name"]: n["metadata"] for n in out["nodes"]}
    note = json.loads(recs["dgx-0"]["annotations"]["gpuops.platform/smoke.cuda.nvidia-h100-80gb-hbm3"])
    assert note["result"] == "pass" and note["time"] == "2026-01-01T00:00:00Z"
    assert "TEST" in out["table"] and "not-measured: simulated node" in out["table"]
    assert out["failed"] == [] and out["verdict"] == f"{len(out['results'])} test(s), none failed"


@pytest.mark.parametrize(
    ("rows", "want"),
    [
        ([], "0 test(s), none failed"),
        ([{"result": "pass"}, {"result": "not-measured"}], "2 test(s), none failed"),
        (
            [
                {"result": "fail", "test": "cuda.l40s", "nodes": ["a"], "detail": "not scheduled: no GPU"},
                {"result": "pass", "test": "cuda.h100", "nodes": ["b"], "detail": ""},
                {"result": "fail", "test": "nccl.h100", "nodes": ["b", "c"], "detail": "12 GB/s < 350 GB/s"},
            ],
            "2 smoke test(s) failed: cuda.l40s on a: not scheduled: no GPU || nccl.h100 on b,c: 12 GB/s < 350 GB/s || "
            "- see the table above; the results are on the nodes.",
        ),
    ],
)
def test_verdict_names_each_failed_test_its_nodes_and_why(rows, want):
    assert _smoke_results.verdict(rows) == want


@pytest.mark.parametrize(
    ("pod_", "final", "outcome"),
    [
        (None, True, ("fail", "pod not found")),
        (
            live(
                "p",
                phase="Pending",
                conditions=[
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                    }
                ],
            ),
            True,
            ("fail", "not scheduled: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
        ),
        (live("p", "dgx-0", "Running"), True, ("fail", "not finished within the timeout (phase Running)")),
        (
            live(
                "p",
                "dgx-0",
                "Failed",
                containerStatuses=[{"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}],
            ),
            False,
            ("fail", "Error, exit code 1"),
        ),
        (live("p", "sim-0", "Running"), False, ("not-measured", "not-measured: simulated node")),
    ],
)
def test_pod_outcomes(pod_, final, outcome):
    got = _smoke_results.pod_outcome(pod_, {"sim-0"}, final)
    assert got["done"] is True
    assert (got["result"], got["detail"]) == outcome


def test_result_keys_are_valid_label_keys():
    key = _smoke.result_key("ib_write_bw." + "x" * 80)
    name = key.split("/", 1)[1]
    assert len(name) <= 63 and name.startswith("smoke.ib_write_bw.")
    assert _smoke.result_key("sharing.time_slicing") == "gpuops.platform/smoke.sharing.time_slicing"
    assert len(_smoke.slug("A" * 80)) <= 40


def test_the_filters_refuse_wrong_input():
    with pytest.raises(AnsibleFilterError):
        smoke_plan([], [])
    with pytest.raises(AnsibleFilterError):
        smoke_plan({}, [1])
    with pytest.raises(AnsibleFilterError):
        smoke_results({}, [])


# --- phases ---------------------------------------------------------------------------------------------------


def phases_of(built):
    return {e["test"]: e["phase"] for e in built["tests"]}


@pytest.mark.parametrize(
    ("cluster", "models", "tests", "phases"),
    [
        # the whole cluster: the tests of one node first, then the pair and the rail
        (
            CLUSTER,
            MODELS,
            list(_smoke.TESTS),
            {
                "cuda.nvidia-h100-80gb-hbm3": 1,
                "sharing.time_slicing": 1,
                "sharing.mig": 1,
                "dra": 1,
                "rocm_smi.amd-instinct-mi300x": 1,
                "nccl.nvidia-h100-80gb-hbm3": 2,
                "ib_write_bw.ib": 2,
            },
        ),
        # the lab: vectorAdd holds one GPU of dgx-0, rank 0 of the pair wants all 8 - never at once
        (
            REAL,
            [],
            ["cuda", "nccl"],
            {"cuda.nvidia-h100-80gb-hbm3": 1, "cuda.nvidia-l40s": 1, "nccl.nvidia-h100-80gb-hbm3": 2},
        ),
        # the pair alone: phases are numbered without gaps
        (REAL, [], ["nccl"], {"nccl.nvidia-h100-80gb-hbm3": 1}),
        # a rail with one device: the pair takes it, ib_write_bw waits for a phase of its own
        (
            [
                node("dgx-0", H100, {"nvidia.com/gpu": 8, "rdma/ib": 1}),
                node("dgx-1", H100, {"nvidia.com/gpu": 8, "rdma/ib": 1}),
            ],
            [],
            ["nccl", "ib_write_bw"],
            {"nccl.nvidia-h100-80gb-hbm3": 1, "ib_write_bw.ib": 2},
        ),
        # enough of the rail for both: one phase
        (
            [
                node("dgx-0", H100, {"nvidia.com/gpu": 8, "rdma/ib": 2}),
                node("dgx-1", H100, {"nvidia.com/gpu": 8, "rdma/ib": 2}),
            ],
            [],
            ["cuda", "nccl", "ib_write_bw"],
            {"cuda.nvidia-h100-80gb-hbm3": 1, "nccl.nvidia-h100-80gb-hbm3": 2, "ib_write_bw.ib": 2},
        ),
    ],
)
def test_phases(cluster, models, tests, phases):
    built = smoke_plan(variables(smoke_tests_tests=tests), cluster, models)
    assert phases_of(built) == phases
    assert "smoke-phase-overcommit" not in ids(built["findings"])
    # the plan's phases hold each test's objects, once
    assert [p["phase"] for p in built["phases"]] == sorted(set(phases.values()))
    assert sorted(t for p in built["phases"] for t in p["tests"]) == sorted(phases)
    assert sorted(x["metadata"]["name"] for p in built["phases"] for x in p["pods"]) == sorted(
        x["metadata"]["name"] for x in built["pods"]
    )
    for p in built["phases"]:
        assert [s["metadata"]["name"] for s in p["services"]] == [
            by_test(built)[t]["service"] for t in p["tests"] if by_test(built)[t].get("service")
        ]


def test_the_dra_claim_template_runs_in_the_dra_test_s_phase():
    built = smoke_plan(variables(), CLUSTER, MODELS)
    (first, second) = built["phases"]
    assert [c["metadata"]["name"] for c in first["claim_templates"]] == ["smoke-dra"]
    assert second["claim_templates"] == [] and [s["metadata"]["name"] for s in second["services"]] == [
        "smoke-nccl-nvidia-h100-80gb-hbm3"
    ]
    assert "TEST" in built["table"] and "PHASE" in built["table"]


def asks(name, gpu=0, ib=0):
    limits = {k: str(v) for k, v in (("nvidia.com/gpu", gpu), ("rdma/ib", ib)) if v}
    return {"metadata": {"name": name}, "spec": {"containers": [{"resources": {"limits": limits}}]}}


def entry_(test, phase, pods, nodes):
    return {"test": test, "phase": phase, "pods": pods, "nodes": nodes}


@pytest.mark.parametrize(
    ("entries", "pods", "allocatable", "evidence"),
    [
        # two tests of one phase on one node, more GPUs than it has: a finding naming both
        (
            [entry_("cuda.h100", 1, ["a"], ["dgx-0"]), entry_("nccl.h100", 1, ["b0", "b1"], ["dgx-0", "dgx-1"])],
            [asks("a", gpu=1), asks("b0", gpu=8), asks("b1", gpu=8)],
            {"dgx-0": {"nvidia.com/gpu": 8}, "dgx-1": {"nvidia.com/gpu": 8}},
            ["phase 1: cuda.h100 nvidia.com/gpu=1, nccl.h100 nvidia.com/gpu=8; the node has 8"],
        ),
        # the same two in different phases: none
        (
            [entry_("cuda.h100", 1, ["a"], ["dgx-0"]), entry_("nccl.h100", 2, ["b0", "b1"], ["dgx-0", "dgx-1"])],
            [asks("a", gpu=1), asks("b0", gpu=8), asks("b1", gpu=8)],
            {"dgx-0": {"nvidia.com/gpu": 8}, "dgx-1": {"nvidia.com/gpu": 8}},
            [],
        ),
        # one phase, different nodes: none
        (
            [entry_("cuda.h100", 1, ["a"], ["dgx-0"]), entry_("cuda.l40s", 1, ["c"], ["l40s-0"])],
            [asks("a", gpu=8), asks("c", gpu=4)],
            {"dgx-0": {"nvidia.com/gpu": 8}, "l40s-0": {"nvidia.com/gpu": 4}},
            [],
        ),
        # one phase, one node, enough for both: none
        (
            [entry_("nccl.h100", 1, ["b0"], ["dgx-0"]), entry_("ib_write_bw.ib", 1, ["i"], ["dgx-0"])],
            [asks("b0", gpu=8, ib=1), asks("i", ib=1)],
            {"dgx-0": {"nvidia.com/gpu": 8, "rdma/ib": 2}},
            [],
        ),
        # one phase, one node, the rail short by one: a finding for the rail, not for the GPUs
        (
            [entry_("nccl.h100", 1, ["b0"], ["dgx-0"]), entry_("ib_write_bw.ib", 1, ["i"], ["dgx-0"])],
            [asks("b0", gpu=8, ib=1), asks("i", ib=1)],
            {"dgx-0": {"nvidia.com/gpu": 8, "rdma/ib": 1}},
            ["phase 1: nccl.h100 rdma/ib=1, ib_write_bw.ib rdma/ib=1; the node has 1"],
        ),
        # one test alone that asks for more than the node has is not this rule's (the scheduler says why)
        (
            [entry_("nccl.h100", 1, ["b0"], ["dgx-0"])],
            [asks("b0", gpu=16)],
            {"dgx-0": {"nvidia.com/gpu": 8}},
            [],
        ),
        # a DRA claim and a KAI fraction count nothing here
        (
            [entry_("dra", 1, ["d"], ["dgx-0"]), entry_("sharing.kai_fraction", 1, ["k"], ["dgx-0"])],
            [
                {"metadata": {"name": "d"}, "spec": {"containers": [{"resources": {"claims": [{"name": "gpu"}]}}]}},
                {"metadata": {"name": "k"}, "spec": {"containers": [{}]}},
            ],
            {"dgx-0": {}},
            [],
        ),
    ],
)
def test_no_two_tests_of_one_phase_ask_a_node_for_more_than_it_has(entries, pods, allocatable, evidence):
    found = _smoke_phases.phase_findings(entries, pods, allocatable)
    assert [e for f in found for e in f["evidence"]] == evidence
    assert all(f["id"] == "smoke-phase-overcommit" and f["severity"] == "error" for f in found)


def test_one_phase_is_judged_alone_and_its_holding_pods_named():
    built = smoke_plan(variables(smoke_tests_tests=["cuda", "nccl"]), REAL, [])
    first = [
        live("smoke-cuda-nvidia-l40s", "sim-0", "Running"),
        live("smoke-cuda-nvidia-h100-80gb-hbm3", "dgx-0", "Succeeded", **TERM),
    ]
    out = smoke_results(built, first, {}, False, "", 1)
    # the NCCL pair (phase 2) is not waited for in phase 1
    assert out["done"] is True and sorted(rows(out)) == ["cuda.nvidia-h100-80gb-hbm3", "cuda.nvidia-l40s"]
    # the simulated pod runs for ever: it holds its GPU until deleted; the finished one holds nothing
    assert out["holding"] == ["smoke-cuda-nvidia-l40s"]
    assert smoke_results(built, first, {}, False, "", 2)["done"] is False


def test_the_record_keeps_each_pod_s_placement_and_requests():
    built = smoke_plan(variables(smoke_tests_tests=["cuda", "nccl"]), REAL, [])
    seen = []
    for p in built["pods"]:
        bound = json.loads(json.dumps(p))
        bound["spec"]["nodeName"] = bound["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        bound["status"] = {"phase": "Running"}
        seen.append(bound)
    out = smoke_results(built, seen, {}, True, "2026-01-01T00:00:00Z")
    recs = {n["metadata"]["name"]: n["metadata"]["annotations"] for n in out["nodes"]}
    note = json.loads(recs["dgx-1"]["gpuops.platform/smoke.nccl.nvidia-h100-80gb-hbm3"])
    assert note["phase"] == 2
    assert [(p["name"], p["node"], p["requests"]) for p in note["pods"]] == [
        ("smoke-nccl-nvidia-h100-80gb-hbm3-0", "dgx-0", {"nvidia.com/gpu": "8"}),
        ("smoke-nccl-nvidia-h100-80gb-hbm3-1", "dgx-1", {"nvidia.com/gpu": "8"}),
    ]
    assert note["pods"][0]["image"].endswith(DIGEST)
    assert note["pods"][0]["selector"] == {"kubernetes.io/hostname": "dgx-0", "nvidia.com/gpu.product": H100}
    # a pod the API no longer had is recorded as such
    gone = smoke_results(built, [], {}, True, "t")
    (rec,) = [r for r in gone["results"] if r["test"] == "cuda.nvidia-l40s"]
    assert rec["pod_records"] == [{"name": "smoke-cuda-nvidia-l40s", "node": None}]


def test_the_results_filter_refuses_a_phase_that_is_not_a_number():
    with pytest.raises(AnsibleFilterError):
        smoke_results(PLAN, [], {}, False, "", "first")


@pytest.mark.parametrize(
    ("nodes", "rows", "failed", "text"),
    [
        ([], [], [], "no smoke test result recorded"),
        ([node("cpu-0")], [], [], "no smoke test result recorded"),  # labels, none of them a result
        (
            [
                {"metadata": {"name": "b", "labels": {"gpuops.platform/smoke.nccl": "fail", "x": "y"}}},
                {"metadata": {"name": "a", "labels": {"gpuops.platform/smoke.gpu": "pass"}}},
                {"metadata": {"name": "c"}},  # a node without labels
            ],
            [{"node": "a", "test": "gpu", "result": "pass"}, {"node": "b", "test": "nccl", "result": "fail"}],
            ["b gpuops.platform/smoke.nccl"],
            "a  gpu  pass\nb  nccl  fail",
        ),
    ],
)
def test_recorded_results_on_the_nodes(nodes, rows, failed, text):
    out = smoke_recorded(nodes)
    assert (out["rows"], out["failed"], out["text"]) == (rows, failed, text)


def test_recorded_refuses_what_is_not_nodes():
    with pytest.raises(AnsibleFilterError, match="list of Node objects"):
        smoke_recorded({"resources": []})
