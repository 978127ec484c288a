# Lava's build. `make help` lists the targets. `make test` is what CI runs (.ci/run calls it).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

##@ Tool versions (pinned; built from the Go module proxy into TOOLS_DIR, outside the repo)
BUF_VERSION            := v1.75.0
NATS_SERVER_VERSION    := v2.15.2
NATSCLI_VERSION        := v0.5.1
KUBE_VERSION           := v1.37.2
TOFU_VERSION           := v1.12.6
HELM_VERSION           := v3.22.0
TERRAFORM_VERSION      := v1.8.5
CONTROLLER_GEN_VERSION := v0.23.0
ALERTMANAGER_VERSION   := v0.28.1
PROMTOOL_VERSION       := v0.316.0
STATICCHECK_VERSION    := v0.8.2
DEADCODE_VERSION       := v0.53.0
SOURCE_CONTROLLER_VERSION := v1.9.6
COREDNS_VERSION        := v1.14.7
KUBE_ROUTER_VERSION    := v2.1.0
OPENSTACK_PROVIDER_VERSION := 3.4.0
KUBERNETES_PROVIDER_VERSION := 1.13.4
HELM_PROVIDER_VERSION  := 1.3.2

TOOLS_DIR      ?= $(HOME)/.cache/lava/tools
BUF_DIR        := $(TOOLS_DIR)/buf-$(BUF_VERSION)
NATS_DIR       := $(TOOLS_DIR)/nats-server-$(NATS_SERVER_VERSION)
NATSCLI_DIR    := $(TOOLS_DIR)/natscli-$(NATSCLI_VERSION)
KUBE_DIR       := $(TOOLS_DIR)/kube-$(KUBE_VERSION)
TOFU_DIR       := $(TOOLS_DIR)/tofu-$(TOFU_VERSION)
HELM_DIR       := $(TOOLS_DIR)/helm-$(HELM_VERSION)
TERRAFORM_DIR  := $(TOOLS_DIR)/terraform-$(TERRAFORM_VERSION)
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)/controller-gen
TESTKIT_DIR    := $(TOOLS_DIR)/testkit-v0.4.0
ALERTMANAGER_DIR := $(TOOLS_DIR)/alertmanager-$(ALERTMANAGER_VERSION)
PROMTOOL_DIR     := $(TOOLS_DIR)/promtool-$(PROMTOOL_VERSION)
SOURCE_CONTROLLER_DIR := $(TOOLS_DIR)/source-controller-$(SOURCE_CONTROLLER_VERSION)
KUBE_NODE_DIR  := $(TOOLS_DIR)/kube-node-$(KUBE_VERSION)
COREDNS_DIR    := $(TOOLS_DIR)/coredns-$(COREDNS_VERSION)
KUBE_ROUTER_DIR := $(TOOLS_DIR)/kube-router-$(KUBE_ROUTER_VERSION)
OPENSTACK_DIR  := $(TOOLS_DIR)/openstack-provider-v$(OPENSTACK_PROVIDER_VERSION)
KUBERNETES_PROVIDERS_DIR := $(TOOLS_DIR)/kubernetes-providers-v$(KUBERNETES_PROVIDER_VERSION)-helm-v$(HELM_PROVIDER_VERSION)
# The one-node cluster's state (hack/cluster/up.sh): configuration, data, sockets, logs.
CLUSTER_DIR    ?= $(HOME)/.cache/lava/cluster
BUF            := $(BUF_DIR)/buf
STATICCHECK    := $(TOOLS_DIR)/staticcheck-$(STATICCHECK_VERSION)/staticcheck
DEADCODE       := $(TOOLS_DIR)/deadcode-$(DEADCODE_VERSION)/deadcode

