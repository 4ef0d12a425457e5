#!/usr/bin/env python3
"""Record a PyTorch inference workload's GPU allocations as an allocation trace.

The trace is written in the format of RMM's logging_resource_adaptor (see
DESIGN.md, "Formats"):

    Thread,Time,Action,Pointer,Size,Stream
    0,14:53:30.623504,allocate,0x7f3d3ee00000,37632,0

Time is HH:MM:SS.ffffff (UTC), Action is `allocate` or `free`, Pointer is hex,
Size is the size in bytes as requested by PyTorch (not the caching allocator's
rounded block size), Stream is the CUDA stream in hex (`0` for the default
stream) and Thread is the ordinal of that stream in order of first appearance.
The output is gzip-compressed when its path ends in `.gz`.

Allocations are taken from PyTorch's memory-history recorder
(`torch.cuda.memory._record_memory_history` and `_snapshot()["device_traces"]`):
an `alloc` entry becomes an `allocate` row, a `free_completed` entry (the block
went back to PyTorch's cache) a `free` row; `free_requested`, `segment_*` and
the rest are skipped. Frees of blocks allocated before recording started are
dropped and counted. PyTorch records `alloc` and `free_completed` with the
block's requested size (`orig_size` / `Block::requested_size` in
CUDACachingAllocator.cpp); `--check-sizes` verifies that on the machine at hand.

Command line:

    capture_torch_trace.py --list
    capture_torch_trace.py --check-sizes
    capture_torch_trace.py --workload mobilenet_crops --iterations 100 \
        --out data/traces/mobilenet_crops.csv.gz --summary-json summary.jsonl
    capture_torch_trace.py --validate data/traces/*.csv.gz
    capture_torch_trace.py --workload mobilenet_crops --dry-run --device cpu

As a module:

    from capture_torch_trace import record_allocations
    cap = record_allocations(lambda: model(x))   # any callable
    cap.write_csv("trace.csv.gz"); print(cap.summary("my_workload"))

Only `--workload` (without `--dry-run`) and `--check-sizes` need torch and a
GPU; `--list` and `--validate` need neither. Models come from torchvision with
untrained weights (weights=None, weights_backbone=None): nothing is downloaded.
"""

import argparse
import contextlib
import gc
import gzip
import io
import json
import random
import sys
import threading

HEADER = "Thread,Time,Action,Pointer,Size,Stream"
DEFAULT_MAX_ENTRIES = 4_000_000

# ---------------------------------------------------------------------------
# Trace conversion (pure Python: no torch needed)
# ---------------------------------------------------------------------------


def format_time_us(time_us):
    """Microseconds since the epoch -> 'HH:MM:SS.ffffff' (UTC time of day)."""
    t = int(time_us) % 86_400_000_000
    sec, us = divmod(t, 1_000_000)
    h, rem = divmod(sec, 3600)
    m, s = divmod(rem, 60)
    return "%02d:%02d:%02d.%06d" % (h, m, s, us)


def format_stream(stream):
    return "0" if int(stream) == 0 else hex(int(stream))


class Conversion:
    """Result of converting recorder entries: rows plus counters."""

    def __init__(self):
        self.rows = []  # (thread, time_str, action, ptr_hex, size, stream_hex)
        self.events = 0  # recorder entries (all actions except 'snapshot')
        self.action_counts = {}
        self.allocations = 0
        self.frees = 0
        self.dropped_frees_before_recording = 0
        self.dropped_free_bytes_before_recording = 0
        self.double_allocations = 0
        self.size_mismatches = 0
        self.peak_live_requested = 0
        self.live_at_end = 0
        self.live_bytes_at_end = 0
        self.streams = []  # stream handles in order of first appearance

    def stats(self):
        return {
            "events": self.events,
            "rows": len(self.rows),
            "allocations": self.allocations,
            "frees": self.frees,
            "peak_live_requested": self.peak_live_requested,
            "live_at_end": self.live_at_end,
            "live_bytes_at_end": self.live_bytes_at_end,
            "dropped_frees_before_recording": self.dropped_frees_before_recording,
            "dropped_free_bytes_before_recording":
                self.dropped_free_bytes_before_recording,
            "double_allocations": self.double_allocations,
            "size_mismatches": self.size_mismatches,
            "streams": len(self.streams),
            "action_counts": dict(sorted(self.action_counts.items())),
        }


