"""helm_chart_pull through main(): one helm pull argv under timeout (also in check mode), the unpacked chart
checked, failures that name the reference, the reason, the fix and the registry's tags."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuops.platform.plugins.modules import helm_chart_pull

REF = "oci://127.0.0.1:20880/charts/nfd"


@pytest.fixture
def helm(commands, tmp_path):
    commands.tools.update({"helm", "timeout"})
    state = {"rc": 0, "err": "", "version": "1.0.0"}

    def pull(argv):
        if state["rc"] == 0:
            d = Path(argv[argv.index("--destination") + 1]) / "nfd"
            d.mkdir(parents=True, exist_ok=True)
            (d / "Chart.yaml").write_text(f"apiVersion: v2\nname: nfd\nversion: {state['version']}\n")
        return state["rc"], "", state["err"]

    commands.on(r"^timeout .*helm pull", pull)
    return state


def args(tmp_path, **kw):
    return {
        "repo_url": "oci://127.0.0.1:20880/charts/",
        "chart_name": "nfd",
        "chart_version": "1.0.0",
        "destination": str(tmp_path),
        "caller": "nfd",
        **kw,
    }


@pytest.mark.parametrize("check_mode", [False, True])
def test_pulls_the_pinned_version(run_module, commands, helm, tmp_path, check_mode):
    ca = tmp_path / "ca.pem"
    ca.write_text("PEM")
    result, failed = run_module(helm_chart_pull, args(tmp_path, ca_file=str(ca), timeout=7), check_mode=check_mode)
    assert not failed and result["changed"] is False, result
    assert result["chart_path"] == str(tmp_path / "nfd") and result["ref"] == REF
    assert commands.calls == [
        f"timeout --kill-after=5 7 /usr/bin/helm pull {REF} --version 1.0.0 --untar --destination {tmp_path} "
        f"--ca-file {ca}"
    ]


def test_a_chart_that_is_not_the_pin_fails(run_module, helm, tmp_path):
    helm["version"] = "1.0.1"
    result, failed = run_module(helm_chart_pull, args(tmp_path))
    assert failed and "it holds chart nfd 1.0.1" in result["msg"] and result["msg"].endswith("Nothing was changed.")


def test_unknown_version_names_the_reference_and_the_tags(run_module, helm, tmp_path, monkeypatch):
    helm.update(rc=1, err=f"Error: {REF[6:]}:9.9.9: not found")
    seen = {}

    def tags(ref, ca_file, timeout):
        seen.update(ref=ref, ca_file=ca_file, timeout=timeout)
        return ["1.0.0", "1.1.0"]

    monkeypatch.setattr(helm_chart_pull, "list_tags", tags)
    ca = tmp_path / "ca.pem"
    ca.write_text("PEM")
    result, failed = run_module(helm_chart_pull, args(tmp_path, chart_version="9.9.9", ca_file=str(ca)))
    assert failed and result["reason"] == "not_found" and result["tags"] == ["1.0.0", "1.1.0"]
    assert result["msg"] == (
        f"nfd: cannot pull chart {REF} version 9.9.9: the registry has no such chart version (it has: 1.0.0, 1.1.0). "
        "Fix: pin a version the registry has or push the chart to the mirror. Nothing was changed."
    )
    assert seen == {"ref": REF, "ca_file": str(ca), "timeout": 10}


@pytest.mark.parametrize(
    ("rc", "err", "reason", "words"),
    [
        (124, "", "timeout", "did not answer within 30s"),
        (1, "dial tcp 127.0.0.1:9: connect: connection refused", "unreachable", "gpuops_chart_repo_mirror"),
        (1, "x509: certificate signed by unknown authority", "tls", "gpuops_chart_repo_ca_file"),
        (1, "unexpected status: 401 Unauthorized", "auth", "helm registry login"),
    ],
)
def test_failures_say_reason_and_fix(run_module, helm, tmp_path, rc, err, reason, words):
    helm.update(rc=rc, err=err)
    result, failed = run_module(helm_chart_pull, args(tmp_path))
    assert failed and result["reason"] == reason and result["tags"] is None
    assert result["msg"].startswith(f"nfd: cannot pull chart {REF} version 1.0.0: ") and words in result["msg"]
    assert result["msg"].endswith("Nothing was changed.")


def test_an_https_url_is_refused_before_any_command(run_module, commands, helm, tmp_path):
    result, failed = run_module(helm_chart_pull, args(tmp_path, repo_url="https://charts.example.com"))
    assert failed and result["reason"] == "invalid" and "is not an oci:// repository URL" in result["msg"]
    assert commands.calls == []


def test_an_unreadable_ca_file_is_named_before_any_command(run_module, commands, helm, tmp_path):
    result, failed = run_module(helm_chart_pull, args(tmp_path, ca_file=str(tmp_path / "missing.pem")))
    assert failed and result["reason"] == "invalid" and "missing.pem is not a readable file" in result["msg"]
    assert "gpuops_chart_repo_ca_file" in result["msg"] and commands.calls == []


class _Unauthorized(Exception):
    code = 401

    def __init__(self, header):
        super().__init__("HTTP Error 401: Unauthorized")
        self.headers = {"WWW-Authenticate": header}


@pytest.mark.parametrize(
    ("challenge", "expected"),
    [
        (None, ["1.5.0", "1.6.0"]),  # an open registry answers at once
        ('Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:k/c:pull"', ["1.5.0", "1.6.0"]),
        ('Basic realm="registry"', _Unauthorized),  # no anonymous token to ask for: the 401 is the answer
    ],
    ids=["open", "anonymous-token", "basic"],
)
def test_list_tags_asks_for_an_anonymous_token_when_the_registry_wants_one(monkeypatch, challenge, expected):
    calls = []

    def get_json(url, ca_file, timeout, headers=None):
        calls.append((url, headers))
        if url.startswith("https://ghcr.io/token"):
            return {"token": "t0k"}
        if challenge and not headers:
            raise _Unauthorized(challenge)
        return {"name": "k/c", "tags": ["1.5.0", "1.6.0"]}

    monkeypatch.setattr(helm_chart_pull, "_get_json", get_json)
    if expected is _Unauthorized:
        with pytest.raises(_Unauthorized):
            helm_chart_pull.list_tags("oci://ghcr.io/k/c", None, 5)
        return
    assert helm_chart_pull.list_tags("oci://ghcr.io/k/c", None, 5) == expected
    if challenge:
        assert calls == [
            ("https://ghcr.io/v2/k/c/tags/list", None),
            ("https://ghcr.io/token?service=ghcr.io&scope=repository:k/c:pull", None),
            ("https://ghcr.io/v2/k/c/tags/list", {"Authorization": "Bearer t0k"}),
        ]
