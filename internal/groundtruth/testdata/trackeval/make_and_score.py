#!/usr/bin/env python3
"""Writes the small sequence of TestTrackEvalReference (gt.txt, tracker.txt, MOTChallenge
format) and prints TrackEval's CLEAR, Identity and HOTA of it.

    /usr/bin/python3 make_and_score.py /path/to/TrackEval > trackeval-output.txt

TrackEval (github.com/JonathonLuiten/TrackEval, commit 12c8791) is not part of visiond; its
metric classes are called on the sequence directly (no dataset loader: the sequence has no
distractors to remove). Needs numpy and scipy (Debian: python3-numpy python3-scipy); numpy
1.24 dropped np.float and np.int, which TrackEval's code still names, so they are set back
here before it is imported.
"""
import sys

import numpy as np

np.float = float
np.int = int
sys.path.insert(0, sys.argv[1])
from trackeval.metrics import CLEAR, HOTA, Identity  # noqa: E402
from trackeval.datasets._base_dataset import _BaseDataset  # noqa: E402

FRAMES = 12
gt, tr = [], []  # (frame, id, x, y, w, h)
for f in range(1, FRAMES + 1):
    gt.append((f, 1, 10 + 10 * f, 10, 20, 40))     # walks right...
    gt.append((f, 2, 150 - 10 * f, 12, 20, 40))    # ...past 2, walking left: they meet at frame 7
    if 3 <= f <= 10:
        gt.append((f, 3, 200, 100, 30, 60))        # stands
jit = [0, 1, -1, 2, -2, 1, 0, -1, 2, 0, 1, -2]
for f in range(1, FRAMES + 1):
    j = jit[f - 1]
    x1, x2 = 10 + 10 * f, 150 - 10 * f
    if f <= 6:
        tr.append((f, 1, x1 + j, 10, 20, 40))      # track 1 on person 1...
        tr.append((f, 2, x2 - j, 12 + j, 20, 40))  # ...track 2 on person 2
    else:
        tr.append((f, 1, x2 + j, 12, 21, 40))      # they swap where they meet
        if f != 7:
            tr.append((f, 2, x1, 10 - j, 20, 38))  # track 2 missing at frame 7
    if 3 <= f <= 5:
        tr.append((f, 3, 200 + 3 * (f - 3), 100, 30, 60))  # person 3, sliding off: IoU 1, 0.82, 0.67
    if f == 5:
        tr.append((f, 6, 212, 110, 30, 60))        # a second box on person 3, IoU 0.34
    if 8 <= f <= 10:
        tr.append((f, 4, 208, 95, 30, 60))         # person 3 again under a new id, IoU 0.51
    if 2 <= f <= 4:
        tr.append((f, 5, 400, 300, 25, 50))        # a false positive

def write(name, rows, extra):
    with open(name, "w") as fh:
        for r in rows:
            fh.write(",".join(str(v) for v in r) + extra + "\n")

write("gt.txt", gt, ",1,1,1")          # consider, pedestrian, fully visible
write("tracker.txt", tr, ",1,-1,-1,-1")

def dense(ids):
    u = sorted(set(ids))
    return {v: i for i, v in enumerate(u)}

gmap, tmap = dense(r[1] for r in gt), dense(r[1] for r in tr)
data = {"num_timesteps": FRAMES, "gt_ids": [], "tracker_ids": [], "similarity_scores": [],
        "num_gt_dets": len(gt), "num_tracker_dets": len(tr), "num_gt_ids": len(gmap), "num_tracker_ids": len(tmap)}
for f in range(1, FRAMES + 1):
    g = [r for r in gt if r[0] == f]
    t = [r for r in tr if r[0] == f]
    data["gt_ids"].append(np.array([gmap[r[1]] for r in g], dtype=int))
    data["tracker_ids"].append(np.array([tmap[r[1]] for r in t], dtype=int))
    gd = np.array([r[2:6] for r in g], dtype=float).reshape(-1, 4)
    td = np.array([r[2:6] for r in t], dtype=float).reshape(-1, 4)
    data["similarity_scores"].append(_BaseDataset._calculate_box_ious(gd, td, box_format="xywh"))

clear = CLEAR({"PRINT_CONFIG": False}).eval_sequence(data)
ident = Identity({"PRINT_CONFIG": False}).eval_sequence(data)
hota = HOTA().eval_sequence(data)
for k in ["CLR_TP", "CLR_FN", "CLR_FP", "IDSW", "MT", "PT", "ML", "Frag", "MOTA", "MODA", "MOTP", "CLR_Re", "CLR_Pr"]:
    print("CLEAR", k, repr(float(clear[k])))
for k in ["IDTP", "IDFN", "IDFP", "IDF1", "IDP", "IDR"]:
    print("Identity", k, repr(float(ident[k])))
for k in ["HOTA", "DetA", "AssA", "DetRe", "DetPr", "AssRe", "AssPr", "LocA"]:
    print("HOTA", k, repr(float(np.mean(hota[k]))))
print("HOTA", "HOTA(0)", repr(float(hota["HOTA(0)"])), "LocA(0)", repr(float(hota["LocA(0)"])))
