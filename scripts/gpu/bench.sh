#!/usr/bin/env bash
# The GPU machine's part of the benchmark report (`make bench GPU=DIR` merges it). Run on the
# GPU machine from the repository root, after scripts/gpu/bench-pack.sh's staging
# (it prints the calls), with ONNX Runtime's CUDA build staged by scripts/gpu/stage.sh:
#
#   source /tmp/gpustage/activate.sh && scripts/gpu/bench.sh [PART ...]
#
# PARTs (default: env selftest pipeline scale peer), each writing raw results to $RESULTS
# (/tmp/gpubench-results, kept between calls while the machine stays), all of which are
# packed after every call into $OUT/gpu-bench.tar.gz (the machine returns few files):
#   env       the machine and versions
#   selftest  peer.py's letterbox, session output and NMS against visiond's (visiond-bench tensor)
#   pipeline  BenchmarkThroughputVsBareLoop with the CUDA provider, for each of GPU_PIPE_WORKERS
#   scale     cameras sustained at 5 fps with p99 < 300 ms, CUDA workers
#   peer      peer.py (plain, latest) against visiond on the same cameras and CPUs, CPU provider
# Cameras per box (issue 15), side by side, each a scale search (5 fps a camera; sustained =
# every camera >= 4.75 fps, all together >= 95%, p99 capture-to-result < 300 ms), each step
# recording cores busy, CPU per analysed frame, GPU MiB and p99 for the report's plots:
#   cpu-scale   visiond's default CPU pool (workers, threads not set: the daemon's defaults) on
#               every core, with the FP32 model (scale-cpu-fp32.json) and CPU_INT8_MODEL
#               (scale-cpu-int8.json, made beforehand by `visiond model quantize`, staged by
#               bench-pack.sh); about 1.5-2 min each
#   peer-scale  peer.py, the Python loop (a thread per camera, one ONNX Runtime session with
#               its default threads), analysing 5 fps of each camera (peer-scale.json); ~2-3 min
#   gpu-scale   one CUDA worker of N sessions for each N of GPU_SESSIONS (scale-cuda-sN.json),
#               then GPU_FP16's sessions with GPU_FP16_MODEL (scale-cuda-sN-fp16.json), then
#               GPU_NVDEC's with the cameras decoded on the GPU (decoder: cuda; scale-cuda-sN-nvdec.json); ~2 min each
#   overload  twice the scale's capacity for GPU_OVERLOAD (not in the default list)
#   soak      GPU_SOAK with config edits every GPU_SOAK_EDIT, GPU memory per worker (not in the default list)
# Each part takes: env, selftest ~15 s; pipeline ~80 s per worker count; scale ~3-5 min;
# peer ~4 min; soak GPU_SOAK + 30 s. One call runs 10 minutes at most: split the parts
# (for the cameras per box: `env cpu-scale peer-scale`, then `gpu-scale`; should gpu-scale not
# fit one call, split it by its knobs: GPU_SESSIONS="1:56" GPU_FP16="", then
# GPU_SESSIONS="4:140" GPU_FP16="4:140" GPU_CURVE="").
#
# Knobs: GPU_WORKERS=2 (CUDA workers for scale, overload, soak), GPU_SCALE_START=8,
# GPU_SCALE_WINDOW=10s, GPU_PIPE_WORKERS="1", GPU_PIPE_CAMERAS=120, GPU_PIPE_SESSIONS (the provider's
# default, 4), GPU_PIPE_DECODER=cpu (the cameras' decoder: cpu or cuda), GPU_PIPE_SECONDS=20,
# PEER_CAMERAS=8, PEER_CPUS=0-3 (both sides pinned there; the camera server runs on the
# other CPUs), PEER_VISIOND="1x4 2x2" (visiond's WORKERSxTHREADS configurations measured after
# its default, a one-thread worker per CPU), PEER_SECONDS=45, PEER_WARMUP=10, GPU_OVERLOAD=2m, GPU_SOAK=3m, GPU_SOAK_EDIT=30s,
# PYTHON=python3, PEER_ARGS (more peer.py arguments; --fake-output to try the script where
# Python has no onnxruntime).
# Cameras per box: CPU_INT8_MODEL=build/models/yolov8n-int8.onnx, CPU_SCALE_START=16 (visiond
# FP32), CPU_INT8_START=24, PEER_SCALE_START=16, CPU_CURVE="1" and GPU_CURVE="1 32" (cameras
# measured before each search for the low end of the cost plot only; "" none), CPU_SCALE_GROW=1.25, CPU_SCALE_WINDOW=10s,
# CPU_SCALE_SETTLE=3s; GPU_SESSIONS="1:56 4:140" (sessions per worker, each with the cameras of
# its search's first step), GPU_FP16="4:140" (the same for the FP16 model; "" skips it),
# GPU_NVDEC="" (the same with decoder: cuda, e.g. "8:150"; "" skips it),
# GPU_FP16_MODEL=build/models/yolov8n-fp16.onnx, GPU_SCALE_GROW=1.25, GPU_SCALE_RES=2 (bisect
# to within this many cameras), GPU_SCALE_SETTLE=3s, GPU_SCALE_WARMUP=20s (more settling before a search's first step: the
# sessions' first runs, cuDNN's algorithm search) and GPU_SCALE_WINDOW (also the scale part's).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
RESULTS=${RESULTS:-/tmp/gpubench-results}
GPU_WORKERS=${GPU_WORKERS:-2} GPU_SCALE_START=${GPU_SCALE_START:-8} GPU_SCALE_WINDOW=${GPU_SCALE_WINDOW:-10s}
GPU_PIPE_WORKERS=${GPU_PIPE_WORKERS:-1} GPU_PIPE_CAMERAS=${GPU_PIPE_CAMERAS:-120} GPU_PIPE_SECONDS=${GPU_PIPE_SECONDS:-20}
GPU_PIPE_SESSIONS=${GPU_PIPE_SESSIONS:-} GPU_PIPE_DECODER=${GPU_PIPE_DECODER:-cpu}
PEER_CAMERAS=${PEER_CAMERAS:-8} PEER_CPUS=${PEER_CPUS:-0-3} PEER_SECONDS=${PEER_SECONDS:-45} PEER_WARMUP=${PEER_WARMUP:-10}
GPU_OVERLOAD=${GPU_OVERLOAD:-2m} GPU_SOAK=${GPU_SOAK:-3m} GPU_SOAK_EDIT=${GPU_SOAK_EDIT:-30s}
PYTHON=${PYTHON:-python3} PEER_ARGS=${PEER_ARGS:-} PEER_VISIOND=${PEER_VISIOND:-1x4 2x2}
CPU_INT8_MODEL=${CPU_INT8_MODEL:-build/models/yolov8n-int8.onnx} CPU_SCALE_START=${CPU_SCALE_START:-16} CPU_INT8_START=${CPU_INT8_START:-24}
PEER_SCALE_START=${PEER_SCALE_START:-16} CPU_SCALE_GROW=${CPU_SCALE_GROW:-1.25} CPU_SCALE_WINDOW=${CPU_SCALE_WINDOW:-10s}
CPU_SCALE_SETTLE=${CPU_SCALE_SETTLE:-3s} CPU_CURVE=${CPU_CURVE-1} GPU_CURVE=${GPU_CURVE-1 32} GPU_SESSIONS=${GPU_SESSIONS-1:56 4:140} GPU_FP16=${GPU_FP16-4:140} GPU_NVDEC=${GPU_NVDEC-}
GPU_FP16_MODEL=${GPU_FP16_MODEL:-build/models/yolov8n-fp16.onnx} GPU_SCALE_GROW=${GPU_SCALE_GROW:-1.25}
GPU_SCALE_RES=${GPU_SCALE_RES:-2} GPU_SCALE_SETTLE=${GPU_SCALE_SETTLE:-3s} GPU_SCALE_WARMUP=${GPU_SCALE_WARMUP:-20s}
parts=("${@:-env selftest pipeline scale peer}")
parts=(${parts[*]})
mkdir -p "$OUT" "$RESULTS"

