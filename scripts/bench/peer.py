#!/usr/bin/env python3
"""visiond's peer in `make bench`: the loop most YOLO deployment guides run.

One OpenCV VideoCapture per camera (FFmpeg backend, RTSP over TCP), a thread per camera that
reads a frame, letterboxes it, runs one shared ONNX Runtime session (CPU provider, the given
intra-op thread count) and decodes the output with class-wise NMS -- the same geometry,
thresholds and NMS as visiond's workers, so both do the same work per frame.

    peer.py --urls URLS_FILE --cameras N --threads T --seconds S [--fps F] -o peer.json
        camera i reads line i mod n of URLS_FILE (`visiond-bench serve` writes it);
        --mode plain: read, infer, repeat, in the camera's thread (the guides' loop);
        --mode latest: a reader thread per camera keeps only the newest frame and the
        camera's inference thread takes it (the usual fix for a loop that falls behind);
        --fps F: analyse at most F frames per second of each camera (plain: every frame is
        read and decoded, those before the next slot of the stream's clock are skipped, as
        the guides' frame skipping; latest: the inference thread takes the newest frame
        every 1/F s); 0, the default: as many as the loop manages.
        `visiond-bench peer-scale` runs it for growing N to find the cameras it sustains.
    peer.py --selftest DIR
        checks the letterbox and the postprocessing against visiond's on the images that
        `visiond-bench tensor -o DIR` wrote (input canvas, raw model output, detections);
        where onnxruntime is importable, also the session's output on that canvas.

Measured over the window: frames analysed per second (all cameras and each; Jain's index),
read-to-result time, lag behind live (from the stream's timestamps: how much later than the
soonest frame of the session, relative to its stream time, the frame was read), latency
(lag behind live + read to result: from the frame's live arrival to its result, the
counterpart of visiond's capture-to-publish), CPU time of the process per analysed frame
(getrusage: every thread, decoding included) and resident memory.
"""
import argparse
import ast
import json
import math
import os
import resource
import sys
import threading
import time


def parse_cpus(s):
    cpus = set()
    for part in s.split(","):
        a, _, b = part.partition("-")
        cpus.update(range(int(a), int(b or a) + 1))
    return cpus


# --cpus pins the process before numpy, OpenCV and ONNX Runtime start their threads (a
# thread keeps the CPU mask it was created with).
for _i, _a in enumerate(sys.argv):
    if _a == "--cpus" and _i + 1 < len(sys.argv) and sys.argv[_i + 1]:
        os.sched_setaffinity(0, parse_cpus(sys.argv[_i + 1]))
    elif _a.startswith("--cpus=") and len(_a) > 7:
        os.sched_setaffinity(0, parse_cpus(_a[7:]))

import numpy as np  # noqa: E402

os.environ.setdefault("OPENCV_FFMPEG_CAPTURE_OPTIONS", "rtsp_transport;tcp")
import cv2  # noqa: E402  (after the capture options)

PAD = 114  # visiond's PadValue (Ultralytics' gray)


def rnd(x):
    """Go's math.Round: half away from zero (Python's round() rounds half to even)."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def letterbox(bgr, w=640, h=640):
    """The frame scaled into a w x h canvas keeping its aspect ratio, centred, gray around:
    visiond's NewLetterbox geometry. Returns the RGB canvas (h, w, 3) uint8 and the geometry."""
    sh, sw = bgr.shape[:2]
    r = min(w / sw, h / sh)
    nw, nh = min(w, max(1, rnd(sw * r))), min(h, max(1, rnd(sh * r)))
    px, py = (w - nw) // 2, (h - nh) // 2
    canvas = np.full((h, w, 3), PAD, np.uint8)
    scaled = cv2.resize(bgr, (nw, nh), interpolation=cv2.INTER_LINEAR)
    canvas[py:py + nh, px:px + nw] = cv2.cvtColor(scaled, cv2.COLOR_BGR2RGB)
    return canvas, (sw, sh, nw, nh, px, py)


