# detour: a Kubernetes operator that routes RocketMQ producer traffic around slow and failing brokers.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
CONTROLLER_GEN ?= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen
KUBECTL ?= kubectl
# ENVTEST_ASSETS is where hack/setup-envtest.sh installs kube-apiserver and etcd (built from Go
# modules the first time, reused afterwards).
ENVTEST_ASSETS = $(shell hack/setup-envtest.sh)
# ROCKETMQ_DIST is where hack/setup-rocketmq.sh puts real Apache RocketMQ (name server, broker,
# client, from Maven Central) and the Java test driver; it needs Java and Maven.
ROCKETMQ_DIST = $(shell hack/setup-rocketmq.sh)
# PYTHON_CLIENT is where hack/setup-python-client.sh installs RocketMQ's Python gRPC client (a
# virtual environment from hack/rocketmq/python/requirements.txt) and its test driver; it needs
# python3 with its venv module.
PYTHON_CLIENT = $(shell hack/setup-python-client.sh)
# NODE_CLIENT is where hack/setup-node-client.sh installs RocketMQ's Node.js gRPC client (npm ci of
# hack/rocketmq/node/package-lock.json) and its test driver; it needs node and npm.
NODE_CLIENT = $(shell hack/setup-node-client.sh)
# HELM is the Helm client hack/setup-helm.sh builds from its Go module (hack/helm) and caches.
HELM = $(shell hack/setup-helm.sh)
# PROTOC is Debian's protobuf-compiler, which hack/setup-protoc.sh installs when it is missing; its
# Go plugins run from the modules pinned in go.mod (tools/tools.go).
PROTOC = $(shell hack/setup-protoc.sh)
PROTO_FILES = $(sort $(wildcard proto/apache/rocketmq/v2/*.proto))
# PROMTOOL is Prometheus' rule checker (Debian's prometheus package, installed by
# hack/setup-promtool.sh when missing); the alerting rules' unit tests run it.
PROMTOOL = $(shell hack/setup-promtool.sh)
# KUBE_API_LINTER is golangci-lint with kube-api-linter (the Kubernetes API conventions linter)
# compiled in, which hack/setup-kube-api-linter.sh builds from their Go modules
# (hack/kube-api-linter) and caches; .golangci-kal.yml says which of its checks run.
KUBE_API_LINTER = $(shell hack/setup-kube-api-linter.sh)
TEST_TIMEOUT ?= 40m
# GENERATED are the files `make manifests generate` writes; `make verify` checks them.
GENERATED = config/crd/bases config/rbac/role.yaml api/v1alpha1/zz_generated.deepcopy.go \
	charts/detour/crds charts/detour/files/manager-role.yaml charts/detour/files/prometheus-alerts.yaml pkg/rmqpb \
	docs/reference config/grafana charts/detour/files/dashboards
FUZZ_TIME ?= 10s

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code for the API types and the RocketMQ gRPC protocol's Go code (pkg/rmqpb).
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."
	@protoc="$(PROTOC)"; [[ -n "$$protoc" ]] || { echo "make generate: hack/setup-protoc.sh failed (see above)" >&2; exit 1; }
	@# The plugins are built once into a scratch folder, so protoc finds them by path.
	@plugins=$$(mktemp -d); trap 'rm -rf "$$plugins"' EXIT; \
		$(GO) build -o "$$plugins/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc; \
		rm -f pkg/rmqpb/*.pb.go; \
		"$(PROTOC)" -I proto -I /usr/include --plugin=protoc-gen-go="$$plugins/protoc-gen-go" \
			--plugin=protoc-gen-go-grpc="$$plugins/protoc-gen-go-grpc" \
			--go_out=. --go_opt=module=github.com/detourmq/detour \
			--go-grpc_out=. --go-grpc_opt=module=github.com/detourmq/detour $(PROTO_FILES)

.PHONY: manifests
manifests: ## Generate CRDs into config/crd/bases, RBAC into config/rbac and the Grafana dashboards into config/grafana, and copy them into the Helm chart.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@# Helm reads no file outside the chart's folder, so the chart carries copies.
	rm -f charts/detour/crds/*.yaml
	cp config/crd/bases/*.yaml charts/detour/crds/
	cp config/rbac/role.yaml charts/detour/files/manager-role.yaml
	cp config/prometheus/alerts.yaml charts/detour/files/prometheus-alerts.yaml
	@# The dashboards are built with Grafana's foundation SDK, in their own module (hack/dashboards).
	cd hack/dashboards && $(GO) run . -out ../../config/grafana
	mkdir -p charts/detour/files/dashboards
	rm -f charts/detour/files/dashboards/*.json
	cp config/grafana/*.json charts/detour/files/dashboards/

.PHONY: docs
docs: ## Generate docs/reference (API, manager flags, Helm values, metrics); check every relative link in README.md, CHANGELOG.md, docs/ and bench/, the package map of docs/design/architecture.md, that no function (tests and generated code aside) is over 80 lines and that no product code outside pkg/scope glues or cuts a "/" by hand.
	$(GO) run ./hack/docgen

.PHONY: lint-api
lint-api: ## Check the API types in api/ against the Kubernetes API conventions (kube-api-linter).
	@kal="$(KUBE_API_LINTER)"; [[ -n "$$kal" ]] || { echo "make lint-api: hack/setup-kube-api-linter.sh failed (see above)" >&2; exit 1; }; \
		"$$kal" run --config .golangci-kal.yml ./api/...

.PHONY: verify
verify: manifests generate docs lint-api ## Fail when generated files (docs/reference among them) are out of date, a markdown link is broken, the architecture map, a function's size or a hand-built identity is wrong, api/ breaks an API convention or a go.mod is not tidy.
	@# go mod tidy -diff prints what tidy would change and fails without writing anything.
	@for mod in . $$(dirname $$(git ls-files 'hack/*go.mod')); do \
		(cd "$$mod" && $(GO) mod tidy -diff) || { echo "$$mod: go.mod or go.sum is not tidy; run 'go mod tidy' there and commit"; exit 1; }; done
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		echo "generated files are out of date; run 'make manifests generate docs' and commit:"; \
		git status --porcelain -- $(GENERATED); git diff --stat -- $(GENERATED); exit 1; fi

.PHONY: fmt
fmt: ## Run gofmt.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: rocketmq
rocketmq: ## Resolve (first time) and print the real RocketMQ folder for the real-RocketMQ tests.
	@hack/setup-rocketmq.sh

.PHONY: python-client
python-client: ## Install (first time) and print RocketMQ's Python gRPC client folder for the real-client tests.
	@hack/setup-python-client.sh

.PHONY: node-client
node-client: ## Install (first time) and print RocketMQ's Node.js gRPC client folder for the real-client tests.
	@hack/setup-node-client.sh

.PHONY: helm
helm: ## Build (first time) and print the Helm client that lints and renders charts/detour.
	@hack/setup-helm.sh

.PHONY: envtest
envtest: ## Build (first time) and print the envtest control plane folder.
	@hack/setup-envtest.sh

.PHONY: test
test: vet ## Run all tests (never from the test cache): unit, fuzz seeds, envtest, kubectl, helm, real RocketMQ, and the dashboards' and alerts' queries.
	@dist="$(ROCKETMQ_DIST)"; [[ -n "$$dist" ]] || { echo "make test: hack/setup-rocketmq.sh failed (see above)" >&2; exit 1; }
	@# -json through hack/testreport: every top-level test is named with its result, failures in full.
	@helm="$(HELM)"; [[ -n "$$helm" ]] || { echo "make test: hack/setup-helm.sh failed (see above)" >&2; exit 1; }
	@promtool="$(PROMTOOL)"; [[ -n "$$promtool" ]] || { echo "make test: hack/setup-promtool.sh failed (see above)" >&2; exit 1; }
	@pyclient="$(PYTHON_CLIENT)"; [[ -n "$$pyclient" ]] || { echo "make test: hack/setup-python-client.sh failed (see above)" >&2; exit 1; }
	@nodeclient="$(NODE_CLIENT)"; [[ -n "$$nodeclient" ]] || { echo "make test: hack/setup-node-client.sh failed (see above)" >&2; exit 1; }
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" DETOUR_ROCKETMQ="$(ROCKETMQ_DIST)" DETOUR_HELM="$(HELM)" DETOUR_PROMTOOL="$(PROMTOOL)" DETOUR_PYTHON_CLIENT="$(PYTHON_CLIENT)" DETOUR_NODE_CLIENT="$(NODE_CLIENT)" $(GO) test -json -race -count=1 -timeout $(TEST_TIMEOUT) ./... \
		| $(GO) run ./hack/testreport
	@# The dashboards' module holds Prometheus' PromQL parser, which the product's go.mod does not take.
	cd hack/dashboards && $(GO) test -json -race -count=1 ./... | (cd ../.. && $(GO) run ./hack/testreport)

.PHONY: test-unit
test-unit: ## Run the fast tier (go test -short -race): no envtest, Java, Python, Helm, promtool or kubectl; minutes, for the inner loop.
	$(GO) test -short -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	cd hack/dashboards && $(GO) test -short -race -count=1 ./...

.PHONY: test-e2e
test-e2e: ## Run test/e2e on a real single-node cluster in a network namespace (root; the first run installs and builds what the node needs).
	hack/test-e2e.sh

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZ_TIME.
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZ_TIME) $$pkg; \
		done; done

.PHONY: bench
bench: ## Run Go benchmarks and the full fault benchmark on real RocketMQ and brokersim (writes bench/; about two hours).
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./pkg/...
	@dist="$(ROCKETMQ_DIST)"; [[ -n "$$dist" ]] || { echo "make bench: hack/setup-rocketmq.sh failed (see above)" >&2; exit 1; }
	DETOUR_ROCKETMQ="$(ROCKETMQ_DIST)" $(GO) run ./hack/faultbench -out bench

##@ Build

.PHONY: build
build: ## Build the manager, the demo, brokersim and detourctl into bin/.
	$(GO) build -o bin/ ./cmd/...

.PHONY: run
run: ## Run the manager against the cluster in the current kubeconfig.
	$(GO) run ./cmd/manager

.PHONY: demo
demo: ## Run everything locally: control plane, brokers, operator, traffic and a fault script.
	@# Built, not `go run`: Ctrl-C ends the demo, and `go run` exits non-zero when interrupted.
	$(GO) build -o bin/detour-demo ./cmd/detour-demo
	bin/detour-demo --local-assets "$(ENVTEST_ASSETS)"

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster in the current kubeconfig.
	$(KUBECTL) apply -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRDs from the cluster.
	$(KUBECTL) delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: manifests ## Deploy the operator into the cluster in the current kubeconfig.
	$(KUBECTL) apply -k config/default

.PHONY: undeploy
undeploy: ## Remove the operator from the cluster.
	$(KUBECTL) delete --ignore-not-found -k config/default
