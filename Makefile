# fleetq: every target a user or CI runs. `make demo` and `make test` are the two set-up commands.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

ROOT := $(abspath .)
BIN ?= $(ROOT)/bin
export FLEETQ_BIN_DIR := $(BIN)
# controller-runtime's envtest finds etcd and kube-apiserver here.
export KUBEBUILDER_ASSETS := $(BIN)

GO ?= go
# Every package but the chaos suite, which `make test` runs on its own afterwards: its lab of
# four clusters and five fleetq processes would starve the e2e suites running beside it on 2 cores.
PKGS = $(shell $(GO) list ./... | grep -v /e2e/chaos)
# Test timeout for the whole suite (unit, integration on real API servers, e2e on the lab).
TEST_TIMEOUT ?= 40m

.PHONY: all build test generate verify lint tools demo clean help

all: build

help: ## Show the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 12

build: ## Build fleetq's binaries into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

tools: ## Build the pinned lab tools (etcd, kube-*, kwok, training-operator, ray-operator) into bin/; skips what is current.
	hack/tools/build.sh etcd
	hack/tools/build.sh kube
	hack/tools/build.sh kwok
	hack/tools/build.sh kubeflow
	hack/tools/build.sh kuberay

kueue: ## Build Kueue v0.17.0 into bin/ for the benchmark and the differential suite (~6 min cold).
	hack/tools/build.sh kueue

test: tools kueue ## Run every test: unit, integration (real API servers), e2e (the lab), then a short chaos run.
	$(GO) test -timeout $(TEST_TIMEOUT) -p 2 $(PKGS)
	$(GO) test -timeout 30m ./e2e/chaos/

# Flags for fleetq-demo, e.g. DEMO_FLAGS="--story smoke" or "--kubeconfig mgmt.kubeconfig" (see bin/fleetq-demo --help).
DEMO_FLAGS ?=

demo: tools ## The main job: bring up the lab, start fleetq, and show two teams' GPU jobs queue, borrow, run and get preempted, live.
	$(GO) build -o $(BIN)/ ./cmd/fleetq-manager ./cmd/fleetq-agent ./cmd/fleetq-lab ./cmd/fleetq-demo
	$(BIN)/fleetq-demo $(DEMO_FLAGS)

generate: ## Regenerate deepcopy code and CRDs.
	$(GO) tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(GO) tool controller-gen crd:allowDangerousTypes=false,generateEmbeddedObjectMeta=true paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(GO) run ./config/crd/bounds config/crd/bases

verify: generate ## Fail if generated files are stale or code is unformatted.
	@git diff --exit-code -- api config/crd || { echo "generated files are stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w"; exit 1; }

lint: ## gofmt and go vet.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w"; exit 1; }
	$(GO) vet ./...

clean: ## Remove built binaries (not the Go cache).
	rm -rf $(BIN)

# Images and charts (issue 7).
IMAGE_REPO ?= fleetq
IMAGE_TAG ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
DOCKER ?= docker

.PHONY: image charts

image: ## Build the fleetq-manager and fleetq-agent images from the Dockerfile (needs a Docker engine and registry access).
	$(DOCKER) build --target fleetq-manager -t $(IMAGE_REPO)/fleetq-manager:$(IMAGE_TAG) .
	$(DOCKER) build --target fleetq-agent -t $(IMAGE_REPO)/fleetq-agent:$(IMAGE_TAG) .

charts: ## Write the charts' generated files: CRDs from config/crd/bases, the agent's RBAC from worker/setup.
	$(GO) run ./charts/sync

# Benchmark knobs: make bench BENCH_RUNS=3 BENCH_SCALE=0.5 BENCH_FLAGS='--systems fleetq,direct' (direct: the
# lab's ceiling, jobs created where they run, see e2e/bench/README.md). One run of the
# three scenarios at full size took 45 min on 2 cores (Kueue already built), 20 of them Kueue dispatching scenario (b)'s
# 1,000 jobs at ~1 workload/s; BENCH_RUNS=3 (medians with min–max) takes three times that.
BENCH_RUNS ?= 1
BENCH_SCALE ?= 1
BENCH_OUT ?= _bench
BENCH_FLAGS ?=

.PHONY: kueue bench chaos differential

# Differential conformance (e2e/differential): N generated scenarios from seed SEED, PARALLEL at once.
N ?= 50
SEED ?= 1
PARALLEL ?= 4
DIFF_OUT ?= _differential

differential: tools kueue ## Play N generated admission scenarios through Kueue v0.17 and fleetq on the lab and compare their decisions; summary.md and reproductions in _differential/.
	$(GO) run ./cmd/fleetq-differential -n $(N) -seed $(SEED) -parallel $(PARALLEL) -out $(DIFF_OUT)

# The long chaos run (e2e/chaos): CHAOS_SEED reruns a schedule; a new seed by default.
CHAOS_SEED ?= $(shell date +%s)
CHAOS_LENGTH ?= 30m
CHAOS_JOBS ?= 300
CHAOS_DRAIN ?= 10m

chaos: tools ## Faults on a seeded schedule for CHAOS_LENGTH (30m) under a few hundred jobs; invariants checked; table in _chaos/.
	$(GO) test -timeout 120m ./e2e/chaos/ -run TestChaos -v -args -ginkgo.v \
		-chaos.seed=$(CHAOS_SEED) -chaos.length=$(CHAOS_LENGTH) -chaos.jobs=$(CHAOS_JOBS) -chaos.drain=$(CHAOS_DRAIN) \
		-chaos.report=$(ROOT)/_chaos/report-$(CHAOS_SEED).txt -chaos.logs=$(ROOT)/_chaos/logs-$(CHAOS_SEED)

bench: tools kueue ## Benchmark fleetq against Kueue v0.17 on the lab (e2e/bench/scenarios); report, CSV and plots in _bench/.
	$(GO) run ./cmd/fleetq-bench --runs $(BENCH_RUNS) --scale $(BENCH_SCALE) --out $(BENCH_OUT) $(BENCH_FLAGS)
