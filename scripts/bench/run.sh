#!/usr/bin/env bash
# `make bench`: every benchmark of the report in one run on this box, raw results in
# $BENCH_OUT (build/bench), then BENCHMARKS.md (and the soak plot beside it) from them and,
# when GPU names a directory, from the GPU machine's results (scripts/gpu/bench.sh's $OUT).
#
# Knobs (environment; the Makefile passes its variables of the same names):
#   BENCH_TIME=10x      decode iterations per stream (go test -benchtime)
#   PIPE_SECONDS=20 PIPE_CAMERAS=4 PIPE_WORKERS=N    daemon against bare loops
#   WORKERS=auto THREADS=auto  the daemon's CPU workers and their ONNX Runtime threads (scale,
#                       overload, soak); auto: not set in its config, the daemon's defaults
#   PARTS="decode pipeline scale overload soak memory live crowd" a subset to (re)run; the others' files stay;
#                       also (not by default) clips (below), cpu-scale and peer-scale, the cameras-per-box
#                       comparison of scripts/gpu/bench.sh on this box's cores: INT8_MODEL=
#                       build/models/yolov8n-int8.onnx, SCALE_START=1, PYTHON=python3, PEER_ARGS
#   SCALE_WINDOW=20s    measurement window per scale step
#   CROWD_SEEDS=100-129 the held-out crowd scenes the crowd part scores (pipeline/crowd_test.go)
#   OVERLOAD=10m        overload duration;  SOAK=30m soak duration (2h for issue 39's figure),
#                       SOAK_EDIT=1m between config edits, SOAK_CAMERAS=8
#   MEMORY_CAMERAS=1,4,16 the memory part's camera counts (576p at 5 fps, 720p at 10 fps: a daemon run each)
#   clips (not by default: about 11 minutes with these): the daemon with event clips off and on,
#   CLIPS_ROUNDS pairs of rounds, each CLIPS_WARMUP then CLIPS_WINDOW on CLIPS_CAMERAS cameras
#   CLIPS_CAMERAS=4 CLIPS_ROUNDS=2 CLIPS_WARMUP=30s CLIPS_WINDOW=120s
#   BENCH_OUT=build/bench  GPU=  REPORT=BENCHMARKS.md
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${BENCH_OUT:-build/bench}
BENCH_TIME=${BENCH_TIME:-10x}
cpu_workers=$(nproc) # the pipeline bench: one one-thread worker per CPU, against as many bare loops
PIPE_SECONDS=${PIPE_SECONDS:-20} PIPE_CAMERAS=${PIPE_CAMERAS:-4} PIPE_WORKERS=${PIPE_WORKERS:-$cpu_workers}
WORKERS=${WORKERS:-auto} THREADS=${THREADS:-auto}
INT8_MODEL=${INT8_MODEL:-build/models/yolov8n-int8.onnx} SCALE_START=${SCALE_START:-1} PYTHON=${PYTHON:-python3} PEER_ARGS=${PEER_ARGS:-}
SCALE_WINDOW=${SCALE_WINDOW:-20s} OVERLOAD=${OVERLOAD:-10m} SOAK=${SOAK:-30m} SOAK_EDIT=${SOAK_EDIT:-1m} SOAK_CAMERAS=${SOAK_CAMERAS:-8}
CROWD_SEEDS=${CROWD_SEEDS:-100-129}
CLIPS_CAMERAS=${CLIPS_CAMERAS:-4} CLIPS_ROUNDS=${CLIPS_ROUNDS:-2} CLIPS_WARMUP=${CLIPS_WARMUP:-30s} CLIPS_WINDOW=${CLIPS_WINDOW:-120s}
MEMORY_CAMERAS=${MEMORY_CAMERAS:-1,4,16}
PARTS=${PARTS:-decode pipeline scale overload soak memory live crowd}
GPU=${GPU:-} REPORT=${REPORT:-BENCHMARKS.md}
GO=${GO:-go}

set -e
mkdir -p "$OUT"
cmds=$OUT/commands.txt
: >"$cmds"
for k in BENCH_TIME PIPE_SECONDS PIPE_CAMERAS PIPE_WORKERS WORKERS THREADS SCALE_WINDOW OVERLOAD SOAK SOAK_EDIT SOAK_CAMERAS MEMORY_CAMERAS CROWD_SEEDS PARTS INT8_MODEL SCALE_START CLIPS_CAMERAS CLIPS_ROUNDS CLIPS_WARMUP CLIPS_WINDOW; do
  echo "# knob $k=${!k}" >>"$cmds"
