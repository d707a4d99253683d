#!/usr/bin/env bash
# Runs the daemon on the GPU machine with the CUDA provider and writes what it measured to
# $OUT (scripts/gpu/README.md says how to stage): N cameras reading the built-in sample
# camera at FPS each, W workers on GPU 0, for SECONDS; every event is captured with
# `visiond sub -json` and summarized (events/s, latency percentiles per stage).
#   scripts/gpu/demo.sh [CAMERAS] [FPS] [WORKERS] [SECONDS]
set -euo pipefail
cams=${1:-8} fps=${2:-10} workers=${3:-2} secs=${4:-60} provider=${PROVIDER:-cuda}
out=${OUT:-/tmp/out}
mkdir -p "$out"
cfg=$out/gpu-demo.yaml
{
  echo "site: gpu"
  echo "http: {listen: ''}"
  echo "nats: {listen: 127.0.0.1:4222}"
  echo "workers: {model: third_party/yolov8n.onnx, library: '${ONNXRUNTIME_SHARED_LIBRARY_PATH:?source activate.sh first}', pools: [{count: $workers, provider: $provider, device: 0}]}"
  echo "sample: {enabled: true, listen: 127.0.0.1:8554, file: third_party/media/vtest.h264.ts}"
  echo "camera_defaults: {fps: $fps}"
  echo "cameras:"
  for i in $(seq 1 "$cams"); do echo "  - {id: cam$i, url: rtsp://127.0.0.1:8554/sample}"; done
} >"$cfg"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv >"$out/gpu.txt" 2>&1 || true
bin/visiond run -config "$cfg" 2>"$out/daemon.log" &
pid=$!
# Skip the first 10 s (model load, cuDNN autotuning, cameras connecting), then record.
sleep 10
timeout "$secs" bin/visiond sub -json -subject 'visiond.gpu.>' >"$out/events.jsonl" 2>/dev/null || true
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >>"$out/gpu.txt" 2>&1 || true
kill -INT "$pid"; wait "$pid" || true
python3 - "$out/events.jsonl" "$secs" "$cams" "$fps" "$workers" >"$out/summary.txt" <<'PY'
import json, sys
path, secs, cams, fps, workers = sys.argv[1], float(sys.argv[2]), *map(int, sys.argv[3:])
evs = [json.loads(l) for l in open(path) if l.strip()]
def pct(xs, q):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
print(f"{cams} cameras x {fps} fps requested, {workers} workers, {secs:.0f} s")
print(f"events: {len(evs)} = {len(evs)/secs:.1f}/s (requested {cams*fps}/s)")
for stage in ("queue", "pre", "infer", "post", "total"):
    xs = [e["latency_ms"][stage] for e in evs]
    print(f"latency {stage:6s} ms: p50 {pct(xs,.5):7.2f}  p99 {pct(xs,.99):7.2f}")
per = {}
for e in evs: per[e["camera"]] = per.get(e["camera"], 0) + 1
print("events per camera:", dict(sorted(per.items())))
print("detections per event:", sum(len(e["detections"]) for e in evs) / max(1, len(evs)))
PY
cat "$out/summary.txt"
