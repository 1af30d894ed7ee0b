# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This doc fragment is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

from __future__ import annotations


class ModuleDocFragment:
    # Kubernetes connection options; paired with AUTH_ARG_SPEC in plugins/module_utils/_k8s.py.
    # Names, aliases and environment variables mirror kubernetes.core's k8s_auth_options.
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to an existing Kubernetes config file.
      - If not given, and O(host) is not given either, the client loads the default configuration
        (C(KUBECONFIG) or C(~/.kube/config)), or the in-cluster service account configuration when there is no
        such file.
      - Can also be set with the E(K8S_AUTH_KUBECONFIG) environment variable.
    type: path
  context:
    description:
      - The name of a context in the kubeconfig file. Defaults to the file's current context.
      - Can also be set with the E(K8S_AUTH_CONTEXT) environment variable.
    type: str
  host:
    description:
      - URL of the Kubernetes API server. Overrides the server of the kubeconfig when both are given.
      - Can also be set with the E(K8S_AUTH_HOST) environment variable.
    type: str
  api_key:
    description:
      - Bearer token used to authenticate with the API server.
      - Can also be set with the E(K8S_AUTH_API_KEY) environment variable.
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's TLS certificate. Defaults to the kubeconfig's setting (verify).
      - Can also be set with the E(K8S_AUTH_VERIFY_SSL) environment variable.
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - Path to the CA certificate (full chain) that signed the API server's certificate.
      - Can also be set with the E(K8S_AUTH_SSL_CA_CERT) environment variable.
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Path to a client certificate used to authenticate with the API server.
      - Can also be set with the E(K8S_AUTH_CERT_FILE) environment variable.
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path to the key of O(client_cert).
      - Can also be set with the E(K8S_AUTH_KEY_FILE) environment variable.
    type: path
    aliases: [key_file]
requirements:
  - kubernetes (Python client) >= 24.2.0
"""
