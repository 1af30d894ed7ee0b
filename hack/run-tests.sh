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
    # molecule keeps a scenario's state (prepared: true) in its ephemeral directory across runs, and skips prepare
    # when an earlier run of this checkout left it: every scenario starts from none
    rm -rf "$ANSIBLE_HOME"/tmp/molecule.*."$s"
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

# `all`: the work as a queue of items - each integration test file, each molecule scenario - taken by four workers,
# each with a lab of its own (labs a, b, c, d), the longest items first, so the workers end together whatever the
# machine (a fixed split in halves left one stream 25 minutes behind the others on the CI machine). Integration files
# come first in the queue; a worker whose lab has run integration files restarts it fresh before its first molecule
# scenario (the scenarios expect a lab no test has used). Worker c runs lint, sanity and the unit tests (no lab) first;
# the quiet-fleet test runs the whole time beside them on lab e (its window is ten minutes). The order comes from the
# last fresh-clone run's durations (benchmarks/README.md); a file or scenario not listed here joins at the end.
QUEUE_INTEGRATION=(tests/integration/test_helm_killed.py tests/integration/test_gpu_operator_role.py
  tests/integration/test_upgrade.py tests/integration/test_remediation.py tests/integration/test_kueue_admission.py
  tests/integration/test_site_check_first_install.py tests/integration/test_helm.py
  tests/integration/test_plan_first.py tests/integration/test_gpu_alerts_e2e.py tests/integration/test_host_prep.py
  tests/integration/test_host_guards.py tests/integration/test_sriov_bundled_source.py
  tests/integration/test_uninstall.py tests/integration/test_gpu_cluster_status_lab.py
  tests/integration/test_kueue_team_namespaces.py tests/integration/test_network_operator_guards.py
  tests/integration/test_helm_oci.py tests/integration/test_awx_jobs.py tests/integration/test_fixture_crds.py
  tests/integration/test_volcano_scheduling.py tests/integration/test_network_status_lab.py
  hack/tests/integration/test_sim_operators.py hack/tests/integration/test_lab_cli.py
  tests/integration/test_gpu_nodes_inventory.py hack/tests/integration/test_kueue_lab.py
  hack/tests/integration/test_control_plane.py hack/tests/integration/test_simulator.py
  hack/tests/integration/test_sim_dra.py tests/integration/test_kueue_diagnosis.py)
QUEUE_MOLECULE=(site monitoring gpu_sharing kueue network_operator amd_gpu_operator kai_scheduler gpu_operator volcano
  host_prep nfd sriov_network_operator smoke_tests gpuops)

