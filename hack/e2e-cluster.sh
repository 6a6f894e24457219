#!/usr/bin/env bash
# Starts and stops the end-to-end suite's single-node Kubernetes cluster. Everything runs inside a
# network namespace of its own (node address 10.77.0.1, pods 10.88.0.0/24, Services 10.96.0.0/24,
# all private to that namespace), so nothing reaches or changes the machine's network:
#
#   etcd + kube-apiserver (the envtest builds), kube-controller-manager, kube-scheduler, kube-proxy
#   (iptables) and kubelet (hack/setup-e2e.sh builds them), containerd + runc + the CNI bridge.
#
#   hack/e2e-cluster.sh up     # start; prints the admin kubeconfig; images are imported from $STATE/images
#   hack/e2e-cluster.sh down   # stop every process, unmount, delete the namespace, restore sysctls
#   hack/e2e-cluster.sh exec CMD...  # run CMD inside the node's network namespace
#
# up tears down what a previous run left behind first; down is safe to run any number of times.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
netns=${DETOUR_E2E_NETNS:-detour-e2e}
state=${DETOUR_E2E_STATE:-${TMPDIR:-/tmp}/detour-e2e}
cgroup=detour-e2e
node_ip=10.77.0.1
pod_cidr=10.88.0.0/24
service_cidr=10.96.0.0/24
api="https://$node_ip:6443"
# The kernel-wide sysctls the kubelet sets (kernel.panic, panic_on_oops, vm.overcommit_memory):
# saved before the node starts and restored when it stops.
sysctls=(kernel.panic kernel.panic_on_oops vm.overcommit_memory kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

log() { echo "e2e-cluster: $*" >&2; }
fail() { log "$*"; exit 1; }
in_ns() { ip netns exec "$netns" "$@"; }

# daemon NAME CMD...: start CMD inside the namespace with its log in $state/logs/NAME.log.
daemon() {
  local name=$1; shift
  # nsenter execs the command, so the pid recorded is the daemon's own.
  setsid nsenter --net="/run/netns/$netns" "$@" >"$state/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$state/pids/$name"
}

# wait_for WHAT SECONDS CMD...: poll CMD until it succeeds.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "$what not up within ${secs}s; last lines of the logs:"
      tail -n 20 "$state"/logs/*.log >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

up() {
  [[ $(id -u) == 0 ]] || fail "needs root (network namespaces, mounts, cgroups)"
  : "${KUBEBUILDER_ASSETS:?set KUBEBUILDER_ASSETS to hack/setup-envtest.sh\'s folder (kube-apiserver, etcd)}"
  : "${DETOUR_E2E_ASSETS:?set DETOUR_E2E_ASSETS to hack/setup-e2e.sh\'s folder}"
  local kube="$DETOUR_E2E_ASSETS/kube-v1.37.2/kube"
  [[ -x $kube ]] || fail "$kube missing: run hack/setup-e2e.sh"
  down 2>/dev/null || true
  mkdir -p "$state"/{logs,pids,pki,etcd,kubelet,pod-logs,cni/net.d,cni/ipam,containerd,volumes}
  save_sysctls
  make_netns
  make_cgroups
  make_pki
  write_configs

  daemon containerd containerd --config "$state/containerd/config.toml"
  wait_for containerd 30 ctr --address "$state/containerd/containerd.sock" version
  local img
  for img in "$state"/images/*.tar; do
    [[ -e $img ]] || continue
    ctr --address "$state/containerd/containerd.sock" -n k8s.io images import --no-unpack=false "$img" >/dev/null
  done

  daemon etcd "$KUBEBUILDER_ASSETS/etcd" --data-dir "$state/etcd" --unsafe-no-fsync \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --log-level warn
  daemon kube-apiserver "$KUBEBUILDER_ASSETS/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 --bind-address=$node_ip --advertise-address=$node_ip --secure-port=6443 \
    --tls-cert-file="$state/pki/apiserver.crt" --tls-private-key-file="$state/pki/apiserver.key" \
    --client-ca-file="$state/pki/ca.crt" --token-auth-file="$state/pki/tokens.csv" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$state/pki/sa.pub" --service-account-signing-key-file="$state/pki/sa.key" \
    --service-cluster-ip-range=$service_cidr --authorization-mode=Node,RBAC --allow-privileged=true \
    --kubelet-preferred-address-types=InternalIP --profiling=false
  wait_for kube-apiserver 120 in_ns kubectl --kubeconfig "$state/admin.kubeconfig" get --raw /readyz

  daemon kube-controller-manager "$kube" kube-controller-manager --kubeconfig="$state/pki/kcm.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --root-ca-file="$state/pki/ca.crt" \
    --service-account-private-key-file="$state/pki/sa.key" --use-service-account-credentials=false \
    --cluster-name=detour-e2e --profiling=false
  daemon kube-scheduler "$kube" kube-scheduler --kubeconfig="$state/pki/sched.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --profiling=false
  daemon kube-proxy "$kube" kube-proxy --config="$state/kube-proxy.yaml"
  daemon kubelet "$kube" kubelet --config="$state/kubelet.yaml" --kubeconfig="$state/pki/kubelet.kubeconfig" \
    --hostname-override=node0 --node-ip=$node_ip --root-dir="$state/kubelet" --cert-dir="$state/pki/kubelet"
  wait_for "node Ready" 120 in_ns kubectl --kubeconfig "$state/admin.kubeconfig" wait --for=condition=Ready node/node0 --timeout=2s
  wait_for "the default ServiceAccount" 60 in_ns kubectl --kubeconfig "$state/admin.kubeconfig" get serviceaccount default
  echo "$state/admin.kubeconfig"
}

save_sysctls() {
  [[ -f $state/sysctl.orig ]] && return
  local k
  for k in "${sysctls[@]}"; do
    [[ -e /proc/sys/${k//.//} ]] && echo "$k=$(sysctl -n "$k")"
  done >"$state/sysctl.orig"
}

make_netns() {
  ip netns add "$netns"
  in_ns ip link set lo up
  # The node's address sits on one end of a veth pair inside the namespace: there is no dummy
  # device on every kernel, and nothing needs to leave the namespace.
  in_ns ip link add node0 type veth peer name node0-peer
  in_ns ip addr add $node_ip/24 dev node0
  in_ns ip link set node0 up
  in_ns ip link set node0-peer up
  in_ns ip route add default via 10.77.0.2 dev node0 onlink
  # Pod to Service to pod on one bridge: the reply must pass iptables to be un-NATed.
  in_ns sysctl -qw net.ipv4.ip_forward=1
  modprobe br_netfilter 2>/dev/null || true
  in_ns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || log "net.bridge.bridge-nf-call-iptables not settable; pod-to-Service hairpin may fail"
}

# make_cgroups creates the cgroup under which the kubelet puts every pod, in each v1 hierarchy
# (cpuset needs its cpus and mems filled before a task can join).
make_cgroups() {
  local h
  for h in /sys/fs/cgroup/*/; do
    [[ -e $h/cgroup.procs && ! -e $h/cgroup.controllers ]] || continue
    mkdir -p "$h$cgroup"
    if [[ -e $h/cpuset.cpus ]]; then
      cat "$h/cpuset.cpus" >"$h$cgroup/cpuset.cpus"
      cat "$h/cpuset.mems" >"$h$cgroup/cpuset.mems"
    fi
  done
}