def to_tensor(canvas):
    """HWC uint8 RGB to NCHW float32 in 0..1."""
    return (canvas.transpose(2, 0, 1)[None].astype(np.float32) / np.float32(255)).copy()


def postprocess(out, geom, names, conf=0.25, iou=0.45, max_det=300):
    """YOLOv8 output [1, 4+C, N] to detections in source pixels: best class per anchor,
    score >= conf, class-wise greedy NMS (IoU > iou removed), boxes mapped back through the
    letterbox and clipped; as visiond's decoder."""
    p = out[0]
    scores = p[4:]
    cls = scores.argmax(0)
    best = scores[cls, np.arange(scores.shape[1])]
    keep = np.nonzero(best >= np.float32(conf))[0]
    cx, cy, bw, bh = p[0, keep], p[1, keep], p[2, keep], p[3, keep]
    half = np.float32(2)
    x1, y1, x2, y2 = cx - bw / half, cy - bh / half, cx + bw / half, cy + bh / half
    s, c = best[keep], cls[keep]
    order = np.argsort(-s, kind="stable")
    x1, y1, x2, y2, s, c = x1[order], y1[order], x2[order], y2[order], s[order], c[order]
    removed = np.zeros(len(s), bool)
    kept = []
    area = (x2 - x1).astype(np.float64) * (y2 - y1).astype(np.float64)
    for i in range(len(s)):
        if removed[i]:
            continue
        kept.append(i)
        if len(kept) == max_det:
            break
        j = np.arange(i + 1, len(s))
        j = j[(~removed[j]) & (c[j] == c[i])]
        if len(j) == 0:
            continue
        iw = np.minimum(x2[i], x2[j]) - np.maximum(x1[i], x1[j])
        ih = np.minimum(y2[i], y2[j]) - np.maximum(y1[i], y1[j])
        inter = np.where((iw > 0) & (ih > 0), iw.astype(np.float64) * ih.astype(np.float64), 0.0)
        union = area[i] + area[j] - inter
        ov = np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
        removed[j[ov > iou]] = True
    sw, sh, nw, nh, px, py = geom
    sx, sy = nw / sw, nh / sh
    dets = []
    for i in kept:
        bx1 = min(max((float(x1[i]) - px) / sx, 0), sw)
        by1 = min(max((float(y1[i]) - py) / sy, 0), sh)
        bx2 = min(max((float(x2[i]) - px) / sx, 0), sw)
        by2 = min(max((float(y2[i]) - py) / sy, 0), sh)
        if bx2 - bx1 <= 0 or by2 - by1 <= 0:
            continue  # entirely in the padding
        k = int(c[i])
        dets.append({"class_id": k, "label": names[k] if k < len(names) else f"class{k}",
                     "score": float(s[i]), "box": {"x": bx1, "y": by1, "w": bx2 - bx1, "h": by2 - by1}})
    return dets


def model_names(sess):
    meta = sess.get_modelmeta().custom_metadata_map
    try:
        d = ast.literal_eval(meta.get("names", "{}"))
        return [d[k] for k in sorted(d)]
    except (ValueError, SyntaxError):
        return []


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def pct(xs, q):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class FakeSession:
    """Stands in for an onnxruntime session where none is installed (testing the loop only):
    returns a saved output after sleeping infer_ms, outside the GIL like a real run."""

    def __init__(self, output, infer_ms, names):
        self.out, self.infer_ms, self.names = np.load(output), infer_ms, names

    def run(self, _outputs, _feed):
        time.sleep(self.infer_ms / 1000)
        return [self.out]


