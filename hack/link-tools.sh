#!/usr/bin/env bash
# Put the lab's pinned helm and kubectl on the virtualenv's PATH (kubernetes.core.helm finds `helm` there).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/hack/cluster/versions.env"
cache=${GPUOPS_CACHE:-$HOME/.cache/gpuops}
ln -sfn "$cache/bin/helm-v$HELM_VERSION/helm" "$repo/.venv/bin/helm"
ln -sfn "$cache/bin/k8s-v$K8S_VERSION/kubectl" "$repo/.venv/bin/kubectl"
