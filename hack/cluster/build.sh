#!/usr/bin/env bash
# Build (or reuse) the local control plane binaries from their published Go modules.
# Output: $GPUOPS_CACHE/bin/<component>-<version>/ (outside the repository), with a
# SHA256SUMS stamp; a cache whose binaries do not match their stamp is rebuilt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=/dev/null
. "$here/versions.env"
CACHE=${GPUOPS_CACHE:-$HOME/.cache/gpuops}
export GOFLAGS=-mod=mod CGO_ENABLED=0

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "build.sh: '$1' not found: $2" >&2; exit 3; }
}
need go "install Go >= 1.25 (https://go.dev/doc/install or the Debian package golang)"

ok() { # ok DIR BIN... -> 0 when every binary exists and matches the stamp
  local d=$1; shift
  [ -f "$d/SHA256SUMS" ] || return 1
  for b in "$@"; do [ -f "$d/$b" ] || return 1; done
  (cd "$d" && sha256sum --quiet -c SHA256SUMS >/dev/null 2>&1)
}
stamp() { local d=$1; shift; (cd "$d" && sha256sum "$@" > SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS); }

copy_module() { # copy_module MOD@VERSION DEST: a writable copy of a published module (`go install mod@v` reads the
  # proxy's version list, which this proxy refuses: download the exact version and build inside a copy of it)
  local dir
  mkdir -p "$(dirname "$2")"
  dir=$(cd "$(dirname "$2")" && GOFLAGS= go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || { echo "build.sh: go mod download gave no module dir for $1" >&2; exit 1; }
  cp -r "$dir" "$2"; chmod -R u+w "$2"
}

build_k8s() {
  local out="$CACHE/bin/k8s-v$K8S_VERSION" src="$CACHE/src/k8s-v$K8S_VERSION"
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  if ok "$out" "${bins[@]}"; then echo "k8s v$K8S_VERSION: cached in $out"; return; fi
  [ -d "$out" ] && echo "k8s v$K8S_VERSION: cache in $out incomplete or corrupted, rebuilding" >&2
  rm -rf "$out"; mkdir -p "$src" "$out.tmp"
  local staging="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client
    csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
    kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils
    pod-security-admission sample-apiserver sample-cli-plugin sample-controller"
  {
    printf 'module local.test/k8sbuild\n\ngo 1.24.0\n\ngodebug default=go1.24\n\n'
    printf 'require k8s.io/kubernetes v%s\n\nreplace (\n' "$K8S_VERSION"
    for m in $staging; do printf '\tk8s.io/%s => k8s.io/%s v0.%s\n' "$m" "$m" "${K8S_VERSION#1.}"; done
    printf ')\n'
  } > "$src/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n\t_ "k8s.io/kubernetes/cmd/kubectl"\n)\n' > "$src/tools.go"
  local bd ldf p
  bd=$(date -u +%Y-%m-%dT%H:%M:%SZ); ldf="-s -w"
  local minor=${K8S_VERSION#1.}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf="$ldf -X $p.gitTreeState=clean -X $p.buildDate=$bd"
  done
  echo "k8s v$K8S_VERSION: building in $src (cold: 15-40 min on 2 cores)"
  (cd "$src" && go mod tidy && go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ldf" -o "$out.tmp/" \
     k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
     k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
  stamp "$out.tmp" "${bins[@]}"; mv "$out.tmp" "$out"
}

build_etcd() {
  local out="$CACHE/bin/etcd-v$ETCD_VERSION" src="$CACHE/src/etcd-v$ETCD_VERSION"
  if ok "$out" etcd; then echo "etcd v$ETCD_VERSION: cached in $out"; return; fi
  rm -rf "$out"; mkdir -p "$src" "$out.tmp"
  printf 'module local.test/etcdbuild\n\ngo 1.25.0\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" > "$src/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > "$src/tools.go"
  echo "etcd v$ETCD_VERSION: building in $src"
  (cd "$src" && go mod tidy && go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$ETCD_VERSION" \
     -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3)
  stamp "$out.tmp" etcd; mv "$out.tmp" "$out"
}

build_kwok() {
  local out="$CACHE/bin/kwok-v$KWOK_VERSION"
  if ok "$out" kwok stages/pod-ready.yaml; then echo "kwok v$KWOK_VERSION: cached in $out"; return; fi
  rm -rf "$out"; mkdir -p "$out.tmp"
  echo "kwok v$KWOK_VERSION: building"
  GOFLAGS= GOBIN="$out.tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  # kwok's default Stages ship in its module; keep the ones the lab uses next to the binary
  local stages f names=()
  stages="$(GOFLAGS= go env GOMODCACHE)/sigs.k8s.io/kwok@v$KWOK_VERSION/kustomize/stage"
  mkdir -p "$out.tmp/stages"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    cp "$stages/$f" "$out.tmp/stages/"; names+=("stages/$(basename "$f")")
  done
  stamp "$out.tmp" kwok "${names[@]}"; mv "$out.tmp" "$out"
}

build_helm() {
  local out="$CACHE/bin/helm-v$HELM_VERSION"
  if ok "$out" helm; then echo "helm v$HELM_VERSION: cached in $out"; return; fi
  rm -rf "$out"; mkdir -p "$out.tmp"
  echo "helm v$HELM_VERSION: building"
  GOFLAGS= GOBIN="$out.tmp" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@v$HELM_VERSION"
  stamp "$out.tmp" helm; mv "$out.tmp" "$out"
}

build_nfd() { # nfd-master only: the lab plays nfd-worker (NodeFeature objects), the real master labels
  local out="$CACHE/bin/nfd-v$NFD_VERSION" src="$CACHE/src/nfd-v$NFD_VERSION"
  local mod=sigs.k8s.io/node-feature-discovery
  if ok "$out" nfd-master; then echo "nfd v$NFD_VERSION: cached in $out"; return; fi
  rm -rf "$out" "$src"; mkdir -p "$out.tmp" "$(dirname "$src")"
  echo "nfd v$NFD_VERSION: building nfd-master in $src"
  # `go install mod@v` refuses the module (go.mod replaces api/nfd with a local dir the zip lacks):
  # copy the module out of the read-only cache and put the published api/nfd module in that dir.
  local dirs dir api
  dirs=$(cd "$(dirname "$src")" && GOFLAGS= go mod download -json "$mod@v$NFD_VERSION" "$mod/api/nfd@v$NFD_VERSION" |
         sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  dir=$(printf '%s\n' "$dirs" | sed -n 1p); api=$(printf '%s\n' "$dirs" | sed -n 2p)
  [ -d "$dir" ] && [ -d "$api" ] || { echo "build.sh: go mod download gave no module dirs for $mod" >&2; exit 1; }
  cp -r "$dir" "$src"; chmod -R u+w "$src"; rm -rf "$src/api/nfd"; cp -r "$api" "$src/api/nfd"; chmod -R u+w "$src/api/nfd"
  # The one change to upstream code: its metrics/healthz server listens on ":<port>" (every interface)
  # with no flag to bind it; the lab serves nothing beyond loopback.
  local srv="$src/pkg/nfd-master/nfd-master.go"
  grep -q 'Addr: fmt.Sprintf(":%d", m.args.Port)' "$srv" || { echo "build.sh: $srv changed upstream: update the loopback patch" >&2; exit 1; }
  sed -i 's/Addr: fmt.Sprintf(":%d", m.args.Port)/Addr: fmt.Sprintf("127.0.0.1:%d", m.args.Port)/' "$srv"
  (cd "$src" && go build -trimpath -ldflags "-s -w -X $mod/pkg/version.version=v$NFD_VERSION" \
     -o "$out.tmp/nfd-master" ./cmd/nfd-master)
  stamp "$out.tmp" nfd-master; mv "$out.tmp" "$out"; rm -rf "$src"
}

fetch_chart() { # fetch_chart LABEL MOD VERSION DIR NAME: an upstream Helm chart (issue 27 §6) the lab's chart repository
  # serves in place of a fixture, or that the tests check a fixture against: DIR of module MOD at VERSION copied into $CACHE/charts/NAME-vVERSION/NAME with a
  # SHA256SUMS stamp. A cache entry of its own: a machine whose binaries are cached (and whose Go module cache may be
  # empty) still fetches it. Read from the module zip at the pinned version, never committed. Upstream's Chart.yaml in
  # git carries a placeholder version; its release sets VERSION when packaging, and so does the lab
  # (hack/gpuops_lab/charts.py: helm package --version VERSION --app-version vVERSION).
  local label=$1 mod=$2 version=$3 sub=$4 name=$5
  local out="$CACHE/charts/$name-v$version" files dir
  if [ -f "$out/SHA256SUMS" ] && (cd "$out" && sha256sum --quiet -c SHA256SUMS >/dev/null 2>&1) \
     && [ -f "$out/$name/Chart.yaml" ]; then echo "$label chart v$version: cached in $out"; return; fi
  rm -rf "$out" "$out.tmp"; mkdir -p "$out.tmp"
  echo "$label chart v$version: fetching $mod@v$version ($sub)"
  dir=$(cd "$out.tmp" && GOFLAGS= go mod download -json "$mod@v$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -f "$dir/$sub/Chart.yaml" ] || { echo "build.sh: $mod@v$version has no $sub/Chart.yaml (module dir '$dir')" >&2; exit 1; }
  cp -r "$dir/$sub" "$out.tmp/$name"; chmod -R u+w "$out.tmp"
  files=$(cd "$out.tmp" && find "$name" -type f | LC_ALL=C sort)
  # shellcheck disable=SC2086
  stamp "$out.tmp" $files; mv "$out.tmp" "$out"
}

build_nfd_chart() { # the upstream NFD Helm chart; its Chart.yaml in git says version 0.2.1
  fetch_chart nfd sigs.k8s.io/node-feature-discovery "$NFD_VERSION" deployment/helm/node-feature-discovery \
    node-feature-discovery
}

build_sriov_chart() { # the upstream SR-IOV Network Operator Helm chart (named sriov-network-operator-chart); its
  # Chart.yaml in git says version 0.0.0-dev, appVersion v0.0.0-dev, and values.yaml names its images without tags
  # (upstream's hack/release/chart-update.sh stamps them at release time; the lab runs no image)
  fetch_chart sriov github.com/k8snetworkplumbingwg/sriov-network-operator "$SRIOV_VERSION" \
    deployment/sriov-network-operator-chart sriov-network-operator-chart
}

build_kueue_chart() { # the upstream Kueue Helm chart (charts/kueue; its Chart.yaml in git says 0.19.2), served by the
  # lab's chart repository (the kueue role installs it; the lab's kubelet runs the controller for its pod)
  fetch_chart kueue sigs.k8s.io/kueue "$KUEUE_VERSION" charts/kueue kueue
}

build_volcano_chart() { # the upstream Volcano Helm chart (installer/helm/chart/volcano, with its jobflow subchart; its
  # Chart.yaml in git says 1.15.1): served by the lab's chart repository, as the Kueue chart is
  fetch_chart volcano volcano.sh/volcano "$VOLCANO_VERSION" installer/helm/chart/volcano volcano
}

build_sriov() { # the SR-IOV Network Operator (the operator only): the lab plays its config daemon and device plugin
  local out="$CACHE/bin/sriov-network-operator-v$SRIOV_VERSION" src="$CACHE/src/sriov-network-operator-v$SRIOV_VERSION"
  local mod=github.com/k8snetworkplumbingwg/sriov-network-operator
  if ok "$out" sriov-network-operator; then echo "sriov-network-operator v$SRIOV_VERSION: cached in $out"; return; fi
  rm -rf "$out" "$out.tmp" "$src"; mkdir -p "$out.tmp" "$(dirname "$src")"
  echo "sriov-network-operator v$SRIOV_VERSION: building in $src"
  copy_module "$mod@v$SRIOV_VERSION" "$src"  # its one go.mod replace points at a published module
  (cd "$src" && go build -trimpath -ldflags "-s -w -X $mod/pkg/version.Raw=v$SRIOV_VERSION" \
     -o "$out.tmp/sriov-network-operator" .)
  # The operator renders its DaemonSets from ./bindata (relative to its working directory): keep it beside the binary.
  cp -r "$src/bindata" "$out.tmp/bindata"
  local files
  files=$(cd "$out.tmp" && find bindata -type f | LC_ALL=C sort)
  # shellcheck disable=SC2086
  stamp "$out.tmp" sriov-network-operator $files; mv "$out.tmp" "$out"; rm -rf "$src"
}

build_prometheus() { # Prometheus and promtool (issue 11): the lab's real Prometheus and `promtool test rules`
  local out="$CACHE/bin/prometheus-v$PROMETHEUS_VERSION" src="$CACHE/src/prometheus-v$PROMETHEUS_VERSION"
  local mod=github.com/prometheus/prometheus
  if ok "$out" prometheus promtool; then echo "prometheus v$PROMETHEUS_VERSION: cached in $out"; return; fi
  rm -rf "$out" "$out.tmp" "$src"; mkdir -p "$out.tmp" "$(dirname "$src")"
  echo "prometheus v$PROMETHEUS_VERSION (module $mod@v$PROMETHEUS_MODULE_VERSION): building in $src"
  # The Go module is tagged v0.<minor>.<patch> for Prometheus 3.<minor>.<patch>; its one go.mod replace points at
  # a published module. The web UI's assets are built with npm and are not in the module: without the
  # builtinassets tag the binary serves the HTTP API (all the lab uses) and no UI.
  copy_module "$mod@v$PROMETHEUS_MODULE_VERSION" "$src"
  local ver="-X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION"
  (cd "$src" && go build -trimpath -ldflags "-s -w $ver" -o "$out.tmp/prometheus" ./cmd/prometheus \
     && go build -trimpath -ldflags "-s -w $ver" -o "$out.tmp/promtool" ./cmd/promtool)
  stamp "$out.tmp" prometheus promtool; mv "$out.tmp" "$out"; rm -rf "$src"
}

build_alertmanager() { # Alertmanager and amtool: the lab's monitoring routes the GPU alerts to the rulebook's webhook
  local out="$CACHE/bin/alertmanager-v$ALERTMANAGER_VERSION" src="$CACHE/src/alertmanager-v$ALERTMANAGER_VERSION"
  local mod=github.com/prometheus/alertmanager
  if ok "$out" alertmanager amtool; then echo "alertmanager v$ALERTMANAGER_VERSION: cached in $out"; return; fi
  rm -rf "$out" "$out.tmp" "$src"; mkdir -p "$out.tmp" "$(dirname "$src")"
  echo "alertmanager v$ALERTMANAGER_VERSION: building in $src"
  copy_module "$mod@v$ALERTMANAGER_VERSION" "$src"  # no go.mod replace
  # ui/web.go embeds app/dist, the web UI that npm builds and the module leaves out: an empty page stands in (the
  # lab uses the HTTP API only), as the lab's Prometheus is built without its UI.
  local page
  for page in elm mantine; do
    mkdir -p "$src/ui/app/dist/$page"
    printf '<!doctype html><title>Alertmanager</title><p>Built without the web UI; use the API (/api/v2).\n' \
      > "$src/ui/app/dist/$page/index.html"
  done
  local ver="-X github.com/prometheus/common/version.Version=$ALERTMANAGER_VERSION"
  (cd "$src" && go build -trimpath -ldflags "-s -w $ver" -o "$out.tmp/alertmanager" ./cmd/alertmanager \
     && go build -trimpath -ldflags "-s -w $ver" -o "$out.tmp/amtool" ./cmd/amtool)
  stamp "$out.tmp" alertmanager amtool; mv "$out.tmp" "$out"; rm -rf "$src"
}

build_kube_state_metrics() { # kube-state-metrics (issue 11): the lab's monitoring runs it out of cluster (nodes, pods)
  local out="$CACHE/bin/kube-state-metrics-v$KUBE_STATE_METRICS_VERSION" src="$CACHE/src/kube-state-metrics-v$KUBE_STATE_METRICS_VERSION"
  local mod=k8s.io/kube-state-metrics/v2
  if ok "$out" kube-state-metrics; then echo "kube-state-metrics v$KUBE_STATE_METRICS_VERSION: cached in $out"; return; fi
  rm -rf "$out" "$out.tmp" "$src"; mkdir -p "$out.tmp" "$(dirname "$src")"
  echo "kube-state-metrics v$KUBE_STATE_METRICS_VERSION: building in $src"
  copy_module "$mod@v$KUBE_STATE_METRICS_VERSION" "$src"  # no go.mod replace
  (cd "$src" && go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=v$KUBE_STATE_METRICS_VERSION" \
     -o "$out.tmp/kube-state-metrics" .)
  stamp "$out.tmp" kube-state-metrics; mv "$out.tmp" "$out"; rm -rf "$src"
}

build_node_exporter() { # node_exporter: the lab's monitoring runs it with only the infiniband collector on fake sysfs
  local out="$CACHE/bin/node_exporter-v$NODE_EXPORTER_VERSION" src="$CACHE/src/node_exporter-v$NODE_EXPORTER_VERSION"
  local mod=github.com/prometheus/node_exporter
  if ok "$out" node_exporter; then echo "node_exporter v$NODE_EXPORTER_VERSION: cached in $out"; return; fi
  rm -rf "$out" "$out.tmp" "$src"; mkdir -p "$out.tmp" "$(dirname "$src")"
  echo "node_exporter v$NODE_EXPORTER_VERSION: building in $src"
  copy_module "$mod@v$NODE_EXPORTER_VERSION" "$src"  # no go.mod replace
  (cd "$src" && go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=$NODE_EXPORTER_VERSION" \
     -o "$out.tmp/node_exporter" .)
  stamp "$out.tmp" node_exporter; mv "$out.tmp" "$out"; rm -rf "$src"
}

build_registry() { # the CNCF Distribution registry (OCI), the lab's oci:// chart repository
  local out="$CACHE/bin/registry-v$REGISTRY_VERSION" src="$CACHE/src/registry-v$REGISTRY_VERSION"
  local mod=github.com/distribution/distribution/v3
  if ok "$out" registry; then echo "registry v$REGISTRY_VERSION: cached in $out"; return; fi
  rm -rf "$out" "$out.tmp"; mkdir -p "$src" "$out.tmp"
  echo "registry v$REGISTRY_VERSION: building in $src"
  # `go install mod@v` reads the proxy's version list: a wrapper module pins the exact version instead.
  printf 'module local.test/registrybuild\n\ngo 1.26.0\n\nrequire %s v%s\n' "$mod" "$REGISTRY_VERSION" > "$src/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s/cmd/registry"\n' "$mod" > "$src/tools.go"
  (cd "$src" && go mod tidy && go build -trimpath -ldflags "-s -w -X $mod/version.version=v$REGISTRY_VERSION" \
     -o "$out.tmp/registry" "$mod/cmd/registry")
  stamp "$out.tmp" registry; mv "$out.tmp" "$out"
}

build_kueue() { # the Kueue controller, run out of cluster by the lab's kubelet (hack/gpuops_lab/kubelet.py) for the
  # upstream chart's pod
  local out="$CACHE/bin/kueue-v$KUEUE_VERSION" src="$CACHE/src/kueue-v$KUEUE_VERSION"
  local mod=sigs.k8s.io/kueue patches="metrics-cert-dir visibility-cert-dir"
  if ok "$out" kueue PATCHES && [ "$(cat "$out/PATCHES")" = "$patches" ]; then echo "kueue v$KUEUE_VERSION: cached in $out"; return; fi
  rm -rf "$out" "$out.tmp" "$src"; mkdir -p "$out.tmp" "$(dirname "$src")"
  echo "kueue v$KUEUE_VERSION: building in $src (cold: about 15 min on 2 cores)"
  copy_module "$mod@v$KUEUE_VERSION" "$src"
  # The two changes to upstream code, both certificate directories the chart mounts and upstream hardcodes; out of
  # cluster the lab writes neither /etc nor /visibility, so an environment variable, when set, names the directory:
  # - metrics: /etc/kueue/metrics/certs (KUEUE_METRICS_CERT_DIR);
  # - the visibility API server's serving certificate: /visibility (KUEUE_VISIBILITY_CERT_DIR; an emptyDir in the
  #   chart, where internal cert management writes a self-signed one).
  local main="$src/cmd/kueue/main.go" vis="$src/pkg/visibility/server.go"
  grep -q 'metricsCertPath := "/etc/kueue/metrics/certs"' "$main" || { echo "build.sh: $main changed upstream: update the metrics cert patch" >&2; exit 1; }
  sed -i 's|metricsCertPath := "/etc/kueue/metrics/certs"|metricsCertPath := cmp.Or(os.Getenv("KUEUE_METRICS_CERT_DIR"), "/etc/kueue/metrics/certs")|' "$main"
  sed -i '0,/^import (/s//import (\n\t"cmp"/' "$main"
  grep -q '^	certDir = "/visibility"$' "$vis" || { echo "build.sh: $vis changed upstream: update the visibility cert patch" >&2; exit 1; }
  sed -i 's|^	certDir = "/visibility"$|	certDir = cmp.Or(os.Getenv("KUEUE_VISIBILITY_CERT_DIR"), "/visibility")|' "$vis"
  sed -i '0,/^import (/s//import (\n\t"cmp"\n\t"os"/' "$vis"
  (cd "$src" && go build -trimpath -ldflags "-s -w -X $mod/pkg/version.GitVersion=v$KUEUE_VERSION" \
     -o "$out.tmp/kueue" ./cmd/kueue)
  echo "$patches" > "$out.tmp/PATCHES"
  # its CRDs, webhooks and Configuration come from the upstream chart (kueue-chart), as in a cluster
  stamp "$out.tmp" kueue PATCHES; mv "$out.tmp" "$out"; rm -rf "$src"
}

build_volcano() { # Volcano's three binaries (vc-scheduler, vc-controller-manager, vc-webhook-manager) and the admission
  # image's certificate script, run by the lab's kubelet for the upstream chart's pods (hack/gpuops_lab/volcano.py)
  local out="$CACHE/bin/volcano-v$VOLCANO_VERSION" src="$CACHE/src/volcano-v$VOLCANO_VERSION"
  local mod=volcano.sh/volcano apis=volcano.sh/apis
  if ok "$out" vc-scheduler vc-controller-manager vc-webhook-manager gen-admission-secret.sh; then echo "volcano v$VOLCANO_VERSION: cached in $out"; return; fi
  rm -rf "$out" "$out.tmp" "$src" "$src.apis"; mkdir -p "$out.tmp" "$(dirname "$src")"
  echo "volcano v$VOLCANO_VERSION: building vc-scheduler, vc-controller-manager and vc-webhook-manager in $src (cold: about 7 min on 2 cores; they share most packages)"
  copy_module "$apis@v$VOLCANO_APIS_VERSION" "$src.apis"  # (downloaded outside the volcano module, which replaces it)
  copy_module "$mod@v$VOLCANO_VERSION" "$src"
  # Its go.mod replaces volcano.sh/apis with ./staging/src/volcano.sh/apis, a directory the module zip lacks, and the
  # proxy has no volcano.sh/apis v1.15.x: put the published v$VOLCANO_APIS_VERSION there, plus the one constant the
  # v$VOLCANO_VERSION scheduler uses that it lacks (its value from the module's own design doc, as upstream's apis
  # defines it).
  local stage="$src/staging/src/volcano.sh/apis" doc="$src/docs/design/scheduling-gates-queue-admission.md" gate
  grep -q "volcano.sh/apis => ./staging/src/volcano.sh/apis" "$src/go.mod" || { echo "build.sh: $src/go.mod no longer replaces $apis with ./staging: update build_volcano" >&2; exit 1; }
  gate=$(grep -m1 '^const QueueAllocationGateKey = GroupName + "/queue-allocation-gate"$' "$doc") || { echo "build.sh: $doc no longer defines QueueAllocationGateKey: update build_volcano" >&2; exit 1; }
  mkdir -p "$(dirname "$stage")"; mv "$src.apis" "$stage"
  local labels="$stage/pkg/apis/scheduling/v1beta1/labels.go"
  grep -q QueueAllocationGateKey "$labels" && { echo "build.sh: $labels already has QueueAllocationGateKey: drop the addition" >&2; exit 1; }
  printf '\n// QueueAllocationGateKey: added by gpuops build.sh (missing from %s v%s; value from %s)\n%s\n' \
    "$apis" "$VOLCANO_APIS_VERSION" "docs/design/scheduling-gates-queue-admission.md" "$gate" >> "$labels"
  local ldflags="-s -w -X $mod/pkg/version.Version=v$VOLCANO_VERSION -X $mod/pkg/version.Built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  (cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$out.tmp/vc-scheduler" ./cmd/scheduler \
     && go build -trimpath -ldflags "$ldflags" -o "$out.tmp/vc-controller-manager" ./cmd/controller-manager \
     && go build -trimpath -ldflags "$ldflags" -o "$out.tmp/vc-webhook-manager" ./cmd/webhook-manager)
  # The admission image's gen-admission-secret.sh, which the chart's volcano-admission-init hook Job runs (openssl and
  # kubectl): the lab's kubelet runs it for that Job's pod. One change: its work directory, hardcoded /tmp (shared by
  # every lab on this machine), taken from CERTDIR when set. Its CRDs and configurations come from the chart.
  local script="$src/installer/dockerfile/webhook-manager/gen-admission-secret.sh"
  grep -q '^CERTDIR=/tmp$' "$script" || { echo "build.sh: $script no longer sets CERTDIR=/tmp: update build_volcano" >&2; exit 1; }
  sed 's|^CERTDIR=/tmp$|CERTDIR=${CERTDIR:-/tmp}  # gpuops build.sh: CERTDIR from the environment when set|' "$script" > "$out.tmp/gen-admission-secret.sh"
  chmod 0755 "$out.tmp/gen-admission-secret.sh"
  stamp "$out.tmp" vc-scheduler vc-controller-manager vc-webhook-manager gen-admission-secret.sh; mv "$out.tmp" "$out"; rm -rf "$src"
}

build_helm_diff() { # optional (not in `all`): the helm-diff plugin, as a Helm 4 plugin directory (docs/helm_release.md)
  local out="$CACHE/bin/helm-diff-v$HELM_DIFF_VERSION" src="$CACHE/src/helm-diff-v$HELM_DIFF_VERSION"
  local mod=github.com/databus23/helm-diff/v3
  if ok "$out" plugin.yaml bin/diff; then echo "helm-diff v$HELM_DIFF_VERSION: cached in $out"; return; fi
  rm -rf "$out" "$src"; mkdir -p "$out.tmp/bin" "$(dirname "$src")"
  echo "helm-diff v$HELM_DIFF_VERSION: building"
  # sum.golang.org has no record of this module version (go verifies nothing): pin its h1 hash in versions.env.
  local info dir sum
  info=$(cd "$(dirname "$src")" && GOFLAGS= GONOSUMDB=$mod go mod download -json "$mod@v$HELM_DIFF_VERSION")
  dir=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  sum=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p')
  [ "$sum" = "$HELM_DIFF_SUM" ] || { echo "build.sh: $mod@v$HELM_DIFF_VERSION has sum $sum, pinned $HELM_DIFF_SUM" >&2; exit 1; }
  cp -r "$dir" "$src"; chmod -R u+w "$src"
  (cd "$src" && go build -trimpath -ldflags "-s -w -X $mod/cmd.Version=$HELM_DIFF_VERSION" -o "$out.tmp/bin/diff" .)
  # Helm 4 plugin metadata (apiVersion v1, type cli/v1); upstream's plugin.yaml is Helm 3's legacy format.
  printf 'apiVersion: v1\ntype: cli/v1\nname: diff\nversion: %s\nruntime: subprocess\nconfig:\n  usage: diff [flags]\n  shortHelp: Preview helm upgrade changes as a diff\nruntimeConfig:\n  platformCommand:\n    - command: ${HELM_PLUGIN_DIR}/bin/diff\n' \
    "$HELM_DIFF_VERSION" > "$out.tmp/plugin.yaml"
  stamp "$out.tmp" plugin.yaml bin/diff; mv "$out.tmp" "$out"; rm -rf "$src"
  echo "helm-diff: use it with HELM_PLUGINS=$CACHE/bin helm diff upgrade --disable-validation ... (see docs/helm_release.md)"
}

what=${1:-all}
case "$what" in
  k8s) build_k8s ;; etcd) build_etcd ;; kwok) build_kwok ;; helm) build_helm ;; nfd) build_nfd ;; nfd-chart) build_nfd_chart ;; sriov-chart) build_sriov_chart ;; sriov) build_sriov ;; registry) build_registry ;; prometheus) build_prometheus ;; alertmanager) build_alertmanager ;; kube-state-metrics) build_kube_state_metrics ;; node-exporter) build_node_exporter ;; kueue) build_kueue ;; kueue-chart) build_kueue_chart ;; volcano) build_volcano ;; volcano-chart) build_volcano_chart ;; helm-diff) build_helm_diff ;;
  all) build_etcd; build_kwok; build_helm; build_k8s; build_nfd; build_nfd_chart; build_sriov; build_sriov_chart; build_registry; build_prometheus; build_alertmanager; build_kube_state_metrics; build_node_exporter; build_kueue; build_kueue_chart; build_volcano; build_volcano_chart ;;
  # what `make demo` needs (hack/gpuops_lab/cluster.py DEMO_SKIPS; the NFD, SR-IOV and Volcano charts too: the chart
  # repository packages every upstream chart it serves): no OCI registry, SR-IOV operator or Volcano binaries
  demo) build_etcd; build_kwok; build_helm; build_k8s; build_nfd; build_nfd_chart; build_sriov_chart; build_prometheus; build_alertmanager; build_kube_state_metrics; build_node_exporter; build_kueue; build_kueue_chart; build_volcano_chart ;;
  *) echo "usage: build.sh [all|demo|k8s|etcd|kwok|helm|nfd|nfd-chart|sriov|sriov-chart|registry|prometheus|alertmanager|kube-state-metrics|node-exporter|kueue|kueue-chart|volcano|volcano-chart|helm-diff]" >&2; exit 2 ;;
esac
