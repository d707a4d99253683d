#!/usr/bin/env python3
"""One inference on a still image through a `visiond worker` process, as the daemon drives it.

    scripts/worker-smoke.py --image IMG --model M.onnx --library libonnxruntime.so.1 \
        [--expect person] [--json OUT] -- [qemu-aarch64-static -L SYSROOT] VISIOND

It speaks the worker protocol of infer/protocol.go: a memfd with one frame slot on fd 3, jobs
on fd 4, hello and results on fd 5 (4-byte little-endian length, then JSON). It starts
`VISIOND worker -detector {...} -slots 1 -slot-bytes N`, waits for the hello (the worker has
loaded ONNX Runtime and the model and run it once by then), letterboxes the image into the
model's input with ffmpeg (gray 114 padding, as the daemon does), sends one job, prints the
result and closes the job stream, which is how the daemon stops a worker; the worker must
then exit with status 0. The command before VISIOND (e.g. qemu-user) runs it under emulation.

Exit status 0 when all of that worked and, with --expect, a detection of that label came back.
"""
import argparse
import fcntl
import json
import math
import os
import select
import struct
import subprocess
import sys
import time

SLOT_BYTES = 1280 * 1280 * 3  # infer.DefaultSlotBytes


def letterbox(src_w, src_h, dst_w, dst_h):
    """geom.NewLetterbox (internal/geom): keep the aspect ratio, centre, round half away from zero."""
    r = min(dst_w / src_w, dst_h / src_h)
    w = min(dst_w, max(1, math.floor(src_w * r + 0.5)))
    h = min(dst_h, max(1, math.floor(src_h * r + 0.5)))
    return {"src_w": src_w, "src_h": src_h, "dst_w": dst_w, "dst_h": dst_h,
            "scaled_w": w, "scaled_h": h, "pad_x": (dst_w - w) // 2, "pad_y": (dst_h - h) // 2}


def image_size(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "stream=width,height", "-of", "csv=p=0", path],
                         check=True, capture_output=True, text=True).stdout
    w, h = out.strip().split(",")[:2]
    return int(w), int(h)


def letterboxed_rgb(path, lb):
    vf = "scale={scaled_w}:{scaled_h}:flags=bilinear,pad={dst_w}:{dst_h}:{pad_x}:{pad_y}:color=0x727272".format(**lb)
    frame = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-vf", vf, "-frames:v", "1",
                            "-pix_fmt", "rgb24", "-f", "rawvideo", "-"],
                           check=True, capture_output=True).stdout
    want = lb["dst_w"] * lb["dst_h"] * 3
    if len(frame) != want:
        sys.exit(f"worker-smoke: ffmpeg gave {len(frame)} bytes, want {want}")
    return frame


def high_fd(fd):
    """A copy of fd numbered 10 or more (close-on-exec), so that dup2 onto 3..5 cannot clobber it."""
    n = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return n