# What tests read to find the real binaries. A test whose binary is missing fails and names the
# `make tools` target that builds it.
export KUBEBUILDER_ASSETS    := $(KUBE_DIR)
export LAVA_NATS_SERVER_BIN  := $(NATS_DIR)/nats-server
export LAVA_NATS_CLI_BIN     := $(NATSCLI_DIR)/nats
export LAVA_TOFU_DIR         := $(TOFU_DIR)
export LAVA_TERRAFORM_BIN    := $(TERRAFORM_DIR)/terraform
export LAVA_HELM_BIN         := $(HELM_DIR)/helm
export LAVA_TESTKIT_MIRROR   := $(TESTKIT_DIR)
export LAVA_ALERTMANAGER_BIN := $(ALERTMANAGER_DIR)/alertmanager
export LAVA_PROMTOOL_BIN     := $(PROMTOOL_DIR)/promtool
export LAVA_SOURCE_CONTROLLER_DIR := $(SOURCE_CONTROLLER_DIR)
export LAVA_OPENSTACK_MIRROR := $(OPENSTACK_DIR)
export LAVA_KUBERNETES_MIRROR := $(KUBERNETES_PROVIDERS_DIR)
# This machine's environment points TF_CLI_CONFIG_FILE at a file that does not exist.
export TF_CLI_CONFIG_FILE    := $(TOFU_DIR)/tofurc
export CHECKPOINT_DISABLE    := 1
export GOTOOLCHAIN           := local

# Every module of the workspace (the root and services/*).
MODULE_DIRS = $(shell go list -m -f '{{.Dir}}')
# Packages of every module, for go vet and go test.
PKGS = $(foreach d,$(MODULE_DIRS),$(d)/...)

GO_TEST_FLAGS ?= -count=1 -timeout=20m
# fuzz-smoke's budget is a count of executions, not a duration: a duration budget races Go's fuzz
# coordinator at its end and fails with a bare "context deadline exceeded" on a loaded machine
# (go.dev/issue/75804, fixed in Go 1.27; CI failed on it twice, FuzzLinkChain and FuzzResourceSubject).
FUZZTIME      ?= 3000x

##@ General
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z0-9_.-]+:.*?##/ { printf "  %-22s %s\n", $$1, $$2 } /^[A-Z_]+_VERSION *:=/ { split($$0, v, / *:= */); printf "  %-26s %s\n", v[1], v[2] } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the lava CLI into bin/lava.
	go build -o bin/lava ./cmd/lava

.PHONY: up
up: ## Run the main job: every example of examples/ (not examples/cloud, which needs cloud providers) through lava up (embedded NATS, every service, embedded engine). UP_FLAGS=--once exits when settled.
	@$(MAKE) --no-print-directory -j2 build tools-providers
	@if [ ! -x $(TOFU_DIR)/bin/tofu ] && grep -qs '^ *engine: *tofu' $(UP_EXAMPLES); then \
	  mkdir -p $(TOOLS_DIR); echo "make up: building OpenTofu in the background for engine tofu (log: $(TOOLS_DIR)/tofu-build.log); lava up plans its resources when it is there"; \
	  TOFU_VERSION=$(TOFU_VERSION) nohup nice -n 19 hack/tools/build-tofu.sh $(TOFU_DIR) > $(TOOLS_DIR)/tofu-build.log 2>&1 & \
	fi
	bin/lava up -f examples/ $(UP_FLAGS)