def convert_entries(entries):
    """Turn memory-history trace entries (dicts with action, addr, size,
    stream, time_us) into logging_resource_adaptor rows.

    alloc -> allocate; free_completed -> free (only for blocks allocated while
    recording; others are dropped and counted). A free row carries the size
    of its allocate row; a differing recorder size is counted as a mismatch.
    """
    conv = Conversion()
    live = {}  # addr -> (size, stream)
    ordinals = {}
    cur = 0
    for e in entries:
        action = e["action"]
        if action == "snapshot":
            continue
        conv.events += 1
        conv.action_counts[action] = conv.action_counts.get(action, 0) + 1
        if action not in ("alloc", "free_completed"):
            continue
        addr = int(e["addr"])
        size = int(e["size"])
        stream = int(e["stream"])
        if action == "alloc":
            if addr in live:  # a free we never saw (should not happen)
                conv.double_allocations += 1
                cur -= live[addr][0]
            live[addr] = (size, stream)
            cur += size
            if cur > conv.peak_live_requested:
                conv.peak_live_requested = cur
            conv.allocations += 1
            out_action = "allocate"
        else:
            if addr not in live:
                conv.dropped_frees_before_recording += 1
                conv.dropped_free_bytes_before_recording += size
                continue
            asize, astream = live.pop(addr)
            if asize != size:
                conv.size_mismatches += 1
                size = asize
            stream = astream
            cur -= size
            conv.frees += 1
            out_action = "free"
        if stream not in ordinals:
            ordinals[stream] = len(ordinals)
            conv.streams.append(stream)
        conv.rows.append((ordinals[stream], format_time_us(e.get("time_us") or 0),
                          out_action, hex(addr), size, format_stream(stream)))
    conv.live_at_end = len(live)
    conv.live_bytes_at_end = cur
    return conv


def open_text_out(path):
    if path.endswith(".gz"):
        raw = gzip.GzipFile(path, mode="wb", compresslevel=9, mtime=0)
        return io.TextIOWrapper(raw, encoding="ascii", newline="")
    return open(path, "w", encoding="ascii", newline="")


def write_rows(rows, path):
    with open_text_out(path) as f:
        f.write(HEADER + "\n")
        for r in rows:
            f.write("%d,%s,%s,%s,%d,%s\n" % r)


def open_text_in(path):
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="ascii")
    return open(path, "r", encoding="ascii")


def validate_file(path):
    """Check a trace file: exact header, six fields, hex pointers and streams,
    HH:MM:SS.ffffff times, every free matching a live allocate of the same
    size and stream, Thread consistent with Stream. Returns a dict; 'errors'
    lists the first problems found."""
    import re
    time_re = re.compile(r"^\d\d:\d\d:\d\d\.\d{6}$")
    hex_re = re.compile(r"^0x[0-9a-f]+$")
    errors = []
    live = {}
    thread_of = {}
    cur = peak = 0
    n = na = nf = 0
    with open_text_in(path) as f:
        header = f.readline().rstrip("\n")
        if header != HEADER:
            errors.append("header %r" % header)
        for lineno, line in enumerate(f, start=2):
            n += 1
            fields = line.rstrip("\n").split(",")
            if len(fields) != 6:
                errors.append("line %d: %d fields" % (lineno, len(fields)))
                continue
            th, tm, action, ptr, size, stream = fields
            if not th.isdigit() or not size.isdigit() or not time_re.match(tm):
                errors.append("line %d: bad thread/size/time" % lineno)
                continue
            if not hex_re.match(ptr):
                errors.append("line %d: pointer %r" % (lineno, ptr))
            if stream != "0" and not hex_re.match(stream):
                errors.append("line %d: stream %r" % (lineno, stream))
            if thread_of.setdefault(stream, th) != th:
                errors.append("line %d: stream %s on threads %s and %s"
                              % (lineno, stream, thread_of[stream], th))
            size = int(size)
            if action == "allocate":
                na += 1
                if ptr in live:
                    errors.append("line %d: %s allocated twice" % (lineno, ptr))
                live[ptr] = (size, stream)
                cur += size
                peak = max(peak, cur)
            elif action == "free":
                nf += 1
                if live.get(ptr) != (size, stream):
                    errors.append("line %d: free %s %d %s matches no live "
                                  "allocate (%r)" % (lineno, ptr, size, stream,
                                                     live.get(ptr)))
                else:
                    del live[ptr]
                    cur -= size
            else:
                errors.append("line %d: action %r" % (lineno, action))
            if len(errors) > 20:
                break
    threads = sorted(set(int(t) for t in thread_of.values()))
    if threads != list(range(len(threads))):
        errors.append("thread ordinals %r not 0..n-1" % threads)
    return {"file": path, "rows": n, "allocations": na, "frees": nf,
            "peak_live_requested": peak, "live_at_end": len(live),
            "threads": len(threads), "errors": errors}


