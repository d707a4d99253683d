#!/usr/bin/env bash
# Install test of the amd64 .deb on a clean Debian 12 (make deb-test, after make deb-amd64):
# a debootstrap chroot of amd64 bookworm (the default variant: what a minimal install has,
# systemd included), made once and kept as build/chroot-amd64-base.tar, unpacked afresh for
# every run into build/deb-test/root. In that chroot, as root:
#   1. apt-get install ./visiond_*.deb: its dependencies from the mirror, postinst runs
#   2. the visiond system user and group exist; files, conffile and permissions as packaged
#   3. `visiond check /etc/visiond/visiond.yaml` as the visiond user
#   4. `systemd-analyze verify` on the installed unit
#   5. the unit's ExecStart command line by hand, as the visiond user with the unit's
#      environment (STATE_DIRECTORY, CUDA_CACHE_PATH, UMask, NOTIFY_SOCKET and WATCHDOG_USEC
#      pointed at a socket this script reads), on a demo config (the built-in sample camera,
#      one CPU worker, the model copied in from third_party/ for this test only) in a network
#      namespace of its own: it must log "visiond running", send READY=1, publish detections
#      (/metrics), and stop on SIGTERM with status 0
#   6. the same command line on the shipped example config, for a few seconds: reported, not
#      judged (that config is an example to edit: CUDA workers, a hub, sample cameras)
#   7. reinstall (postinst again, user already there), then purge: files and state gone
# Before the chroot, on the .deb itself: lintian reports no error or warning (overrides with
# their reasons in packaging/lintian-overrides), and neither Depends nor what apt installs
# with it brings OpenCV's highgui or Qt. After the install, `systemctl enable` (offline, as an
# admin would) and removal: the enable link goes with the package.
# Starting the unit with systemctl needs systemd as PID 1, which a chroot does not have: step 5
# runs what the unit would run instead.
#
#   scripts/deb-test.sh [DEB]      (default: the newest build/deb/visiond_*_amd64.deb)
set -euo pipefail

