"""The lab's Service network (gpuops_lab.services) with the real API server: a validating webhook registered on a
Service, as upstream charts register theirs, is called at the Service's ClusterIP through the egress proxy and reaches
the loopback server its route names; the serving certificate is checked for `<service>.<namespace>.svc`; without a
route the call fails as a Service without endpoints does."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from gpuops_lab import pki, services
from kubernetes import client


class _Deny(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name = review["request"]["name"]
        body = json.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": review["request"]["uid"],
                    "allowed": False,
                    "status": {"code": 403, "message": f"refused {name} through the Service network"},
                },
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def deny_server(cluster, namespace):
    """A TLS webhook server on a free loopback port, with a lab-CA certificate for `deny.<namespace>.svc`."""
    cfg = cluster.cfg
    name = f"deny-{namespace}"
    pki.ensure_serving_cert(cfg.pki, name, dns=(f"deny.{namespace}.svc",))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cfg.pki / f"{name}.crt"), str(cfg.pki / f"{name}.key"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Deny)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_webhook_on_a_service_is_reached_through_its_route(cluster, namespace, core, deny_server):
    cfg = cluster.cfg
    core.create_namespaced_service(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "deny"},
            "spec": {"ports": [{"port": 443, "targetPort": 9443}]},
        },
    )
    label = f"t-{uuid.uuid4().hex[:6]}"
    hook_name = f"gpuops-lab-{label}"
    adm = client.AdmissionregistrationV1Api(cluster.api_client)
    adm.create_validating_webhook_configuration(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": hook_name},
            "webhooks": [
                {
                    "name": "deny.gpuops-lab.test",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 5,
                    "objectSelector": {"matchLabels": {"gpuops-lab-test": label}},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["configmaps"],
                        }
                    ],
                    "clientConfig": {
                        "service": {"name": "deny", "namespace": namespace, "path": "/validate", "port": 443},
                        "caBundle": base64.b64encode((cfg.pki / "ca.crt").read_bytes()).decode(),
                    },
                }
            ],
        }
    )

    def create(name):
        cm = {"metadata": {"name": name, "labels": {"gpuops-lab-test": label}}}
        with pytest.raises(client.ApiException) as err:
            core.create_namespaced_config_map(namespace, cm)
        return err.value.body

    try:
        # no route yet: the Service has no endpoint in the lab, the call fails (failurePolicy Fail)
        body = create("first")
        assert "503" in body and "deny.gpuops-lab.test" in body
        services.add_route(cfg, namespace, "deny", 443, deny_server)
        body = create("second")  # the webhook itself answered, through the Service's ClusterIP
        assert "refused second through the Service network" in body
        log = (cfg.logs / "service-proxy.log").read_text()
        assert f"(Service {namespace}/deny:443)" in log
        # an object the webhook does not select is created
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "unselected"}})
    finally:
        adm.delete_validating_webhook_configuration(hook_name)
        services.remove_route(cfg, namespace, "deny", 443)