# ---------------------------------------------------------------------------
# Recording (needs torch with CUDA)
# ---------------------------------------------------------------------------


class Capture:
    """What record_allocations() returns."""

    def __init__(self, conv, result, torch_peak_allocated, torch_peak_reserved,
                 max_entries, n_entries, meta, entries=None):
        self.conversion = conv
        self.rows = conv.rows
        self.result = result
        self.torch_peak_allocated = torch_peak_allocated
        self.torch_peak_reserved = torch_peak_reserved
        self.max_entries = max_entries
        self.meta = meta
        self.entries = entries  # raw recorder entries, when asked to keep them
        # The recorder is a ring buffer: a full one has lost its oldest events.
        self.wrapped = n_entries >= max_entries

    def write_csv(self, path):
        write_rows(self.rows, path)

    def summary(self, workload, **extra):
        """Summary dict: the keys of data/traces/summary.json first, then
        details."""
        d = {
            "workload": workload,
            "events": self.conversion.events,
            "torch_peak_allocated": self.torch_peak_allocated,
            "torch_peak_reserved": self.torch_peak_reserved,
            "peak_live_requested": self.conversion.peak_live_requested,
        }
        for k, v in self.conversion.stats().items():
            d.setdefault(k, v)
        d["ring_buffer_wrapped"] = self.wrapped
        d.update(self.meta)
        d.update(extra)
        return d


def _start_recording(torch, max_entries):
    rec = torch.cuda.memory._record_memory_history
    try:
        rec(enabled="all", context=None, stacks="python",
            max_entries=max_entries, clear_history=True)
    except TypeError:  # older PyTorch without clear_history
        rec(enabled="all", context=None, stacks="python",
            max_entries=max_entries)


def _stop_recording(torch):
    torch.cuda.memory._record_memory_history(enabled=None)


def record_allocations(fn, *args, device=None, max_entries=DEFAULT_MAX_ENTRIES,
                       keep_entries=False, **kwargs):
    """Run fn(*args, **kwargs) with PyTorch's memory-history recorder on and
    return a Capture (rows, counters, torch peak stats, fn's result).

    The caching allocator's cache is emptied and its peak statistics reset
    before recording starts, so the peaks belong to this call. Blocks that
    were allocated before the call and freed during it are dropped from the
    trace (counted in dropped_frees_before_recording).
    """
    import torch
    dev = torch.device(device if device is not None else "cuda")
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.synchronize(dev)
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    _start_recording(torch, max_entries)
    try:
        with torch.cuda.device(dev):
            result = fn(*args, **kwargs)
        torch.cuda.synchronize(dev)
        gc.collect()
        torch.cuda.synchronize(dev)
        snap = torch.cuda.memory._snapshot()
    finally:
        _stop_recording(torch)  # this also clears the recorder's buffer
    traces = snap["device_traces"]
    entries = traces[dev.index] if dev.index < len(traces) else []
    conv = convert_entries(entries)
    meta = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(dev),
    }
    return Capture(conv, result, int(torch.cuda.max_memory_allocated(dev)),
                   int(torch.cuda.max_memory_reserved(dev)), max_entries,
                   len(entries), meta,
                   [{k: e.get(k) for k in ("action", "addr", "size", "stream")}
                    for e in entries] if keep_entries else None)


