#!/usr/bin/env bash
# The test stages behind `make test` (and `make lint|sanity|unit|integration|molecule`).
# Prints each stage's wall time and writes them to .state/test-timings.json.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
export PATH="$repo/.venv/bin:$PATH" PYTHONPATH="$repo/hack" ANSIBLE_CONFIG="$repo/ansible.cfg"
export ANSIBLE_HOME="$repo/.state/ansible-home" PY_COLORS=0 ANSIBLE_FORCE_COLOR=0
export PYTHONPYCACHEPREFIX="$repo/.state/pycache"; unset PYTHONDONTWRITEBYTECODE  # bytecode written once (Makefile)
export ANSIBLE_INTERNAL_POLL_INTERVAL=0.01  # as ansible.cfg, also for molecule's own config (less CPU spinning)
# The tests' playbooks run under Mitogen's linear strategy (requirements/dev.txt): one Python per host for the
# whole play instead of one per task, the same modules and results: about 40 % less CPU in a long play, 17 % over
# make test (benchmarks/HISTORY.md).
# The scenarios in PLAIN_SCENARIOS, the AWX job tests (ansible-runner, as AWX runs) and `make demo` keep Ansible's
# own strategy, so the product is also proven the way a user runs it by default.
ANSIBLE_STRATEGY_PLUGINS="$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/ansible_mitogen/plugins/strategy"
export ANSIBLE_STRATEGY_PLUGINS ANSIBLE_STRATEGY=mitogen_linear
PLAIN_SCENARIOS=(site)
plain() { env -u ANSIBLE_STRATEGY -u ANSIBLE_STRATEGY_PLUGINS "$@"; }  # plain CMD...: Ansible's own strategy
lab() { python -m gpuops_lab "$@"; }
declare -A took cpu
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
  ruff check plugins extensions hack tests benchmarks && ruff format --check plugins extensions hack tests benchmarks \
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

# `all` splits the integration tests in two, each half on its own lab: these files run on lab "d" (then some
# molecule scenarios there), every other file on the default lab. Balanced by the fresh-clone run's durations
# (benchmarks/README.md).
INTEGRATION_D=(tests/integration/test_kueue_admission.py tests/integration/test_kueue_diagnosis.py
  tests/integration/test_sriov_bundled_source.py tests/integration/test_uninstall.py
  tests/integration/test_volcano_scheduling.py tests/integration/test_gpu_alerts_e2e.py
  tests/integration/test_network_operator_guards.py tests/integration/test_network_status_lab.py
  tests/integration/test_awx_jobs.py hack/tests/integration/test_kueue_lab.py tests/integration/test_helm_killed.py
  tests/integration/test_remediation.py)
integration_files() { # integration_files a|d: the files of that half
  local f
  for f in tests/integration/test_*.py hack/tests/integration/test_*.py; do
    if [[ " ${INTEGRATION_D[*]} " == *" $f "* ]]; then [ "$1" = d ] && echo "$f"; else [ "$1" = a ] && echo "$f"; fi
  done
}
do_integration_half() { # do_integration_half a|d
  local files
  mapfile -t files < <(integration_files "$1")
  pytest_strict "${files[@]}" -q -p no:cacheprovider --durations=40
}

