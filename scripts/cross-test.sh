#!/usr/bin/env bash
# Smoke test of the arm64 build under qemu-user (make cross-test, after make arm64 and setup):
#   1. `visiond check` on configs/visiond.yaml and on the embedded demo config (exit 0), and
#      on a config with an unknown key (exit 1 with the error);
#   2. one inference on a still image (third_party/media/messi5.jpg) by an arm64 `visiond worker`
#      with the CPU provider and ONNX Runtime's arm64 library, driven over the worker protocol
#      by scripts/worker-smoke.py: hello, one job, a result with a person in it, clean exit;
#   3. the same with the native amd64 binary built from the same tree, and the two results
#      compared (same detections, scores within 0.02, boxes within 2 px).
# The arm64 binary and its libraries run from the sysroot (qemu-aarch64-static -L). The daemon
# itself (`visiond run`) is not started: it execs its workers from /proc/self/exe, which needs
# binfmt_misc to reach qemu again, and that is a setting of the whole machine.
set -euo pipefail

cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
GO=${GO:-go}
SYSROOT=${VISIOND_SYSROOT_ARM64:-build/sysroot-arm64}
TP=${VISIOND_THIRD_PARTY:-third_party}
BIN=bin/linux-arm64/visiond
ORT_ARM64=$TP/linux-arm64/libonnxruntime.so.1
WORK=build/cross-test
IMAGE=$TP/media/messi5.jpg

log() { echo "cross-test: $*"; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
fail() { echo "cross-test: FAIL: $*" >&2; exit 1; }
sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

for f in "$BIN" "$SYSROOT/.visiond-sysroot" "$ORT_ARM64"; do
  [ -e "$f" ] || fail "$f missing: run make arm64 first"
done
for f in "$TP/yolov8n.onnx" "$IMAGE" "$TP/libonnxruntime.so.1"; do
  [ -e "$f" ] || fail "$f missing: run make setup first"
done
if ! command -v qemu-aarch64-static >/dev/null; then
  log "installing qemu-user-static"
  sudo_ apt-get update -q
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends qemu-user-static
fi
command -v ffmpeg >/dev/null || fail "ffmpeg missing: run make setup first"
mkdir -p "$WORK"
QEMU=(qemu-aarch64-static -L "$SYSROOT")
passed=0

# 1. check.
t0=$(now)
out=$("${QEMU[@]}" "$BIN" check configs/visiond.yaml) || fail "check configs/visiond.yaml: $out"
log "$out"
out=$("${QEMU[@]}" "$BIN" check) || fail "check (embedded demo config): $out"
log "$out"
printf 'site: x\nno_such_key: 1\n' >"$WORK/bad.yaml"
set +e
out=$("${QEMU[@]}" "$BIN" check "$WORK/bad.yaml" 2>&1)
rc=$?
set -e
[ "$rc" = 1 ] && grep -q no_such_key <<<"$out" || fail "check of a bad config: want exit 1 naming no_such_key, got $rc: $out"
log "bad config rejected (exit 1): $out"
log "PASS check ($(took "$t0"))"
passed=$((passed + 1))

# 2. One inference by the arm64 worker.
t0=$(now)
scripts/worker-smoke.py --image "$IMAGE" --model "$TP/yolov8n.onnx" --library "$ORT_ARM64" \
  --expect person --json "$WORK/arm64.json" -- "${QEMU[@]}" "$BIN" || fail "arm64 worker"
log "PASS arm64 worker inference under qemu ($(took "$t0"))"
passed=$((passed + 1))

# 3. The native build of the same tree must find the same objects.
t0=$(now)
$GO build -o "$WORK/visiond-amd64" ./cmd/visiond
scripts/worker-smoke.py --image "$IMAGE" --model "$TP/yolov8n.onnx" --library "$TP/libonnxruntime.so.1" \
  --expect person --json "$WORK/amd64.json" --compare "$WORK/arm64.json" -- "$WORK/visiond-amd64" ||
  fail "arm64 and amd64 results differ"
log "PASS amd64 worker inference, same detections as arm64 ($(took "$t0"))"
passed=$((passed + 1))

echo "cross-test: $passed passed, 0 failed"
