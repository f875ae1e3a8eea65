#!/usr/bin/env bash
# Builds one pinned tool into bin/ from its own module under hack/tools/<module>, unless bin/ already
# holds it built from the same go.mod and go.sum (a stamp file records their hash).
#   hack/tools/build.sh kube | etcd | kwok | kueue
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${FLEETQ_BIN_DIR:-$root/bin}
mod=$1
dir=$root/hack/tools/$mod
mkdir -p "$bin/.stamps"
hash=$(cat "$dir/go.mod" "$dir/go.sum" "$0" | sha256sum | cut -c1-16)
stamp=$bin/.stamps/$mod

case $mod in
  kube) outputs=(kube-apiserver kube-controller-manager kube-scheduler) ;;
  etcd) outputs=(etcd) ;;
  kwok) outputs=(kwok) ;;
  kueue) outputs=(kueue) ;;
  *) echo "build.sh: unknown tool module '$mod' (want kube, etcd, kwok or kueue)" >&2; exit 2 ;;
esac

fresh=1
[ "$(cat "$stamp" 2>/dev/null)" = "$hash" ] || fresh=0
for o in "${outputs[@]}"; do [ -x "$bin/$o" ] || fresh=0; done
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
esac
echo "$hash" > "$stamp"
echo ">> $mod built in $(( $(date +%s) - start ))s"
