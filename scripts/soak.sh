#!/usr/bin/env bash
# Memory over a long run: the daemon with CAMERAS cameras reading the built-in sample camera
# at 5 fps and one CPU worker (overloaded on a small box, so every path is busy), for
# MINUTES; resident memory (VmRSS) of the daemon and of each worker process every 10 s.
#   scripts/soak.sh [MINUTES] [CAMERAS]     (after `make build`)
set -euo pipefail
minutes=${1:-10} cams=${2:-4}
cd "$(dirname "$0")/.."
cfg=$(mktemp --suffix=.yaml)
trap 'kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$cfg"' EXIT
{
  echo "site: soak"
  echo "log_level: warn"
  echo "http: {listen: ''}"
  echo "nats: {listen: 127.0.0.1:0}"
  echo "sample: {enabled: true, listen: 127.0.0.1:18554}"
  echo "camera_defaults: {fps: 5}"
  echo "cameras:"
  for i in $(seq 1 "$cams"); do echo "  - {id: cam$i, url: rtsp://127.0.0.1:18554/sample}"; done
} >"$cfg"
bin/visiond run -config "$cfg" &
pid=$!
rss() { awk '/^VmRSS:/ {print int($2/1024)}' "/proc/$1/status" 2>/dev/null || echo -; }
echo "elapsed_s daemon_rss_mib worker_rss_mib(pid)..."
end=$(( $(date +%s) + minutes * 60 ))
start=$(date +%s)
while [ "$(date +%s)" -lt "$end" ]; do
  sleep 10
  line="$(( $(date +%s) - start )) $(rss $pid)"
  for w in $(pgrep -P "$pid" -f 'visiond worker' || true); do line="$line $(rss "$w")($w)"; done
  echo "$line"
done