class Camera:
    def __init__(self, idx, url):
        self.idx, self.url = idx, url
        self.records = []  # (done_monotonic, dets, read_to_result_ms, infer_ms, (session, offset_ms))
        self.reopens = 0
        self.failures = 0
        self.epoch = 0  # sessions opened after the first
        self.latest = None  # newest (frame, monotonic, stream ms) in latest mode
        self.superseded = 0
        self.skipped = 0  # frames read but not analysed (--fps)
        self.pos = 0.0  # stream time of the last frame read, ms
        self.cond = threading.Condition()

    def open(self):
        cap = cv2.VideoCapture(self.url, cv2.CAP_FFMPEG)
        cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)
        return cap

    def read(self, cap):
        """One frame, reopening on failure; returns (cap, frame, monotonic, offset): offset is
        the arrival time minus the frame's stream time, in ms; its excess over the least
        offset of the session is how far behind live the frame is (see lags)."""
        while True:
            ok, frame = cap.read()
            if ok:
                now = time.monotonic()
                self.pos = cap.get(cv2.CAP_PROP_POS_MSEC)
                return cap, frame, now, (self.epoch, now * 1000 - self.pos)
            self.failures += 1
            cap.release()
            time.sleep(0.5)
            self.reopens += 1
            cap = self.open()
            self.epoch += 1  # the stream's clock starts again

    def lags(self, records):
        """The lag behind live of each record: its offset less the least offset of its
        session (the frame that came soonest after its capture)."""
        least = {}
        for r in self.records:
            e, off = r[4]
            least[e] = min(least.get(e, off), off)
        return [r[4][1] - least[r[4][0]] for r in records]


class Pacer:
    """Which frames the plain loop analyses for at most fps per camera, by the stream's clock
    (the guides' frame skipping): a frame is taken when its stream time reaches the next slot;
    the slots start again when the stream does (a reopened capture)."""

    def __init__(self, fps):
        self.period = 1000.0 / fps if fps > 0 else 0.0
        self.due, self.epoch = None, None

    def take(self, epoch, pos):
        if not self.period:
            return True
        tol = self.period / 8  # a frame a little before its slot (rounded timestamps) is the slot's
        if (epoch != self.epoch or self.due is None or pos + 2 * self.period < self.due
                or pos > self.due + 2 * self.period):
            self.epoch, self.due = epoch, pos  # a new stream, or its clock jumped
        if pos + tol < self.due:
            return False
        self.due += self.period  # slots at the stream's rate: frames between them do not shift them
        return True


def detect(sess, inp, names, frame):
    canvas, geom = letterbox(frame)
    x = to_tensor(canvas)
    t0 = time.monotonic()
    out = sess.run(None, {inp: x})[0]
    t1 = time.monotonic()
    return postprocess(out, geom, names), (t1 - t0) * 1000


def run_plain(cam, sess, inp, names, stop, fps):
    cap = cam.open()
    pacer = Pacer(fps)
    while not stop.is_set():
        cap, frame, t_read, lag = cam.read(cap)
        if not pacer.take(lag[0], cam.pos):
            cam.skipped += 1
            continue
        dets, infer_ms = detect(sess, inp, names, frame)
        done = time.monotonic()
        cam.records.append((done, len(dets), (done - t_read) * 1000, infer_ms, lag))
    cap.release()


def run_latest(cam, sess, inp, names, stop, fps):
    def reader():
        cap = cam.open()
        while not stop.is_set():
            cap, frame, t_read, lag = cam.read(cap)
            with cam.cond:
                if cam.latest is not None:
                    cam.superseded += 1
                cam.latest = (frame, t_read, lag)
                cam.cond.notify()
        cap.release()

    threading.Thread(target=reader, daemon=True).start()
    period = 1.0 / fps if fps > 0 else 0.0
    slot = time.monotonic()
    while not stop.is_set():
        if period:
            now = time.monotonic()
            if slot > now:
                time.sleep(slot - now)
            slot = max(slot + period, time.monotonic() - period)  # a late loop does not catch up in a burst
        with cam.cond:
            while cam.latest is None and not stop.is_set():
                cam.cond.wait(0.5)
            if cam.latest is None:
                break
            frame, t_read, lag = cam.latest
            cam.latest = None
        dets, infer_ms = detect(sess, inp, names, frame)
        done = time.monotonic()
        cam.records.append((done, len(dets), (done - t_read) * 1000, infer_ms, lag))


