# gpuops.platform - every entry point. On a fresh machine: `make demo`, `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
REPO := $(abspath .)
VENV := $(REPO)/.venv
PY := $(VENV)/bin/python
export PATH := $(VENV)/bin:$(PATH)
export PYTHONPATH := $(REPO)/hack
export ANSIBLE_CONFIG := $(REPO)/ansible.cfg
export ANSIBLE_HOME := $(REPO)/.state/ansible-home
# Bytecode for every Python process (Ansible, its module runs, the lab, the tests), kept out of the tree. Where
# PYTHONDONTWRITEBYTECODE is set (it is on the CI machines) every process compiled Ansible, the kubernetes client
# and the rest from source again: about a quarter of make test's CPU (benchmarks/HISTORY.md).
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(REPO)/.state/pycache
LAB := $(PY) -m gpuops_lab
COLL_LINK := $(REPO)/.state/collections/ansible_collections/gpuops/platform

.PHONY: help venv constraints build up down status demo test lint sanity unit integration molecule bench ee de role-readmes rulebook clean

help:
	@echo "make demo   - build/reuse the local control plane, start it (and its Prometheus), run site.yml, print node readiness, onboard a fifth node, inject a GPU fault and show its quarantine"
	@echo "make test   - lint, sanity, unit, integration and molecule tests (starts the lab as needed)"
	@echo "make down   - stop every lab process and remove all lab state"
	@echo "make up | status | bench | build | venv | ee (AWX execution environment build context) | de (EDA decision environment build context) | role-readmes | rulebook (extensions/eda/rulebooks/gpu_health*.yml from the fault policy)"

$(VENV)/.stamp: hack/venv/gpuops_zipimport_cache.py requirements/bootstrap.txt requirements/dev.txt requirements/constraints.txt
	py=$$(bash hack/find-python312.sh) && $$py -m venv $(VENV)
	bash hack/host-deps.sh
	# uv (pinned in requirements/bootstrap.txt) installs the pinned set in seconds; pip took about 2 minutes
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements/bootstrap.txt
	VIRTUAL_ENV=$(VENV) $(VENV)/bin/uv pip install -q -r requirements/dev.txt -c requirements/constraints.txt pip
	# modules imported from Ansible's zip payloads keep their bytecode (hack/venv/gpuops_zipimport_cache.py)
	sp=$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
	  && cp hack/venv/gpuops_zipimport_cache.py "$$sp/" && echo 'import gpuops_zipimport_cache' > "$$sp/gpuops_zipimport_cache.pth"
	touch $@

$(COLL_LINK):
	mkdir -p $(dir $(COLL_LINK))
	ln -sfn $(REPO) $(COLL_LINK)

venv: $(VENV)/.stamp $(COLL_LINK)

constraints: $(VENV)/.stamp
	{ echo "# Exact versions of every package in the dev/test virtualenv (pip freeze of requirements/dev.txt)."; \
	  echo "# Regenerate: make constraints"; $(VENV)/bin/pip freeze --all | grep -v '^-e'; } > requirements/constraints.txt

build: venv
	$(LAB) build
	@bash hack/link-tools.sh

up: build
	$(LAB) up --inventory-nodes

status: venv
	$(LAB) status

down:
	@if [ -x $(PY) ]; then $(LAB) down; else echo "no virtualenv; nothing started"; fi

# The demo builds and starts only what it uses (GPUOPS_LAB_PROFILE=demo: no OCI registry, SR-IOV operator or Volcano;
# hack/gpuops_lab/cluster.py DEMO_SKIPS); `make test` builds and starts the rest on the same lab.
demo: venv
	GPUOPS_LAB_PROFILE=demo $(LAB) build
	@bash hack/link-tools.sh
	GPUOPS_LAB_PROFILE=demo $(LAB) up --inventory-nodes
	$(LAB) monitoring up
	ansible-playbook site.yml -i inventories/local
	$(LAB) table --wait 60
	ansible-playbook hack/demo/sample_jobs.yml -i inventories/local
	ansible-playbook playbooks/diagnose.yml -i inventories/local
	# day 2: a fifth node is racked (the lab creates its host and node) and onboarded (docs/operations.md)
	$(LAB) nodes sync-inventory --inventory hack/demo/onboard-inventory.yml
	ansible-playbook playbooks/onboard_node.yml -i inventories/local -i hack/demo/onboard-inventory.yml -e gpuops_onboard_host=dgx-h100-2
	# a GPU fault: XID 79 on GPU 3 of dgx-h100-1 -> Prometheus -> Alertmanager -> the gpu_health rulebook (acting, not
	# the dry run a user starts with) -> the node is quarantined; diagnose.yml's QUARANTINED table says why (docs/remediation.md)
	$(LAB) eda up --mode act
	$(LAB) dcgm-fault inject dgx-h100-1 3 xid79
	kubectl --kubeconfig "$${GPUOPS_LAB_STATE:-.state/lab}/kubeconfig" wait node/dgx-h100-1 --timeout=300s \
	  --for=jsonpath='{.metadata.labels.gpuops\.platform/remediation}'
	ansible-playbook playbooks/diagnose.yml -i inventories/local

lint: venv
	bash hack/run-tests.sh lint

sanity: venv
	bash hack/run-tests.sh sanity

unit: venv
	bash hack/run-tests.sh unit

integration: build
	bash hack/run-tests.sh integration

molecule: build
	bash hack/run-tests.sh molecule

test: build
	bash hack/run-tests.sh all

ee: build
	bash hack/ee-context.sh .state/ee/context

de: venv
	bash hack/ee-context.sh .state/de/context decision-environment.yml

bench: build
	$(PY) benchmarks/run.py $(BENCH_ARGS)

# roles/<role>/README.md from each role's argument spec and defaults (tests/unit/test_role_readmes.py checks them)
role-readmes: venv
	$(PY) hack/role_readmes.py

rulebook: venv
	$(PY) hack/eda_rulebook.py

clean: down
	rm -rf $(VENV) .state .cache tests/output
