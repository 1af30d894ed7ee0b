#!/usr/bin/env bash
# The test stages behind `make test` (and `make lint|sanity|unit|integration|molecule`).
# Prints each stage's wall time and writes them to .state/test-timings.json.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
export PATH="$repo/.venv/bin:$PATH" PYTHONPATH="$repo/hack" ANSIBLE_CONFIG="$repo/ansible.cfg"
export ANSIBLE_HOME="$repo/.state/ansible-home" PY_COLORS=0 ANSIBLE_FORCE_COLOR=0
lab() { python -m gpuops_lab "$@"; }
declare -A took
order=()
t_start=$(date +%s.%N)
fail=0

stage() { # stage NAME CMD...
  local name=$1 t0 rc; shift
  printf '\n===== %s =====\n' "$name"
  t0=$(date +%s.%N)
  "$@"; rc=$?
  took[$name]=$(python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
  order+=("$name")
  if [ $rc -ne 0 ]; then echo "FAILED: stage $name (exit $rc)"; fail=1; fi
  return $rc
}

pytest_strict() { # pytest exit 5 (no tests collected) is a failure here, never a pass
  python -m pytest "$@"; local rc=$?
  [ $rc -eq 5 ] && echo "pytest collected no tests in $*: that is a failure"
  return $rc
}

do_lint() {
  ruff check plugins hack tests benchmarks && ruff format --check plugins hack tests benchmarks \
    && yamllint -s . && antsibull-changelog lint && ansible-lint --profile production --offline \
    && do_typecheck
}

do_typecheck() { # mypy over plugins/ (config: pyproject.toml), through the collection link of `make venv`
  local link="$repo/.state/collections/ansible_collections/gpuops/platform"
  [ -e "$link" ] || { mkdir -p "$(dirname "$link")" && ln -sfn "$repo" "$link"; }
  (cd "$repo/.state/collections" && mypy --config-file "$repo/pyproject.toml")
}

do_sanity() {
  local dst="${GPUOPS_CACHE:-$HOME/.cache/gpuops}/sanity/ansible_collections/gpuops/platform" cache="$HOME/.ansible/test/cache" pipv
  rm -rf "$dst"; mkdir -p "$dst"
  git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$dst" 2>/dev/null \
    || { echo "copying the collection for ansible-test failed"; return 1; }
  # ansible-test bootstraps pip by downloading get-pip.py (no network here): seed its cache with the
  # pip wheel from PyPI and a stand-in script (ansible/ansible#77304).
  pipv=$(python - <<'PY'
import inspect, re
import ansible_test._internal.python_requirements as r
print(re.search(r"pip='([^']+)'", inspect.getsource(r)).group(1))
PY
)
  mkdir -p "$cache"
  if ! ls "$cache"/pip-"$pipv"-*.whl >/dev/null 2>&1; then
    pip download -q --no-deps -d "$cache" "pip==$pipv" || return 1
  fi
  cp hack/get_pip_offline.py "$cache/get_pip_${pipv//./_}.py"
  (cd "$dst" && ansible-test sanity --python 3.12 --color no)
}

do_unit() { pytest_strict tests/unit hack/tests/unit -q -p no:cacheprovider; }  # product | lab

was_up=0
lab_up() { if lab status >/dev/null 2>&1; then was_up=1; fi; lab up --inventory-nodes; }
lab_down() { [ $was_up -eq 1 ] || lab down; }

do_integration() { pytest_strict tests/integration hack/tests/integration -q -p no:cacheprovider --durations=25; }

do_molecule() {
  local s rc=0
  for s in molecule/*/molecule.yml; do
    s=$(basename "$(dirname "$s")")
    (cd "$repo" && molecule test -s "$s") || { echo "molecule scenario $s failed"; rc=1; }
  done
  return $rc
}

# A second lab for the molecule scenarios, so they run while the integration tests use the first one (most of
# both stages is waiting on the API server, Helm and the simulated kubelet, not CPU). Its own state directory and
# ports; the molecule configs follow GPUOPS_LAB_STATE and GPUOPS_LAB_CHART_REPO_PORT.
second_lab_env() {
  export GPUOPS_LAB_STATE="$repo/.state/lab-molecule" GPUOPS_LAB_ETCD_PORT=24790 GPUOPS_LAB_ETCD_PEER_PORT=24800 \
    GPUOPS_LAB_APISERVER_PORT=17443 GPUOPS_LAB_KCM_PORT=21257 GPUOPS_LAB_SCHEDULER_PORT=21259 \
    GPUOPS_LAB_CHART_REPO_PORT=19879 GPUOPS_LAB_NFD_MASTER_PORT=21290
}

molecule_on_second_lab() { # writes .state/molecule.{log,rc,took}; run in the background by `all`
  local t0 rc
  t0=$(date +%s.%N)
  (
    second_lab_env
    lab up --inventory-nodes && do_molecule
    rc=$?
    lab down >/dev/null 2>&1
    exit $rc
  ) > .state/molecule.log 2>&1
  rc=$?
  python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)" > .state/molecule.took
  echo $rc > .state/molecule.rc
}

what=${1:-all}
case "$what" in
  lint) stage lint do_lint ;;
  sanity) stage sanity do_sanity ;;
  unit) stage unit do_unit ;;
  integration) stage lab-up lab_up && stage integration do_integration; lab_down ;;
  molecule) stage lab-up lab_up && stage molecule do_molecule; lab_down ;;
  all)
    mkdir -p .state
    rm -f .state/molecule.rc .state/molecule.took
    molecule_on_second_lab &
    mpid=$!
    stage lint do_lint
    stage sanity do_sanity
    stage unit do_unit
    if stage lab-up lab_up; then
      stage integration do_integration
    fi
    stage lab-down lab_down
    printf '\n===== molecule (second lab, alongside the stages above) =====\n'
    wait $mpid
    cat .state/molecule.log
    took[molecule]=$(cat .state/molecule.took 2>/dev/null || echo 0)
    order+=(molecule)
    if [ "$(cat .state/molecule.rc 2>/dev/null || echo 1)" != 0 ]; then echo "FAILED: stage molecule"; fail=1; fi
    ;;
  *) echo "usage: run-tests.sh [all|lint|sanity|unit|integration|molecule]" >&2; exit 2 ;;
esac

mkdir -p .state
{
  printf '{'
  sep=""
  for n in "${order[@]}"; do printf '%s"%s": %s' "$sep" "$n" "${took[$n]}"; sep=", "; done
  printf '}\n'
} > .state/test-timings.json
printf '\n===== stage timings (s) =====\n'
for n in "${order[@]}"; do printf '%-12s %8s\n' "$n" "${took[$n]}"; done
printf '%-12s %8s\n' "wall" "$(python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t_start" "$(date +%s.%N)")"
exit $fail
