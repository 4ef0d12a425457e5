#!/usr/bin/python3
"""tests/onnx/compare.py REFDIR OUTDIR [--tol T] - compare the outputs vramkit
wrote (OUTDIR/<name>.npy) with ONNX Runtime's (REFDIR/<name>.npy, listed in
REFDIR/ort_run.json): same dtype and shape, and relative L2 error
||ours - theirs|| / ||theirs|| at most T (default 1e-4; exact equality for
integer and boolean outputs, and an absolute L2 of at most T when the
reference is all zeros). Prints one line per output; exit status 1 if any
differs."""
import json
import os
import sys

import numpy as np


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    ref, out = argv[1], argv[2]
    tol = float(argv[argv.index("--tol") + 1]) if "--tol" in argv else 1e-4
    meta = json.load(open(os.path.join(ref, "ort_run.json")))
    bad = 0
    for o in meta["outputs"]:
        name = os.path.basename(o["file"])
        theirs = np.load(os.path.join(ref, name))
        path = os.path.join(out, name)
        if not os.path.exists(path):
            print("MISSING %s" % name)
            bad += 1
            continue
        ours = np.load(path)
        if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
            print("DIFFER  %s: %s %s against %s %s" % (name, ours.dtype, ours.shape,
                                                      theirs.dtype, theirs.shape))
            bad += 1
            continue
        if theirs.dtype.kind in "biu":
            ok = np.array_equal(ours, theirs)
            err = 0.0 if ok else float(np.count_nonzero(ours != theirs))
            what = "mismatched elements"
        else:
            t = theirs.astype(np.float64)
            d = np.linalg.norm(ours.astype(np.float64) - t)
            n = np.linalg.norm(t)
            err = d / n if n > 0 else d
            ok = bool(np.isfinite(err)) and err <= tol
            what = "relative L2" if n > 0 else "absolute L2"
        print("%s %s: %s %.3g" % ("ok     " if ok else "DIFFER ", name, what, err))
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
