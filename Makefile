# fleetslice: kubebuilder-style Makefile. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GOBIN ?= $(shell go env GOPATH)/bin
LOCALBIN ?= $(CURDIR)/bin

## Tool versions (pinned; newer kustomize needs a newer Go than we pin)
CONTROLLER_TOOLS_VERSION ?= v0.23.0
KUSTOMIZE_VERSION ?= v5.7.1

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)

# Kubernetes binaries are built from source once per machine (see hack/k8s-binaries.sh) and cached
# outside the checkout; envtest finds them through KUBEBUILDER_ASSETS.
K8S_BIN_DIR = $(shell hack/k8s-binaries.sh)

# Extra flags for `go test`, e.g. make test TEST_FLAGS='-run TestFoo -v'.
TEST_FLAGS ?=
TEST_TIMEOUT ?= 30m

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs and RBAC from the +kubebuilder markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/..." paths="./controllers/..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods for the API types.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: k8s-binaries
k8s-binaries: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and kwokctl (first run only).
	@hack/k8s-binaries.sh

.PHONY: kube-proxy
kube-proxy: ## Build kube-proxy (the agent bench runs it beside the agent, test/kubeproxy instead of it; first run only).
	@hack/k8s-binaries.sh kube-proxy

.PHONY: test
test: vet k8s-binaries kube-proxy kustomize ## Run every test: unit, envtest integration, local ClusterSet and dataplane tests.
	KUSTOMIZE=$(KUSTOMIZE) KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(K8S_BIN_DIR)}" go test -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...

# The full fault suite: test/chaos at full size (1,000-Pod rollouts, a 60 s broker outage) and the
# agent's kill and drift tests at their long sizes. `make test` runs the quick variants.
CHAOS_REPORT ?= $(CURDIR)/docs/reliability-run.md

.PHONY: chaos
chaos: k8s-binaries ## Run the full fault suite on a local ClusterSet and the agent's fault tests; writes the measured table to docs/reliability-run.md.
	FLEETSLICE_CHAOS=full FLEETSLICE_REQUIRE_KERNEL_TESTS=1 FLEETSLICE_CHAOS_REPORT=$(CHAOS_REPORT) \
		KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(K8S_BIN_DIR)}" go test -count=1 -timeout 120m -v $(TEST_FLAGS) ./test/chaos/ ./agent/

# Extra flags for `fleetslice bench`, e.g. make bench BENCH_FLAGS=--quick (every part shrunk, under
# 3 minutes) or BENCH_FLAGS=--topology-sample=4000000 (an evenly spread tenth of the simulator's space).
BENCH_FLAGS ?=

.PHONY: bench
bench: build k8s-binaries kube-proxy ## Run every part of `fleetslice bench` beside upstream; rewrites docs/benchmarks.md and its pictures.
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(K8S_BIN_DIR)}" $(LOCALBIN)/fleetslice bench --all --output docs/benchmarks.md $(BENCH_FLAGS)

##@ Build

.PHONY: build
build: fmt vet ## Build the manager, agent, fleetslice-dns, the development CLI fleetslice and the kubectl plugin kubectl-fleetslice into bin/.
	go build -o $(LOCALBIN)/ ./cmd/...

.PHONY: plugin
plugin: ## Build only the kubectl plugin (kubectl fleetslice: join, leave, status, explain) into bin/.
	go build -o $(LOCALBIN)/ ./cmd/kubectl-fleetslice

.PHONY: dns
dns: ## Build only fleetslice-dns (CoreDNS with the clusterset plugin) into bin/.
	go build -o $(LOCALBIN)/ ./cmd/fleetslice-dns

.PHONY: run
run: build k8s-binaries ## Bring up a local ClusterSet, run fleetslice on it and show what it decides (Ctrl-C tears down).
	$(LOCALBIN)/fleetslice run

##@ Deployment

# Images: each a static binary on an empty base, cross-compiled for every platform in PLATFORMS
# into one image index, written as OCI archives under DIST (hack/image), loaded into docker or
# podman when an engine answers, pushed with the credentials their logins leave. Nothing but Go
# modules is fetched. References are $(REGISTRY)/manager, /agent and /dns tagged $(VERSION)
# (empty: the release in pkg/version); IMG, AGENT_IMG and DNS_IMG override one each.
REGISTRY ?= ghcr.io/fleetslice
VERSION ?=
IMG ?=
AGENT_IMG ?=
DNS_IMG ?=
PLATFORMS ?= linux/amd64,linux/arm64
DIST ?= dist
IMAGE_FLAGS = --registry "$(REGISTRY)" --tag "$(VERSION)" --img "$(IMG)" --agent-img "$(AGENT_IMG)" --dns-img "$(DNS_IMG)"

.PHONY: docker-build
docker-build: ## Build the manager, agent and fleetslice-dns images for PLATFORMS as dist/*.tar (REGISTRY, VERSION, DIST).
	go run ./hack/image build $(IMAGE_FLAGS) --platforms "$(PLATFORMS)" --out "$(DIST)"

.PHONY: docker-push
docker-push: ## Push the image archives in dist/ and record their digests in dist/image-digests.yaml.
	go run ./hack/image push --out "$(DIST)"

.PHONY: build-installer
build-installer: manifests kustomize ## Write dist/install.yaml, crds.yaml, broker.yaml and the Helm chart; images pinned by digest once pushed.
	go run ./hack/installer $(IMAGE_FLAGS) --digests "$(DIST)/image-digests.yaml" --kustomize "$(KUSTOMIZE)" --out "$(DIST)"

.PHONY: deploy
deploy: build-installer ## Install dist/install.yaml into the cluster of the current kubeconfig context.
	kubectl apply --server-side -f "$(DIST)/install.yaml"

.PHONY: undeploy
undeploy: ## Remove what deploy created.
	kubectl delete --ignore-not-found -f "$(DIST)/install.yaml"

##@ Tools

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into bin/.
$(CONTROLLER_GEN): | $(LOCALBIN)
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: kustomize
kustomize: $(KUSTOMIZE) ## Install kustomize into bin/.
$(KUSTOMIZE): | $(LOCALBIN)
	$(call go-install-tool,$(KUSTOMIZE),sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))

# go-install-tool installs a Go tool at a pinned version as bin/NAME-VERSION and links bin/NAME.
define go-install-tool
@[ -f "$(1)" ] || { \
set -e; \
package=$(2)@$(3) ;\
echo "Downloading $${package}" ;\
rm -f $(1) ;\
GOBIN=$(LOCALBIN) go install $${package} ;\
mv $(LOCALBIN)/$$(basename "$$(echo "$(1)" | sed "s/-$(3)$$//")") $(1) ;\
} ;\
ln -sf $$(realpath $(1)) $$(echo "$(1)" | sed "s/-$(3)$$//")
endef