done

# step NAME COMMAND: runs COMMAND (a shell line, logged as typed) and, when it fails, leaves
# NAME.failed with the end of its output for the report; the other parts still run.
step() {
  local name=$1 cmd=$2
  echo "$cmd" >>"$cmds"
  echo "bench: $cmd" >&2
  rm -f "$OUT/$name.failed"
  if ! bash -o pipefail -c "$cmd" 2>&1 | tee "$OUT/$name.log" >&2; then
    { echo "exit status non-zero; the end of its log ($OUT/$name.log):"; tail -c 600 "$OUT/$name.log"; } >"$OUT/$name.failed"
    echo "bench: $name failed (see $OUT/$name.log)" >&2
  fi
}
has() { [[ " $PARTS " == *" $1 "* ]]; }

# Build the daemon and the bench command (the go benchmarks' test binaries are built by their steps).
echo "$GO build -buildmode=pie -o bin/visiond ./cmd/visiond && $GO build -o bin/visiond-bench ./cmd/visiond-bench" >>"$cmds"
$GO build -buildmode=pie -o bin/visiond ./cmd/visiond
$GO build -o bin/visiond-bench ./cmd/visiond-bench
rel=$(realpath --relative-to=sources "$OUT") # test binaries run in their package's directory
set +e # from here a failing part is recorded (step) and the others still run

step env "bin/visiond-bench env -o $OUT/env.json"
if has decode; then
  rm -f "$OUT/decode.txt"
  step decode "$GO test -c -o $OUT/sources.test ./sources && cd sources && $rel/sources.test -test.run '^\$' -test.bench DecodeVsFFmpeg -test.benchtime $BENCH_TIME | tee $rel/decode.txt"
  rm -f "$OUT/skip.txt"
  step skip "cd sources && $rel/sources.test -test.run '^\$' -test.bench SkipNonRef -test.benchtime $BENCH_TIME | tee $rel/skip.txt"
fi
if has pipeline; then
  rm -f "$OUT/pipeline.txt"
  step pipeline "$GO test -c -o $OUT/pipeline.test ./pipeline && cd pipeline && VISIOND_BENCH_SECONDS=$PIPE_SECONDS VISIOND_BENCH_CAMERAS=$PIPE_CAMERAS VISIOND_BENCH_WORKERS=$PIPE_WORKERS VISIOND_BENCH_THREADS=${THREADS#auto} $rel/pipeline.test -test.run '^\$' -test.bench ThroughputVsBareLoop -test.benchtime 1x | sed 's/^Benchmark/provider=cpu workers=$PIPE_WORKERS threads=$THREADS cameras=$PIPE_CAMERAS: Benchmark/' | tee $rel/pipeline.txt"
fi
daemon="-workers $WORKERS -threads $THREADS -provider cpu"
if has scale; then
  rm -f "$OUT/scale.json"
  step scale "bin/visiond-bench scale $daemon -fps 5 -p99 300ms -window $SCALE_WINDOW -o $OUT/scale.json"
fi
if has cpu-scale; then
  cpu="-provider cpu -fps 5 -p99 300ms -start $SCALE_START -window $SCALE_WINDOW"
  rm -f "$OUT"/scale-cpu-*.json
  step scale-cpu-fp32 "bin/visiond-bench scale $cpu -label 'default CPU pool, FP32' -o $OUT/scale-cpu-fp32.json"
  if [ -f "$INT8_MODEL" ]; then
    step scale-cpu-int8 "bin/visiond-bench scale $cpu -model $INT8_MODEL -label 'default CPU pool, INT8' -o $OUT/scale-cpu-int8.json"
  else
    echo "$INT8_MODEL missing: make it with bin/visiond model quantize" | tee "$OUT/scale-cpu-int8.failed" >&2
  fi
fi
if has peer-scale; then
  rm -f "$OUT/peer-scale.json"
  step peer-scale "bin/visiond-bench peer-scale -python '$PYTHON' -mode plain -threads 0 -fps 5 -p99 300ms -start $SCALE_START -window $SCALE_WINDOW ${PEER_ARGS:+-peer-args '$PEER_ARGS' }-dir $OUT/peer-scale -label 'peer.py plain, one session, default threads' -o $OUT/peer-scale.json"
