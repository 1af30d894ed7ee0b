"""Charts from OCI registries as tables: the reference, the helm pull argv, what a failed pull means, the tag
list URL and the registry's token challenge."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.release import _helm_oci as oci


@pytest.mark.parametrize(
    ("repo", "chart", "ref"),
    [
        (
            "oci://ghcr.io/k8snetworkplumbingwg",
            "sriov-network-operator-chart",
            "oci://ghcr.io/k8snetworkplumbingwg/sriov-network-operator-chart",
        ),
        ("oci://registry.k8s.io/kueue/charts/", "kueue", "oci://registry.k8s.io/kueue/charts/kueue"),
        ("oci://127.0.0.1:20880/charts", "nfd", "oci://127.0.0.1:20880/charts/nfd"),
        ("oci://mirror.example.com", "gpu-operator", "oci://mirror.example.com/gpu-operator"),
    ],
)
def test_chart_ref(repo, chart, ref):
    assert oci.chart_ref(repo, chart) == ref


@pytest.mark.parametrize(
    ("repo", "chart", "error"),
    [
        ("https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "is not an oci:// repository URL"),
        ("oci://", "c", "is not an oci:// repository URL"),
        ("oci://host/Path With Space", "c", "is not an oci:// repository URL"),
        ("oci://host/charts", "Bad/Name", "is not a chart name"),
        ("oci://host/charts", "", "is not a chart name"),
    ],
)
def test_chart_ref_refuses(repo, chart, error):
    with pytest.raises(ValueError, match=error):
        oci.chart_ref(repo, chart)


def test_pull_argv():
    assert oci.pull_argv("oci://h/c/x", "1.0.0", "/tmp/d") == [
        "pull",
        "oci://h/c/x",
        "--version",
        "1.0.0",
        "--untar",
        "--destination",
        "/tmp/d",
    ]
    assert oci.pull_argv("oci://h/c/x", "1.0.0", "/tmp/d", "/ca.pem")[-2:] == ["--ca-file", "/ca.pem"]


@pytest.mark.parametrize(
    ("rc", "output", "rid"),
    [
        (124, "", "timeout"),
        (
            1,
            'Error: failed to do request: Head "https://h/v2/c/x/manifests/9.9.9": tls: failed to verify certificate: '
            "x509: certificate signed by unknown authority",
            "tls",
        ),
        (1, "Error: ... http: server gave HTTP response to HTTPS client", "plain_http"),
        (1, "Error: failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized", "auth"),
        (1, "Error: GET https://ghcr.io/v2/x/manifests/1: DENIED: denied", "auth"),
        (
            1,
            'Error: Head "https://127.0.0.1:9/v2/c/x/manifests/1": dial tcp 127.0.0.1:9: connect: connection refused',
            "unreachable",
        ),
        (1, "Error: dial tcp: lookup nosuch.invalid: no such host", "unreachable"),
        (
            1,
            'Error: failed to perform "FetchReference" on source: 127.0.0.1:5000/charts/x:9.9.9: not found',
            "not_found",
        ),
        (1, "Error: MANIFEST_UNKNOWN: manifest unknown", "not_found"),
        (1, "Error: something else", "helm_failed"),
    ],
    ids=[
        "timeout",
        "tls",
        "plain-http",
        "auth-401",
        "auth-denied",
        "refused",
        "dns",
        "not-found",
        "manifest-unknown",
        "other",
    ],
)
def test_classify(rc, output, rid):
    got, reason, fix = oci.classify(rc, output, 30)
    assert got == rid and reason and fix
    if rid == "timeout":
        assert "30s" in reason
    if rid == "tls":
        assert "gpuops_chart_repo_ca_file" in fix


def test_tags_url():
    assert oci.tags_url("oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler") == (
        "https://ghcr.io/v2/nvidia/kai-scheduler/kai-scheduler/tags/list",
        "nvidia/kai-scheduler/kai-scheduler",
    )
    with pytest.raises(ValueError):
        oci.tags_url("https://h/c")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            'Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull"',
            {"realm": "https://ghcr.io/token", "service": "ghcr.io", "scope": "repository:a/b:pull"},
        ),
        ('Basic realm="registry"', {}),
        ("", {}),
    ],
)
def test_bearer_challenge(header, expected):
    assert oci.bearer_challenge(header) == expected


def test_version_tag_and_message():
    assert oci.version_tag("1.0.0+build.1") == "1.0.0_build.1"
    msg = oci.failure_message(
        "nfd", "oci://h/c/x", "9.9.9", "the registry has no such chart version", "pin one", "it has: 1.0.0"
    )
    assert msg == (
        "nfd: cannot pull chart oci://h/c/x version 9.9.9: the registry has no such chart version "
        "(it has: 1.0.0). Fix: pin one. Nothing was changed."
    )
