# etcd-on-loopback.sh: sourced by benchmarks that need one real etcd member beside their ranks.
#
#   source bench/etcd-on-loopback.sh
#   start_loopback_etcd DIR     # its data and log in DIR; sets etcd_pid and etcd_endpoint (127.0.0.1:PORT)
#   stop_loopback_etcd          # idempotent; call it from the script's EXIT trap
#   start_etcd_member DIR ADDRESS CLIENT_PORT PEER_PORT [PREFIX...]   # a member of its own on ADDRESS, run
#                               # (and asked for /health) under PREFIX, such as `ip netns exec NS`
#
# The loopback member listens on ports the kernel chose (free when asked, bound by etcd a moment later), so
# runs never collide; both return once the member answers /health, or fail after 10 s.

etcd_pid=""
etcd_endpoint=""

start_etcd_member() {
  local dir=$1 address=$2 client=$3 peer=$4
  shift 4
  [[ -x /usr/bin/etcd ]] || { echo "etcd-on-loopback.sh: /usr/bin/etcd is missing (Debian: etcd-server)" >&2; return 1; }
  mkdir -p "$dir"
  "$@" /usr/bin/etcd --name m0 --data-dir "$dir/etcd-data" --listen-client-urls "http://$address:$client" \
    --advertise-client-urls "http://$address:$client" --listen-peer-urls "http://$address:$peer" \
    --initial-advertise-peer-urls "http://$address:$peer" --initial-cluster "m0=http://$address:$peer" \
    >"$dir/etcd.log" 2>&1 &
  etcd_pid=$!
  for _ in $(seq 100); do
    "$@" curl -s -m 1 "http://$address:$client/health" | grep -q '"health":"true"' && return 0
    sleep 0.1
  done
  echo "etcd-on-loopback.sh: the etcd member on $address did not answer within 10 s (log: $dir/etcd.log)" >&2
  return 1
}

start_loopback_etcd() {
  local client peer
  read -r client peer < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
  etcd_endpoint="127.0.0.1:$client"
  start_etcd_member "$1" 127.0.0.1 "$client" "$peer"
}

stop_loopback_etcd() {
  if [[ -n $etcd_pid ]]; then kill "$etcd_pid" 2>/dev/null || true; wait "$etcd_pid" 2>/dev/null || true; fi
  etcd_pid=""
}