# The manifests make up applies (engine tofu in any of them starts the OpenTofu build).
UP_EXAMPLES = $(wildcard examples/*.yaml examples/*.yml examples/*.json)

SERVICES   ?= watcher synth applier drift viggy anomaly attest
IMAGE_REPO ?= ghcr.io/lava-operator
IMAGE_TAG  ?= dev
# make images (hack/mkimage; docs/install.md "Build the images"): IMAGES picks the images (a
# service's name, or lava for the CLI); IMAGES_DIR gets one tarball each and images.txt;
# IMAGES_PROVIDERS are the provider mirror directories (OpenTofu filesystem-mirror layout) the
# applier and drift images carry, by default hashicorp/local and the test provider (empty: none);
# IMAGES_TOFU=1 adds OpenTofu to them. SOURCE_DATE_EPOCH, when set, replaces the commit's time.
IMAGES           ?= $(SERVICES) lava
IMAGES_DIR       ?= bin/images
IMAGES_PROVIDERS ?= $(TOFU_DIR)/providers $(TESTKIT_DIR)
IMAGES_TOFU      ?= 0
.PHONY: images
images: $(if $(or $(filter 1,$(IMAGES_TOFU)),$(filter $(TOFU_DIR)/providers,$(IMAGES_PROVIDERS))),tools-tofu) $(if $(filter $(TESTKIT_DIR),$(IMAGES_PROVIDERS)),tools-testkit) ## Build the OCI images of IMAGES (every service and the lava CLI) into IMAGES_DIR as tarballs, without docker (IMAGES_PROVIDERS, IMAGES_TOFU=1: see docs/install.md).
	go run ./hack/mkimage -out $(IMAGES_DIR) -registry $(IMAGE_REPO) -tag $(IMAGE_TAG) \
	  $(foreach d,$(IMAGES_PROVIDERS),-providers $(d)) $(if $(filter 1,$(IMAGES_TOFU)),-tofu $(TOFU_DIR)/bin/tofu) $(IMAGES)

##@ Tools (cached in TOOLS_DIR; a fresh machine builds them once)
.PHONY: tools
tools: tools-buf tools-nats tools-natscli tools-kube tools-tofu tools-terraform tools-helm tools-testkit tools-alertmanager tools-promtool tools-source-controller tools-openstack tools-kubernetes-providers tools-controller-gen tools-staticcheck tools-deadcode ## Build every tool the tests need.

.PHONY: tools-buf
tools-buf: ## buf, protoc-gen-go, protoc-gen-connect-go.
	hack/tools/build-buf.sh $(BUF_DIR)

.PHONY: tools-nats
tools-nats: ## nats-server for multi-process tests.
	NATS_SERVER_VERSION=$(NATS_SERVER_VERSION) hack/tools/build-nats.sh $(NATS_DIR)

.PHONY: tools-natscli
tools-natscli: ## The nats command line, for the test of the state bucket's backup and restore (docs/operations.md).
	NATSCLI_VERSION=$(NATSCLI_VERSION) hack/tools/build-natscli.sh $(NATSCLI_DIR)

.PHONY: tools-kube
tools-kube: ## kube-apiserver, etcd, kube-controller-manager for envtest and e2e.
	KUBE_VERSION=$(KUBE_VERSION) hack/tools/build-kube-testbin.sh $(KUBE_DIR)

.PHONY: tools-tofu
tools-tofu: ## OpenTofu and the offline provider mirror.
	TOFU_VERSION=$(TOFU_VERSION) hack/tools/build-tofu.sh $(TOFU_DIR)

.PHONY: tools-providers
tools-providers: ## Only the offline provider mirror of tools-tofu (hashicorp/local, example/testkit 0.1.0): what make up's embedded engine needs.
	TOFU_VERSION=$(TOFU_VERSION) hack/tools/build-tofu.sh $(TOFU_DIR) providers

.PHONY: tools-terraform
tools-terraform: ## Terraform 1.8.5 for the terraform engine's tests.
	TERRAFORM_VERSION=$(TERRAFORM_VERSION) hack/tools/build-terraform.sh $(TERRAFORM_DIR)

.PHONY: tools-testkit
tools-testkit: ## The extended test provider example/testkit 0.4.0 into a provider mirror.
	test/provider/testkit/build.sh $(TESTKIT_DIR)

.PHONY: tools-alertmanager
tools-alertmanager: ## Alertmanager for the anomaly service's sink tests.
	ALERTMANAGER_VERSION=$(ALERTMANAGER_VERSION) hack/tools/build-alertmanager.sh $(ALERTMANAGER_DIR)

.PHONY: tools-promtool
tools-promtool: ## promtool, for the chart's alerting rule unit tests.
	PROMTOOL_VERSION=$(PROMTOOL_VERSION) hack/tools/build-promtool.sh $(PROMTOOL_DIR)

.PHONY: tools-source-controller
tools-source-controller: ## Flux's source-controller and its CRDs, for the spec.sourceRef tests.
	SOURCE_CONTROLLER_VERSION=$(SOURCE_CONTROLLER_VERSION) hack/tools/build-source-controller.sh $(SOURCE_CONTROLLER_DIR)

.PHONY: tools-helm
tools-helm: ## helm, for the chart checks.
	HELM_VERSION=$(HELM_VERSION) hack/tools/build-helm.sh $(HELM_DIR)

.PHONY: tools-controller-gen
tools-controller-gen: ## controller-gen for CRDs and deepcopy.
	@if [ -x $(CONTROLLER_GEN) ]; then echo "[tools] controller-gen $(CONTROLLER_GEN_VERSION) present, skipping" >&2; \
	else cd "$${TMPDIR:-/tmp}" && GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN=$(dir $(CONTROLLER_GEN)) \
	  go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION); fi

.PHONY: tools-staticcheck
tools-staticcheck: ## staticcheck (honnef.co/go/tools) for make lint.
	@if [ -x $(STATICCHECK) ]; then echo "[tools] staticcheck $(STATICCHECK_VERSION) present, skipping" >&2; \
	else cd "$${TMPDIR:-/tmp}" && GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN=$(dir $(STATICCHECK)) \
	  go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); fi

.PHONY: tools-deadcode
tools-deadcode: ## deadcode (golang.org/x/tools, DEADCODE_VERSION is that module's version) for make lint.
	@if [ -x $(DEADCODE) ]; then echo "[tools] deadcode $(DEADCODE_VERSION) present, skipping" >&2; \
	else cd "$${TMPDIR:-/tmp}" && GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN=$(dir $(DEADCODE)) \
	  go install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION); fi

# The node tools are not in `tools`: only the one-node cluster needs them (make test-cluster).
.PHONY: tools-kube-node
tools-kube-node: ## kube-scheduler, kubelet, kube-proxy, kubectl for the one-node cluster.
	KUBE_VERSION=$(KUBE_VERSION) hack/tools/build-kube-node.sh $(KUBE_NODE_DIR)

.PHONY: tools-coredns
tools-coredns: ## A slim CoreDNS for the one-node cluster's DNS.
	COREDNS_VERSION=$(COREDNS_VERSION) hack/tools/build-coredns.sh $(COREDNS_DIR)

.PHONY: tools-kube-router
tools-kube-router: ## kube-router, whose NetworkPolicy controller the one-node cluster runs.
	KUBE_ROUTER_VERSION=$(KUBE_ROUTER_VERSION) hack/tools/build-kube-router.sh $(KUBE_ROUTER_DIR)

.PHONY: tools-openstack
tools-openstack: ## The OpenStack provider into a provider mirror, for the real-provider tests against Keystone.
	OPENSTACK_PROVIDER_VERSION=$(OPENSTACK_PROVIDER_VERSION) hack/tools/build-openstack-provider.sh $(OPENSTACK_DIR)

.PHONY: tools-kubernetes-providers
tools-kubernetes-providers: ## hashicorp/kubernetes and hashicorp/helm into a provider mirror, for the real-provider tests against a real API server.
	KUBERNETES_PROVIDER_VERSION=$(KUBERNETES_PROVIDER_VERSION) HELM_PROVIDER_VERSION=$(HELM_PROVIDER_VERSION) \
	  hack/tools/build-kubernetes-providers.sh $(KUBERNETES_PROVIDERS_DIR)

##@ One-node cluster (root; containerd, kubelet and the control plane on this machine: hack/cluster)
CLUSTER_ENV = CLUSTER_DIR=$(CLUSTER_DIR) KUBE_DIR=$(KUBE_DIR) KUBE_NODE_DIR=$(KUBE_NODE_DIR) COREDNS_DIR=$(COREDNS_DIR) KUBE_ROUTER_DIR=$(KUBE_ROUTER_DIR)

.PHONY: cluster-packages
cluster-packages: ## Install the Debian packages the cluster runs on (containerd, runc, CNI plugins, iptables, ...).
	hack/cluster/install-packages.sh

.PHONY: cluster-up
cluster-up: tools-kube tools-kube-node tools-coredns tools-kube-router cluster-packages ## Start the one-node cluster; then KUBECONFIG=CLUSTER_DIR/kubeconfig (CLUSTER_DIR: ~/.cache/lava/cluster).
	$(CLUSTER_ENV) hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop the one-node cluster and undo every change it made to the host.
	$(CLUSTER_ENV) hack/cluster/down.sh

.PHONY: test-cluster
test-cluster: tools-kube tools-kube-node tools-coredns tools-kube-router tools-nats tools-helm tools-tofu tools-testkit cluster-packages ## cluster-up, the tests of test/cluster (smoke, isolation, NetworkPolicy, the chart with NATS), cluster-down; fails if the host differs afterwards. Part of make test (root).
	$(CLUSTER_ENV) hack/cluster/test.sh

##@ Generated code
.PHONY: generate
generate: tools-buf tools-controller-gen tools-helm ## Regenerate protobuf code, deepcopy, CRDs, the chart's CRDs and deploy/manifests; tidy modules.
	@if [ -d proto ]; then \
	  PATH=$(BUF_DIR):$$PATH $(BUF) format -w && \
	  PATH=$(BUF_DIR):$$PATH $(BUF) generate; fi
	@# The Terraform plugin protocol stubs: their own buf module, generated into the engine package.
	@if [ -d internal/engine/embedded/proto ]; then cd internal/engine/embedded && \
	  rm -rf tfplugin5 tfplugin6 && \
	  PATH=$(BUF_DIR):$$PATH $(BUF) format -w && \
	  PATH=$(BUF_DIR):$$PATH $(BUF) generate; fi
	@if [ -d api ]; then \
	  $(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/... && \
	  $(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases; fi
	@for d in $(MODULE_DIRS); do (cd $$d && go mod tidy); done
	go work sync
	$(MAKE) manifests

.PHONY: manifests
manifests: tools-helm ## Copy the CRDs into the chart and render deploy/manifests/lava.yaml.
	cp config/crd/bases/*.yaml deploy/charts/lava/crds/
	HELM_CACHE_HOME=$$(mktemp -d) HELM_CONFIG_HOME=$$(mktemp -d) HELM_DATA_HOME=$$(mktemp -d) \
	  $(LAVA_HELM_BIN) template lava deploy/charts/lava --namespace lava-system --include-crds > deploy/manifests/lava.yaml

.PHONY: check-generate
check-generate: generate ## Fail if regenerating changes anything.
	@git add -N . && if ! git diff --exit-code --stat; then \
	  echo "generated files are stale: run 'make generate' and commit" >&2; exit 1; fi

##@ Checks
# Dead code (hack/deadcode.sh): every function of a package a binary links must be reached from a
# binary (code only tests call is deleted, or moved into a _test.go file or a test-support
# package); every function of a test-support package (under test/ or internal/platform/testutil/,
# or named *test; no binary links it) must be reached from a test.
.PHONY: lint
lint: tools-buf tools-staticcheck tools-deadcode ## go vet, staticcheck, gofmt, buf lint/format/breaking, module dependency rules, function length, dead code (a binary reaches every function it links, a test every test-support function).
	go vet -tags integration,terraform,providers,e2e,cluster $(PKGS)
	$(STATICCHECK) -tags integration,terraform,providers,e2e,cluster $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:" >&2; echo "$$out" >&2; exit 1; fi
	@if [ -d proto ]; then \
	  $(BUF) lint && $(BUF) format -d --exit-code && \
	  if git cat-file -e HEAD~1:proto 2>/dev/null; then $(BUF) breaking --against '.git#ref=HEAD~1'; \
	  else echo "[lint] buf breaking: no previous commit with proto/, skipped" >&2; fi; fi
	@if [ -d internal/engine/embedded/proto ]; then cd internal/engine/embedded && \
	  $(BUF) lint && $(BUF) format -d --exit-code; fi
	hack/depcheck.sh
	go run ./hack/funclen -allow hack/funclen/allow.txt .
	hack/deadcode.sh $(DEADCODE)

##@ Tests
.PHONY: test
test: tools check-generate lint test-all test-e2e bench-smoke fuzz-smoke test-cluster ## Everything CI runs (test-cluster needs root: it runs a one-node Kubernetes cluster on this machine).

.PHONY: test-all
test-all: ## Unit and integration tests (real NATS, real API server, real tofu and terraform, real providers against real services) of every module.
	go test -tags integration,terraform,providers $(GO_TEST_FLAGS) $(PKGS)

.PHONY: test-providers
test-providers: tools-tofu tools-terraform tools-openstack tools-kube tools-helm tools-kubernetes-providers ## Only the real-provider tests (build tag providers, also in test-all): the OpenStack provider against Debian's Keystone on PostgreSQL, the kubernetes and helm providers against kube-apiserver, etcd and kube-controller-manager, on both engines and terraform 1.8.5 (docs/embedded-engine.md).
	go test -tags integration,providers $(GO_TEST_FLAGS) -run '^(TestOpenStack_tofuOracle|TestKubernetes_tofuOracle|TestHelm_tofuOracle|TestStart)$$' ./internal/engine/embedded ./internal/platform/testutil/keystonetest

.PHONY: test-e2e
test-e2e: ## End to end: every service its own process, real kube-apiserver/etcd/kcm, nats-server, tofu, kubectl.
	go test -tags e2e -count=1 -timeout=30m ./test/e2e/

SCALE_OBJECTS ?= 500
.PHONY: test-e2e-scale
test-e2e-scale: ## The full-size scale-out run (docs/design/0018-receipt-order-across-replicas.md): two replicas of every service on SCALE_OBJECTS (500) objects.
	go test -tags e2e -count=1 -timeout=60m -run '^TestScaleOut_' -v ./test/e2e/ -args -scale.objects=$(SCALE_OBJECTS)

CLUSTER_OBJECTS ?= 200
.PHONY: test-e2e-cluster
test-e2e-cluster: ## The full-size JetStream cluster run (docs/operations.md): CLUSTER_OBJECTS (200) objects, one server then the meta leader SIGKILLed.
	go test -tags e2e -count=1 -timeout=60m -run '^TestCluster_' -v ./test/e2e/ -args -cluster.objects=$(CLUSTER_OBJECTS)

CHAOS_OBJECTS ?= 200
CHAOS_SEED ?= 0
.PHONY: test-e2e-chaos
test-e2e-chaos: ## The full-size chaos run (docs/operations.md): CHAOS_OBJECTS (200) objects, every service SIGKILLed twice and nats-server once (CHAOS_SEED replays a schedule).
	go test -tags e2e -count=1 -timeout=60m -run '^TestChaos_' -v ./test/e2e/ -args -chaos.objects=$(CHAOS_OBJECTS) -chaos.seed=$(CHAOS_SEED)

SOAK_DURATION ?= 2h
SOAK_OBJECTS  ?= 100
SOAK_TIMEOUT  ?= 4h
.PHONY: soak
soak: ## The soak (docs/operations.md; not in CI): SOAK_DURATION (2h) of create/update/delete churn with drift scans on SOAK_OBJECTS (100) objects; RSS, goroutines and store sizes flat.
	go test -tags e2e,soak -count=1 -timeout=$(SOAK_TIMEOUT) -run '^TestSoak$$' -v ./test/e2e/ -args -soak.duration=$(SOAK_DURATION) -soak.objects=$(SOAK_OBJECTS)

.PHONY: test-unit
test-unit: ## The quick loop: tests that need no built binary.
	go test $(GO_TEST_FLAGS) $(PKGS)

.PHONY: chart
chart: tools-helm tools-kube ## Chart checks: helm lint/template, schema, RBAC, server-side dry-run on a real API server.
	go test -tags integration $(GO_TEST_FLAGS) ./test/chart

.PHONY: bench-smoke
bench-smoke: ## Every benchmark once (-benchtime=1x), one package at a time (-p 1) so no benchmark shares the cores with another.
	go test -p 1 -tags integration,providers -run '^$$' -bench . -benchtime=1x $(PKGS)

# Fuzz targets: package:FuzzName, each run for FUZZTIME (executions, or a duration for make fuzz).
FUZZ_TARGETS ?= ./internal/platform/eventid:FuzzEncodeInjective ./cmd/lava:FuzzLoadUnits ./internal/lang/render:FuzzRender ./internal/lang/tlisp:FuzzParse ./internal/platform/bus:FuzzEscapeToken ./internal/platform/bus:FuzzUnescapeToken ./internal/platform/bus:FuzzResourceSubject ./internal/readmodel:FuzzVerifyTamper ./internal/platform/bus:FuzzDecodeEvent ./internal/service/watcher:FuzzPhaseEvent ./internal/manifest:FuzzParse
# The decoders of every service's events (besides bus.DecodeBody's FuzzDecodeEvent) and of a Flux artifact.
FUZZ_TARGETS += ./internal/service/anomaly:FuzzAnomalyFromEvents ./internal/service/viggy:FuzzRecordPolicy ./internal/readmodel:FuzzLinkChain ./internal/service/synth:FuzzObservedToSynthesized ./internal/pipeline/synthesis:FuzzFileInTarGz ./internal/service/applier:FuzzSynthesizedInput
.PHONY: fuzz-smoke
# A duration-budget run (make fuzz) that ends with go's own "context deadline exceeded" at the
# end of -fuzztime and records no failing input (no "Failing input written to") found nothing
# (go.dev/issue/75804): it is run once more. Any failing input fails at once.
fuzz-smoke: ## Every fuzz target for FUZZTIME.
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "[fuzz] $$pkg $$name $(FUZZTIME)"; out=$$(mktemp); \
	  if ! go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1 | tee $$out; then \
	    if grep -q 'context deadline exceeded' $$out && ! grep -q 'Failing input written to' $$out; then \
	      echo "[fuzz] $$name: deadline at the end of -fuzztime with no failing input; running it once more"; \
	      go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	    else rm -f $$out; exit 1; fi; fi; rm -f $$out; done

.PHONY: fuzz
fuzz: FUZZTIME = 10m
fuzz: fuzz-smoke ## Every fuzz target, one at a time, for FUZZTIME (10m here: make fuzz FUZZTIME=1h); not in CI (fuzz-smoke is).

.PHONY: bench
bench: ## The long benchmarks, with figures.
	go test -tags integration,providers -run '^$$' -bench . -skip Pipeline -benchmem -count=5 $(PKGS)

.PHONY: bench-pipeline
bench-pipeline: tools ## N=1000 LavaArchitectures through the whole pipeline vs the client-go floor, unlimited QPS (a few minutes).
	go test -tags integration -run '^$$' -bench Pipeline -benchtime=1x -timeout 60m ./bench/pipeline/ -args -n 1000
