"""The filters that build objects from role variables, templated as a playbook templates them: their arguments
arrive as ansible-core's lazy containers. Copying one with copy.deepcopy copies its templar and makes ansible-core
warn ("Instantiating filter PluginLoader with aliases is deprecated", once per site.yml run until stop 27); the
filters take plain data (module_utils/common/_plain.py) instead. Each case runs in its own interpreter: the collection
finder a real Templar needs is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

COLLECTIONS = Path(__file__).resolve().parents[4] / ".state" / "collections"  # tests/unit/conftest.py links it

SCRIPT = r"""
import json, sys
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[sys.argv[1]])._install()
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.utils.display import Display

said = []
Display.deprecated = lambda self, msg, *a, **kw: said.append(msg)
Display.warning = lambda self, msg, *a, **kw: said.append(msg)

def trusted(value):  # the inner strings are templates, as in a role's variables
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value

case = json.loads(sys.argv[2])
templar = Templar(loader=DataLoader(), variables=trusted(case["variables"]))
result = templar.template(trust_as_template(case["expression"]))
print(json.dumps({"result": result, "said": said}))
"""

TOLERATION = {"key": "{{ 'nvidia.com/gpu' }}", "operator": "Exists", "effect": "NoSchedule"}
NODE = {"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}
CASES = {
    "network_operator_objects": (
        {"v": {"network_operator_tolerations": [TOLERATION]}},
        "{{ (v | gpuops.platform.network_operator_objects).nic_cluster_policy.spec.tolerations }}",
        [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    ),
    "gpu_alert_rules": (
        {"t": {"power_watts_by_model": {"NVIDIA H100 80GB HBM3": "{{ 600 }}"}}},
        "{{ (t | gpuops.platform.gpu_alert_rules).thresholds.power_watts_by_model }}",
        {"NVIDIA H100 80GB HBM3": 600},
    ),
    "kueue_objects": (
        {
            "v": {
                "kueue_flavors": [
                    {
                        "name": "h100",
                        "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                        "tolerations": [TOLERATION],
                    }
                ],
                "kueue_teams": [],
                "kueue_gpu_flavors": False,
            },
            "nodes": [NODE],
        },
        "{{ (v | gpuops.platform.kueue_objects(nodes)).resource_flavors | map(attribute='spec')"
        " | selectattr('tolerations', 'defined') | map(attribute='tolerations') | list }}",
        [[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_deprecation_and_plain_results(name):
    variables, expression, expected = CASES[name]
    case = json.dumps({"variables": variables, "expression": expression})
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(COLLECTIONS), case], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["said"] == []
    assert out["result"] == expected
