#!/usr/bin/env bash
# The real control plane as local processes: etcd, kube-apiserver,
# kube-scheduler and kube-controller-manager v1.37.2 (built by ./build.sh) on
# loopback, with fresh certificates, DRA on (the 1.37 default) and the
# GenericWorkload gate on everywhere (gang scheduling and PodGroups at
# scheduling.k8s.io/v1beta1). No kubelet: dra-provider-fake plays the kubelet
# and the DRA driver for the nodes it creates.
#
#   e2e/cluster/up.sh [--dir DIR] [--feature-gates A=true,B=false]
#       starts the cluster; prints the admin kubeconfig's path on stdout when
#       every component is ready (logs in DIR/logs, PIDs in DIR/pids).
#   e2e/cluster/up.sh down [--dir DIR]
#       stops the processes started in DIR (SIGTERM, then SIGKILL after 10 s).
#
# DIR defaults to $E2E_CLUSTER_DIR or /tmp/dra-e2e-cluster. Starting removes
# what an earlier cluster left in DIR (its data and certificates).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

action=up
if [[ "${1:-}" == "down" || "${1:-}" == "up" ]]; then
  action="$1"
  shift
fi
dir="${E2E_CLUSTER_DIR:-/tmp/dra-e2e-cluster}"
# Gates the tests may add (e.g. TopologyAwareWorkloadScheduling=true); the
# GenericWorkload gate is always on.
extra_gates=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --feature-gates) extra_gates="$2"; shift 2 ;;
    *) echo "up.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done

log() { echo "up.sh: $*" >&2; }

stop_all() {
  local pidfile="$dir/pids"
  [[ -f "$pidfile" ]] || return 0
  local pids=()
  while read -r name pid; do
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && pids+=("$pid") && log "stopping $name ($pid)"
  done < <(tac "$pidfile")
  if [[ ${#pids[@]} -gt 0 ]]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 100); do
      local alive=0
      for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
      [[ $alive == 0 ]] && break
      sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

if [[ "$action" == "down" ]]; then
  stop_all
  exit 0
fi

bin="$("$here/build.sh")"
stop_all
rm -rf "$dir/etcd" "$dir/pki" "$dir/logs"
mkdir -p "$dir/pki" "$dir/logs"
pki="$dir/pki"

# Free loopback ports, chosen by the kernel so that several clusters (or a CI
# run beside a developer's) never collide.
read -r etcd_client etcd_peer api_port sched_port kcm_port < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
for s in socks:
    s.close()
EOF
)

# Certificates: one CA for serving and client certificates, the API server's
# serving certificate for loopback, one system:masters client certificate for
# the control plane's own components and for tests that act as cluster-admin,
# and the ServiceAccount token key pair.
openssl_quiet() { openssl "$@" >/dev/null 2>&1; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=dra-e2e-ca" \
  -keyout "$pki/ca.key" -out "$pki/ca.crt"
cat > "$pki/apiserver.ext" <<EOF
subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1
extendedKeyUsage=serverAuth
EOF
openssl_quiet req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
  -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr"
openssl_quiet x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
  -CAcreateserial -days 2 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt"
printf 'extendedKeyUsage=clientAuth\n' > "$pki/client.ext"
openssl_quiet req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=e2e-admin" \
  -keyout "$pki/admin.key" -out "$pki/admin.csr"
openssl_quiet x509 -req -in "$pki/admin.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
  -CAcreateserial -days 2 -extfile "$pki/client.ext" -out "$pki/admin.crt"
openssl_quiet genrsa -out "$pki/sa.key" 2048
openssl_quiet rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

server="https://127.0.0.1:$api_port"
kubeconfig="$dir/admin.kubeconfig"
b64() { base64 -w0 < "$1"; }
cat > "$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dra-e2e
  cluster:
    server: $server
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: e2e-admin
  user:
    client-certificate-data: $(b64 "$pki/admin.crt")
    client-key-data: $(b64 "$pki/admin.key")
contexts:
- name: dra-e2e
  context: {cluster: dra-e2e, user: e2e-admin}
current-context: dra-e2e
EOF

gates="GenericWorkload=true${extra_gates:+,$extra_gates}"
: > "$dir/pids"

start() {
  local name="$1"; shift
  # setsid: the processes outlive this script (up.sh returns once they are
  # ready) and a Ctrl-C in the caller's terminal does not reach them.
  setsid "$@" > "$dir/logs/$name.log" 2>&1 < /dev/null &
  echo "$name $!" >> "$dir/pids"
  log "started $name (pid $!, log $dir/logs/$name.log)"
}

fail() {
  log "$1; last lines of $dir/logs/$2.log:"
  tail -n 30 "$dir/logs/$2.log" >&2 || true
  stop_all
  exit 1
}

# wait_for NAME URL [curl TLS args...]: polls URL until it answers 200 (60 s).
wait_for() {
  local name="$1" url="$2"; shift 2
  local pid
  pid="$(awk -v n="$name" '$1 == n {print $2}' "$dir/pids")"
  for _ in $(seq 600); do
    if curl -fsS --max-time 2 "$@" "$url" >/dev/null 2>&1; then
      log "$name is ready"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || fail "$name exited" "$name"
    sleep 0.1
  done
  fail "$name did not become ready at $url within 60 s" "$name"
}

start etcd "$bin/etcd" --name=node0 --data-dir="$dir/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_client" --advertise-client-urls="http://127.0.0.1:$etcd_client" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-cluster="node0=http://127.0.0.1:$etcd_peer" \
  --unsafe-no-fsync=true --quota-backend-bytes=4294967296 --log-level=warn
wait_for etcd "http://127.0.0.1:$etcd_client/health"

# ServiceAccount admission is off (as envtest has it): it would refuse pods in
# a namespace whose default ServiceAccount KCM has not created yet, a race no
# test is about. TaintNodesByCondition stays on: new Nodes get the not-ready
# taint, which KCM's node lifecycle controller removes once Ready=True, as in
# a real cluster.
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$etcd_client" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" \
  --authorization-mode=RBAC \
  --service-account-issuer="$server" \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 \
  --allow-privileged=true \
  --disable-admission-plugins=ServiceAccount \
  --endpoint-reconciler-type=none \
  --feature-gates="$gates" \
  --runtime-config=scheduling.k8s.io/v1beta1=true
tls=(--cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key")
wait_for kube-apiserver "$server/readyz" "${tls[@]}"

start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig="$kubeconfig" --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port="$sched_port" \
  --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics \
  --feature-gates="$gates" --v=2
start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig="$kubeconfig" --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port="$kcm_port" \
  --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics \
  --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
  --use-service-account-credentials=false \
  --node-monitor-period=2s \
  --feature-gates="$gates" --v=2
wait_for kube-scheduler "https://127.0.0.1:$sched_port/healthz" -k
wait_for kube-controller-manager "https://127.0.0.1:$kcm_port/healthz" -k

cat > "$dir/env" <<EOF
KUBECONFIG=$kubeconfig
E2E_CLUSTER_BIN=$bin
E2E_CLUSTER_SERVER=$server
E2E_CLUSTER_CA=$pki/ca.crt
E2E_CLUSTER_SCHEDULER_PORT=$sched_port
E2E_CLUSTER_KCM_PORT=$kcm_port
EOF
log "ready: export KUBECONFIG=$kubeconfig   (stop: $0 down --dir $dir)"
echo "$kubeconfig"