queue_items() { # the queue, one item a line: "it <file>" or "mol <scenario>", listed ones first in their order
  local f s
  declare -A seen=()
  for f in "${QUEUE_INTEGRATION[@]}"; do [ -f "$f" ] && { echo "it $f"; seen[$f]=1; }; done
  for f in tests/integration/test_*.py hack/tests/integration/test_*.py; do [ -n "${seen[$f]:-}" ] || echo "it $f"; done
  for s in "${QUEUE_MOLECULE[@]}"; do [ -f "molecule/$s/molecule.yml" ] && { echo "mol $s"; seen[mol-$s]=1; }; done
  for s in molecule/*/molecule.yml; do
    s=$(basename "$(dirname "$s")")
    [ -n "${seen[mol-$s]:-}" ] || echo "mol $s"
  done
}

item_name() { # item_name KIND PATH: the stage name of an item (it-<file>, it-hack-<file>, mol-<scenario>)
  local base
  if [ "$1" = mol ]; then echo "mol-$2"; return; fi
  base=$(basename "$2" .py)
  case $2 in hack/*) echo "it-hack-${base#test_}" ;; *) echo "it-${base#test_}" ;; esac
}

worker() { # worker a|b|c|d: takes items from the queue until none is left, on its own lab
  local w=$1 kind path state=none n=0 i=0 name
  lab_env "$w"
  while read -r kind path <&3; do  # the queue on fd 3: nothing an item runs reads it from stdin
    i=$((i + 1))
    mkdir ".state/queue/$i" 2>/dev/null || continue  # taken by another worker (mkdir is atomic)
    name=$(item_name "$kind" "$path")
    echo "$name" > ".state/queue/$i/item"
    # a fresh lab for the first item of each kind and for every molecule scenario: a scenario may leave what its
    # prepare installed (kueue leaves NFD in molecule-nfd), which the next scenario's guards would take for another
    # installation (amd_gpu_operator's second-NFD check after kueue, in a fresh-clone run)
    if [ "$state" != "$kind" ] || [ "$kind" = mol ]; then
      n=$((n + 1))
      [ $n -eq 1 ] || lab down > ".state/stages/lab-$w$n-down.log" 2>&1 < /dev/null
      if ! timed "lab-$w$n-up" lab up --inventory-nodes < /dev/null; then
        state=none
        lab down > /dev/null 2>&1 < /dev/null  # what the failed start left
        echo "not run: lab $w did not start (.state/stages/lab-$w$n-up.log)" > ".state/stages/$name.log"
        echo 0 > ".state/stages/$name.took"
        echo 1 > ".state/stages/$name.rc"  # last: the printer shows a stage once its .rc exists
        continue
      fi
      state=$kind
    fi
    if [ "$kind" = it ]; then
      timed "$name" pytest_strict "$path" -q -p no:cacheprovider --durations=15 < /dev/null
    else
      timed "$name" do_molecule_scenarios "$path" < /dev/null
    fi
  done 3< .state/queue/items
  [ "$state" = none ] || lab down 2>&1 | grep '^lab CPU' > ".state/stages/lab-$w-cpu.log"
}

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

show_stage() { # show_stage NAME: its log, then FAILED when it failed
  local n=$1
  printf '\n===== %s =====\n' "$n"
  cat ".state/stages/$n.log"
  took[$n]=$(cat ".state/stages/$n.took" 2>/dev/null || echo 0)
  cpu[$n]=$(cat ".state/stages/$n.cpu" 2>/dev/null)
  order+=("$n")
  if [ "$(cat ".state/stages/$n.rc")" != 0 ]; then echo "FAILED: stage $n (exit $(cat ".state/stages/$n.rc"))"; fail=1; fi
}

run_all() { # the workers and the quiet fleet; each stage's output is printed as soon as it has finished
  local n shown=" " names w
  rm -rf .state/stages .state/queue && mkdir -p .state/stages .state/queue
  queue_items > .state/queue/items
  ( timed quiet-fleet quiet_fleet_on ) &
  ( timed lint do_lint; timed sanity do_sanity; timed unit do_unit; worker c ) &
  for w in a b d; do worker "$w" & done
  while :; do
    # the stages that have finished, oldest first
    mapfile -t names < <(cd .state/stages && ls -tr -- *.rc 2>/dev/null | sed 's/\.rc$//')
    for n in "${names[@]}"; do
      [[ "$shown" == *" $n "* ]] && continue
      show_stage "$n"
      shown+="$n "
    done
    [ -z "$(jobs -rp)" ] && break
    sleep 5
  done
  wait
  # every item taken and run (a worker that died leaves its item without a result)
  local i=0 kind path
  while read -r kind path; do
    i=$((i + 1))
    n=$(item_name "$kind" "$path")
    [ -f ".state/stages/$n.rc" ] || { echo "FAILED: $n ($path) did not run"; fail=1; }
  done < .state/queue/items
  for w in a b c d; do [ -f ".state/stages/lab-$w-cpu.log" ] && echo "lab $w: $(cat ".state/stages/lab-$w-cpu.log")"; done
  for n in lint sanity unit quiet-fleet; do [ -f ".state/stages/$n.rc" ] || { echo "FAILED: stage $n did not run"; fail=1; }; done
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
for n in "${order[@]}"; do printf '%-30s %8s %8s\n' "$n" "${took[$n]}" "${cpu[$n]:-}"; done
printf '%-30s %8s\n' "wall" "$(python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t_start" "$(date +%s.%N)")"
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
