"""Monitoring in the lab (issue 11): the real Prometheus 3.5.0 scraping the simulated dcgm-exporters (dcgm.py) and
the real kube-state-metrics, with the cluster's ServiceMonitors and PrometheusRules loaded, started only when asked
(``python -m gpuops_lab up --monitoring`` or ``monitoring up``; start() for tests).

No Prometheus Operator runs here: sync() stands in for it. It reads the ServiceMonitors and PrometheusRules (those a
Prometheus object selects, below) and writes what the operator would generate:

- one scrape job per ServiceMonitor endpoint, ``serviceMonitor/<namespace>/<name>/<index>`` (honor_labels,
  interval, scrapeTimeout, path, params, relabelings and metricRelabelings of the endpoint), whose targets (a file_sd
  file) are the ready addresses of the Endpoints of each Service the ``selector`` matches in the namespaces the
  ``namespaceSelector`` selects (its own namespace when empty), on the Service port named ``port`` (or the
  ``targetPort``); target labels as the operator relabels them: ``job`` (the Service's label named by ``jobLabel``,
  else the Service name), ``namespace``, ``service``, ``pod``, ``container`` (the container whose port matches),
  ``endpoint`` (the port name), ``instance`` (``<pod IP>:<port>``), plus ``targetLabels``/``podTargetLabels``. A
  few ``__meta_kubernetes_*`` labels are passed for relabelings (namespace, service name, pod name, node name, pod
  and service labels).
- the address scraped: a pod of the GPU Operator's dcgm-exporter (label ``app=nvidia-dcgm-exporter``) runs nowhere
  (kwok), so its target is the lab's simulated exporter, ``127.0.0.1:<dcgm-exporter port>`` at
  ``/node/<pod's node><path>``. A pod of the Network Operator's DOCA Telemetry Service (label
  ``app.kubernetes.io/name=doca-telemetry``) is answered by the same process at ``/dts/<pod's node><path>``, with an
  empty exposition (*sim*: DTS's metric names are not verified, so the lab serves none; the scrape, its ``up`` and
  its target labels are what the monitoring role checks). Targets of other pods have nothing to answer in the lab and
  are left out (listed in the result's ``skipped``).
- one rules file per PrometheusRule (``rules/<namespace>-<name>.yaml``, its ``spec.groups``).
- which ServiceMonitors and PrometheusRules: when a ``monitoring.coreos.com/v1`` Prometheus object exists (the first
  by namespace/name, e.g. the kube-prometheus-stack fixture chart's), those its ``serviceMonitorSelector``,
  ``serviceMonitorNamespaceSelector``, ``ruleSelector`` and ``ruleNamespaceSelector`` select, read as the operator
  reads them (select_for_prometheus); without one, every one in every namespace.

node_exporter (node_exporter.py): the real node_exporter, only its infiniband collector, one per node with RDMA
devices in its hardware profile, reading a generated sysfs tree whose counters advance; scraped by the static job
``node-exporter`` (instance = node name). sync() starts and stops them and advances their counters.

Prometheus watches the target files; a changed job list or rules file is applied with ``POST /-/reload``. sync()
also tells the exporter which nodes it serves (the nodes running a dcgm-exporter pod, with their hardware profile,
driver version and which pod holds which GPU: dcgm.assign_gpus over the node's Running pods) and its collectors
(the ClusterPolicy's ``dcgmExporter.config`` ConfigMap, key ``dcgm-metrics.csv``, else the GPU Operator's default).
The ``monitoring-sync`` process runs sync() every SYNC_INTERVAL seconds; tests and ``python -m gpuops_lab
monitoring sync`` run it at once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import dcgm, node_exporter
from .config import EPHEMERAL_RANGE_FILE, HACK, LabConfig, refuse_ephemeral
from .errors import LabError
from .procs import Proc, port_free, wait_until

COMPONENTS = ("dcgm-exporter", "kube-state-metrics", "alertmanager", "prometheus", "monitoring-sync")
SCRAPE_INTERVAL = "5s"
EVALUATION_INTERVAL = "5s"
SCRAPE_TIMEOUT = "4s"
RETENTION = "2h"
SYNC_INTERVAL = 3.0
DCGM_APP = "nvidia-dcgm-exporter"  # the app label of the GPU Operator's exporter pods (and its Service's)
DTS_LABEL = ("app.kubernetes.io/name", "doca-telemetry")  # the DOCA Telemetry Service's pods (network-operator)
KSM_RESOURCES = "nodes,pods"
CLUSTER_POLICY = ("nvidia.com", "v1", "clusterpolicies")
GFD_DRIVER_LABEL = "nvidia.com/cuda.driver-version.full"
Obj = dict[str, Any]
# Ports on loopback: name -> (variable, offset from the nfd-master port when the variable is unset; 20310-20313 with
# the default ports), as the SR-IOV, Kueue and Volcano ports follow it (config.py)
PORTS = {
    "prometheus": ("GPUOPS_LAB_PROMETHEUS_PORT", 20),
    "dcgm-exporter": ("GPUOPS_LAB_DCGM_EXPORTER_PORT", 21),
    "kube-state-metrics": ("GPUOPS_LAB_KSM_PORT", 22),
    "kube-state-metrics-telemetry": ("GPUOPS_LAB_KSM_TELEMETRY_PORT", 23),
    "alertmanager": ("GPUOPS_LAB_ALERTMANAGER_PORT", 24),
    # where the Event-Driven Ansible rulebook's webhook listens (its source gpuops.platform.alertmanager, rulebook
    # variable gpuops_eda_port): the lab's Alertmanager routes the GPU alerts there; nothing else listens on it
    "eda-webhook": ("GPUOPS_LAB_EDA_WEBHOOK_PORT", 25),
}
# The lab Alertmanager's route to the rulebook (docs/remediation-events.md): every alert of the collection's GPU rules
# (their names start with GPU), one notification group per GPU, sent at once (group_wait) and again on change
# (group_interval); the source drops the repeats.
GPU_ALERTS_MATCHER = 'alertname=~"GPU.+"'
ALERT_GROUP_BY = ["alertname", "Hostname", "UUID"]
ALERT_GROUP_WAIT = "1s"
ALERT_GROUP_INTERVAL = "5s"
ALERT_REPEAT_INTERVAL = "1h"


def port(cfg: LabConfig, name: str) -> int:
    var, offset = PORTS[name]
    raw = os.environ.get(var, "")
    if raw:
        if not raw.isdigit() or not 0 < int(raw) < 65536:
            raise LabError(f"{var}={raw!r} is not a TCP port number (1-65535); unset it or fix it")
        chosen = int(raw)
    else:
        chosen = cfg.ports["nfd-master"] + offset
    refuse_ephemeral(
        {f"{var}={chosen} ({name})": chosen}, os.environ.get("GPUOPS_LAB_EPHEMERAL_RANGE_FILE", EPHEMERAL_RANGE_FILE)
    )
    return chosen


def binary(cfg: LabConfig, name: str) -> Path:
    """prometheus, promtool, alertmanager, kube-state-metrics, node_exporter: built by hack/cluster/build.sh, versions
    in versions.env."""
    if name == "kube-state-metrics":
        return cfg.cache / "bin" / f"kube-state-metrics-v{cfg.versions['KUBE_STATE_METRICS_VERSION']}" / name
    if name == "alertmanager":
        return cfg.cache / "bin" / f"alertmanager-v{cfg.versions['ALERTMANAGER_VERSION']}" / name
    if name == "node_exporter":
        return cfg.cache / "bin" / f"node_exporter-v{cfg.versions['NODE_EXPORTER_VERSION']}" / name
    return cfg.binary(name)


# ---- ServiceMonitor -> scrape jobs (pure) -------------------------------------------------------------------------
def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist) against labels. An empty
    selector matches everything, as the Prometheus Operator reads a ServiceMonitor's."""
    labels = labels or {}
    sel = selector or {}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or ():
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def namespaces_of(sm: Mapping[str, Any], all_namespaces: list[str]) -> list[str]:
    """The namespaces a ServiceMonitor's namespaceSelector selects: any, matchNames, else its own."""
    ns_sel = (sm.get("spec") or {}).get("namespaceSelector") or {}
    if ns_sel.get("any"):
        return list(all_namespaces)
    if ns_sel.get("matchNames"):
        return [n for n in ns_sel["matchNames"] if n in all_namespaces]
    return [sm["metadata"]["namespace"]]