# The binaries and data: from scripts/gpu/bench-pack.sh's parts in /tmp/gpubench, once.
if [ ! -x bin/visiond-bench ] && ls /tmp/gpubench/part* >/dev/null 2>&1; then
  cat $(ls /tmp/gpubench/part* | sort -V) | xz -d -T0 | tar -x && rm -f /tmp/gpubench/part*
fi
for f in bin/visiond bin/visiond-bench third_party/yolov8n.onnx third_party/media/vtest.h264.ts; do
  [ -e "$f" ] || { echo "bench.sh: $f missing: stage with scripts/gpu/bench-pack.sh" >&2; exit 1; }
done
: "${ONNXRUNTIME_SHARED_LIBRARY_PATH:?source /tmp/gpustage/activate.sh first}"
lib=$ONNXRUNTIME_SHARED_LIBRARY_PATH
cmds=$RESULTS/commands-$(date -u +%Y%m%dT%H%M%S).txt # one file per call: the report reads them all, in order
for k in GPU_WORKERS GPU_SCALE_START GPU_SCALE_WINDOW GPU_PIPE_WORKERS GPU_PIPE_CAMERAS GPU_PIPE_SESSIONS GPU_PIPE_DECODER GPU_PIPE_SECONDS PEER_CAMERAS PEER_CPUS PEER_VISIOND PEER_SECONDS PEER_WARMUP GPU_OVERLOAD GPU_SOAK GPU_SOAK_EDIT \
  CPU_INT8_MODEL CPU_SCALE_START CPU_INT8_START PEER_SCALE_START CPU_CURVE GPU_CURVE CPU_SCALE_GROW CPU_SCALE_WINDOW CPU_SCALE_SETTLE GPU_SESSIONS GPU_FP16 GPU_NVDEC GPU_FP16_MODEL GPU_SCALE_GROW GPU_SCALE_RES GPU_SCALE_SETTLE GPU_SCALE_WARMUP; do
  echo "# knob $k=${!k}" >>"$cmds"
