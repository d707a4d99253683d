#!/usr/bin/env bash
# Issue 25 on the GPU machine with the daemon users run: NVDEC's cost per camera and its
# opens (items 2 and 5), then `visiond run` itself at many cameras, all in phase (one
# server, one stream), decoded on the GPU, analytics and JetStream on (item 1), with each
# batch=1 lever on and off (items 3 and 4).
#
# Here (after scripts/setup.sh):
#   scripts/gpu/daemon.sh pack   # .gpud: binaries (PACK_TESTS=1: sources.test too, for nvdec); .gpue: models, media, this script
#   scripts/gpu/stage.sh bin/gpu/visiond bin/gpu/visiond-bench bin/gpu/sources.test   # .gpu1..N: libraries
# There, one call per .gpuK (mkdir -p /tmp/gpustage && cp .gpuK/* /tmp/gpustage/), then
#   source /tmp/gpustage/activate.sh && bash .gpue/daemon.sh PART ...
# with .gpud and .gpue carried. PARTs (results in $OUT, as JSON and text):
#   nvdec    TestDecoderCUDAMatchesCPU, TestCameraDecoderCUDA, the benchmarks matching
#            $NVDEC_BENCH (BenchmarkNVDEC: BenchmarkNVDECOpen, BenchmarkNVDECDecode; ~1.5 min)
#   levers   visiond-bench measure at $CAMERAS cameras, $SESSIONS sessions, decoder cuda, $PHASES
#            camera server(s) (1: every camera in phase): FP32 host tensors, FP32 graph,
#            FP16+uint8 graph (~90 s each)
#   scale    visiond-bench scale -restart (a new daemon for every step) with $SCALE_CUDA and
#            $SCALE_MODEL from $SCALE_START cameras (~1.5 min a step), cut by $SCALE_BUDGET
#            (8m30s: a call's 10 minutes) with what it found
#   contend  BenchmarkNVDECDecode alone, then again while a daemon of $CONTEND_CAMERAS cameras
#            decoded on the CPU at 10 fps keeps its CUDA worker busy (another process's
#            inference on the same GPU), then the bench with only the CPU loaded by as many
#            busy loops as the daemon took cores (nvdec-alone.txt, nvdec-beside-daemon.txt,
#            nvdec-beside-cpu.txt, measure-contend-*.json; ~5 min)
#   fallback visiond-bench measure at $FALLBACK_CAMERAS (300) cameras of decoder cuda, past the
#            driver's NVDEC decoders a process (285): the cameras whose GPU decoder does not
#            open decode on the CPU (issue 39, item 6); FP16 + uint8 prelude, CUDA graph (~4 min)
#   memory   visiond-bench memory at $MEMORY_CAMERAS (50,250) cameras, decoder $DECODER, FP16 +
#            uint8 prelude, CUDA graph: the daemon's host memory by owner, a fresh daemon a
#            count (issue 39, item 1; ~6 min)
#   soak     visiond-bench soak, issue 39's churn: $CAMERAS cameras, clips on, $SOAK_CHURN (1) added
#            or removed and every zone moved by a config edit every $SOAK_EDIT (1m), the hub link
#            cut 30 s every 5 min, for $SOAK (8m: a call's 10 minutes), with $SCALE_CUDA and
#            $SCALE_MODEL; every process's host and GPU memory over time (soak-*.json, .csv, .png)
# Knobs: CAMERAS=150 SESSIONS=8 PHASES=1 DECODER=cuda WINDOW=30s WARMUP=20s LEVERS="host graph fp16u8-graph"
# SCALE_START=150 SCALE_GROW=1.25 SCALE_BUDGET=8m30s SCALE_CUDA='{graph: true}' SCALE_MODEL=y8-fp16-u8.onnx SCALE_WINDOW=10s
# SOAK=8m SOAK_EDIT=1m SOAK_CHURN=1 SOAK_WARMUP=60s.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = pack ]; then
  cd "$here/../.."
  GO=${GO:-go}
  . scripts/gpu/build-env.sh
  gb=bin/gpu # not bin/: a `make bench` here may be running bin/visiond
  $GO build -tags customenv -ldflags='-s -w' -o $gb/visiond ./cmd/visiond || exit 1
  $GO build -tags customenv -ldflags='-s -w' -o $gb/visiond-bench ./cmd/visiond-bench || exit 1
  $GO test -c -tags customenv -ldflags='-s -w' -o $gb/sources.test ./sources || exit 1
  rm -rf .gpud .gpue && mkdir -p .gpud .gpue
  cp $gb/visiond $gb/visiond-bench .gpud/
  # sources.test only for the nvdec part: with it .gpud and the tree pass a call's 64 MiB
  [ -n "${PACK_TESTS:-}" ] && cp $gb/sources.test .gpud/
  cp third_party/yolov8n.onnx third_party/media/vtest.h264.ts scripts/gpu/daemon.sh .gpue/
  export ONNXRUNTIME_SHARED_LIBRARY_PATH=$PWD/third_party/libonnxruntime.so.1
  $gb/visiond model fp16 -model third_party/yolov8n.onnx -out /tmp/y8-fp16.onnx >/dev/null || exit 1
  $gb/visiond model prelude -model /tmp/y8-fp16.onnx -out .gpue/y8-fp16-u8.onnx >/dev/null || exit 1
  ffmpeg -v error -y -i third_party/media/vtest.avi -t 6 -vf scale=640:360 -c:v libx264 -preset fast -bf 3 \
    -x264-params ref=4:bframes=3:keyint=30 -pix_fmt yuv420p -f mpegts .gpue/bframes.ts || exit 1
  du -sh .gpud .gpue
  exit 0