# make_pki writes a CA, the API server's certificate (valid for the node address and the
# kubernetes Service), the service-account signing key, and a static token per component.
make_pki() {
  local p=$state/pki
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$p/ca.key" -out "$p/ca.crt" -days 2 -subj /CN=detour-e2e-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$p/apiserver.key" -out "$p/apiserver.csr" -subj /CN=kube-apiserver 2>/dev/null
  printf 'subjectAltName=IP:%s,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n' $node_ip >"$p/apiserver.ext"
  openssl x509 -req -in "$p/apiserver.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 2 \
    -extfile "$p/apiserver.ext" -out "$p/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  : >"$p/tokens.csv"
  # The controller manager runs every controller under its own name (not one ServiceAccount per
  # controller), which the bootstrap RBAC roles do not cover: it gets system:masters.
  local who file user group token
  for who in "admin|kubernetes-admin|system:masters" "kubelet|system:node:node0|system:nodes" \
    "proxy|system:kube-proxy|" "kcm|system:kube-controller-manager|system:masters" "sched|system:kube-scheduler|"; do
    IFS='|' read -r file user group <<<"$who"
    token=$(openssl rand -hex 16)
    echo "$token,$user,$user${group:+,\"$group\"}" >>"$p/tokens.csv"
    kubeconfig "$p/$file.kubeconfig" "$token"
  done
  cp "$p/admin.kubeconfig" "$state/admin.kubeconfig"
}

