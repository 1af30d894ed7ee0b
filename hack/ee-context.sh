#!/usr/bin/env bash
# Writes the build context of an ansible-builder v3 definition to $1 (default .state/ee/context): $2 is the
# definition, execution-environment.yml (default; the AWX execution environment) or decision-environment.yml (the
# EDA decision environment). Stages the collection artifact under files/ - and the pinned helm binary when the
# definition copies it in - next to a copy of the definition, then runs `ansible-builder create` (offline: it only
# writes files). No container engine is needed; building the image from the context is `ansible-builder build` /
# podman where one exists.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$repo/.state/ee/context}")
definition=${2:-execution-environment.yml}
. "$repo/hack/cluster/versions.env"
helm="${GPUOPS_CACHE:-$HOME/.cache/gpuops}/bin/helm-v$HELM_VERSION/helm"
with_helm=$(grep -c 'src: files/helm' "$repo/$definition" || true)
[ "$with_helm" = 0 ] || [ -x "$helm" ] || { echo "ee-context: $helm is missing: run 'make build' first" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/files"
cp "$repo/$definition" "$repo/requirements.txt" "$repo/bindep.txt" "$work/"
ansible-galaxy collection build "$repo" --output-path "$work/build" >/dev/null
mv "$work"/build/gpuops-platform-*.tar.gz "$work/files/gpuops-platform.tar.gz"
[ "$with_helm" = 0 ] || cp "$helm" "$work/files/helm"
rm -rf "$out"
(cd "$work" && ansible-builder create -f "$definition" -c "$out" --output-filename Containerfile)
