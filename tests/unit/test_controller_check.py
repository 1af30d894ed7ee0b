"""Green must mean done (issue 27): every playbook with cluster plays fails, naming the group, the hosts found and the
fix, when the inventory's cluster_controller has no host or more than one - before, such a run skipped every cluster
play ("Could not match supplied host pattern") and ended successful, rc 0. One check, playbooks/controller.yml, the
first play of each of those playbooks (directly or through preflight.yml), tagged always; a --limit that leaves the
controller out on purpose still runs the host plane only. Run with ansible-playbook; no cluster is needed: the check
comes before anything reads one."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "playbooks/controller.yml"
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}


def _entries(playbook: Path) -> list[tuple[Path, dict, list[str]]]:
    """(file, play, tags from the imports above it) of every play, import_playbook followed."""
    out = []
    for item in yaml.safe_load(playbook.read_text()):
        target = item.get("ansible.builtin.import_playbook")
        if target:
            out += [(f, p, item.get("tags", []) + t) for f, p, t in _entries(playbook.parent / target)]
        else:
            out.append((playbook, item, []))
    return out


def _with_cluster_plays() -> list[Path]:
    paths = [REPO / "site.yml", *sorted(REPO.glob("playbooks/*.yml"))]
    return [p for p in paths if p != CHECK and any(e[1]["hosts"] == "cluster_controller" for e in _entries(p))]


def test_the_playbooks_with_cluster_plays_are_known():
    """A guard on the list below: every playbook but the host plane's (and the check itself) has cluster plays."""
    names = {str(p.relative_to(REPO)) for p in _with_cluster_plays()}
    assert names == {
        "site.yml",
        *(f"playbooks/{n}.yml" for n in ("site", "operators", "upgrade", "uninstall", "validate", "diagnose", "smoke")),
        *(f"playbooks/{n}.yml" for n in ("onboard_node", "preflight", "remediate")),
    }


@pytest.mark.parametrize("playbook", _with_cluster_plays(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_playbook_with_cluster_plays_checks_the_controller_first(playbook):
    path, play, tags = _entries(playbook)[0]
    assert path == CHECK, f"{playbook.name}: its first play is {play['name']!r} of {path.name}, not the check"
    assert "always" in play.get("tags", []) + tags  # --tags <layer> keeps it


def _run(tmp_path: Path, playbook: Path, groups: dict, *args: str) -> tuple[int, str]:
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": groups}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_STRATEGY", None)  # the run-tests Mitogen strategy is not what this is about
    r = subprocess.run(
        ["ansible-playbook", str(playbook), "-i", str(inv), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    return r.returncode, re.sub(r"\s+", " ", r.stdout + r.stderr)


NO_CONTROLLER = {"gpu_nodes": {"hosts": {}}}  # what the AWX inventory of the GPU nodes alone held
TWO = {"cluster_controller": {"hosts": {"ctl-a": LOCAL, "ctl-b": LOCAL}}, "gpu_nodes": {"hosts": {"gpu-a": LOCAL}}}
ONE = {"cluster_controller": {"hosts": {"localhost": LOCAL}}, "gpu_nodes": {"hosts": {"gpu-a": LOCAL}}}


def test_diagnose_without_a_controller_fails_and_says_why(tmp_path):
    """The run of issue 27 (AWX's "gpuops - diagnose" over the GPU nodes' source alone): not green any more."""
    rc, out = _run(tmp_path, REPO / "playbooks/diagnose.yml", NO_CONTROLLER)
    assert rc != 0, out[-3000:]
    assert "The inventory's group cluster_controller has no host" in out, out[-3000:]
    assert "Fix: put the one host that runs the cluster plays in cluster_controller" in out
    assert "gpu_cluster_status" not in out and "Read the cluster status" not in out  # nothing ran after it


@pytest.mark.parametrize("playbook", [REPO / "site.yml", REPO / "playbooks/uninstall.yml"], ids=lambda p: p.name)
def test_a_playbook_refuses_two_controllers(tmp_path, playbook):
    """--tags of no layer: only the always-tagged plays run, so nothing is connected to or changed either way. Two
    playbooks run (each costs an ansible-playbook start); that every one starts with the same check is
    test_every_playbook_with_cluster_plays_checks_the_controller_first."""
    rc, out = _run(tmp_path, playbook, TWO, "--tags", "no-such-layer")
    assert rc != 0, out[-3000:]
    assert "The group cluster_controller has 2 hosts: ctl-a, ctl-b" in out, out[-3000:]
    assert "Fix: keep exactly one host in cluster_controller, or name just one of them in --limit" in out


@pytest.mark.parametrize(
    ("groups", "limit", "ok"),
    [
        (ONE, None, True),
        (ONE, "gpu-a", True),  # the controller left out on purpose: the host plane only, as site.yml says
        (NO_CONTROLLER | {"gpu_nodes": {"hosts": {"gpu-a": LOCAL}}}, "gpu-a", False),  # nothing to leave out
        (TWO, "ctl-a,gpu-a", True),  # one of them chosen
        (TWO, "ctl-a,ctl-b", False),
        (TWO, "gpu-a", True),
    ],
)
def test_the_check_and_limit(tmp_path, groups, limit, ok):
    rc, out = _run(tmp_path, CHECK, groups, *(["--limit", limit] if limit else []))
    assert (rc == 0) is ok, out[-3000:]
    if limit == "ctl-a,ctl-b":
        assert "has 2 hosts in the run (--limit ctl-a,ctl-b): ctl-a, ctl-b" in out, out[-3000:]