fi
: "${ONNXRUNTIME_SHARED_LIBRARY_PATH:?source /tmp/gpustage/activate.sh first}"
OUT=${OUT:-/tmp/out}
root=$(cd "$here/.." && pwd) # the repository root there: .gpud and .gpue are in it
bin=${BIN:-$root/.gpud} # BIN: where an earlier call left them (.gpud and .gpue together pass 64 MiB)
w=/tmp/w
mkdir -p $w/sources $w/third_party/media "$OUT"
cp "$here"/*.onnx "$here"/*.ts $w/third_party/ 2>/dev/null
cp "$here/vtest.h264.ts" $w/third_party/media/
: >$w/go.mod # the tests find third_party/ at the module root
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64
graph='{graph: true}'
SCALE_CUDA=${SCALE_CUDA:-$graph}
CAMERAS=${CAMERAS:-150} SESSIONS=${SESSIONS:-8} WINDOW=${WINDOW:-30s} WARMUP=${WARMUP:-20s}
DECODER=${DECODER:-cuda} PHASES=${PHASES:-1}
# What every daemon run here shares: the binary, one CUDA worker of $SESSIONS sessions, the
# cameras' decoder and servers, 5 fps a camera.
daemon=(-visiond "$bin/visiond" -library "$ONNXRUNTIME_SHARED_LIBRARY_PATH" -provider cuda -workers 1 -sessions "$SESSIONS"
  -decoder "$DECODER" -fps 5 -phases "$PHASES" -video $w/third_party/media/vtest.h264.ts)
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv >"$OUT/gpu.txt" 2>&1
echo "open files: soft $(ulimit -Sn), hard $(ulimit -Hn)" >>"$OUT/gpu.txt"
for part in "$@"; do
  case $part in
  nvdec)
    cp "$bin/sources.test" $w/sources/
    (cd $w/sources && VISIOND_TEST_CUDA=1 VISIOND_TEST_BFRAMES=$w/third_party/bframes.ts \
      ./sources.test -test.run 'TestDecoderCUDAMatchesCPU|TestCameraDecoderCUDA' -test.v 2>&1 | tail -20
      ./sources.test -test.run '^$' -test.bench "${NVDEC_BENCH:-BenchmarkNVDEC}" -test.benchtime 1x -test.v 2>&1 |
        grep -v '^goos\|^goarch\|^pkg\|^cpu') | tee "$OUT/nvdec.txt"
    ;;
  levers)
    for lever in ${LEVERS:-host graph fp16u8-graph}; do
      model=$w/third_party/yolov8n.onnx cuda=
      case $lever in
      graph) cuda=$graph ;;
      fp16u8-graph) cuda=$graph model=$w/third_party/y8-fp16-u8.onnx ;;
      esac
      cd "$root"
      "$bin/visiond-bench" measure "${daemon[@]}" -cameras "$CAMERAS" \
        -duration "$WINDOW" -warmup "$WARMUP" -model "$model" ${cuda:+-cuda "$cuda"} -o "$OUT/measure-$lever-c$CAMERAS-s$SESSIONS-p$PHASES-$DECODER.json" \
        2>"$OUT/measure-$lever-c$CAMERAS-p$PHASES-$DECODER.log"
      echo "levers: $lever rc=$? $(tail -c 300 "$OUT/measure-$lever-c$CAMERAS-p$PHASES-$DECODER.log" | tr '\n' ' ')"
    done
    ;;
  scale)
    cd "$root"
    "$bin/visiond-bench" scale "${daemon[@]}" \
      -model "$w/third_party/${SCALE_MODEL:-y8-fp16-u8.onnx}" -cuda "$SCALE_CUDA" \
      -restart -start "${SCALE_START:-150}" -grow "${SCALE_GROW:-1.25}" -resolution 8 -window "${SCALE_WINDOW:-10s}" -settle 3s -warmup 20s -curve '' -online 3m -budget "${SCALE_BUDGET:-8m30s}" \
      -label "visiond run, 1 CUDA worker of $SESSIONS sessions, FP16 + uint8 prelude, CUDA graph, decoder $DECODER, $PHASES camera server(s)" \
      -o "$OUT/scale-cuda-s$SESSIONS-graph-fp16u8-$DECODER-p$PHASES.json" 2>"$OUT/scale.log"
    echo "scale: rc=$? $(tail -c 600 "$OUT/scale.log" | tr '\n' ' ')"
    ;;
  contend)
    cp "$bin/sources.test" $w/sources/
    nvdec() { (cd $w/sources && ./sources.test -test.run '^$' -test.bench BenchmarkNVDECDecode -test.benchtime 1x -test.v 2>&1 |
      grep -v '^goos\|^goarch\|^pkg\|^cpu') >"$OUT/$1"; grep 'frames/s in all' "$OUT/$1" | sed "s/^/contend: $1: /"; }
    nvdec nvdec-alone.txt
    cd "$root"
    "$bin/visiond-bench" measure "${daemon[@]}" -decoder cpu -fps 10 -cameras "${CONTEND_CAMERAS:-100}" \
      -duration 90s -warmup 25s -model "$w/third_party/y8-fp16-u8.onnx" -cuda "$graph" \
      -o "$OUT/measure-contend-c${CONTEND_CAMERAS:-100}-cpu.json" 2>"$OUT/measure-contend.log" &
    mpid=$!
    sleep 40
    nvdec nvdec-beside-daemon.txt
    wait $mpid
    echo "contend: measure rc=$? $(tail -c 400 "$OUT/measure-contend.log" | tr '\n' ' ')"
    cores=$(grep -o '[0-9.]* cores' "$OUT/measure-contend.log" | tail -1 | cut -d' ' -f1)
    n=$(printf '%.0f' "${cores:-4}")
    pids=()
    for _ in $(seq "$n"); do (while :; do :; done) & pids+=($!); done
    nvdec nvdec-beside-cpu.txt
    kill "${pids[@]}"
    echo "contend: $n busy loops"
    ;;
  fallback)
    cd "$root"
    n=${FALLBACK_CAMERAS:-300}
    rm -rf /tmp/fallback && mkdir -p /tmp/fallback
    "$bin/visiond-bench" measure "${daemon[@]}" -decoder cuda -dir /tmp/fallback -cameras "$n" -duration 60s -warmup 30s \
      -model "$w/third_party/y8-fp16-u8.onnx" -cuda "$graph" -o "$OUT/measure-fallback-c$n.json" 2>"$OUT/measure-fallback-c$n.log"
    echo "fallback: rc=$? $(tail -c 700 "$OUT/measure-fallback-c$n.log" | tr '\n' ' ')"
    log=/tmp/fallback/daemon.log
    echo "fallback: daemon log: $(grep -c 'decoding on the CPU' $log) 'decoding on the CPU', $(grep -c 'GPU decoder opened' $log) 'GPU decoder opened', $(grep -c 'stalled' $log) 'stalled'"
    grep -m3 'decoding on the CPU' $log
    xz -9 <$log >"$OUT/daemon-fallback-c$n.log.xz"
    ;;
  memory)
    cd "$root"
    "$bin/visiond-bench" memory "${daemon[@]}" -cameras "${MEMORY_CAMERAS:-50,250}" -warmup 30s -window 60s \
      -model "$w/third_party/y8-fp16-u8.onnx" -cuda "$graph" \
      -label "visiond run on the GPU machine, decoder $DECODER, 1 CUDA worker of $SESSIONS sessions, FP16 + uint8 prelude, CUDA graph" \
      -profiles "$OUT/profiles" -o "$OUT/memory-gpu.json" 2>"$OUT/memory-gpu.log"
    echo "memory: rc=$? $(tail -c 700 "$OUT/memory-gpu.log" | tr '\n' ' ')"
    ;;
  soak)
    # Issue 39's churn, as `make bench`'s soak: clips on, every $SOAK_EDIT one camera added or
    # removed and every zone moved, the hub link (a hub in visiond-bench's process) cut 30 s
    # every 5 minutes, a 64 MiB clip store.
    cd "$root"
    "$bin/visiond-bench" soak "${daemon[@]}" \
      -model "$w/third_party/${SCALE_MODEL:-y8-fp16-u8.onnx}" -cuda "$SCALE_CUDA" -cameras "$CAMERAS" -churn "${SOAK_CHURN:-1}" \
      -duration "${SOAK:-8m}" -edit-every "${SOAK_EDIT:-1m}" -sample-every 10s -warmup "${SOAK_WARMUP:-60s}" \
      -analytics -zones -clips '{enabled: true, pre_capture: 3s, post_capture: 3s, max_length: 30s}' -clip-store-mib 64 \
      -hub -cut-every 5m -cut-for 30s \
      -title "visiond run on the GPU machine, $CAMERAS cameras (decoder $DECODER), every ${SOAK_EDIT:-1m} ${SOAK_CHURN:-1} added or removed and the zones moved, the hub link cut 30 s every 5 min, clips on" \
      -o "$OUT/soak-c$CAMERAS.json" -csv "$OUT/soak-c$CAMERAS.csv" -png "$OUT/soak-c$CAMERAS.png" 2>"$OUT/soak.log"
    echo "soak: rc=$? $(tail -c 600 "$OUT/soak.log" | tr '\n' ' ')"
    ;;
  *) echo "daemon.sh: unknown part $part" >&2 ;;
  esac
done