def bench(args):
    versions = {"python": sys.version.split()[0], "numpy": np.__version__, "opencv": cv2.__version__}
    if args.fake_output:
        sess = FakeSession(args.fake_output, args.fake_infer_ms, [])
        inp, names, providers = "images", [], ["fake (--fake-output)"]
        versions["onnxruntime"] = "none (fake session)"
    else:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
        inp, names, providers = sess.get_inputs()[0].name, model_names(sess), sess.get_providers()
        versions["onnxruntime"] = ort.__version__
        sess.run(None, {inp: np.zeros((1, 3, 640, 640), np.float32)})  # warm-up
    urls = open(args.urls).read().split() if args.urls else args.url
    cams = [Camera(i, urls[i % len(urls)]) for i in range(args.cameras)]
    stop = threading.Event()
    loop = run_latest if args.mode == "latest" else run_plain
    threads = [threading.Thread(target=loop, args=(c, sess, inp, names, stop, args.fps), daemon=True) for c in cams]
    started = time.monotonic()
    for t in threads:
        t.start()
    while any(not c.records for c in cams):
        if time.monotonic() - started > 60:
            sys.exit("peer: cameras without a frame after 60 s: "
                     + ", ".join(c.url for c in cams if not c.records))
        time.sleep(0.1)
    time.sleep(args.warmup)
    t0, c0 = time.monotonic(), cpu_seconds()
    time.sleep(args.seconds)
    t1, c1 = time.monotonic(), cpu_seconds()
    rss = rss_mib()
    stop.set()
    for t in threads:
        t.join(timeout=10)
    secs = t1 - t0
    per, lat, inf, lag, total, dets = {}, [], [], [], [], 0
    for c in cams:
        rec = [r for r in c.records if t0 <= r[0] < t1]
        per[f"cam{c.idx:03d}"] = len(rec) / secs
        dets += sum(r[1] for r in rec)
        lat += [r[2] for r in rec]
        inf += [r[3] for r in rec]
        lags = c.lags(rec)
        lag += lags
        total += [g + r[2] for g, r in zip(lags, rec)]
    frames = len(lat)
    rates = list(per.values())
    s2 = sum(x * x for x in rates)
    res = {
        "tool": "scripts/bench/peer.py", "mode": args.mode, "versions": versions, "providers": providers,
        "cameras": args.cameras, "fps": args.fps, "threads": args.threads, "cpus": args.cpus, "urls": sorted(set(urls)),
        "warmup_s": args.warmup, "seconds": secs, "frames": frames,
        "frames_per_s": frames / secs, "detections_per_s": dets / secs,
        "per_camera_per_s": per, "min_camera_per_s": min(rates), "max_camera_per_s": max(rates),
        "jain": (sum(rates) ** 2 / (len(rates) * s2)) if s2 else 0.0,
        "read_to_result_p50_ms": pct(lat, .5), "read_to_result_p99_ms": pct(lat, .99),
        "infer_p50_ms": pct(inf, .5), "infer_p99_ms": pct(inf, .99),
        "lag_p50_ms": pct(lag, .5), "lag_p99_ms": pct(lag, .99), "lag_max_ms": max(lag) if lag else 0.0,
        "latency_p50_ms": pct(total, .5), "latency_p99_ms": pct(total, .99), "latency_max_ms": max(total) if total else 0.0,
        "read_failures": sum(c.failures for c in cams), "reopens": sum(c.reopens for c in cams),
        "superseded": sum(c.superseded for c in cams), "skipped": sum(c.skipped for c in cams),
        "cpu_s": c1 - c0, "cpu_ms_per_frame": 1000 * (c1 - c0) / frames if frames else 0.0,
        "cores_busy": (c1 - c0) / secs, "rss_mib": rss,
    }
    text = json.dumps(res, indent=2)
    if args.o and args.o != "-":
        with open(args.o, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    print(f"peer ({args.mode}): {args.cameras} cameras: {res['frames_per_s']:.1f} frames/s "
          f"({res['detections_per_s']:.1f} detections/s), Jain {res['jain']:.3f}, "
          f"read-to-result p50 {res['read_to_result_p50_ms']:.0f} p99 {res['read_to_result_p99_ms']:.0f} ms, "
          f"lag p99 {res['lag_p99_ms']:.0f} ms, latency p99 {res['latency_p99_ms']:.0f} ms, "
          f"slowest camera {res['min_camera_per_s']:.2f}/s, {res['cpu_ms_per_frame']:.1f} ms CPU per frame, "
          f"{res['cores_busy']:.2f} cores", file=sys.stderr)
    # The capture threads may sit in a blocking read; do not wait for them.
    sys.stdout.flush()
    os._exit(0)


def selftest(args):
    """Compare with visiond on the images of `visiond-bench tensor`; exit 1 on a mismatch."""
    names = sorted(f[:-5] for f in os.listdir(args.selftest) if f.endswith(".json"))
    if not names:
        sys.exit(f"selftest: no NAME.json in {args.selftest} (visiond-bench tensor -o DIR)")
    sess = None
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    except ImportError:
        print("selftest: onnxruntime not importable: the session is not checked, only pre- and postprocessing")
    bad = 0
    for name in names:
        base = os.path.join(args.selftest, name)
        ref = json.load(open(base + ".json"))
        img = cv2.imread(ref["image"], cv2.IMREAD_COLOR)
        canvas, geom = letterbox(img)
        want_canvas = np.load(base + ".input.npy")
        diff = np.abs(canvas.astype(int) - want_canvas.astype(int))
        lb = ref["letterbox"]
        geom_ok = geom == (lb["src_w"], lb["src_h"], lb["scaled_w"], lb["scaled_h"], lb["pad_x"], lb["pad_y"])
        out = np.load(base + ".output.npy")
        got = postprocess(out, geom, ref["classes"], ref["confidence"], ref["iou"])
        want = ref["detections"]
        worst = 0.0
        same = len(got) == len(want)
        for g, w in zip(got, want):
            same = same and g["class_id"] == w["class_id"] and abs(g["score"] - w["score"]) < 1e-5
            worst = max(worst, *(abs(g["box"][k] - w["box"][k]) for k in "xywh"))
        same = same and worst < 0.01
        line = (f"{name}: letterbox geometry {'same' if geom_ok else 'DIFFERS'}, canvas max diff {diff.max()} "
                f"({(diff > 0).mean() * 100:.3f}% of values differ); detections {len(got)} vs visiond's "
                f"{len(want)}, {'same' if same else 'DIFFERENT'} (largest box difference {worst:.4f} px)")
        if sess is not None:
            o = sess.run(None, {sess.get_inputs()[0].name: to_tensor(want_canvas)})[0]
            line += f"; session output max diff vs visiond's ONNX Runtime {np.abs(o - out).max():.2e}"
        print(line)
        bad += (not geom_ok) or diff.max() > 1 or not same
    sys.exit(1 if bad else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--urls", help="file of camera URLs, one a line (camera i reads line i mod n)")
    ap.add_argument("--url", action="append", default=[], help="a camera URL (or a video file); repeatable")
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0: its default)")
    ap.add_argument("--cpus", default="", help="CPU list to run on (sched_setaffinity, at start), e.g. 0-3")
    ap.add_argument("--model", default="third_party/yolov8n.onnx")
    ap.add_argument("--mode", choices=["plain", "latest"], default="plain")
    ap.add_argument("--fps", type=float, default=0, help="analyse at most this many frames per second of each camera (0: as many as it can)")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=15)
    ap.add_argument("--fake-output", help="no onnxruntime: a saved output .npy returned by a fake session (loop testing)")
    ap.add_argument("--fake-infer-ms", type=float, default=50)
    ap.add_argument("--selftest", metavar="DIR")
    ap.add_argument("-o", default="-")
    args = ap.parse_args()
    if args.selftest:
        selftest(args)
    elif not (args.urls or args.url):
        ap.error("--urls or --url is required")
    elif args.fps < 0:
        ap.error(f"--fps {args.fps}: must be 0 or more")
    elif args.cameras < 1:
        ap.error(f"--cameras {args.cameras}: must be at least 1")
    else:
        bench(args)


if __name__ == "__main__":
    main()