self=$(realpath "$0")
cd "$(dirname "$0")/.."
# build/ (git-ignored) holds sysroots and chroots: a go.mod there keeps it out of ./... patterns.
mkdir -p build && { [ -f build/go.mod ] || printf 'module visiond/build\n\n// Not code: the cross-build sysroot and packaging outputs. This go.mod keeps them out of ./...\n' >build/go.mod; }
MIRROR=${VISIOND_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${VISIOND_DEBIAN_SECURITY_MIRROR:-${MIRROR}-security}
SUITE=bookworm
TP=${VISIOND_THIRD_PARTY:-third_party}
BASE=build/chroot-amd64-base.tar
WORK=build/deb-test
ROOT=$WORK/root

log() { echo "deb-test: $*"; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
passed=0 failed=0
pass() { echo "deb-test: PASS $*"; passed=$((passed + 1)); }
fail() { echo "deb-test: FAIL $*"; failed=$((failed + 1)); }
die() { echo "deb-test: $*" >&2; exit 1; }
in_root() { chroot "$ROOT" "$@"; }
as_visiond() { chroot "$ROOT" setpriv --reuid=visiond --regid=visiond --init-groups "$@"; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts, namespaces)"

# Everything below runs in a mount namespace of its own: the mounts in the chroot go away with it.
if [ -z "${VISIOND_DEB_TEST_NS:-}" ]; then
  DEB=${1:-$(ls -t build/deb/visiond_*_amd64.deb 2>/dev/null | head -1)}
  [ -n "$DEB" ] && [ -f "$DEB" ] || die "no .deb: run make deb-amd64 first"
  for f in "$TP/yolov8n.onnx" "$TP/media/vtest.h264.ts"; do [ -f "$f" ] || die "$f missing: run make setup"; done
  for p in debootstrap lintian; do
    command -v "$p" >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$p"; }
  done
  exec unshare --mount --propagation private env VISIOND_DEB_TEST_NS=1 "$self" "$DEB"
fi
DEB=$1
t_all=$(now)

# The .deb itself: lintian, and no highgui or Qt in its Depends.
t0=$(now)
mkdir -p "$WORK"
if lintian --pedantic --display-info --fail-on error,warning "$DEB" >"$WORK/lintian.txt" 2>&1; then
  pass "lintian --pedantic: no error or warning ($(grep -c '^[IP]: ' "$WORK/lintian.txt") info and pedantic tags; $(lintian --version), $(took "$t0"))"
else
  grep -vE '^[IPN]: |root privileges' "$WORK/lintian.txt" | sed 's/^/    /'
  fail "lintian: errors or warnings (whole report: $WORK/lintian.txt)"
fi
depends=$(dpkg-deb -f "$DEB" Depends)
if grep -qiE 'highgui|qt[0-9]|libqt' <<<"$depends"; then
  fail "Depends brings highgui or Qt: $depends"
else
  pass "Depends without highgui or Qt: $depends"
fi

# The clean Debian 12, once.
t0=$(now)
if [ ! -f "$BASE" ]; then
  log "debootstrap $SUITE amd64 ($MIRROR) into a base chroot"
  tmp=$BASE.d
  rm -rf --one-file-system "$tmp"
  mkdir -p build
  debootstrap --arch=amd64 "$SUITE" "$tmp" "$MIRROR" >"$BASE.log" 2>&1 ||
    { tail -20 "$BASE.log" >&2; die "debootstrap failed (log: $BASE.log)"; }
  tar -C "$tmp" -cf "$BASE.tmp" .
  mv "$BASE.tmp" "$BASE"
  rm -rf --one-file-system "$tmp"
  log "base chroot: $BASE ($(du -h "$BASE" | cut -f1)) made in $(took "$t0")"
fi

# A fresh root from it.
t0=$(now)
mkdir -p "$WORK"
rootabs=$(realpath -m "$ROOT")
if findmnt -rn -o TARGET | grep -q "^$rootabs"; then die "something is mounted under $ROOT: unmount it first"; fi
rm -rf --one-file-system "$ROOT"
mkdir -p "$ROOT"
tar -C "$ROOT" -xf "$BASE"
cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
EOF
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d" # no service starts in the chroot
chmod 755 "$ROOT/usr/sbin/policy-rc.d"
mount -t proc proc "$ROOT/proc"
mount -t sysfs sysfs "$ROOT/sys"
mount --rbind /dev "$ROOT/dev"
cp "$DEB" "$ROOT/root/"
debname=$(basename "$DEB")
log "fresh root from $BASE in $(took "$t0"); $(in_root dpkg-query -W -f='.\n' | wc -l) packages installed"

# 1. Install.
t0=$(now)
before=$(in_root dpkg-query -W -f='${Package}\n' | sort)
in_root apt-get update -q >"$WORK/apt-update.log" 2>&1 || { cat "$WORK/apt-update.log"; die "apt-get update failed"; }
if in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "/root/$debname" >"$WORK/install.log" 2>&1; then
  after=$(in_root dpkg-query -W -f='${Package}\n' | sort)
  added=$(comm -13 <(echo "$before") <(echo "$after") | wc -l)
  sed -n '/^Setting up visiond/,/^Processing triggers\|^$/p' "$WORK/install.log" | sed 's/^/    /'
  pass "apt-get install ./$debname: $added packages added, $(in_root du -sm --exclude=/proc --exclude=/sys --exclude=/dev / 2>/dev/null | cut -f1) MiB in the root, $(took "$t0")"
else
  tail -30 "$WORK/install.log"
  die "apt-get install failed (log: $WORK/install.log)"
fi
in_root dpkg-query -W -f='    ${Package} ${Version} ${Status}\n' visiond
qt=$(in_root dpkg-query -W -f='${Package}\n' | grep -iE '^libqt|highgui' | tr '\n' ' ' || true)
if [ -z "$qt" ]; then
  pass "no Qt or highgui package installed with it"
else
  fail "installed with it: $qt"
fi

# 2. User, files, permissions.
if pw=$(in_root getent passwd visiond) && in_root getent group visiond >/dev/null; then
  pass "user: $pw; $(in_root id visiond)"
else
  fail "no visiond user or group"
fi
stat_of() { in_root stat -c '%U:%G %a' "$1"; }
problems=
for f in /usr/bin/visiond /usr/lib/visiond/libonnxruntime.so.1 /lib/systemd/system/visiond.service /etc/visiond/visiond.yaml /usr/share/visiond/fetch-model.sh /usr/share/doc/visiond/copyright /usr/share/man/man1/visiond.1.gz; do
  [ -f "$ROOT$f" ] || problems="$problems $f missing;"
done
readelf -h "$ROOT/usr/bin/visiond" | grep -q 'Type:.*DYN' || problems="$problems /usr/bin/visiond is not a position-independent executable;"
[ "$(stat_of /etc/visiond/visiond.yaml)" = "root:visiond 640" ] || problems="$problems /etc/visiond/visiond.yaml is $(stat_of /etc/visiond/visiond.yaml);"
[ "$(stat_of /var/lib/visiond)" = "visiond:visiond 750" ] || problems="$problems /var/lib/visiond is $(stat_of /var/lib/visiond);"
conffiles=$(in_root dpkg-query -W -f='${Conffiles}' visiond)
grep -q '/etc/visiond/visiond.yaml' <<<"$conffiles" || problems="$problems no conffile;"
[ ! -e "$ROOT/var/lib/visiond/yolov8n.onnx" ] || problems="$problems a model was installed;"
if [ -z "$problems" ]; then
  pass "files: $(in_root dpkg -L visiond | wc -l) paths, man page, PIE binary; conffile$conffiles; /etc/visiond/visiond.yaml root:visiond 640; /var/lib/visiond visiond:visiond 750; no model shipped"
else
  fail "files:$problems"
fi

# 3. check, as the service's user.
if out=$(as_visiond /usr/bin/visiond check /etc/visiond/visiond.yaml 2>&1); then
  pass "visiond check as visiond: $out"
else
  fail "visiond check /etc/visiond/visiond.yaml: $out"
fi

# 4. systemd-analyze verify.
if out=$(in_root systemd-analyze verify /lib/systemd/system/visiond.service 2>&1); then
  pass "systemd-analyze verify visiond.service$( [ -z "$out" ] && echo ": no complaints" || echo ": $out")"
else
  fail "systemd-analyze verify: $out"
fi

# 5. The unit's ExecStart, by hand, as the unit would run it, on a demo config.
exec_start=$(sed -n 's/^ExecStart=//p' "$ROOT/lib/systemd/system/visiond.service")
[ "$exec_start" = "/usr/bin/visiond run -config /etc/visiond/visiond.yaml" ] ||
  fail "ExecStart is '$exec_start', the test expects /usr/bin/visiond run -config /etc/visiond/visiond.yaml"
install -m 0644 "$TP/yolov8n.onnx" "$ROOT/var/lib/visiond/yolov8n.onnx"        # for this test only: AGPL
install -m 0644 "$TP/media/vtest.h264.ts" "$ROOT/var/lib/visiond/vtest.h264.ts"
cat >"$ROOT/etc/visiond/demo.yaml" <<'EOF'
# deb-test: the built-in sample camera, one CPU worker, the embedded NATS server.
site: debtest
workers:
  model: /var/lib/visiond/yolov8n.onnx
  library: /usr/lib/visiond/libonnxruntime.so.1
  pools: [{count: 1, provider: cpu}]
sample: {enabled: true, listen: 127.0.0.1:8554, file: /var/lib/visiond/vtest.h264.ts}
cameras:
  - {id: sample, url: rtsp://127.0.0.1:8554/sample, fps: 5}
EOF
chgrp "$(in_root getent group visiond | cut -d: -f3)" "$ROOT/etc/visiond/demo.yaml"
chmod 640 "$ROOT/etc/visiond/demo.yaml"

# run_unit CONFIG SECONDS LOG: ExecStart with -config CONFIG in a new network namespace, as the
# visiond user with the unit's environment; waits for "visiond running" (at most SECONDS), then
# reads /metrics, waits until 20 frames were analysed (at most 60 s), and stops it with SIGTERM. Writes
# LOG.{log,notify,metrics,status}.
run_unit() {
  local config=$1 secs=$2 out=$3
  local cmd=${exec_start//\/etc\/visiond\/visiond.yaml/$config}
  rm -f "$ROOT/run/visiond-notify.sock" "$out".*
  VISIOND_CMD=$cmd VISIOND_SECS=$secs VISIOND_OUT=$(realpath -m "$out") VISIOND_ROOT=$ROOT unshare --net bash -c '
    set -u
    ip link set lo up
    # systemd'"'"'s side of Type=notify: a datagram socket that records what the daemon sends.
    python3 -c "
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
import os; os.chmod(sys.argv[1], 0o777)
s.settimeout(1)
end = time.time() + float(sys.argv[3])
with open(sys.argv[2], \"w\") as f:
    while time.time() < end:
        try:
            m = s.recv(4096).decode()
        except socket.timeout:
            continue
        f.write(\"%.1f %s\n\" % (time.time(), m.replace(chr(10), \" \")))
        f.flush()
" "$VISIOND_ROOT/run/visiond-notify.sock" "$VISIOND_OUT.notify" $((VISIOND_SECS + 40)) &
    npid=$!
    sleep 0.5
    start=$(date +%s)
    chroot "$VISIOND_ROOT" setpriv --reuid=visiond --regid=visiond --init-groups \
      env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/var/lib/visiond \
      STATE_DIRECTORY=/var/lib/visiond CUDA_CACHE_PATH=/var/lib/visiond/cuda-cache \
      NOTIFY_SOCKET=/run/visiond-notify.sock WATCHDOG_USEC=30000000 \
      sh -c "umask 0027; exec $VISIOND_CMD" >"$VISIOND_OUT.log" 2>&1 &
    pid=$!
    while kill -0 $pid 2>/dev/null && ! grep -q "visiond running" "$VISIOND_OUT.log" && [ $(( $(date +%s) - start )) -lt "$VISIOND_SECS" ]; do sleep 0.5; done
    if grep -q "visiond running" "$VISIOND_OUT.log"; then
      echo "running after $(( $(date +%s) - start )) s" >"$VISIOND_OUT.status"
      # Detections published, read from /metrics; at most 60 s.
      for i in $(seq 120); do
        curl -s --max-time 2 http://127.0.0.1:8080/metrics >"$VISIOND_OUT.metrics" || true
        n=$(awk "/^visiond_camera_frames_analysed_total/ { s += \$2 } END { print s + 0 }" "$VISIOND_OUT.metrics")
        [ "$n" -ge 20 ] && break
        sleep 0.5
      done
      sleep 16 # one watchdog period (WATCHDOG_USEC/2) at least
      curl -s --max-time 2 http://127.0.0.1:8080/metrics >"$VISIOND_OUT.metrics" || true
      curl -s --max-time 2 http://127.0.0.1:8080/api/cameras >"$VISIOND_OUT.cameras" || true
    fi
    if kill -0 $pid 2>/dev/null; then
      kill -TERM $pid
      wait $pid
      echo "exit $?" >>"$VISIOND_OUT.status"
    else
      wait $pid
      echo "exited by itself: $?" >>"$VISIOND_OUT.status"
    fi
    kill $npid 2>/dev/null
    wait $npid 2>/dev/null
    true
  '
}

t0=$(now)
run_unit /etc/visiond/demo.yaml 120 "$WORK/demo"
status=$(cat "$WORK/demo.status" 2>/dev/null || echo "no status")
published=$(awk '/^visiond_events_published_total/ { s += $2 } END { print s + 0 }' "$WORK/demo.metrics" 2>/dev/null || echo 0)
analysed=$(awk '/^visiond_camera_frames_analysed_total/ { s += $2 } END { print s + 0 }' "$WORK/demo.metrics" 2>/dev/null || echo 0)
jobs=$(awk '/^visiond_worker_jobs_total/ { s += $2 } END { print s + 0 }' "$WORK/demo.metrics" 2>/dev/null || echo 0)
log "demo run ($(took "$t0")): $(tr '\n' ';' <<<"$status") $analysed frames analysed, $jobs worker jobs, $published events published"
grep -E 'visiond running|worker ready|stopping|level=(WARN|ERROR)' "$WORK/demo.log" | head -20 | cut -c1-300 | sed 's/^/    /'
sed 's/^/    notify: /' "$WORK/demo.notify" 2>/dev/null | head -8
if grep -q '^running after' <<<"$status" && grep -q '^exit 0$' <<<"$status" && [ "$analysed" -gt 0 ] && [ "$published" -gt 0 ] &&
  grep -q 'READY=1' "$WORK/demo.notify" && grep -q 'WATCHDOG=1' "$WORK/demo.notify" && grep -q 'STOPPING=1' "$WORK/demo.notify"; then
  pass "ExecStart as visiond on the demo config: 'visiond running', READY=1, WATCHDOG=1, $analysed frames analysed, $published events published, SIGTERM -> STOPPING=1, exit 0"
else
  fail "ExecStart on the demo config (log: $WORK/demo.log)"
fi
if [ -d "$ROOT/var/lib/visiond" ] && [ -n "$(ls -A "$ROOT/var/lib/visiond" | grep -v -e yolov8n.onnx -e vtest.h264.ts)" ]; then
  log "state written by the run: $(cd "$ROOT/var/lib/visiond" && find . -mindepth 1 -maxdepth 2 ! -name yolov8n.onnx ! -name vtest.h264.ts | sort | tr '\n' ' ')"
fi

# 6. The shipped example config, as is: reported only.
t0=$(now)
run_unit /etc/visiond/visiond.yaml 20 "$WORK/example"
log "INFO the shipped example config, unedited ($(took "$t0")): $(tr '\n' ';' <<<"$(cat "$WORK/example.status" 2>/dev/null)")"
grep -E 'level=(WARN|ERROR)|"level":"(WARN|ERROR)"|visiond run:|running' "$WORK/example.log" | head -6 | cut -c1-300 | sed 's/^/    /'

# 7. Reinstall, then purge; before the purge, an admin enables the service (systemctl works
# offline on the links) and prerm must take the link away.
t0=$(now)
if in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --reinstall "/root/$debname" >"$WORK/reinstall.log" 2>&1; then
  pass "reinstall (postinst with the user already there) ($(took "$t0"))"
else
  tail -20 "$WORK/reinstall.log"
  fail "reinstall"
fi
rm -f "$ROOT/etc/visiond/demo.yaml" # the test's own file: purge leaves an admin's files in /etc/visiond
wants=/etc/systemd/system/multi-user.target.wants/visiond.service
if ! in_root systemctl enable visiond.service >"$WORK/enable.log" 2>&1 || [ ! -L "$ROOT$wants" ]; then
  fail "systemctl enable visiond (offline) made no $wants: $(cat "$WORK/enable.log")"
fi
t0=$(now)
if in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q visiond >"$WORK/purge.log" 2>&1; then
  left=
  for f in /usr/bin/visiond /usr/lib/visiond /lib/systemd/system/visiond.service /etc/visiond /var/lib/visiond "$wants"; do
    [ ! -e "$ROOT$f" ] || left="$left $f"
  done
  if [ -z "$left" ]; then
    pass "purge: binary, library, unit, the admin's enable link, /etc/visiond and /var/lib/visiond gone; user kept: $(in_root getent passwd visiond >/dev/null && echo yes || echo no) ($(took "$t0"))"
  else
    fail "purge left:$left"
  fi
else
  tail -20 "$WORK/purge.log"
  fail "purge"
fi

log "total $(took "$t_all")"
echo "deb-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
