#!/usr/bin/env bash
# The daemon inside the unit's sandbox, where systemd is not PID 1 (make unit-sandbox-test, as
# root, after make build): scripts/unit-sandbox.py applies the unit's SystemCallFilter= (with
# its SystemCallErrorNumber=), an empty capability bounding set, NoNewPrivileges= and a user
# that is not root, then runs `visiond run` on a demo config (the built-in sample camera, one
# CPU worker, the embedded NATS server, state in a temporary directory) in a network namespace
# of its own. It must log "visiond running", analyse frames and publish events (/metrics), and
# stop on SIGTERM with status 0, with no "operation not permitted" in its log. A sanity check
# first: chown under the same sandbox must fail (the filter is in force).
# On a machine with systemd as PID 1, `systemd-run --wait -p ...` or the installed unit itself
# covers the rest (mount namespaces, ProtectProc=, the device list).
#
#   scripts/unit-sandbox-test.sh [BIN]      (default: bin/visiond)
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-bin/visiond}")
TP=$(realpath "${VISIOND_THIRD_PARTY:-third_party}")
UNIT=systemd/visiond.service
USER_=${VISIOND_SANDBOX_USER:-nobody}
log() { echo "unit-sandbox-test: $*"; }
die() { echo "unit-sandbox-test: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (to drop to $USER_ and to make a network namespace)"
[ -x "$BIN" ] || die "$BIN missing: run make build"
for f in "$TP/yolov8n.onnx" "$TP/libonnxruntime.so.1" "$TP/media/vtest.h264.ts"; do [ -r "$f" ] || die "$f missing: run make setup"; done
if ! /usr/bin/python3 -c 'import seccomp' 2>/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-seccomp
fi
command -v systemd-analyze >/dev/null || die "systemd-analyze missing (apt install systemd)"
SANDBOX=(/usr/bin/python3 "$PWD/scripts/unit-sandbox.py" --unit "$PWD/$UNIT" --user "$USER_" --)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
install -d -o "$USER_" -m 0700 "$work/state"

# The filter is in force: chown fails.
touch "$work/probe"
if "${SANDBOX[@]}" chown "$USER_" "$work/probe" 2>"$work/probe.err"; then
  die "chown worked inside the sandbox: the system call filter is not in force"
fi
grep -q 'Operation not permitted' "$work/probe.err" || die "chown failed otherwise: $(cat "$work/probe.err")"
log "ok: chown inside the sandbox: $(tail -1 "$work/probe.err")"

cat >"$work/demo.yaml" <<YAML
site: sandbox
state_dir: $work/state
workers:
  model: $TP/yolov8n.onnx
  library: $TP/libonnxruntime.so.1
  pools: [{count: 1, provider: cpu}]
sample: {enabled: true, listen: 127.0.0.1:8554, file: $TP/media/vtest.h264.ts}
cameras:
  - {id: sample, url: rtsp://127.0.0.1:8554/sample, fps: 5}
YAML
chmod 644 "$work/demo.yaml"

VISIOND_WORK=$work VISIOND_BIN=$BIN unshare --net bash -c '
  set -u
  ip link set lo up
  cd /
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME="$VISIOND_WORK/state" \
    STATE_DIRECTORY="$VISIOND_WORK/state" CUDA_CACHE_PATH="$VISIOND_WORK/state/cuda-cache" \
    '"$(printf '%q ' "${SANDBOX[@]}")"' "$VISIOND_BIN" run -config "$VISIOND_WORK/demo.yaml" >"$VISIOND_WORK/daemon.log" 2>&1 &
  pid=$!
  for i in $(seq 240); do
    grep -q "visiond running" "$VISIOND_WORK/daemon.log" && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.5
  done
  for i in $(seq 240); do
    curl -s --max-time 2 http://127.0.0.1:8080/metrics >"$VISIOND_WORK/metrics" || true
    a=$(awk "/^visiond_camera_frames_analysed_total/ { s += \$2 } END { print s + 0 }" "$VISIOND_WORK/metrics")
    p=$(awk "/^visiond_events_published_total/ { s += \$2 } END { print s + 0 }" "$VISIOND_WORK/metrics")
    [ "$a" -ge 20 ] && [ "$p" -gt 0 ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.5
  done
  { grep -E "^(Seccomp|NoNewPrivs|CapBnd|Uid):" /proc/$pid/status | tr -s "\t\n" "  "
    w=$(pgrep -P $pid -f " worker " | head -1)
    [ -z "$w" ] || { echo; echo -n "worker $w: "; grep -E "^(Seccomp|CapBnd):" /proc/$w/status | tr -s "\t\n" "  "; }
  } >"$VISIOND_WORK/proc" 2>/dev/null || true
  grep "^visiond_worker_restarts_total\|^visiond_events_published_total\|^visiond_camera_frames_analysed_total" "$VISIOND_WORK/metrics" >"$VISIOND_WORK/metrics.short" || true
  if kill -0 $pid 2>/dev/null; then kill -TERM $pid; fi
  wait $pid
  echo "exit $?" >"$VISIOND_WORK/status"
'
status=$(cat "$work/status")
analysed=$(awk '/^visiond_camera_frames_analysed_total/ { s += $2 } END { print s + 0 }' "$work/metrics")
published=$(awk '/^visiond_events_published_total/ { s += $2 } END { print s + 0 }' "$work/metrics")
restarts=$(awk '/^visiond_worker_restarts_total/ { s += $2 } END { print s + 0 }' "$work/metrics")
eperm=$(grep -ci 'operation not permitted' "$work/daemon.log" || true)
if grep -q 'visiond running' "$work/daemon.log" && [ "$status" = "exit 0" ] && [ "$analysed" -ge 20 ] && [ "$published" -gt 0 ] && [ "$eperm" = 0 ]; then
  log "daemon: $(head -1 "$work/proc"); $(tail -n +2 "$work/proc")"
  log "PASS visiond run inside the unit's syscall filter, no capabilities, as $USER_: $analysed frames analysed, $published events published, $restarts worker restarts, SIGTERM -> $status"
else
  grep -iE 'level=(WARN|ERROR)|not permitted|panic|SIGSYS' "$work/daemon.log" | head -20 | cut -c1-300 >&2 || true
  die "FAIL: running=$(grep -c 'visiond running' "$work/daemon.log"), $status, $analysed analysed, $published published, $eperm 'operation not permitted' lines (log above)"
fi