def check_size_semantics(device=None):
    """Allocate tensors of known byte counts while recording and compare with
    the recorder's sizes. Returns a dict with 'semantics': 'requested' when
    alloc and free_completed entries carry the requested sizes."""
    import torch
    sizes = [1000, 1728, 4097, 1_048_577, 3_000_003]

    def work():
        ts = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in sizes]
        ptrs = [t.data_ptr() for t in ts]
        del ts
        return ptrs

    cap = record_allocations(work, device=device, keep_entries=True)
    by_ptr = {}
    for e in cap.entries:  # raw recorder sizes, before any conversion
        if e["action"] in ("alloc", "free_completed"):
            by_ptr.setdefault(int(e["addr"]), []).append(
                ("allocate" if e["action"] == "alloc" else "free", int(e["size"])))
    seen = []
    for n, p in zip(sizes, cap.result):
        seen.append({"requested": n, "recorded": by_ptr.get(p, [])})
    ok = all(s["recorded"] == [("allocate", s["requested"]),
                               ("free", s["requested"])] for s in seen)
    rounded = all(len(s["recorded"]) == 2 and s["recorded"][0][1] > s["requested"]
                  for s in seen)
    return {"semantics": "requested" if ok else ("rounded" if rounded else "unclear"),
            "size_mismatches": cap.conversion.size_mismatches,
            "checks": seen, "torch": cap.meta["torch"], "gpu": cap.meta["gpu"]}


# ---------------------------------------------------------------------------
# Built-in workloads. Each builder does its CPU-side setup (model with
# untrained weights, synthetic camera frames) and returns a callable that
# runs the GPU part: model upload, inference, model unload.
# ---------------------------------------------------------------------------


def _frame_pool(torch, gen, width, height, count, pin):
    """Synthetic decoded frames: uint8 HWC, as a video decoder hands them."""
    frames = []
    for _ in range(count):
        f = torch.randint(0, 256, (height, width, 3), dtype=torch.uint8,
                          generator=gen)
        frames.append(f.pin_memory() if pin else f)
    return frames


def _stream_ctx(torch, stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def _run_threads(torch, device, n, body):
    """Run body(i, stream) on n Python threads, each with its own CUDA stream
    (no stream on CPU). Re-raises the first exception."""
    is_cuda = torch.device(device).type == "cuda"
    streams = [torch.cuda.Stream(device=device) if is_cuda else None
               for _ in range(n)]
    errors = []

    def target(i):
        try:
            with _stream_ctx(torch, streams[i]), torch.inference_mode():
                body(i, streams[i])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if is_cuda:
        torch.cuda.synchronize(device)
    if errors:
        raise errors[0]


def build_mobilenet_crops(p, device):
    """MobileNetV3-Large classifying object crops: for each request, one
    decoded camera frame (720p or 1080p, uint8) is uploaded, 1..max_batch
    boxes are cropped and resized to 224x224 on the GPU (roi_align),
    normalized, classified; top-5 goes back to the host."""
    import torch
    import torchvision
    from torchvision.ops import roi_align
    gen = torch.Generator().manual_seed(p.seed)
    model = torchvision.models.mobilenet_v3_large(weights=None).eval()
    is_cuda = torch.device(device).type == "cuda"
    res = [(1280, 720), (1920, 1080)]
    pools = {r: _frame_pool(torch, gen, r[0], r[1], 3, is_cuda) for r in res}
    max_batch = p.max_batch or 16

    def run():
        rng = random.Random(p.seed)
        model.to(device)
        mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1)
        with torch.inference_mode():
            for it in range(p.iterations):
                w, h = res[rng.randrange(len(res))]
                frame = pools[(w, h)][it % 3].to(device, non_blocking=True)
                img = frame.permute(2, 0, 1).contiguous().unsqueeze(0).float()
                del frame
                boxes = []
                for _ in range(rng.randint(1, max_batch)):
                    bw = rng.randint(32, min(w, 512))
                    bh = rng.randint(32, min(h, 512))
                    x0 = rng.uniform(0, w - bw)
                    y0 = rng.uniform(0, h - bh)
                    boxes.append([0.0, x0, y0, x0 + bw, y0 + bh])
                boxes = torch.tensor(boxes, dtype=torch.float32).to(
                    device, non_blocking=True)
                crops = roi_align(img, boxes, output_size=(224, 224),
                                  spatial_scale=1.0, sampling_ratio=2,
                                  aligned=True)
                del img, boxes
                crops = crops.div_(255.0).sub_(mean).div_(std)
                logits = model(crops)
                del crops
                top = logits.softmax(dim=1).topk(5, dim=1)
                del logits
                top.values.cpu(), top.indices.cpu()
                del top
        del mean, std
        model.to("cpu")

    return run


