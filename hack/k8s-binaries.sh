#!/usr/bin/env bash
# Builds every Kubernetes binary fleetslice tests and runs against, from the Go module proxy, into a
# cache outside the checkout keyed by version. A binary already in the cache is reused, so only the
# first run on a machine pays for the build (kube-apiserver takes a few minutes on 2 cores).
# Prints the cache directory on its last line.
#
# With no argument it builds the set every `make` needs. `hack/k8s-binaries.sh kube-proxy` builds only
# kube-proxy, which just the agent bench runs beside the agent: keeping it out of the default set keeps
# it off the cold start of `make test` (Makefile evaluates this script on every invocation).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
cache_root=${FLEETSLICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetslice}
dir="$cache_root/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
mkdir -p "$dir"

# Binaries built with plain `go build` report version v0.0.0; kwokctl derives component flags from
# `kube-apiserver --version`, so stamp the real versions in at link time.
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
kwok_ldflags="-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${K8S_VERSION#v}"

# build NAME VERSION MODULE_DIR PACKAGE LDFLAGS
build() {
	local name=$1 version=$2 moddir=$3 pkg=$4 ldflags=${5:-}
	if [[ -x "$dir/$name" ]]; then
		return
	fi
	echo "building $name $version from source, first run only" >&2
	local start=$SECONDS
	(cd "$here/tools/$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/.$name.tmp" "$pkg")
	mv "$dir/.$name.tmp" "$dir/$name"
	echo "built $name in $((SECONDS - start))s" >&2
}

if [[ "${1:-}" == kube-proxy ]]; then
	build kube-proxy "$K8S_VERSION" kube k8s.io/kubernetes/cmd/kube-proxy "$kube_ldflags"
	echo "$dir"
	exit 0
elif [[ $# -gt 0 ]]; then
	echo "usage: $0 [kube-proxy]" >&2
	exit 2
fi

build etcd "$ETCD_VERSION" etcd .
build kube-apiserver "$K8S_VERSION" kube k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
build kube-controller-manager "$K8S_VERSION" kube k8s.io/kubernetes/cmd/kube-controller-manager "$kube_ldflags"
build kube-scheduler "$K8S_VERSION" kube k8s.io/kubernetes/cmd/kube-scheduler "$kube_ldflags"
build kubectl "$K8S_VERSION" kube k8s.io/kubernetes/cmd/kubectl "$kube_ldflags"
build kwok "$KWOK_VERSION" kwok sigs.k8s.io/kwok/cmd/kwok "$kwok_ldflags"
build kwokctl "$KWOK_VERSION" kwok sigs.k8s.io/kwok/cmd/kwokctl "$kwok_ldflags"
# helm only renders dist/chart in tests, to compare it with dist/install.yaml.
build helm "$HELM_VERSION" helm helm.sh/helm/v3/cmd/helm "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"

echo "$dir"