do_molecule() { # every scenario, one after the other (`make molecule`)
  local s all=()
  for s in molecule/*/molecule.yml; do all+=("$(basename "$(dirname "$s")")"); done
  do_molecule_scenarios "${all[@]}"
}

do_molecule_scenarios() { # do_molecule_scenarios SCENARIO...
  local s rc=0 t0 how
  for s in "$@"; do
    t0=$(date +%s)
    how=()
    [[ " ${PLAIN_SCENARIOS[*]} " == *" $s "* ]] && how=(plain)
    (cd "$repo" && "${how[@]}" molecule test -s "$s") || { echo "molecule scenario $s failed"; rc=1; }
    echo "molecule scenario $s took $(( $(date +%s) - t0 )) s"
  done
  return $rc
}

# `all` runs four streams at once, each against its own lab (most of the lab stages is waiting on the API
# server, Helm and the simulated kubelet, not CPU): the checks (lint, sanity; the quiet-fleet test beside them on lab
# "e") then some molecule scenarios on lab "c"; half the integration tests on the default lab, then some molecule scenarios on lab "a"; the other half on lab
# "d", then some molecule scenarios there; the unit tests, then the other molecule scenarios on lab "b". Each lab has its own state
# directory and ports; the molecule configs follow GPUOPS_LAB_STATE and GPUOPS_LAB_CHART_REPO_PORT.
lab_env() { # lab_env a|b|c|d|e
  local base
  case $1 in a) base=2000 ;; b) base=1000 ;; c) base=4000 ;; d) base=7000 ;; e) base=-2000 ;; esac
  export GPUOPS_LAB_STATE="$repo/.state/lab-$1" GPUOPS_LAB_ETCD_PORT=$((23790 + base)) \
    GPUOPS_LAB_ETCD_PEER_PORT=$((23800 + base)) GPUOPS_LAB_APISERVER_PORT=$((16443 + base)) \
    GPUOPS_LAB_KCM_PORT=$((20257 + base)) GPUOPS_LAB_SCHEDULER_PORT=$((20259 + base)) \
    GPUOPS_LAB_CHART_REPO_PORT=$((18879 + base)) GPUOPS_LAB_NFD_MASTER_PORT=$((20290 + base))
}

molecule_on() { # molecule_on a|b|c|d SCENARIO...: a lab of its own, up, the scenarios, down
  local rc
  (
    lab_env "$1"; shift
    lab up --inventory-nodes && do_molecule_scenarios "$@"
    rc=$?
    lab down 2>&1 | grep '^lab CPU'  # what the lab's daemons cost (benchmarks/README.md)
    exit $rc
  )
}

# Lab "c" takes these after the checks, labs "a" and "d" these after their half of the
# integration tests; lab "b" every other scenario (a new scenario lands there). Balanced by the fresh-clone run's
# durations (benchmarks/README.md).
MOLECULE_A=(volcano smoke_tests)
MOLECULE_C=(amd_gpu_operator network_operator site)
MOLECULE_D=(host_prep kai_scheduler kueue)
molecule_scenarios() { # molecule_scenarios a|b|c|d: the scenarios of that lab that exist
  local s
  for s in molecule/*/molecule.yml; do
    s=$(basename "$(dirname "$s")")
    if [[ " ${MOLECULE_C[*]} " == *" $s "* ]]; then [ "$1" = c ] && echo "$s"
    elif [[ " ${MOLECULE_D[*]} " == *" $s "* ]]; then [ "$1" = d ] && echo "$s"
    elif [[ " ${MOLECULE_A[*]} " == *" $s "* ]]; then [ "$1" = a ] && echo "$s"
    else [ "$1" = b ] && echo "$s"; fi
  done
}

timed() { # timed NAME CMD...: runs CMD with its output in .state/stages/NAME.log; writes NAME.took, NAME.cpu
  # (CPU seconds of the processes it waited for: ansible-playbook, modules, Helm, pytest; the lab's daemons are
  # not among them: `lab down` prints theirs) and NAME.rc
  local name=$1 t0 rc; shift
  t0=$(date +%s.%N)
  times > ".state/stages/$name.times0"  # a builtin, in this shell: $(times) would read a fresh subshell's zeros
  "$@" > ".state/stages/$name.log" 2>&1
  rc=$?
  python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)" \
    > ".state/stages/$name.took"
  times > ".state/stages/$name.times1"
  python - ".state/stages/$name.times0" ".state/stages/$name.times1" > ".state/stages/$name.cpu" <<'PY'
import re, sys
def secs(path):  # bash `times`, its second line is the children's: "1m2.345s 0m6.789s" (user, system)
    line = open(path, encoding="utf-8").read().splitlines()[-1]
    return sum(int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", line))
print(f"{secs(sys.argv[2]) - secs(sys.argv[1]):.1f}")
PY
  echo $rc > ".state/stages/$name.rc"
  return $rc
}

# The quiet-fleet test (tests/fleet: 64 GPU nodes watched for 10 minutes by Prometheus, Alertmanager and the
# rulebook) runs on lab "e", a lab of its own, beside lint and sanity, which need no lab: its 10 minutes stay off the
# critical path. Lab "e"'s daemons (64 simulated nodes, the monitoring) cost CPU the whole time: `lab down` prints it,
# the test prints what the window cost.
quiet_fleet_on() {
  local rc
  (
    lab_env e
    # the demo's components: no OCI registry, SR-IOV operator or Volcano (the test needs none of them)
    export GPUOPS_LAB_PROFILE=demo
    lab up && pytest_strict tests/fleet -q -p no:cacheprovider -s --durations=5
    rc=$?
    lab down 2>&1 | grep '^lab CPU'
    exit $rc
  )
}

