#!/usr/bin/env bash
# The cluster's control plane (sourced by scripts/k8s.sh, never run), all on 127.0.0.1: etcd, kube-apiserver
# (TLS from the throwaway CA, static tokens and client certs, Node + RBAC authorization), kube-scheduler (binds the
# pods to the node, as on any cluster) and kube-controller-manager (its default controllers: service accounts,
# namespaces, the garbage collector, the root-CA publisher, node lifecycle, ...). The scheduler and the controller
# manager sign in with client certificates whose names the API server's default RBAC bindings grant their rights.

# shellcheck source=scripts/k8s-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-common.sh"

etcd_ready() { [[ "$(curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null)" == *'"health":"true"'* ]]; }
apiserver_ready() { [[ "$(api GET /readyz 2>/dev/null)" == ok ]]; }
scheduler_ready() { healthz "$SCHEDULER_PORT"; }
controller_manager_ready() { healthz "$CONTROLLER_MANAGER_PORT"; }

start_etcd() {
  mkdir -p "$STATE/etcd"
  chmod 700 "$STATE/etcd"
  launch etcd "$BIN/etcd" --name switchyard --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "switchyard=http://127.0.0.1:$ETCD_PEER_PORT" \
    --log-level warn --unsafe-no-fsync --snapshot-count 10000 --quota-backend-bytes $((2 * 1024 * 1024 * 1024))
}

start_apiserver() {
  mkdir -p "$STATE/apiserver"
  launch kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --cert-dir "$STATE/apiserver" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" \
    --requestheader-client-ca-file "$PKI/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --token-auth-file "$PKI/tokens.csv" --anonymous-auth=false \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range "$SERVICE_SUBNET" --endpoint-reconciler-type none \
    --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction \
    --allow-privileged=false \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --profiling=false --v=1
}

# Their kubeconfigs (client certificates), and the scheduler's configuration file.
write_control_plane_configs() {
  mkdir -p "$STATE/kube-scheduler" "$STATE/kube-controller-manager"
  write_kubeconfig "$STATE/kube-scheduler/kubeconfig" system:kube-scheduler cert kube-scheduler
  write_kubeconfig "$STATE/kube-controller-manager/kubeconfig" system:kube-controller-manager cert \
    kube-controller-manager
  # One scheduler, one controller manager: no leader election (it would also hold a restarted one back until the
  # lease of the one before it ran out).
  cat >"$STATE/kube-scheduler/config.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $STATE/kube-scheduler/kubeconfig
leaderElection:
  leaderElect: false
enableProfiling: false
EOF
}

# Both serve /healthz on 127.0.0.1 with a certificate from the cluster CA; everything else there needs the
# credentials the API server vouches for (delegated authentication and authorization).
start_scheduler() {
  local kc="$STATE/kube-scheduler/kubeconfig"
  launch kube-scheduler "$BIN/kube-scheduler" --config "$STATE/kube-scheduler/config.yaml" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" \
    --tls-cert-file "$PKI/kube-scheduler-server.crt" --tls-private-key-file "$PKI/kube-scheduler-server.key" \
    --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" --v=1
}

# Every default controller, each with its own service account's token (--use-service-account-credentials, as
# kubeadm runs it): the root-CA publisher hands out the cluster CA (kube-root-ca.crt in every namespace), the
# service account controller makes each namespace's `default` account, the namespace controller empties a deleted
# namespace, the garbage collector follows owner references, the node lifecycle controller taints a node that is not
# Ready. The CA key signs what the CSR signer approves (no node here asks).
start_controller_manager() {
  local kc="$STATE/kube-controller-manager/kubeconfig"
  launch kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$kc" \
    --bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" \
    --tls-cert-file "$PKI/kube-controller-manager-server.crt" \
    --tls-private-key-file "$PKI/kube-controller-manager-server.key" \
    --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
    --leader-elect=false --controllers '*' --use-service-account-credentials \
    --root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --allocate-node-cidrs=false --node-monitor-period 2s \
    --flex-volume-plugin-dir "$STATE/kube-controller-manager/volume-plugins" --profiling=false --v=1
}

# What pods of a namespace need before they can be created, and the controllers make: its `default`
# ServiceAccount (the admission plugin refuses pods without it) and kube-root-ca.crt (what token volumes mount).
namespace_served() {
  local ns
  for ns in default "$ENGINE_NAMESPACE" "$TEST_NAMESPACE"; do
    api GET "/api/v1/namespaces/$ns/serviceaccounts/default" -o /dev/null 2>/dev/null || return 1
    api GET "/api/v1/namespaces/$ns/configmaps/kube-root-ca.crt" -o /dev/null 2>/dev/null || return 1
  done
}

# The namespaces: the engine's default one (what engine.env names) and the test suites' one.
ensure_namespaces() {
  local ns
  for ns in "$ENGINE_NAMESPACE" "$TEST_NAMESPACE"; do
    ensure_object /api/v1/namespaces "{\"metadata\":{\"name\":\"$ns\"}}"
  done
  wait_for "the controllers to serve the namespaces (default ServiceAccount, kube-root-ca.crt)" \
    kube-controller-manager namespace_served
}