fi
if has overload; then
  rm -f "$OUT/overload.json"
  step overload "bin/visiond-bench overload $daemon -fps 5 -scale $OUT/scale.json -factor 2 -duration $OVERLOAD -o $OUT/overload.json"
fi
if has soak; then
  rm -f "$OUT"/soak.*
  # Issue 39's soak: SOAK_CAMERAS cameras with clips on, at every edit a camera added or removed and every
  # zone moved, the link to a hub (in the bench's process) cut for 30 s every 5 minutes, the clip store
  # small enough to fill and evict.
  step soak "bin/visiond-bench soak $daemon -fps 5 -cameras $SOAK_CAMERAS -churn 1 -duration $SOAK -edit-every $SOAK_EDIT -sample-every 10s -analytics -zones -clips '{enabled: true, pre_capture: 3s, post_capture: 3s, max_length: 30s}' -clip-store-mib 64 -hub -cut-every 5m -cut-for 30s -csv $OUT/soak.csv -png $OUT/soak.png -o $OUT/soak.json"
fi
if has memory; then
  # The daemon's memory by owner and its workers', per camera (issue 39): the sample (576p) at 5 fps, and 720p cameras
  # analysed as fast as the box allows (10 fps asked), each at MEMORY_CAMERAS cameras: about 1.5 minutes a count.
  rm -f "$OUT"/memory-*.json
  step memory-576p "bin/visiond-bench memory $daemon -fps 5 -cameras $MEMORY_CAMERAS -label '576p, 5 fps' -o $OUT/memory-576p.json"
  step memory-720p "bin/visiond-bench memory $daemon -fps 10 -video third_party/media/vtest720.h264.ts -cameras $MEMORY_CAMERAS -label '720p, 10 fps asked' -o $OUT/memory-720p.json"
fi
if has live; then
  # What the live view costs (issue 40): 4 cameras, 0, 1 and 4 viewers a camera reading the video and the results
  # feed, then headless Chromium playing camera 0 with its overlays in real time for the capture-to-screen latency:
  # about 4 minutes.
  rm -f "$OUT"/live*.json
  step live "bin/visiond-bench live $daemon -fps 5 -cameras 4 -viewers 0,1,4 -o $OUT/live.json"
fi
if has crowd; then
  # The crowded scenes with known truth, the held-out seeds (CROWD_SEEDS, default 100-129; the tracker is tuned
  # on others), each replayed at 10 fps and scored at 0.5-10 fps (pipeline/crowd_test.go), in crowd.json: about
  # 1-2 minutes a seed on a 2-core box.
  rm -f "$OUT/crowd.json"
  step crowd "$GO test -c -o $OUT/pipeline.test ./pipeline && cd pipeline && VISIOND_CROWD_SEEDS=$CROWD_SEEDS VISIOND_CROWD_OUT=$rel/crowd.json $rel/pipeline.test -test.run '^TestCrowdReplay\$' -test.v -test.timeout 3h"
fi
if has crowd; then
  # The real recording (vtest.avi) against its hand-made truth at 1-10 fps (pipeline/vtest_test.go), in vtest.json.
  rm -f "$OUT/vtest.json"
  step vtest "$GO test -c -o $OUT/pipeline.test ./pipeline && cd pipeline && VISIOND_VTEST_OUT=$rel/vtest.json $rel/pipeline.test -test.run '^TestVTestReplay\$' -test.v -test.timeout 30m"
fi
if has clips; then
  # Event clips (issue 23): CPU with clips off and on, the rings' memory, a clip's delay after its object, bytes per clip-minute.
  rm -f "$OUT/clips.json"
  step clips "bin/visiond-bench clips $daemon -fps 5 -cameras $CLIPS_CAMERAS -rounds $CLIPS_ROUNDS -warmup $CLIPS_WARMUP -window $CLIPS_WINDOW -o $OUT/clips.json"
fi
step env-end "bin/visiond-bench env -o $OUT/env-end.json"

gpu=${GPU:+ -gpu $GPU}
echo "bin/visiond-bench report -in $OUT$gpu -o $REPORT" >>"$cmds"
bin/visiond-bench report -in "$OUT" ${GPU:+-gpu "$GPU"} -o "$REPORT"
echo "bench: wrote $REPORT (raw results in $OUT)" >&2
