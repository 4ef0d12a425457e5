#!/usr/bin/env python3
"""tests/faces/compare.py - two JSON Lines files of faces compared frame by
frame (vramkit's output against tests/faces/reference.mjs's, or any two in
the service's schema: {"stream", "frame", "detections": [{"box", "score",
"keypoints"}]}; lines without detections are ignored).

    tests/faces/compare.py A.jsonl B.jsonl [--min-iou 0.9] [--max-score-diff 0.01]
                           [--max-keypoint-diff 0.05]

Frames are matched by stream and frame index: every frame of one file must
be in the other with as many faces; faces are paired greedily by IoU
(highest first); every pair must overlap by at least --min-iou, differ
in score by at most --max-score-diff and have each keypoint within
--max-keypoint-diff of the box's width of its counterpart. Prints a table
per stream (frames, faces, worst IoU, worst score difference, worst
keypoint distance in pixels, lowest score) and exits 0, or 1 naming the
first mismatch (2 for unreadable input)."""
import argparse
import json
import sys


def load(path):
    frames = {}
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except ValueError as e:
                    sys.exit(f"compare: {path}:{n}: not JSON: {e}")
                if not isinstance(r, dict) or "detections" not in r or "frame" not in r:
                    continue
                key = (str(r.get("stream", "")), int(r["frame"]))
                if key in frames:
                    sys.exit(f"compare: {path}:{n}: stream {key[0]} frame {key[1]} twice")
                frames[key] = r["detections"]
    except OSError as e:
        print(f"compare: {e}", file=sys.stderr)
        sys.exit(2)
    return frames


def iou(a, b):
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def pair(fa, fb):
    """Greedy matching by IoU: [(i, j, iou)], highest IoU first."""
    cand = sorted(((iou(a["box"], b["box"]), i, j) for i, a in enumerate(fa)
                   for j, b in enumerate(fb)), reverse=True)
    used_a, used_b, out = set(), set(), []
    for v, i, j in cand:
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            out.append((i, j, v))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--min-iou", type=float, default=0.9)
    ap.add_argument("--max-score-diff", type=float, default=0.01)
    ap.add_argument("--max-keypoint-diff", type=float, default=0.05)
    args = ap.parse_args()
    A, B = load(args.a), load(args.b)

    def mismatch(key, what):
        print(f"compare: MISMATCH stream {key[0]} frame {key[1]}: {what}")
        sys.exit(1)

    stats = {}
    for key in sorted(set(A) | set(B)):
        if key not in A:
            mismatch(key, f"only in {args.b}")
        if key not in B:
            mismatch(key, f"only in {args.a}")
        fa, fb = A[key], B[key]
        if len(fa) != len(fb):
            mismatch(key, f"{len(fa)} faces in {args.a}, {len(fb)} in {args.b} "
                          f"(scores {[f['score'] for f in fa]} against {[f['score'] for f in fb]})")
        s = stats.setdefault(key[0], {"frames": 0, "faces": 0, "iou": 1.0, "score": 0.0,
                                      "kp": 0.0, "min_score": None})
        s["frames"] += 1
        s["faces"] += len(fa)
        for i, j, v in pair(fa, fb):
            d = abs(fa[i]["score"] - fb[j]["score"])
            if v < args.min_iou:
                mismatch(key, f"face {i} box {fa[i]['box']} against {fb[j]['box']}: "
                              f"IoU {v:.4f} < {args.min_iou}")
            if d > args.max_score_diff:
                mismatch(key, f"face {i} score {fa[i]['score']} against {fb[j]['score']}: "
                              f"differs by {d:.5f} > {args.max_score_diff}")
            width = max(fa[i]["box"][2] - fa[i]["box"][0], 1e-6)
            for k, (p, q) in enumerate(zip(fa[i]["keypoints"], fb[j]["keypoints"])):
                dist = ((p[0] - q[0]) ** 2 + (p[1] - q[1]) ** 2) ** 0.5
                if dist > args.max_keypoint_diff * width:
                    mismatch(key, f"face {i} keypoint {k} {p} against {q}: {dist:.2f} px apart, "
                                  f"more than {args.max_keypoint_diff} of the box's {width:.1f}")
                s["kp"] = max(s["kp"], dist)
            s["iou"] = min(s["iou"], v)
            s["score"] = max(s["score"], d)
            lo = min(fa[i]["score"], fb[j]["score"])
            s["min_score"] = lo if s["min_score"] is None else min(s["min_score"], lo)
    print(f"{'stream':<16} {'frames':>6} {'faces':>6} {'worst IoU':>10} {'worst dscore':>12} "
          f"{'worst kp px':>11} {'min score':>9}")
    for name, s in sorted(stats.items()):
        ms = "-" if s["min_score"] is None else f"{s['min_score']:.4f}"
        worst = f"{s['iou']:.4f}" if s["faces"] else "-"
        print(f"{name:<16} {s['frames']:>6} {s['faces']:>6} {worst:>10} {s['score']:>12.5f} "
              f"{s['kp']:>11.2f} {ms:>9}")
    if not stats:
        print("compare: no frames in either file")
        sys.exit(1)


if __name__ == "__main__":
    main()
