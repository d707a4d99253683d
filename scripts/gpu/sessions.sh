#!/usr/bin/env bash
# Sessions per worker and GPU memory (issue 15 items 2 and 3), measured on the GPU machine in
# one call. Stage first, here: scripts/gpu/sessions.sh pack (after make setup), then
# on the GPU machine, after scripts/gpu/stage.sh's library calls and one call per
# .gpupoolK folder (mkdir -p /tmp/gpupool && cp .gpupoolK/* /tmp/gpupool/):
#
#   source /tmp/gpustage/activate.sh && bash /tmp/gpupool/sessions.sh [PART ...]
#
# PARTs (default: memory pool pipeline), results in $OUT/gpu-sessions.tar.gz:
#   memory    BenchmarkGPUMemory (infer/worker): GPU MiB after each session is created and
#             run, then under constant load for MEM_SECONDS, for each of MEM_OPTS: ORT's own
#             CUDA options ("ort") and visiond's (kSameAsRequested, small cuDNN workspace:
#             "visiond"), with each of MEM_COUNTS sessions: one process each, all at once
#   pool      BenchmarkPoolThroughput (infer/pool): jobs/s and latency of one worker with
#             each of POOL_SESSIONS sessions, results out of order, and the p99 they would
#             have in order
#   pipeline  BenchmarkThroughputVsBareLoop (pipeline): daemon events/s over the bare loop of
#             PIPE_SESSIONS sessions in one process, PIPE_CAMERAS cameras, PIPE_SECONDS a side,
#             with JetStream and without it (PIPE_JETSTREAM)
# Knobs: MEM_SECONDS=120 MEM_OPTS="ort visiond" MEM_COUNTS="1 4" POOL_SESSIONS="1 4 8"
# POOL_JOBS=2000 PIPE_SESSIONS=4 PIPE_CAMERAS=120 PIPE_SECONDS=20 PIPE_JETSTREAM=true.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = pack ]; then
  # Here: the test binaries, the model, the media and this script, xz-packed in .gpupool1..M.
  cd "$here/../.."
  GO=${GO:-go}
  for p in ${PACK:-infer/worker infer/pool pipeline}; do
    $GO test -c -ldflags='-s -w' -o "bin/$(basename $p).test" ./$p || exit 1
  done
  m=$(scripts/gpu/pack-parts.sh .gpupool bin/worker.test bin/pool.test bin/pipeline.test third_party/yolov8n.onnx \
    third_party/media/vtest.h264.ts third_party/media/messi5.jpg) || exit 1
  cp scripts/gpu/sessions.sh .gpupool1/
  echo "sessions.sh: $m part(s) in .gpupool1..$m ($(du -ch .gpupool* | tail -1 | cut -f1))"
  exit 0
fi

OUT=${OUT:-/tmp/out}
MEM_SECONDS=${MEM_SECONDS:-120} MEM_OPTS=${MEM_OPTS:-ort visiond} MEM_COUNTS=${MEM_COUNTS:-1 4} POOL_SESSIONS=${POOL_SESSIONS:-1 4 8}
PIPE_JETSTREAM=${PIPE_JETSTREAM:-true}
POOL_JOBS=${POOL_JOBS:-2000} PIPE_SESSIONS=${PIPE_SESSIONS:-4} PIPE_CAMERAS=${PIPE_CAMERAS:-120} PIPE_SECONDS=${PIPE_SECONDS:-20}
parts=(${@:-memory pool pipeline})
: "${ONNXRUNTIME_SHARED_LIBRARY_PATH:?source /tmp/gpustage/activate.sh first}"
work=/tmp/gpupool/tree
res=/tmp/gpupool/results
mkdir -p "$OUT" "$work/infer/worker" "$work/infer/pool" "$work/pipeline" "$res"
if [ ! -x "$work/bin/pool.test" ]; then
  cat $(ls /tmp/gpupool/part* | sort -V) | xz -d -T0 | tar -x -C "$work" || exit 1
fi
# The tests find third_party/ above their package directory; the CUDA build of ONNX Runtime
# through ONNXRUNTIME_SHARED_LIBRARY_PATH.
: >"$work/go.mod" # the tests find the module root by its go.mod
{ nvidia-smi; date -u; nproc; } >"$res/machine.txt" 2>&1
ort=$(printf '{"arena_extend_strategy":"kNextPowerOfTwo","cudnn_conv_max_workspace":true}')
for part in "${parts[@]}"; do
  case $part in
  memory)
    pids=()
    for opt in $MEM_OPTS; do
      for s in $MEM_COUNTS; do
        cuda='{}'
        [ "$opt" = ort ] && cuda=$ort
        (cd "$work/infer/worker" && VISIOND_BENCH_PROVIDER=cuda VISIOND_BENCH_SESSIONS=$s VISIOND_BENCH_SECONDS=$MEM_SECONDS \
          VISIOND_BENCH_CUDA=$cuda ../../bin/worker.test -test.run '^$' -test.bench GPUMemory -test.benchtime 1x -test.v \
          >"$res/memory-$opt-$s.txt" 2>&1) &
        pids+=($!)
      done
    done
    while sleep 5; do # the GPU as a whole, while they run
      nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | sed "s/^/$(date +%s) /" >>"$res/memory-smi.txt"
      alive=0
      for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ $alive = 1 ] || break
    done
    wait
    ;;
  pool)
    for s in $POOL_SESSIONS; do
      (cd "$work/infer/pool" && VISIOND_BENCH_PROVIDER=cuda VISIOND_BENCH_SESSIONS=$s ../../bin/pool.test -test.run '^$' \
        -test.bench "PoolThroughput/sessions=$s/slots=2\$" -test.benchtime "${POOL_JOBS}x" -test.v) >"$res/pool-$s.txt" 2>&1
    done
    ;;
  pipeline)
    for s in $PIPE_SESSIONS; do
      for js in $PIPE_JETSTREAM; do
        (cd "$work/pipeline" && VISIOND_BENCH_PROVIDER=cuda VISIOND_BENCH_SESSIONS=$s VISIOND_BENCH_CAMERAS=$PIPE_CAMERAS \
          VISIOND_BENCH_SECONDS=$PIPE_SECONDS VISIOND_BENCH_JETSTREAM=$js ../bin/pipeline.test -test.run '^$' \
          -test.bench ThroughputVsBareLoop -test.benchtime 1x) >"$res/pipeline-$s-js$js.txt" 2>&1
      done
    done
    ;;
  *) echo "sessions.sh: unknown part $part" >&2 ;;
  esac
done
tar -czf "$OUT/gpu-sessions.tar.gz" -C "$res" .
grep -h "^Benchmark\|MiB\b" "$res"/*.txt | grep -v "^ *gpumem" | cut -c1-400 | tail -80
