#!/usr/bin/env bash
# Writes the execution environment's build context (execution-environment.yml, ansible-builder v3) to $1
# (default .state/ee/context): stages the collection artifact and the pinned helm binary under files/ next to a
# copy of the definition, then runs `ansible-builder create` (offline: it only writes files). No container engine
# is needed; building the image from the context is `ansible-builder build` / podman where one exists.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$repo/.state/ee/context}")
. "$repo/hack/cluster/versions.env"
helm="${GPUOPS_CACHE:-$HOME/.cache/gpuops}/bin/helm-v$HELM_VERSION/helm"
[ -x "$helm" ] || { echo "ee-context: $helm is missing: run 'make build' first" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/files"
cp "$repo/execution-environment.yml" "$repo/requirements.txt" "$repo/bindep.txt" "$work/"
ansible-galaxy collection build "$repo" --output-path "$work/build" >/dev/null
mv "$work"/build/gpuops-platform-*.tar.gz "$work/files/gpuops-platform.tar.gz"
cp "$helm" "$work/files/helm"
rm -rf "$out"
(cd "$work" && ansible-builder create -f execution-environment.yml -c "$out" --output-filename Containerfile)
