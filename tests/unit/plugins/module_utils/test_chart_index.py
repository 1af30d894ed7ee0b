"""Is a pinned chart version published (_chart_index): the index of an http(s) repository, the tags of an OCI registry
(with the anonymous token a public registry asks for), and the finding the run's preflight stops on."""

from __future__ import annotations

import urllib.error

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.release import _chart_index

INDEX = b"""
apiVersion: v1
entries:
  gpu-operator:
    - {version: v26.7.0, urls: [gpu-operator-v26.7.0.tgz]}
    - {version: v26.3.1, urls: [gpu-operator-v26.3.1.tgz]}
"""


def http_error(code, headers=None):
    return urllib.error.HTTPError("https://x", code, "no", headers or {}, None)


def fake(answers):
    """A get() that answers by URL: bytes, or an exception to raise; records the calls."""
    calls = []

    def get(url, ca_file, timeout, headers=None):
        calls.append((url, headers))
        answer = answers[url]
        if isinstance(answer, Exception):
            raise answer
        return answer

    get.calls = calls
    return get


@pytest.mark.parametrize(
    ("version", "answer", "want"),
    [
        ("v26.7.0", INDEX, None),
        ("v26.3.1", INDEX, None),
        ("v99.0.0", INDEX, ("chart-version-not-published", "error", "(it has: v26.7.0, v26.3.1)")),
        ("26.7.0", INDEX, ("chart-version-not-published", "error", "gpu-operator 26.7.0 is not in")),
        ("v26.7.0", b"apiVersion: v1\nentries: {}\n", ("chart-version-not-published", "error", "no such chart")),
        ("v26.7.0", b"<html>not an index</html>", ("chart-repo-unreadable", "error", "is not a chart repository")),
        ("v26.7.0", b"entries: [: bad", ("chart-repo-unreadable", "error", "is not a chart repository index")),
        ("v26.7.0", http_error(404), ("chart-repo-unreadable", "error", "answered HTTP 404")),
        ("v26.7.0", OSError("connection refused"), ("chart-repo-unreadable", "error", "did not answer within 5s")),
    ],
)
def test_http_repository(version, answer, want):
    get = fake({"http://repo/charts/index.yaml": answer})
    found = _chart_index.published_finding(
        "gpu_operator_chart_version", "gpu-operator", version, "http://repo/charts/", None, 5, get
    )
    if want is None:
        assert found is None
        return
    fid, severity, text = want
    assert (found["id"], found["severity"]) == (fid, severity)
    assert text in found["cause"], found["cause"]
    assert found["object"] == {"kind": "variable", "name": "gpu_operator_chart_version"}
    assert found["evidence"] == [f'gpu_operator_chart_version: "{version}"']
    assert "gpu_operator_chart_version" in found["fix"] or "gpuops_chart_repo_mirror" in found["fix"]


TAGS = "https://ghcr.io/v2/kai-scheduler/kai-scheduler/kai-scheduler/tags/list"


@pytest.mark.parametrize(
    ("version", "answers", "want"),
    [
        ("v0.12.4", {TAGS: {"tags": ["v0.12.4", "v0.13.0"]}}, None),
        ("v0.99.0", {TAGS: {"tags": ["v0.12.4"]}}, ("chart-version-not-published", "error")),
        ("1.0.0+build", {TAGS: {"tags": ["1.0.0_build"]}}, None),  # helm stores '+' as '_'
        ("v0.12.4", {TAGS: http_error(403)}, ("chart-version-unchecked", "warning")),
    ],
)
def test_oci_registry(version, answers, want):
    found = _chart_index.published_finding(
        "kai_scheduler_chart_version",
        "kai-scheduler",
        version,
        "oci://ghcr.io/kai-scheduler/kai-scheduler",
        None,
        5,
        get_oci=fake(answers),
    )
    assert (found and (found["id"], found["severity"])) == (want or None)


def test_oci_registry_asks_for_an_anonymous_token_first():
    challenge = {"WWW-Authenticate": 'Bearer realm="https://ghcr.io/token",service="ghcr.io"'}
    token_url = "https://ghcr.io/token?service=ghcr.io&scope=repository:kai-scheduler/kai-scheduler/kai-scheduler:pull"
    answers = {TAGS: [http_error(401, challenge), {"tags": ["v0.12.4"]}], token_url: {"token": "t0k"}}
    calls = []

    def get(url, ca_file, timeout, headers=None):
        calls.append((url, headers))
        answer = answers[url]
        if isinstance(answer, list):
            answer = answer.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    found = _chart_index.published_finding(
        "kai_scheduler_chart_version",
        "kai-scheduler",
        "v0.12.4",
        "oci://ghcr.io/kai-scheduler/kai-scheduler",
        None,
        5,
        get_oci=get,
    )
    assert found is None
    assert calls[-1] == (TAGS, {"Authorization": "Bearer t0k"})