done
echo "# scripts/gpu/bench.sh ${parts[*]}   (after source /tmp/gpustage/activate.sh; these are the commands it ran:)" >>"$cmds"
# The Python of the GPU machine's image, without the staged libraries on its path.
py() { env -u LD_LIBRARY_PATH "$PYTHON" "$@"; }

step() { # step NAME COMMAND, as in run.sh
  local name=$1 cmd=$2
  echo "$cmd" >>"$cmds"
  echo "bench.sh: $cmd" >&2
  rm -f "$RESULTS/$name.failed"
  if ! bash -o pipefail -c "$cmd" 2>&1 | tee "$RESULTS/$name.log" >&2; then
    { echo "exit status non-zero; the end of its log:"; tail -c 600 "$RESULTS/$name.log"; } >"$RESULTS/$name.failed"
    echo "bench.sh: $name failed" >&2
  fi
  pack
}
# Pack after every step: a call cut off at its limit still returns what was done.
pack() { tar -C "$RESULTS" -czf "$OUT/gpu-bench.tar.gz" --exclude='tensors' .; }
export -f py
export PYTHON

for part in "${parts[@]}"; do
  case $part in
  env)
    step env "bin/visiond-bench env -library $lib -o $RESULTS/env.json && { (nvidia-smi; py -c 'import sys, numpy, cv2, onnxruntime; print(sys.version, numpy.__version__, cv2.__version__, onnxruntime.__version__)') >$RESULTS/machine.txt 2>&1 || true; }"
    ;;
  selftest)
    step selftest "bin/visiond-bench tensor -library $lib -o $RESULTS/tensors && py scripts/bench/peer.py --selftest $RESULTS/tensors | tee $RESULTS/selftest.txt; rm -rf $RESULTS/tensors"
    ;;
  pipeline)
    [ -x bin/pipeline.test ] || { echo "bench.sh: bin/pipeline.test missing" >&2; echo "bin/pipeline.test missing" >"$RESULTS/pipeline.failed"; continue; }
    : >"$RESULTS/pipeline.txt"
    for w in $GPU_PIPE_WORKERS; do
      step pipeline "cd pipeline && VISIOND_BENCH_PROVIDER=cuda VISIOND_BENCH_CAMERAS=$GPU_PIPE_CAMERAS VISIOND_BENCH_WORKERS=$w ${GPU_PIPE_SESSIONS:+VISIOND_BENCH_SESSIONS=$GPU_PIPE_SESSIONS }VISIOND_BENCH_DECODER=$GPU_PIPE_DECODER VISIOND_BENCH_SECONDS=$GPU_PIPE_SECONDS ../bin/pipeline.test -test.run '^\$' -test.bench ThroughputVsBareLoop -test.benchtime 1x | sed 's/^Benchmark/provider=cuda workers=$w cameras=$GPU_PIPE_CAMERAS decoder=$GPU_PIPE_DECODER: Benchmark/' | tee -a $RESULTS/pipeline.txt"
    done
    ;;
  scale)
    step scale "bin/visiond-bench scale -library $lib -provider cuda -workers $GPU_WORKERS -fps 5 -p99 300ms -start $GPU_SCALE_START -window $GPU_SCALE_WINDOW -o $RESULTS/scale.json"
    ;;
  overload)
    step overload "bin/visiond-bench overload -library $lib -provider cuda -workers $GPU_WORKERS -fps 5 -scale $RESULTS/scale.json -factor 2 -duration $GPU_OVERLOAD -o $RESULTS/overload.json"
    ;;
  soak)
    scale=""
    [ -f "$RESULTS/scale.json" ] && scale="-scale $RESULTS/scale.json"
    step soak "bin/visiond-bench soak -library $lib -provider cuda -workers $GPU_WORKERS -fps 5 $scale -duration $GPU_SOAK -edit-every $GPU_SOAK_EDIT -sample-every 10s -csv $RESULTS/soak.csv -png $RESULTS/soak.png -o $RESULTS/soak.json"
    ;;
  peer)
    # The cameras on the CPUs that the two contenders do not use.
    ncpu=$(nproc)
    first=${PEER_CPUS%%-*} last=${PEER_CPUS##*-}
    threads=$(( last - first + 1 ))
    others=$([ "$last" -lt $((ncpu - 1)) ] && echo "$((last + 1))-$((ncpu - 1))" || echo "0-$((ncpu - 1))")
    pin=$(command -v taskset >/dev/null && echo "taskset -c $PEER_CPUS")
    urls=$RESULTS/camera-urls.txt
    rm -f "$urls"
    echo "${pin:+taskset -c $others }bin/visiond-bench serve -phases 4 -o $urls &" >>"$cmds"
    ${pin:+taskset -c "$others"} bin/visiond-bench serve -phases 4 -o "$urls" &
    srv=$!
    for _ in $(seq 50); do [ -s "$urls" ] && break; sleep 0.2; done
    step peer "$pin env -u LD_LIBRARY_PATH $PYTHON scripts/bench/peer.py --mode plain --urls $urls --cameras $PEER_CAMERAS --threads $threads --cpus $PEER_CPUS --seconds $PEER_SECONDS --warmup $PEER_WARMUP $PEER_ARGS -o $RESULTS/peer-plain.json"
    step peer-latest "$pin env -u LD_LIBRARY_PATH $PYTHON scripts/bench/peer.py --mode latest --urls $urls --cameras $PEER_CAMERAS --threads $threads --cpus $PEER_CPUS --seconds $PEER_SECONDS --warmup $PEER_WARMUP $PEER_ARGS -o $RESULTS/peer-latest.json"
    # visiond with its default workers for these CPUs (a one-thread worker per CPU), then in
    # each of PEER_VISIOND's other WORKERSxTHREADS configurations.
    rm -f "$RESULTS"/peer-visiond*.json
    for wt in "${threads}x1" $PEER_VISIOND; do
      name=peer-visiond-$wt
      [ "$wt" = "${threads}x1" ] && name=peer-visiond
      step "$name" "bin/visiond-bench measure -library $lib -provider cpu -workers ${wt%x*} -threads ${wt#*x} -cpus $PEER_CPUS -fps 10 -camera-urls $urls -cameras $PEER_CAMERAS -duration ${PEER_SECONDS}s -warmup ${PEER_WARMUP}s -o $RESULTS/$name.json"
    done
    kill "$srv"; wait "$srv" 2>/dev/null
    ;;
  cpu-scale)
    # visiond's default CPU pool on every core: FP32, then INT8.
    rm -f "$RESULTS"/scale-cpu-*.json
    cpu="-library $lib -provider cpu -fps 5 -p99 300ms -grow $CPU_SCALE_GROW -window $CPU_SCALE_WINDOW -settle $CPU_SCALE_SETTLE -curve '$CPU_CURVE'"
    step scale-cpu-fp32 "bin/visiond-bench scale $cpu -start $CPU_SCALE_START -label 'default CPU pool, FP32' -o $RESULTS/scale-cpu-fp32.json"
    if [ -f "$CPU_INT8_MODEL" ]; then
      step scale-cpu-int8 "bin/visiond-bench scale $cpu -start $CPU_INT8_START -model $CPU_INT8_MODEL -label 'default CPU pool, INT8' -o $RESULTS/scale-cpu-int8.json"
    else
      echo "$CPU_INT8_MODEL missing: make it with bin/visiond model quantize (scripts/gpu/bench-pack.sh stages it)" | tee "$RESULTS/scale-cpu-int8.failed" >&2
    fi
    ;;
  peer-scale)
    rm -rf "$RESULTS/peer-scale.json" "$RESULTS/peer-scale"
    step peer-scale "bin/visiond-bench peer-scale -python 'env -u LD_LIBRARY_PATH $PYTHON' -mode plain -threads 0 -fps 5 -p99 300ms -start $PEER_SCALE_START -grow $CPU_SCALE_GROW -window $CPU_SCALE_WINDOW -settle $CPU_SCALE_SETTLE -curve '$CPU_CURVE' ${PEER_ARGS:+-peer-args '$PEER_ARGS' }-dir $RESULTS/peer-scale -label 'peer.py plain, one session, default threads' -o $RESULTS/peer-scale.json"
    ;;
  gpu-scale)
    # One CUDA worker of N sessions for each N, then the FP16 model.
    for ss in $GPU_SESSIONS; do rm -f "$RESULTS/scale-cuda-s${ss%%:*}.json"; done
    for ss in $GPU_FP16; do rm -f "$RESULTS/scale-cuda-s${ss%%:*}-fp16.json"; done
    gpu="-library $lib -provider cuda -workers 1 -fps 5 -p99 300ms -grow $GPU_SCALE_GROW -resolution $GPU_SCALE_RES -window $GPU_SCALE_WINDOW -settle $GPU_SCALE_SETTLE -warmup $GPU_SCALE_WARMUP -curve '$GPU_CURVE'"
    for ss in $GPU_SESSIONS; do
      s=${ss%%:*} start=${ss#*:}
      [ "$start" = "$ss" ] && start=$GPU_SCALE_START
      step scale-cuda-s$s "bin/visiond-bench scale $gpu -sessions $s -start $start -label '1 CUDA worker, $s session(s), FP32' -o $RESULTS/scale-cuda-s$s.json"
    done
    for ss in $GPU_FP16; do
      s=${ss%%:*} start=${ss#*:}
      [ "$start" = "$ss" ] && start=$GPU_SCALE_START
      if [ -f "$GPU_FP16_MODEL" ]; then
        step scale-cuda-s$s-fp16 "bin/visiond-bench scale $gpu -sessions $s -start $start -model $GPU_FP16_MODEL -label '1 CUDA worker, $s session(s), FP16' -o $RESULTS/scale-cuda-s$s-fp16.json"
      else
        echo "$GPU_FP16_MODEL missing: make it with bin/visiond model fp16 (scripts/gpu/bench-pack.sh stages it)" | tee "$RESULTS/scale-cuda-s$s-fp16.failed" >&2
      fi
    done
    for ss in $GPU_NVDEC; do
      s=${ss%%:*} start=${ss#*:}
      [ "$start" = "$ss" ] && start=$GPU_SCALE_START
      rm -f "$RESULTS/scale-cuda-s$s-nvdec.json"
      step scale-cuda-s$s-nvdec "bin/visiond-bench scale $gpu -sessions $s -start $start -decoder cuda -label '1 CUDA worker, $s session(s), FP32, cameras decoded on the GPU (decoder: cuda)' -o $RESULTS/scale-cuda-s$s-nvdec.json"
    done
    ;;
  *)
    echo "bench.sh: unknown part $part" >&2
    ;;
  esac
  pack
done
step env-end "bin/visiond-bench env -library $lib -o $RESULTS/env-end.json"
tar -C "$RESULTS" -czf "$OUT/gpu-bench.tar.gz" --exclude='tensors' .
echo "bench.sh: results in $OUT/gpu-bench.tar.gz: $(tar -tzf "$OUT/gpu-bench.tar.gz" | grep -v '/$' | tr '\n' ' ')" >&2
