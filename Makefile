# Market Spread: everything the project needs is installed by `make setup`, idempotently.
# Downloads are cached by their own tools (~/.cache/pip, ~/.m2, Go's module cache); what is
# built from them lives in .venv and .local, both disposable.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
LOCAL := .local
JARS := $(LOCAL)/jars
BIN := $(LOCAL)/bin
MS := $(VENV)/bin/marketspread
MVN := mvn -B -q -s spark-app/maven-settings.xml
HELM_VERSION := v4.3.1
# Wallaroo's own data files (initial NBBO per symbol set, instrument lists).
WALLAROO_DATA ?= ../shared/data/wallaroo-market-spread
export MARKETSPREAD_WALLAROO_DATA := $(abspath $(WALLAROO_DATA))
export MARKETSPREAD_LOCAL_DIR := $(abspath $(LOCAL))
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: help setup demo test test-fast bench clean distclean

help:
	@echo "make demo   - set up, then run the whole pipeline on one machine and print its summary"
	@echo "make test   - set up, then run every test"
	@echo "make setup  - install everything the project needs (idempotent)"
	@echo "make bench  - spark and its peers side by side (~40 min; QUICK=1: ~18 min); table in docs/benchmarks.md"
	@echo "make cluster-up / cluster-down - a local Kubernetes control plane with simulated nodes"
	@echo "make k8s-e2e - the chart on that cluster: helm install/upgrade/rollback, docs/kubernetes.md, spark-submit"

setup: $(VENV)/.installed $(JARS)/kafka/.resolved $(JARS)/spark/.resolved $(BIN)/helm $(LOCAL)/.promtool

$(VENV)/.installed: pyproject.toml constraints.txt
	@command -v java >/dev/null || { echo "setup: Java 17+ is needed to run Kafka and Spark" >&2; exit 1; }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -U pip
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

$(JARS)/kafka/.resolved: services/marketspread/localkafka/pom.xml
	rm -rf $(@D)
	$(MVN) -f $< dependency:copy-dependencies -Djars.dir=$(abspath $(@D))
	touch $@

$(JARS)/spark/.resolved: spark-app/pom.xml spark-app/maven-settings.xml
	rm -rf $(@D)
	$(MVN) -f $< dependency:copy-dependencies -Djars.dir=$(abspath $(@D))
	touch $@

# The real helm CLI, built from the Go module proxy (Go caches modules and builds under ~/.cache and ~/go).
$(BIN)/helm:
	mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) GOFLAGS=-mod=mod go install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)

# promtool (and prometheus for the local stack) from Debian's package.
$(LOCAL)/.promtool:
	@mkdir -p $(LOCAL)
	command -v promtool >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; }
	touch $@

demo: setup
	$(MS) demo --out out/demo

# The k8s tests start the local control plane; on a fresh machine its binary is built here first
# (cold: ~10 min, once; cached in ~/.cache/marketspread-cluster), not inside a test's time limit.
test: setup cluster-build
	$(VENV)/bin/pytest

test-fast: setup cluster-build
	$(VENV)/bin/pytest -m "not slow"

# The whole comparison (marketspread bench --all): rewrites the generated section of docs/benchmarks.md.
bench: setup
	$(MS) bench --all --out out/bench $(if $(QUICK),--quick,)

clean:
	-$(MS) kafka stop 2>/dev/null
	rm -rf out $(LOCAL)/run

distclean: clean
	-$(PYTHON) k8s/cluster/cluster.py down 2>/dev/null
	rm -rf $(VENV) $(LOCAL)

# After a deliberate change to the chart, its dashboards or a settings class: rewrite what
# tests/chart compares against (golden manifests, dashboard JSON, values.schema.json settings).
.PHONY: chart-regenerate
chart-regenerate: $(VENV)/.installed $(BIN)/helm
	$(VENV)/bin/python tests/chart/regenerate.py

# A real Kubernetes control plane on loopback with kwok's simulated nodes, for the chart's tests
# (docs/kubernetes-local-cluster.md). Only Go and openssl are needed: the first run builds it
# (cached under ~/.cache/marketspread-cluster); its data lives in $(LOCAL)/cluster.
.PHONY: cluster-build cluster-up cluster-down cluster-status k8s-e2e
cluster-build:
	$(PYTHON) k8s/cluster/cluster.py build >/dev/null

cluster-up:
	$(PYTHON) k8s/cluster/cluster.py up

cluster-down:
	$(PYTHON) k8s/cluster/cluster.py down

cluster-status:
	$(PYTHON) k8s/cluster/cluster.py status

# The chart on that cluster with the real helm, kubectl and spark-submit (tests/k8s/test_e2e_*.py,
# docs/kubernetes-local-cluster.md). The cluster stays up afterwards: `make cluster-down`.
k8s-e2e: setup cluster-up
	$(VENV)/bin/pytest -m k8s tests/k8s/test_e2e_*.py