stream_checks() {
  # quiet-fleet in the background, detached from this shell (its CPU is not counted in the stage running when it
  # ends: bash reaps a child as it exits), waited for before the stream ends
  ( timed quiet-fleet quiet_fleet_on & echo $! > .state/stages/quiet-fleet.pid )
  timed lint do_lint
  timed sanity do_sanity
  mapfile -t c < <(molecule_scenarios c)
  timed molecule-c molecule_on c "${c[@]}"
  while kill -0 "$(cat .state/stages/quiet-fleet.pid)" 2>/dev/null; do sleep 5; done
}
stream_integration() { # half the integration tests on the default lab, then some molecule scenarios on a fresh one
  local a
  mapfile -t a < <(molecule_scenarios a)
  timed lab-up lab_up && timed integration do_integration_half a
  timed lab-down lab_down
  timed molecule-a molecule_on a "${a[@]}"
}
stream_integration_d() { # the other half of the integration tests on lab "d", then its molecule scenarios on a fresh lab
  local d
  mapfile -t d < <(molecule_scenarios d)
  timed integration-d integration_on_d
  timed molecule-d molecule_on d "${d[@]}"
}
integration_on_d() {
  local rc
  (
    lab_env d
    lab up --inventory-nodes && do_integration_half d
    rc=$?
    lab down 2>&1 | grep '^lab CPU'
    exit $rc
  )
}
stream_molecule() { # the unit tests (no lab) first: the checks stream, then lab c's scenarios, ended last in CI29
  mapfile -t b < <(molecule_scenarios b)
  timed unit do_unit
  timed molecule-b molecule_on b "${b[@]}"
}

run_all() { # the three streams; each stage's output is printed, in this order, as soon as it has finished
  local names=(lint sanity quiet-fleet unit lab-up integration lab-down molecule-a integration-d molecule-b molecule-c molecule-d) n shown=() rc
  rm -rf .state/stages && mkdir -p .state/stages
  stream_checks & stream_integration & stream_molecule & stream_integration_d &
  while :; do
    for n in "${names[@]}"; do
      [[ " ${shown[*]} " == *" $n "* ]] && continue
      [ -f ".state/stages/$n.rc" ] || break  # print in order: wait for this one
      printf '\n===== %s =====\n' "$n"
      cat ".state/stages/$n.log"
      rc=$(cat ".state/stages/$n.rc")
      took[$n]=$(cat ".state/stages/$n.took")
      cpu[$n]=$(cat ".state/stages/$n.cpu" 2>/dev/null)
      order+=("$n")
      shown+=("$n")
      if [ "$rc" != 0 ]; then echo "FAILED: stage $n (exit $rc)"; fail=1; fi
    done
    [ ${#shown[@]} -eq ${#names[@]} ] && break
    # every stream has ended: print what is left; a stage that never ran (no integration after a failed
    # lab-up) is a failure
    if [ -z "$(jobs -rp)" ]; then
      for n in "${names[@]}"; do
        [[ " ${shown[*]} " == *" $n "* ]] && continue
        if [ -f ".state/stages/$n.rc" ]; then
          printf '\n===== %s =====\n' "$n"
          cat ".state/stages/$n.log"
          took[$n]=$(cat ".state/stages/$n.took")
          cpu[$n]=$(cat ".state/stages/$n.cpu" 2>/dev/null)
          order+=("$n")
          [ "$(cat ".state/stages/$n.rc")" = 0 ] || { echo "FAILED: stage $n"; fail=1; }
        else
          echo "FAILED: stage $n did not run"
          fail=1
        fi
      done
      break
    fi
    sleep 5
  done
  wait
}

what=${1:-all}
case "$what" in
  lint) stage lint do_lint ;;
  sanity) stage sanity do_sanity ;;
  unit) stage unit do_unit ;;
  integration) stage lab-up lab_up && stage integration do_integration; lab_down ;;
  molecule) stage lab-up lab_up && stage molecule do_molecule; lab_down ;;
  all) run_all ;;
  *) echo "usage: run-tests.sh [all|lint|sanity|unit|integration|molecule]" >&2; exit 2 ;;
esac

mkdir -p .state
{
  printf '{'
  sep=""
  for n in "${order[@]}"; do printf '%s"%s": %s' "$sep" "$n" "${took[$n]}"; sep=", "; done
  printf '}\n'
} > .state/test-timings.json
printf '\n===== stage timings (s): wall, CPU =====\n'
for n in "${order[@]}"; do printf '%-12s %8s %8s\n' "$n" "${took[$n]}" "${cpu[$n]:-}"; done
printf '%-12s %8s\n' "wall" "$(python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t_start" "$(date +%s.%N)")"
# CI shows only the last lines of this output: end with what failed, in a few lines per failed stage
if [ $fail -ne 0 ] && [ "$what" = all ]; then
  printf '\n===== what failed =====\n'
  for n in "${order[@]}"; do
    [ -f ".state/stages/$n.rc" ] && [ "$(cat ".state/stages/$n.rc")" != 0 ] || continue
    echo "stage $n (exit $(cat ".state/stages/$n.rc")), log .state/stages/$n.log:"
    grep -E '^(FAILED|ERROR) |failed=[1-9]|^fatal: |molecule scenario .* failed|^CRITICAL |error:|Error:' \
      ".state/stages/$n.log" 2>/dev/null | grep -v "glob failed" | cut -c1-300 | tail -8
  done
fi
exit $fail