def _detection_cameras(p):
    # (width, height, max frames per batch) for thread i, cycling.
    cams = [(640, 360, 4), (1280, 720, 2)]
    return [cams[i % len(cams)] for i in range(p.threads)]


def _build_detector_streams(p, device, model):
    import torch
    gen = torch.Generator().manual_seed(p.seed)
    is_cuda = torch.device(device).type == "cuda"
    cams = _detection_cameras(p)
    pools = [_frame_pool(torch, gen, w, h, 3, is_cuda) for (w, h, _) in cams]

    def body(i, stream):
        rng = random.Random(p.seed * 1000 + i)
        w, h, maxb = cams[i]
        if p.max_batch:
            maxb = p.max_batch
        for it in range(p.iterations):
            imgs = []
            for j in range(rng.randint(1, maxb)):
                f = pools[i][(it + j) % len(pools[i])].to(device, non_blocking=True)
                imgs.append(f.permute(2, 0, 1).contiguous().float().div_(255.0))
                del f
            out = model(imgs)
            del imgs
            for o in out:
                o["boxes"].cpu(), o["scores"].cpu(), o["labels"].cpu()
            del out

    def run():
        model.to(device)
        if is_cuda:
            torch.cuda.synchronize(device)  # weights ready before other streams
        _run_threads(torch, device, p.threads, body)
        model.to("cpu")

    return run


def build_frcnn_streams(p, device):
    """Faster R-CNN MobileNetV3-Large-FPN detection, torchvision's default
    transform (short side 800, long side at most 1333); `threads` Python
    threads, each with its own CUDA stream and camera: thread 0 a 640x360
    camera in batches of 1-4 frames, thread 1 a 1280x720 camera in batches
    of 1-2 (then cycling). The weights are shared and uploaded on the default
    stream."""
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn
    model = fasterrcnn_mobilenet_v3_large_fpn(
        weights=None, weights_backbone=None).eval()
    return _build_detector_streams(p, device, model)


def build_ssdlite_streams(p, device):
    """SSDlite320-MobileNetV3-Large detection (320x320 model input), cameras
    and threads as frcnn_mbv3_streams."""
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large
    model = ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None).eval()
    return _build_detector_streams(p, device, model)


WORKLOADS = {
    "mobilenet_crops": (
        build_mobilenet_crops, {"iterations": 100, "threads": 1},
        "MobileNetV3-Large classification of 1-16 object crops (roi_align to "
        "224x224) per 720p/1080p frame, one stream"),
    "frcnn_mbv3_streams": (
        build_frcnn_streams, {"iterations": 20, "threads": 2},
        "Faster R-CNN MobileNetV3-Large-FPN, one thread+CUDA stream per camera "
        "(640x360 batch 1-4, 1280x720 batch 1-2)"),
    "ssdlite_streams": (
        build_ssdlite_streams, {"iterations": 40, "threads": 2},
        "SSDlite320-MobileNetV3-Large, one thread+CUDA stream per camera "
        "(640x360 batch 1-4, 1280x720 batch 1-2)"),
}


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def _parse(argv):
    ap = argparse.ArgumentParser(
        description="Record a PyTorch inference workload's GPU allocations as "
                    "an RMM logging_resource_adaptor CSV trace.")
    ap.add_argument("--list", action="store_true", help="list the workloads")
    ap.add_argument("--workload", choices=sorted(WORKLOADS))
    ap.add_argument("--out", help="trace path (.csv, or .csv.gz to compress)")
    ap.add_argument("--iterations", type=int,
                    help="requests (per thread for multi-stream workloads)")
    ap.add_argument("--threads", type=int,
                    help="threads/streams for multi-stream workloads")
    ap.add_argument("--max-batch", type=int, default=0,
                    help="largest batch (0: the workload's own)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--max-entries", type=int, default=DEFAULT_MAX_ENTRIES,
                    help="recorder ring-buffer size")
    ap.add_argument("--name", help="workload name written in the summary")
    ap.add_argument("--summary-json",
                    help="append the summary as one JSON line to this file")
    ap.add_argument("--check-sizes", action="store_true",
                    help="check that the recorder gives requested sizes")
    ap.add_argument("--dry-run", action="store_true",
                    help="run the workload without recording (works on cpu)")
    ap.add_argument("--validate", nargs="+", metavar="TRACE",
                    help="check trace files and exit")
    return ap.parse_args(argv)


