#!/usr/bin/env bash
# Builds one pinned tool into bin/ from its own module under hack/tools/<module>, unless bin/ already
# holds it built from the same module files (a stamp file records their hash).
#   hack/tools/build.sh kube | etcd | kwok | kueue | kubeflow | kuberay
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${FLEETQ_BIN_DIR:-$root/bin}
mod=$1
dir=$root/hack/tools/$mod
mkdir -p "$bin/.stamps"
# Every file of the module counts: kubeflow and kuberay hold the lab's own main packages.
hash=$( (cd "$dir" && find . -type f | LC_ALL=C sort | xargs cat; cat "$root/hack/tools/build.sh") | sha256sum | cut -c1-16)
stamp=$bin/.stamps/$mod

case $mod in
  kube) outputs=(kube-apiserver kube-controller-manager kube-scheduler) ;;
  etcd) outputs=(etcd) ;;
  kwok) outputs=(kwok) ;;
  kueue) outputs=(kueue) ;;
  kubeflow) outputs=(training-operator crds/kubeflow) ;;
  kuberay) outputs=(ray-operator crds/ray) ;;
  *) echo "build.sh: unknown tool module '$mod' (want kube, etcd, kwok, kueue, kubeflow or kuberay)" >&2; exit 2 ;;
esac

fresh=1
[ "$(cat "$stamp" 2>/dev/null)" = "$hash" ] || fresh=0
for o in "${outputs[@]}"; do [ -x "$bin/$o" ] || fresh=0; done  # a directory is -x too
if [ $fresh = 1 ]; then exit 0; fi

cd "$dir"
start=$(date +%s)
case $mod in
  kube)
    v=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
    minor=$(echo "$v" | cut -d. -f2)
    ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="$ld -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    done
    ld="$ld -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
    for o in "${outputs[@]}"; do
      echo ">> building $o $v (the first build takes 10-15 minutes on 2 cores)"
      go build -ldflags "$ld" -o "$bin/$o" "k8s.io/kubernetes/cmd/$o"
    done ;;
  etcd)
    echo ">> building etcd $(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
    go build -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3 ;;
  kwok)
    echo ">> building kwok $(go list -m -f '{{.Version}}' sigs.k8s.io/kwok)"
    go build -ldflags "-s -w" -o "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok ;;
  kueue)
    # Only the benchmark runs Kueue (side by side with fleetq); ~7 minutes cold on 2 cores.
    v=$(go list -m -f '{{.Version}}' sigs.k8s.io/kueue)
    echo ">> building kueue $v (the first build takes ~7 minutes on 2 cores)"
    go build -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$v" -o "$bin/kueue" sigs.k8s.io/kueue/cmd/kueue ;;
  kubeflow)
    # The lab's own main over training-operator's controllers (no webhooks); ~2 minutes cold.
    v=$(go list -m -f '{{.Version}}' github.com/kubeflow/training-operator)
    echo ">> building training-operator $v (the first build takes ~2 minutes on 2 cores)"
    go build -ldflags "-s -w" -o "$bin/training-operator" ./training-operator
    # MXJob is deprecated in v1.8 and not run by the lab.
    rm -rf "$bin/crds/kubeflow" && mkdir -p "$bin/crds/kubeflow"
    src=$(go list -m -f '{{.Dir}}' github.com/kubeflow/training-operator)/manifests/base/crds
    for f in "$src"/kubeflow.org_*.yaml; do
      case $f in *mxjobs*) continue ;; esac
      cp "$f" "$bin/crds/kubeflow/" && chmod u+w "$bin/crds/kubeflow/$(basename "$f")"
    done ;;
  kuberay)
    # The lab's own main over ray-operator's RayCluster and RayJob controllers; ~2 minutes cold.
    v=$(go list -m -f '{{.Version}}' github.com/ray-project/kuberay/ray-operator)
    echo ">> building ray-operator $v (the first build takes ~2 minutes on 2 cores)"
    go build -ldflags "-s -w" -o "$bin/ray-operator" ./ray-operator
    rm -rf "$bin/crds/ray" && mkdir -p "$bin/crds/ray"
    src=$(go list -m -f '{{.Dir}}' github.com/ray-project/kuberay/ray-operator)/config/crd/bases
    for f in ray.io_rayclusters.yaml ray.io_rayjobs.yaml; do
      cp "$src/$f" "$bin/crds/ray/" && chmod u+w "$bin/crds/ray/$f"
    done ;;
esac
echo "$hash" > "$stamp"
echo ">> $mod built in $(( $(date +%s) - start ))s"