def read_exact(fd, n, deadline):
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out waiting for the worker")
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError(f"worker closed fd 5 after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def read_message(fd, deadline):
    (size,) = struct.unpack("<I", read_exact(fd, 4, deadline))
    return json.loads(read_exact(fd, size, deadline))


def write_message(fd, msg):
    b = json.dumps(msg, separators=(",", ":")).encode()
    os.write(fd, struct.pack("<I", len(b)) + b)


def unmatched(dets, other):
    """Detections of dets scoring >= 0.5 with no counterpart in other."""
    def same(d, o):
        return (d["label"] == o["label"] and abs(d["score"] - o["score"]) <= 0.02 and
                all(abs(d["box"][k] - o["box"][k]) <= 2 for k in ("x", "y", "w", "h")))
    return [d for d in dets if d["score"] >= 0.5 and not any(same(d, o) for o in other)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--library", required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--expect", help="a label that must be among the detections")
    ap.add_argument("--json", help="write the hello, the job and the result here")
    ap.add_argument("--compare", help="a --json file of another run (e.g. the native binary): every detection "
                    "scoring 0.5 or more in either must be in both, same label, within 0.02 and 2 px")
    ap.add_argument("--timeout", type=float, default=600, help="seconds for start-up and for the job, each")
    ap.add_argument("command", nargs="+", help="the visiond binary, with any wrapper before it")
    a = ap.parse_args()

    detector = {"model": os.path.abspath(a.model), "library": os.path.abspath(a.library), "provider": "cpu"}
    if a.threads:
        detector["threads"] = a.threads
    argv = a.command + ["worker", "-detector", json.dumps(detector), "-slots", "1", "-slot-bytes", str(SLOT_BYTES)]

    slots = high_fd(os.memfd_create("visiond-slots"))
    os.ftruncate(slots, SLOT_BYTES)
    jobs_r, jobs_w = (high_fd(fd) for fd in os.pipe())
    res_r, res_w = (high_fd(fd) for fd in os.pipe())
    t0 = time.monotonic()
    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
        (os.POSIX_SPAWN_DUP2, slots, 3), (os.POSIX_SPAWN_DUP2, jobs_r, 4), (os.POSIX_SPAWN_DUP2, res_w, 5)])
    os.close(jobs_r)
    os.close(res_w)
    print(f"worker-smoke: started pid {pid}: {' '.join(argv[:-7])} worker ...", flush=True)

    hello = read_message(res_r, time.monotonic() + a.timeout)["hello"]
    ready = time.monotonic() - t0
    if hello.get("error"):
        sys.exit(f"worker-smoke: FAIL: the worker could not start: {hello['error']}")
    print(f"worker-smoke: hello after {ready:.1f} s: provider {hello['provider']}, input "
          f"{hello['input_w']}x{hello['input_h']}, {len(hello['classes'])} classes", flush=True)

    w, h = image_size(a.image)
    lb = letterbox(w, h, hello["input_w"], hello["input_h"])
    os.pwrite(slots, letterboxed_rgb(a.image, lb), 0)
    job = {"id": 1, "slot": 0, "camera": "smoke", "seq": 1, "letterbox": lb}
    t1 = time.monotonic()
    write_message(jobs_w, {"type": "job", "job": job})
    result = read_message(res_r, time.monotonic() + a.timeout)["result"]
    took = time.monotonic() - t1
    os.close(jobs_w)  # end of the job stream: the worker stops
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)

    if result.get("error"):
        sys.exit(f"worker-smoke: FAIL: job error: {result['error']}")
    dets = result.get("detections") or []
    print(f"worker-smoke: result after {took:.2f} s (pre {result['pre_us'] / 1000:.1f} ms, run "
          f"{result['run_us'] / 1000:.1f} ms, post {result['post_us'] / 1000:.1f} ms), {len(dets)} detections "
          f"on {os.path.basename(a.image)} ({w}x{h}):")
    for d in dets:
        b = d["box"]
        print(f"  {d['label']:<14} {d['score']:.3f}  [{b['x']:.0f},{b['y']:.0f} {b['w']:.0f}x{b['h']:.0f}]")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"hello": hello, "job": job, "result": result, "ready_s": ready, "job_s": took}, f, indent=1)
    if code != 0:
        sys.exit(f"worker-smoke: FAIL: the worker exited with status {code} after its job stream ended")
    print("worker-smoke: worker exited with status 0")
    if a.expect and not any(d["label"] == a.expect for d in dets):
        sys.exit(f"worker-smoke: FAIL: no {a.expect!r} among the detections")
    if a.compare:
        with open(a.compare) as f:
            other = json.load(f)["result"].get("detections") or []
        missing = unmatched(dets, other) + unmatched(other, dets)
        if missing:
            sys.exit(f"worker-smoke: FAIL: detections differ from {a.compare}: {missing}")
        print(f"worker-smoke: same detections as {a.compare} (scores within 0.02, boxes within 2 px)")
    print("worker-smoke: PASS")


if __name__ == "__main__":
    main()