def _append_json(path, d):
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(d, sort_keys=False) + "\n")


def main(argv=None):
    a = _parse(argv)
    if a.list:
        for name, (_, defaults, desc) in sorted(WORKLOADS.items()):
            print("%-20s %s (defaults: %s)" % (name, desc, defaults))
        return 0
    if a.validate:
        bad = 0
        for path in a.validate:
            r = validate_file(path)
            bad += bool(r["errors"])
            print(json.dumps(r))
        return 1 if bad else 0
    status = 0
    if a.check_sizes:
        r = check_size_semantics(a.device)
        print("size check: %s" % json.dumps(r))
        if a.summary_json:
            _append_json(a.summary_json, {"size_check": r})
        if r["semantics"] != "requested":
            print("WARNING: the recorder does not give requested sizes",
                  file=sys.stderr)
            status = 2
    if not a.workload:
        if not a.check_sizes:
            print("nothing to do: give --workload, --list, --check-sizes or "
                  "--validate", file=sys.stderr)
            return 2
        return status
    builder, defaults, _ = WORKLOADS[a.workload]
    p = argparse.Namespace(
        iterations=a.iterations if a.iterations is not None else defaults["iterations"],
        threads=a.threads if a.threads is not None else defaults["threads"],
        max_batch=a.max_batch, seed=a.seed)
    random.seed(a.seed)
    import torch
    torch.manual_seed(a.seed)
    run = builder(p, a.device)
    if a.dry_run:
        run()
        print("dry run of %s on %s done" % (a.workload, a.device))
        return status
    if not a.out:
        print("--out is required", file=sys.stderr)
        return 2
    cap = record_allocations(run, device=a.device, max_entries=a.max_entries)
    cap.write_csv(a.out)
    s = cap.summary(a.name or a.workload, source_workload=a.workload,
                    iterations=p.iterations, threads=p.threads,
                    max_batch=p.max_batch, seed=p.seed, out=a.out)
    print("workload %s -> %s" % (s["workload"], a.out))
    print("  recorder events      %d (%s)" % (s["events"], s["action_counts"]))
    print("  rows                 %d (%d allocate, %d free), %d stream(s)"
          % (s["rows"], s["allocations"], s["frees"], s["streams"]))
    print("  peak live requested  %d bytes" % s["peak_live_requested"])
    print("  torch max allocated  %d bytes" % s["torch_peak_allocated"])
    print("  torch max reserved   %d bytes" % s["torch_peak_reserved"])
    print("  live at end          %d blocks, %d bytes"
          % (s["live_at_end"], s["live_bytes_at_end"]))
    print("  dropped frees of blocks allocated before recording: %d (%d bytes)"
          % (s["dropped_frees_before_recording"],
             s["dropped_free_bytes_before_recording"]))
    if s["double_allocations"] or s["size_mismatches"] or s["ring_buffer_wrapped"]:
        print("WARNING: double allocations %d, size mismatches %d, ring buffer "
              "wrapped %s" % (s["double_allocations"], s["size_mismatches"],
                              s["ring_buffer_wrapped"]), file=sys.stderr)
        status = status or 3
    if a.summary_json:
        _append_json(a.summary_json, s)
    return status


if __name__ == "__main__":
    sys.exit(main())