kubeconfig() { # kubeconfig FILE TOKEN
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "$api", certificate-authority: "$state/pki/ca.crt"}
users:
- name: e2e
  user: {token: "$2"}
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e}
current-context: e2e
EOF
}

write_configs() {
  cat >"$state/containerd/config.toml" <<EOF
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
[grpc]
  address = "$state/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "detour.e2e/pause:1"
  # The kubelet asks for oom_score_adj -998 for sandboxes; a machine without CAP_SYS_RESOURCE
  # cannot lower it, so containerd must clamp it rather than fail every sandbox.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
EOF
  cat >"$state/cni/net.d/10-detour-e2e.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "detour-e2e", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$state/cni/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$state/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup
# cgroup v1 hosts: the kubelet refuses them unless told otherwise.
failCgroupV1: false
failSwapOn: false
address: $node_ip
readOnlyPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
podLogsDir: $state/pod-logs
resolvConf: ""
# Images are imported, never pulled: never collect them, and evict only when really short.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
serializeImagePulls: false
# Pods are synced (and Secret volumes refreshed) every 10 s rather than every minute, so a rotated
# certificate reaches the pods within the suite's patience.
syncFrequency: 10s
EOF
  cat >"$state/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $state/pki/proxy.kubeconfig}
hostnameOverride: node0
clusterCIDR: $pod_cidr
bindAddress: $node_ip
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Leave the machine-wide conntrack sysctls alone.
conntrack: {maxPerCore: 0}
EOF
}

down() {
  [[ -d $state ]] || { ip netns del "$netns" 2>/dev/null || true; return 0; }
  local f pid
  # The kubelet first, so it restarts nothing; then the rest.
  for f in kubelet kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do
    [[ -f $state/pids/$f ]] || continue
    pid=$(cat "$state/pids/$f")
    kill "$pid" 2>/dev/null || true
  done
  for f in "$state"/pids/*; do
    [[ -f $f ]] || continue
    pid=$(cat "$f")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
  # Container shims outlive containerd; every pod process is in the node's cgroup.
  pkill -9 -f "containerd-shim-runc-v2 .*-address $state/" 2>/dev/null || true
  kill_cgroup
  unmount_all
  ip netns del "$netns" 2>/dev/null || true
  restore_sysctls
  rm -rf "$state"/{containerd,kubelet,etcd,cni,volumes,pod-logs}
}

kill_cgroup() {
  local h d
  for _ in 1 2 3; do
    for h in /sys/fs/cgroup/*/; do
      [[ -d $h$cgroup ]] || continue
      find "$h$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    done
    sleep 0.2
  done
  for h in /sys/fs/cgroup/*/; do
    [[ -d $h$cgroup ]] || continue
    # Children before parents.
    find "$h$cgroup" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

unmount_all() {
  local m
  # Deepest first; lazily, as a dying container may still hold one.
  awk -v s="$state/" 'index($2, s) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
}

restore_sysctls() {
  [[ -f $state/sysctl.orig ]] || return 0
  local line
  while read -r line; do sysctl -qw "$line" 2>/dev/null || true; done <"$state/sysctl.orig"
  rm -f "$state/sysctl.orig"
}

case "${1:-}" in
up) up ;;
down) down ;;
exec) shift; in_ns "$@" ;;
*) echo "usage: $0 up|down|exec CMD..." >&2; exit 2 ;;
esac