def _snake(key: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def relabel_configs(items: list[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """monitoring.coreos.com RelabelConfigs (camelCase) as Prometheus relabel_configs (snake_case)."""
    return [{_snake(k): v for k, v in item.items()} for item in items or ()]


def _service_port(svc: Obj, ep: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(port name, port number or target port) of the ServiceMonitor endpoint on this Service, or None."""
    for p in (svc.get("spec") or {}).get("ports") or ():
        if ep.get("port") and p.get("name") == ep["port"]:
            return p.get("name", ""), p.get("targetPort", p.get("port"))
        if ep.get("targetPort") is not None and p.get("targetPort", p.get("port")) == ep["targetPort"]:
            return p.get("name", ""), ep["targetPort"]
    return None


def _container_of(pod: Obj | None, port: Any) -> tuple[str, int | None]:
    """(container name, port number) of the container port matching `port` (number or name)."""
    for c in ((pod or {}).get("spec") or {}).get("containers") or ():
        for cp in c.get("ports") or ():
            if port in (cp.get("containerPort"), cp.get("name")):
                return c.get("name", ""), cp.get("containerPort")
    return "", port if isinstance(port, int) else None


@dataclass
class Job:
    name: str
    config: dict[str, Any]
    targets: list[dict[str, Any]] = field(default_factory=list)


def scrape_jobs(
    service_monitors: list[Obj],
    services: list[Obj],
    endpoints: list[Obj],
    pods: list[Obj],
    namespaces: list[str],
    address_for: Callable[[Obj, str], tuple[str, str] | None],
) -> tuple[list[Job], list[str]]:
    """The scrape jobs the Prometheus Operator would generate for these ServiceMonitors (see the module doc), and
    what was skipped. address_for(pod, path) gives the (address, metrics path) the lab scrapes for a pod, or None."""
    eps = {(e["metadata"]["namespace"], e["metadata"]["name"]): e for e in endpoints}
    pod_by = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
    jobs: list[Job] = []
    skipped: list[str] = []
    for sm in sorted(service_monitors, key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"])):
        meta, spec = sm["metadata"], sm.get("spec") or {}
        selected = set(namespaces_of(sm, namespaces))
        svcs = [
            s
            for s in services
            if s["metadata"]["namespace"] in selected
            and selector_matches(spec.get("selector"), s["metadata"].get("labels"))
        ]
        for i, ep in enumerate(spec.get("endpoints") or ()):
            name = f"serviceMonitor/{meta['namespace']}/{meta['name']}/{i}"
            path = ep.get("path") or "/metrics"
            cfg: dict[str, Any] = {
                "job_name": name,
                "honor_labels": bool(ep.get("honorLabels", False)),
                "honor_timestamps": bool(ep.get("honorTimestamps", True)),
            }
            if ep.get("interval"):
                cfg["scrape_interval"] = ep["interval"]
            if ep.get("scrapeTimeout"):
                cfg["scrape_timeout"] = ep["scrapeTimeout"]
            if ep.get("params"):
                cfg["params"] = ep["params"]
            if ep.get("relabelings"):
                cfg["relabel_configs"] = relabel_configs(ep["relabelings"])
            if ep.get("metricRelabelings"):
                cfg["metric_relabel_configs"] = relabel_configs(ep["metricRelabelings"])
            job = Job(name, cfg)
            for svc in svcs:
                sns, sname = svc["metadata"]["namespace"], svc["metadata"]["name"]
                port = _service_port(svc, ep)
                if port is None:
                    continue
                port_name, target_port = port
                job_value = sname
                if spec.get("jobLabel") and spec["jobLabel"] in (svc["metadata"].get("labels") or {}):
                    job_value = svc["metadata"]["labels"][spec["jobLabel"]]
                for subset in (eps.get((sns, sname)) or {}).get("subsets") or ():
                    for addr in subset.get("addresses") or ():
                        ref = addr.get("targetRef") or {}
                        pod = (
                            pod_by.get((ref.get("namespace", sns), ref.get("name", "")))
                            if ref.get("kind") == "Pod"
                            else None
                        )
                        container, number = _container_of(pod, target_port)
                        if number is None:  # a named targetPort: the Endpoints subset has the number
                            number = next(
                                (p.get("port") for p in subset.get("ports") or () if p.get("name") == port_name), None
                            )
                        where = address_for(pod, path) if pod is not None else None
                        if where is None:
                            skipped.append(f"{name}: {sns}/{sname} {addr.get('ip')}:{number} (no simulated exporter)")
                            continue
                        labels = {
                            "__metrics_path__": where[1],
                            "job": job_value,
                            "namespace": sns,
                            "service": sname,
                            "pod": ref.get("name", ""),
                            "endpoint": port_name or str(target_port),
                            "instance": f"{addr.get('ip')}:{number}",
                            "__meta_kubernetes_namespace": sns,
                            "__meta_kubernetes_service_name": sname,
                            "__meta_kubernetes_pod_name": ref.get("name", ""),
                            "__meta_kubernetes_pod_node_name": addr.get("nodeName", ""),
                        }
                        if container:
                            labels["container"] = container
                        for k, v in (svc["metadata"].get("labels") or {}).items():
                            labels[f"__meta_kubernetes_service_label_{_label_name(k)}"] = v
                        for k, v in ((pod or {}).get("metadata", {}).get("labels") or {}).items():
                            labels[f"__meta_kubernetes_pod_label_{_label_name(k)}"] = v
                        for k in spec.get("targetLabels") or ():
                            if k in (svc["metadata"].get("labels") or {}):
                                labels[_label_name(k)] = svc["metadata"]["labels"][k]
                        for k in spec.get("podTargetLabels") or ():
                            if k in ((pod or {}).get("metadata", {}).get("labels") or {}):
                                labels[_label_name(k)] = pod["metadata"]["labels"][k]
                        job.targets.append({"targets": [where[0]], "labels": labels})
            job.targets.sort(key=lambda t: (t["labels"]["namespace"], t["labels"]["pod"]))
            jobs.append(job)
    return jobs, skipped


def _label_name(key: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def select_for_prometheus(
    objs: list[Obj],
    prometheus: Obj | None,
    selector_key: str,
    namespace_selector_key: str,
    ns_labels: Mapping[str, Any],
) -> list[Obj]:
    """The objects a Prometheus object selects, as the Prometheus Operator reads its selectors: a nil object
    selector selects nothing, {} everything; a nil namespace selector means the Prometheus object's own namespace,
    {} every namespace. No Prometheus object (None): everything (the lab's Prometheus without the operator)."""
    if prometheus is None:
        return list(objs)
    spec = prometheus.get("spec") or {}
    if spec.get(selector_key) is None:
        return []
    ns_sel = spec.get(namespace_selector_key)
    if ns_sel is None:
        allowed = {prometheus["metadata"]["namespace"]}
    else:
        allowed = {ns for ns, labels in ns_labels.items() if selector_matches(ns_sel, labels)}
    return [
        o
        for o in objs
        if o["metadata"]["namespace"] in allowed and selector_matches(spec[selector_key], o["metadata"].get("labels"))
    ]


def rule_files(prometheus_rules: list[Obj]) -> dict[str, dict[str, Any]]:
    """file name -> rules file ({groups}) for each PrometheusRule, as the Prometheus Operator mounts them."""
    return {
        f"{r['metadata']['namespace']}-{r['metadata']['name']}.yaml": {
            "groups": (r.get("spec") or {}).get("groups") or []
        }
        for r in prometheus_rules
    }


def prometheus_config(
    jobs: list[Job], sd_dir: Path, rules_dir: Path, static: list[dict[str, Any]], alertmanager: str = ""
) -> dict[str, Any]:
    """prometheus.yml; ``alertmanager`` (host:port), when given, receives the alerts."""
    cfgs = []
    for job in jobs:
        cfg = dict(job.config)
        cfg["file_sd_configs"] = [{"files": [str(sd_dir / sd_file(job.name))], "refresh_interval": "5s"}]
        cfgs.append(cfg)
    out: dict[str, Any] = {
        "global": {
            "scrape_interval": SCRAPE_INTERVAL,
            "evaluation_interval": EVALUATION_INTERVAL,
            "scrape_timeout": SCRAPE_TIMEOUT,
        },
        "rule_files": [str(rules_dir / "*.yaml")],
        "scrape_configs": [*static, *cfgs],
    }
    if alertmanager:
        out["alerting"] = {"alertmanagers": [{"api_version": "v2", "static_configs": [{"targets": [alertmanager]}]}]}
    return out


def alertmanager_config(webhook_url: str) -> dict[str, Any]:
    """alertmanager.yml: the GPU alerts to the rulebook's webhook (Alertmanager's webhook_config: every alert, firing
    and resolved), every other alert to a receiver that sends nothing."""
    return {
        "route": {
            "receiver": "null",
            "group_by": ALERT_GROUP_BY,
            "group_wait": ALERT_GROUP_WAIT,
            "group_interval": ALERT_GROUP_INTERVAL,
            "repeat_interval": ALERT_REPEAT_INTERVAL,
            "routes": [{"receiver": "gpuops-remediation", "matchers": [GPU_ALERTS_MATCHER]}],
        },
        "receivers": [
            {"name": "null"},
            {"name": "gpuops-remediation", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]},
        ],
    }


def sd_file(job_name: str) -> str:
    return _label_name(job_name) + ".json"


# ---- the lab side: files, processes, the API ---------------------------------------------------------------------
def mon_dir(cfg: LabConfig) -> Path:
    return dcgm.state_dir(cfg.state)


def alertmanager_url(cfg: LabConfig) -> str:
    return f"http://127.0.0.1:{port(cfg, 'alertmanager')}"


def eda_webhook_url(cfg: LabConfig) -> str:
    """Where the lab's Alertmanager sends the GPU alerts: the rulebook's source, started with gpuops_eda_port set to
    port(cfg, "eda-webhook")."""
    return f"http://127.0.0.1:{port(cfg, 'eda-webhook')}/alerts"


def prometheus_url(cfg: LabConfig) -> str:
    return f"http://127.0.0.1:{port(cfg, 'prometheus')}"


def exporter_url(cfg: LabConfig) -> str:
    return f"http://127.0.0.1:{port(cfg, 'dcgm-exporter')}"


def static_jobs(cfg: LabConfig, with_ksm: bool = True) -> list[dict[str, Any]]:
    out = [{"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{port(cfg, 'prometheus')}"]}]}]
    if with_ksm:  # as kube-prometheus-stack scrapes it: job kube-state-metrics, honorLabels true
        out.append(
            {
                "job_name": "kube-state-metrics",
                "honor_labels": True,
                "static_configs": [{"targets": [f"127.0.0.1:{port(cfg, 'kube-state-metrics')}"]}],
            }
        )
    # the node_exporters (node_exporter.py): their targets, one per RDMA node, in a file sync() rewrites
    targets = mon_dir(cfg) / node_exporter.TARGETS_FILE
    sd = [{"files": [str(targets)], "refresh_interval": "5s"}]
    out.append({"job_name": node_exporter.JOB, "file_sd_configs": sd})
    return out


def write_config(cfg: LabConfig, jobs: list[Job], rules: Mapping[str, Mapping[str, Any]]) -> bool:
    """Write prometheus.yml, the target files and the rules files. Returns whether Prometheus must reload (the job
    list or a rules file changed; target files it watches itself)."""
    d = mon_dir(cfg)
    sd_dir, rules_dir = d / "sd", d / "rules"
    sd_dir.mkdir(parents=True, exist_ok=True)
    rules_dir.mkdir(parents=True, exist_ok=True)
    reload = False
    for job in jobs:
        dcgm.write_if_changed(sd_dir / sd_file(job.name), json.dumps(job.targets, indent=1, sort_keys=True) + "\n")
    keep = {sd_file(j.name) for j in jobs}
    for f in sd_dir.glob("*.json"):
        if f.name not in keep:
            f.unlink()
    for name, content in rules.items():
        reload |= dcgm.write_if_changed(rules_dir / name, yaml.safe_dump(dict(content), sort_keys=False))
    for f in rules_dir.glob("*.yaml"):
        if f.name not in rules:
            f.unlink()
            reload = True
    am = f"127.0.0.1:{port(cfg, 'alertmanager')}"
    text = yaml.safe_dump(prometheus_config(jobs, sd_dir, rules_dir, static_jobs(cfg), am), sort_keys=False)
    reload |= dcgm.write_if_changed(d / "prometheus.yml", text)
    am_text = yaml.safe_dump(alertmanager_config(eda_webhook_url(cfg)), sort_keys=False)
    dcgm.write_if_changed(d / "alertmanager.yml", am_text)  # fixed by the ports: read once at Alertmanager's start
    return reload


def _list_custom(api_client: Any, group: str, version: str, plural: str) -> list[Obj]:
    from kubernetes import client

    try:
        return client.CustomObjectsApi(api_client).list_cluster_custom_object(group, version, plural)["items"]
    except client.ApiException as exc:
        if exc.status == 404:  # the CRD is not installed: nothing to load
            return []
        raise


@dataclass
class SyncResult:
    jobs: dict[str, int]
    rules: list[str]
    exporter_nodes: list[str]
    skipped: list[str]
    reloaded: bool


def lab_address(pod: Obj, path: str, base: str, nodes: set[str], served: set[str]) -> tuple[str, str] | None:
    """(address, metrics path) the lab scrapes for a pod's target (see the module doc): a dcgm-exporter pod on a node
    the simulated exporter serves, a DOCA Telemetry Service pod on any node; None for any other pod."""
    node = (pod.get("spec") or {}).get("nodeName")
    labels = pod["metadata"].get("labels") or {}
    if labels.get(DTS_LABEL[0]) == DTS_LABEL[1] and node in nodes:
        return base, f"/dts/{node}{path}"
    if labels.get("app") != DCGM_APP or node not in served:
        return None
    return base, f"/node/{node}{path}"


def sync(cfg: LabConfig, api_client: Any | None = None, reload: bool = True) -> SyncResult:
    """Stand in for the Prometheus Operator once (see the module doc); reload Prometheus when its configuration
    changed and it runs."""
    from kubernetes import client, config

    api_client = api_client or config.new_client_from_config(str(cfg.kubeconfig))
    core = client.CoreV1Api(api_client)

    def items(resp: Any) -> list[Obj]:
        # the API server's JSON as it is: the client's models (built, then serialized back) cost most of a sync's
        # CPU, every SYNC_INTERVAL seconds, on a lab of 64 nodes
        return json.loads(resp.data)["items"]

    nodes = {n["metadata"]["name"]: n for n in items(core.list_node(_preload_content=False))}
    pods = items(core.list_pod_for_all_namespaces(_preload_content=False))
    services = items(core.list_service_for_all_namespaces(_preload_content=False))
    endpoints = items(core.list_endpoints_for_all_namespaces(_preload_content=False))
    ns_meta = [n["metadata"] for n in items(core.list_namespace(_preload_content=False))]
    ns_labels = {m["name"]: m.get("labels") or {} for m in ns_meta}
    namespaces = sorted(ns_labels)
    proms = sorted(
        _list_custom(api_client, "monitoring.coreos.com", "v1", "prometheuses"),
        key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]),
    )
    prom = proms[0] if proms else None
    sms = select_for_prometheus(
        _list_custom(api_client, "monitoring.coreos.com", "v1", "servicemonitors"),
        prom,
        "serviceMonitorSelector",
        "serviceMonitorNamespaceSelector",
        ns_labels,
    )
    prs = select_for_prometheus(
        _list_custom(api_client, "monitoring.coreos.com", "v1", "prometheusrules"),
        prom,
        "ruleSelector",
        "ruleNamespaceSelector",
        ns_labels,
    )

    # the exporter serves each node where a dcgm-exporter pod runs
    served: dict[str, dict[str, Any]] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if (p["metadata"].get("labels") or {}).get("app") != DCGM_APP or node not in nodes:
            continue
        nlabels = nodes[node]["metadata"].get("labels") or {}
        prof = nlabels.get("gpuops.io/hardware-profile")
        if not prof:
            continue
        served[node] = {"profile": prof, "driver_version": nlabels.get(GFD_DRIVER_LABEL) or _host_driver(prof)}
    for node, info in served.items():
        try:
            n_gpus = len(dcgm.gpus_of(node, _profile(info["profile"])))
        except LabError:
            continue
        alloc = str(((nodes[node].get("status") or {}).get("allocatable") or {}).get(dcgm.GPU_RESOURCE) or "0")
        replicas = max(1, int(alloc) // n_gpus) if n_gpus and alloc.isdigit() else 1
        holders = dcgm.assign_gpus(node, pods, n_gpus, replicas)
        if holders:
            info["holders"] = holders
    dcgm.write_nodes(cfg.state, served)
    # node_exporter on every node whose hardware profile has RDMA devices
    rdma = {}
    for name, n in nodes.items():
        prof = (n["metadata"].get("labels") or {}).get("gpuops.io/hardware-profile")
        if prof:
            try:
                rdma[name] = node_exporter.rdma_devices(_profile(prof))
            except LabError:
                continue
    _ne_nodes, ne_skipped = node_exporter.reconcile(cfg, binary(cfg, "node_exporter"), rdma)
    dcgm.write_collectors(cfg.state, _collectors_csv(api_client, core))

    base = f"127.0.0.1:{port(cfg, 'dcgm-exporter')}"

    def address_for(pod: Obj, path: str) -> tuple[str, str] | None:
        return lab_address(pod, path, base, set(nodes), set(served))

    jobs, skipped = scrape_jobs(sms, services, endpoints, pods, namespaces, address_for)
    skipped += ne_skipped
    rules = rule_files(prs)
    changed = write_config(cfg, jobs, rules)
    reloaded = False
    if changed and reload and Proc("prometheus", cfg.run, cfg.logs).alive():
        req = urllib.request.Request(f"{prometheus_url(cfg)}/-/reload", method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310 - loopback
            r.read()
        reloaded = True
    return SyncResult({j.name: len(j.targets) for j in jobs}, sorted(rules), sorted(served), skipped, reloaded)


_PROFILES: dict[str, dict[str, Any]] = {}


def _profile(name: str) -> dict[str, Any]:
    """A hardware profile, loaded once per process (sync runs every few seconds)."""
    from . import profiles

    if name not in _PROFILES:
        _PROFILES[name] = profiles.load(name)
    return _PROFILES[name]


def _host_driver(profile: str) -> str:
    try:
        return str(_profile(profile)["host"].get("nvidia_driver") or "")
    except LabError:
        return ""


def _collectors_csv(api_client: Any, core: Any) -> str | None:
    """The ClusterPolicy's dcgmExporter.config ConfigMap's dcgm-metrics.csv, in the operator's namespace."""
    from kubernetes import client

    for cp in _list_custom(api_client, *CLUSTER_POLICY):
        name = (((cp.get("spec") or {}).get("dcgmExporter") or {}).get("config") or {}).get("name")
        ns = (cp.get("status") or {}).get("namespace")
        if not name or not ns:
            continue
        try:
            data = core.read_namespaced_config_map(name, ns).data or {}
        except client.ApiException:
            return None
        return data.get("dcgm-metrics.csv")
    return None


def _argv(cfg: LabConfig, name: str) -> list[str]:
    d = mon_dir(cfg)
    if name == "dcgm-exporter":
        return [sys.executable, "-m", "gpuops_lab.dcgm", "--port", str(port(cfg, "dcgm-exporter")), "--state", str(d)]
    if name == "kube-state-metrics":
        return [
            str(binary(cfg, "kube-state-metrics")),
            f"--kubeconfig={cfg.kubeconfig}",
            "--host=127.0.0.1",
            f"--port={port(cfg, 'kube-state-metrics')}",
            "--telemetry-host=127.0.0.1",
            f"--telemetry-port={port(cfg, 'kube-state-metrics-telemetry')}",
            f"--resources={KSM_RESOURCES}",
        ]
    if name == "prometheus":
        return [
            str(binary(cfg, "prometheus")),
            f"--config.file={d / 'prometheus.yml'}",
            f"--storage.tsdb.path={d / 'tsdb'}",
            f"--storage.tsdb.retention.time={RETENTION}",
            f"--web.listen-address=127.0.0.1:{port(cfg, 'prometheus')}",
            "--web.enable-lifecycle",
            "--log.level=warn",
        ]
    if name == "alertmanager":
        return [
            str(binary(cfg, "alertmanager")),
            f"--config.file={d / 'alertmanager.yml'}",
            f"--storage.path={d / 'alertmanager'}",
            f"--web.listen-address=127.0.0.1:{port(cfg, 'alertmanager')}",
            "--cluster.listen-address=",  # one instance: no gossip port
            "--log.level=warn",
        ]
    if name == "monitoring-sync":
        return [sys.executable, "-m", "gpuops_lab.monitoring", "watch", "--interval", str(SYNC_INTERVAL)]
    raise KeyError(name)


def _get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback only
        return r.read()


def _probe(cfg: LabConfig, name: str) -> tuple[Callable[[], bool], str]:
    if name == "dcgm-exporter":
        return (lambda: _get(f"{exporter_url(cfg)}/healthz") == b"ok"), "GET /healthz"
    if name == "kube-state-metrics":
        url = f"http://127.0.0.1:{port(cfg, 'kube-state-metrics')}/healthz"
        return (lambda: b"OK" in _get(url).upper()), f"GET {url}"
    if name == "prometheus":
        return (lambda: bool(_get(f"{prometheus_url(cfg)}/-/ready"))), "GET /-/ready"
    if name == "alertmanager":
        return (lambda: bool(_get(f"{alertmanager_url(cfg)}/-/ready"))), "GET /-/ready"
    return (lambda: True), "started"


def ports_of(name: str) -> list[str]:
    return {
        "dcgm-exporter": ["dcgm-exporter"],
        "kube-state-metrics": ["kube-state-metrics", "kube-state-metrics-telemetry"],
        "prometheus": ["prometheus"],
        "alertmanager": ["alertmanager"],
    }.get(name, [])


def missing_binaries(cfg: LabConfig) -> list[str]:
    return [
        b for b in ("prometheus", "alertmanager", "kube-state-metrics", "node_exporter") if not binary(cfg, b).is_file()
    ]


def start(cfg: LabConfig, say: Callable[[str], None] = print) -> dict[str, str]:
    """Start the monitoring processes that are not running (the lab must be up), after one sync so that
    Prometheus starts with the cluster's ServiceMonitors and rules. Returns the URLs."""
    import subprocess

    from .config import BUILD_SCRIPT

    if not cfg.kubeconfig.is_file():
        raise LabError(f"no kubeconfig at {cfg.kubeconfig}: start the lab first (python -m gpuops_lab up)")
    missing = missing_binaries(cfg)
    if missing:
        say(f"building {', '.join(missing)} (hack/cluster/build.sh)")
        env = {**os.environ, "GPUOPS_CACHE": str(cfg.cache)}
        builds = (
            ("prometheus",) * 2,
            ("alertmanager",) * 2,
            ("kube-state-metrics",) * 2,
            ("node-exporter", "node_exporter"),
        )
        for what, bname in builds:
            if bname in missing and subprocess.call(["bash", str(BUILD_SCRIPT), what], env=env) != 0:  # noqa: S603,S607
                raise LabError(f"{BUILD_SCRIPT} {what} failed; see its output above")
    t0 = time.monotonic()
    sync(cfg, reload=False)
    env = {**os.environ, "PYTHONPATH": str(HACK), "GPUOPS_LAB_STATE": str(cfg.state)}
    for name in COMPONENTS:
        proc = Proc(name, cfg.run, cfg.logs)
        if proc.alive():
            continue
        for pname in ports_of(name):
            if not port_free(port(cfg, pname)):
                raise LabError(
                    f"port {port(cfg, pname)} ({pname}) on 127.0.0.1 is already in use; choose another with the "
                    "GPUOPS_LAB_*_PORT variables (hack/gpuops_lab/config.py)"
                )
        proc.start(_argv(cfg, name), env=env)
        ready, what = _probe(cfg, name)
        wait_until(proc, ready, 30, what)
        say(f"  {name}: ready (pid {proc.pid()}, log {proc.log})")
    say(
        f"monitoring up in {time.monotonic() - t0:.1f}s; Prometheus {prometheus_url(cfg)}, Alertmanager "
        f"{alertmanager_url(cfg)} (GPU alerts to {eda_webhook_url(cfg)})"
    )
    return {
        "prometheus": prometheus_url(cfg),
        "alertmanager": alertmanager_url(cfg),
        "eda-webhook": eda_webhook_url(cfg),
        "dcgm-exporter": exporter_url(cfg),
    }


def stop(cfg: LabConfig) -> list[str]:
    stopped = [n for n in reversed(COMPONENTS) if Proc(n, cfg.run, cfg.logs).stop()]
    return stopped + node_exporter.stop_all(cfg)


def status(cfg: LabConfig) -> dict[str, int | None]:
    return {n: Proc(n, cfg.run, cfg.logs).pid() for n in COMPONENTS}


# ---- the Prometheus HTTP API -------------------------------------------------------------------------------------
def query(cfg: LabConfig, expr: str) -> list[dict[str, Any]]:
    """An instant query: the result vector (each {metric, value})."""
    url = f"{prometheus_url(cfg)}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.loads(_get(url, timeout=10))
    if body.get("status") != "success":
        raise LabError(f"Prometheus query {expr!r} failed: {body}")
    return body["data"]["result"]


def alerts(cfg: LabConfig) -> list[dict[str, Any]]:
    """Every pending and firing alert (/api/v1/alerts): each {labels, annotations, state, activeAt, value}."""
    return json.loads(_get(f"{prometheus_url(cfg)}/api/v1/alerts", timeout=10))["data"]["alerts"]


def alertmanager_alerts(cfg: LabConfig) -> list[dict[str, Any]]:
    """The alerts Alertmanager holds (/api/v2/alerts): each {labels, annotations, status, receivers, fingerprint}."""
    return json.loads(_get(f"{alertmanager_url(cfg)}/api/v2/alerts", timeout=10))


def targets(cfg: LabConfig) -> list[dict[str, Any]]:
    return json.loads(_get(f"{prometheus_url(cfg)}/api/v1/targets?state=active", timeout=10))["data"]["activeTargets"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpuops_lab.monitoring")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch", help="sync every --interval seconds (the monitoring-sync lab process)")
    w.add_argument("--interval", type=float, default=SYNC_INTERVAL)
    args = ap.parse_args(argv)
    cfg = LabConfig.load()
    from kubernetes import config

    api_client = config.new_client_from_config(str(cfg.kubeconfig))
    last = None
    while True:
        try:
            res = sync(cfg, api_client)
            summary = (res.jobs, res.rules, res.exporter_nodes)
            if summary != last or res.reloaded:
                print(
                    f"{time.strftime('%H:%M:%S')} synced: jobs {res.jobs}, rules {res.rules}, "
                    f"exporter nodes {len(res.exporter_nodes)}, reloaded {res.reloaded}",
                    flush=True,
                )
                last = summary
        except Exception as exc:  # noqa: BLE001 - keep going; the next round retries
            print(f"{time.strftime('%H:%M:%S')} sync failed: {exc}", flush=True)
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
