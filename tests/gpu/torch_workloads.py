#!/usr/bin/env python3
"""PyTorch inference under PyTorch's own caching allocator and under vramkit.

tests/gpu/torch_workloads.py runs torchvision models with untrained weights
(weights=None, weights_backbone=None), fp32, under torch.inference_mode(), on
one CUDA device, either with PyTorch's caching allocator (`--allocator torch`)
or with every CUDA allocation served by libvramkit-core.so through
torch.cuda.memory.CUDAPluggableAllocator (`--allocator vramkit --lib PATH`):

    alloc = torch.cuda.memory.CUDAPluggableAllocator(
        lib, "vram_torch_malloc", "vram_torch_free")
    torch.cuda.memory.change_current_allocator(alloc)

Workloads (each a fixed pseudo-random schedule drawn from --seed, so both
allocators see the same requests in the same order):

  resnet     ResNet-50 classification, batches 1/4/8/16/32 x square inputs
             224/320/448; top-5 back to the host each request.
  deeplab    DeepLabV3 segmentation (MobileNetV3-Large backbone as in the
             deeplab_dynamic trace; --deeplab-backbone resnet50 for the heavy
             one), frames of 360p/480p/720p/1080p, batch 1-2; the class mask
             back to the host each request.
  retinanet  RetinaNet-ResNet50-FPN detection on --threads (4) Python threads,
             each with its own torch.cuda.Stream and camera (1280x720,
             1920x1080, 640x480, 1024x768, cycling), batch 1-2; boxes, scores
             and labels back to the host.

Inputs are synthetic decoded frames (uint8 HWC in pinned host memory, drawn
from --seed), uploaded and normalized on the GPU each request, as a video
service does. Warm-up (every distinct shape once; --warmup requests per
thread for retinanet) is excluded from the throughput and included in the
peak memory. torch.backends.cudnn.benchmark is left at its default.

One run prints one JSON line on stdout (everything else goes to stderr):
workload, allocator, iterations, images, seconds, throughput (images/s, timed
between torch.cuda.synchronize() calls after warm-up), peak_held_bytes (torch:
torch.cuda.max_memory_reserved(); vramkit: its pool's peak_reserved_bytes),
peak_live_bytes (torch: torch.cuda.max_memory_allocated(), block sizes rounded
to 512 B; vramkit: peak_live_bytes, as requested), the context's stack limit
afterwards (cuCtxGetLimit), the device memory in use afterwards
(cudaMemGetInfo: allocator, context and everything else), and more.

Usage:

    # one (workload, allocator) pair in this process
    torch_workloads.py --workload resnet --allocator torch
    torch_workloads.py --workload resnet --allocator vramkit --lib build/libvramkit-core.so

    # every workload under both allocators, one process each (an allocator
    # cannot be switched back), alternating which allocator goes first;
    # writes the Markdown table and FILE.jsonl with the raw lines next to it
    torch_workloads.py --all --lib build/libvramkit-core.so --out tests/gpu/out/torch.md

    # the table again from raw lines
    torch_workloads.py --report tests/gpu/out/torch.jsonl --out tests/gpu/out/torch.md

Targets, printed PASS/FAIL per workload in the table: vramkit's peak held at
most 0.75 of PyTorch's; vramkit's peak held at most 1.10 of its peak live;
vramkit's throughput at least 0.95 of PyTorch's. The exit status of --all is
0 unless a run crashed (no JSON line, or a non-zero exit status).
"""

import argparse
import ctypes
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import threading
import time

WORKLOADS = ("resnet", "deeplab", "retinanet")
DEFAULT_ITERATIONS = {"resnet": 300, "deeplab": 200, "retinanet": 40}

RESNET_BATCHES = (1, 4, 8, 16, 32)
RESNET_SIZES = (224, 320, 448)
DEEPLAB_FRAMES = ((640, 360), (854, 480), (1280, 720), (1920, 1080))
RETINANET_CAMERAS = ((1280, 720), (1920, 1080), (640, 480), (1024, 768))
FRAMES_PER_SHAPE = 3

TARGET_HELD_RATIO = 0.75    # vramkit peak held / torch peak held, at most
TARGET_HELD_LIVE = 1.10     # vramkit peak held / vramkit peak live, at most
TARGET_THROUGHPUT = 0.95    # vramkit images/s / torch images/s, at least

MiB = 1024.0 * 1024.0


def log(msg):
    print("torch_workloads: %s" % msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# One run: one workload under one allocator, in this process
# ---------------------------------------------------------------------------


def load_vramkit(path):
    """Load libvramkit-core.so with ctypes and declare what we call."""
    lib = ctypes.CDLL(path)
    lib.vram_torch_stats_json.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    lib.vram_torch_stats_json.restype = ctypes.c_int
    lib.vram_last_error.argtypes = []
    lib.vram_last_error.restype = ctypes.c_char_p
    for name in ("vram_torch_malloc", "vram_torch_free"):
        getattr(lib, name)  # AttributeError when the library lacks it
    return lib


def vramkit_stats(lib, device):
    buf = ctypes.create_string_buffer(16384)
    rc = lib.vram_torch_stats_json(device, buf, len(buf))
    if rc != 0:
        raise RuntimeError("vram_torch_stats_json: %s" % lib.vram_last_error().decode())
    return json.loads(buf.value.decode())


def stack_limit_bytes():
    """CU_LIMIT_STACK_SIZE of the calling thread's current context, or None."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_size_t(0)
        if cu.cuCtxGetLimit(ctypes.byref(v), 0) == 0:  # CU_LIMIT_STACK_SIZE = 0
            return int(v.value)
    except OSError:
        pass
    return None


def frame_pool(torch, gen, width, height, count):
    """Synthetic decoded frames: uint8 HWC in pinned memory."""
    return [torch.randint(0, 256, (height, width, 3), dtype=torch.uint8,
                          generator=gen).pin_memory() for _ in range(count)]


class Normalizer:
    """uint8 NHWC on the device -> normalized float NCHW (ImageNet mean/std)."""

    def __init__(self, torch, dev):
        self.mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1)

    def __call__(self, x):
        # contiguous NCHW (as a decoder's output would be converted), not channels-last
        return x.permute(0, 3, 1, 2).contiguous().float().div_(255.0).sub_(self.mean) \
            .div_(self.std)


def upload_batch(torch, frames, first, batch, dev):
    imgs = [frames[(first + j) % len(frames)].to(dev, non_blocking=True)
            for j in range(batch)]
    x = torch.stack(imgs)
    del imgs
    return x


class ResNetWorkload:
    name = "resnet"

    def __init__(self, torch, torchvision, a, dev):
        self.torch, self.dev = torch, dev
        self.model = torchvision.models.resnet50(weights=None).eval()
        gen = torch.Generator().manual_seed(a.seed)
        self.frames = {s: frame_pool(torch, gen, s, s, FRAMES_PER_SHAPE) for s in RESNET_SIZES}
        rng = random.Random(a.seed)
        self.schedule = [(rng.choice(RESNET_BATCHES), rng.choice(RESNET_SIZES))
                         for _ in range(a.iterations)]
        self.warmup_schedule = sorted(set((b, s) for b in RESNET_BATCHES for s in RESNET_SIZES))

    def to_device(self):
        self.model.to(self.dev)
        self.norm = Normalizer(self.torch, self.dev)

    def request(self, it, batch, size):
        x = self.norm(upload_batch(self.torch, self.frames[size], it, batch, self.dev))
        logits = self.model(x)
        del x
        top = logits.softmax(dim=1).topk(5, dim=1)
        del logits
        top.indices.cpu()
        return batch

    def run(self, schedule):
        return sum(self.request(it, b, s) for it, (b, s) in enumerate(schedule))


class DeepLabWorkload:
    name = "deeplab"

    def __init__(self, torch, torchvision, a, dev):
        self.torch, self.dev = torch, dev
        seg = torchvision.models.segmentation
        if a.deeplab_backbone == "resnet50":
            self.model = seg.deeplabv3_resnet50(weights=None, weights_backbone=None).eval()
        else:
            self.model = seg.deeplabv3_mobilenet_v3_large(
                weights=None, weights_backbone=None).eval()
        gen = torch.Generator().manual_seed(a.seed)
        self.frames = {wh: frame_pool(torch, gen, wh[0], wh[1], FRAMES_PER_SHAPE)
                       for wh in DEEPLAB_FRAMES}
        rng = random.Random(a.seed)
        self.schedule = [(rng.randint(1, 2), rng.choice(DEEPLAB_FRAMES))
                         for _ in range(a.iterations)]
        self.warmup_schedule = [(b, wh) for wh in DEEPLAB_FRAMES for b in (1, 2)]

    def to_device(self):
        self.model.to(self.dev)
        self.norm = Normalizer(self.torch, self.dev)

    def request(self, it, batch, wh):
        x = self.norm(upload_batch(self.torch, self.frames[wh], it, batch, self.dev))
        out = self.model(x)["out"]
        del x
        mask = out.argmax(dim=1).to(self.torch.uint8)
        del out
        mask.cpu()
        return batch

    def run(self, schedule):
        return sum(self.request(it, b, wh) for it, (b, wh) in enumerate(schedule))


class RetinaNetWorkload:
    """Threads share the model (uploaded on the default stream before they
    start); each has its own stream, camera and schedule."""
    name = "retinanet"

    def __init__(self, torch, torchvision, a, dev):
        from torchvision.models.detection import retinanet_resnet50_fpn
        self.torch, self.dev, self.threads = torch, dev, a.threads
        self.model = retinanet_resnet50_fpn(weights=None, weights_backbone=None).eval()
        gen = torch.Generator().manual_seed(a.seed)
        self.cams = [RETINANET_CAMERAS[i % len(RETINANET_CAMERAS)] for i in range(a.threads)]
        self.frames = [frame_pool(torch, gen, w, h, FRAMES_PER_SHAPE) for (w, h) in self.cams]
        self.schedules = []
        for i in range(a.threads):
            rng = random.Random(a.seed * 1000 + i)
            self.schedules.append([rng.randint(1, 2) for _ in range(a.warmup + a.iterations)])
        self.warmup = a.warmup

    def to_device(self):
        self.model.to(self.dev)

    def request(self, i, it, batch):
        imgs = [self.frames[i][(it + j) % FRAMES_PER_SHAPE].to(self.dev, non_blocking=True)
                .permute(2, 0, 1).contiguous().float().div_(255.0) for j in range(batch)]
        out = self.model(imgs)
        del imgs
        for o in out:
            o["boxes"].cpu(), o["scores"].cpu(), o["labels"].cpu()
        del out
        return batch

    def run_threads(self):
        """Warm up on every thread, then time all threads together. Returns
        (warm-up images, timed images, seconds)."""
        torch, n = self.torch, self.threads
        streams = [torch.cuda.Stream(device=self.dev) for _ in range(n)]
        ready = threading.Barrier(n + 1)
        counts = [[0, 0] for _ in range(n)]
        errors = []

        def body(i):
            try:
                torch.cuda.set_device(self.dev)
                with torch.cuda.stream(streams[i]), torch.inference_mode():
                    sched = self.schedules[i]
                    for it in range(self.warmup):
                        counts[i][0] += self.request(i, it, sched[it])
                    streams[i].synchronize()
                    ready.wait()
                    for it in range(self.warmup, len(sched)):
                        counts[i][1] += self.request(i, it, sched[it])
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)
                ready.abort()

        threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        try:
            ready.wait()
        except threading.BrokenBarrierError:
            pass
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        torch.cuda.synchronize(self.dev)
        seconds = time.perf_counter() - t0
        if errors:
            raise errors[0]
        return sum(c[0] for c in counts), sum(c[1] for c in counts), seconds


def run_one(a):
    """Run a.workload under a.allocator; return the result dict."""
    t_start = time.perf_counter()
    import torch
    import torchvision
    if not torch.cuda.is_available():  # does not initialize the allocator
        raise RuntimeError("no CUDA device visible to PyTorch")
    lib = None
    if a.allocator == "vramkit":
        if not a.lib:
            raise RuntimeError("--allocator vramkit needs --lib PATH/libvramkit-core.so")
        path = os.path.abspath(a.lib)
        lib = load_vramkit(path)
        alloc = torch.cuda.memory.CUDAPluggableAllocator(
            path, "vram_torch_malloc", "vram_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)
    random.seed(a.seed)
    torch.manual_seed(a.seed)  # the same untrained weights under both allocators
    dev = torch.device("cuda", a.device)
    torch.cuda.set_device(dev)

    t0 = time.perf_counter()
    cls = {"resnet": ResNetWorkload, "deeplab": DeepLabWorkload,
           "retinanet": RetinaNetWorkload}[a.workload]
    w = cls(torch, torchvision, a, dev)
    w.to_device()
    torch.cuda.synchronize(dev)
    build_s = time.perf_counter() - t0

    if a.workload == "retinanet":
        warm_images, images, seconds = w.run_threads()
        iterations = a.iterations * a.threads
    else:
        with torch.inference_mode():
            warm_images = w.run(w.warmup_schedule)
            torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            images = w.run(w.schedule)
            torch.cuda.synchronize(dev)
            seconds = time.perf_counter() - t0
        iterations = a.iterations

    r = {
        "workload": a.workload,
        "allocator": a.allocator,
        "iterations": iterations,
        "images": images,
        "warmup_images": warm_images,
        "seconds": round(seconds, 4),
        "throughput": images / seconds if seconds > 0 else 0.0,
    }
    if a.allocator == "torch":
        r["peak_held_bytes"] = int(torch.cuda.max_memory_reserved(dev))
        r["peak_live_bytes"] = int(torch.cuda.max_memory_allocated(dev))
        r["held_bytes_end"] = int(torch.cuda.memory_reserved(dev))
    else:
        s = vramkit_stats(lib, a.device)
        if not s.get("ready"):
            raise RuntimeError("vramkit served nothing: %s" % s.get("error"))
        r["peak_held_bytes"] = int(s["peak_reserved_bytes"])
        r["peak_live_bytes"] = int(s["peak_live_bytes"])
        r["held_bytes_end"] = int(s["reserved_bytes"])
        r["vramkit"] = s
        try:  # PyTorch's own counters under a pluggable allocator
            torch.cuda.max_memory_reserved(dev)
            r["torch_counters"] = "available"
        except Exception as exc:  # noqa: BLE001 - recorded, not fatal
            r["torch_counters"] = "unavailable: %s" % str(exc).splitlines()[0][:200]
        r["vram_env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("VRAM_")}
    r["held_over_live"] = (r["peak_held_bytes"] / r["peak_live_bytes"]
                           if r["peak_live_bytes"] else None)
    try:
        free_b, total_b = torch.cuda.mem_get_info(dev)
        r["device_used_bytes"] = int(total_b - free_b)
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal
        r["device_used_bytes"] = None
        r["device_used_error"] = str(exc).splitlines()[0][:200]
    r["stack_limit_bytes"] = stack_limit_bytes()
    r.update({
        "seed": a.seed,
        "threads": a.threads if a.workload == "retinanet" else 1,
        "deeplab_backbone": a.deeplab_backbone if a.workload == "deeplab" else None,
        "model_build_s": round(build_s, 3),
        "wall_s": round(time.perf_counter() - t_start, 3),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(dev),
    })
    return r


# ---------------------------------------------------------------------------
# --all: every workload under both allocators, one process each
# ---------------------------------------------------------------------------


def child_command(a, workload, allocator, lib):
    cmd = [sys.executable, os.path.abspath(__file__), "--workload", workload,
           "--allocator", allocator, "--seed", str(a.seed), "--device", str(a.device),
           "--threads", str(a.threads), "--warmup", str(a.warmup),
           "--deeplab-backbone", a.deeplab_backbone]
    it = getattr(a, "iterations_" + workload)
    if it is None:
        it = a.iterations  # --iterations with --all: every workload
    if it is not None:
        cmd += ["--iterations", str(it)]
    if allocator == "vramkit":
        cmd += ["--lib", lib]
    return cmd


def run_child(a, workload, allocator, lib):
    cmd = child_command(a, workload, allocator, lib)
    log("running %s under %s" % (workload, allocator))
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True,
                           timeout=a.timeout)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rc = "timeout after %d s" % a.timeout
    rec = None
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                rec = json.loads(line)
                break
            except ValueError:
                continue
    if rec is None:
        rec = {"workload": workload, "allocator": allocator,
               "error": "no result line (exit status %s)" % rc}
    if rc != 0:
        rec["crashed"] = True
        rec["exit_status"] = rc
    log("%s under %s: %s in %.1f s" % (
        workload, allocator, "crashed (%s)" % rc if rc != 0 else "done",
        time.perf_counter() - t0))
    return rec


def run_all(a):
    if not a.lib or not a.out:
        print("--all needs --lib PATH/libvramkit-core.so and --out FILE.md", file=sys.stderr)
        return 2
    lib = os.path.abspath(a.lib)
    try:
        load_vramkit(lib)  # fail early on a wrong path or an old library
    except (OSError, AttributeError) as exc:
        print("cannot use %s: %s" % (lib, exc), file=sys.stderr)
        return 2
    workloads = [w for w in a.workloads.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS:
            print("unknown workload %r (known: %s)" % (w, ", ".join(WORKLOADS)), file=sys.stderr)
            return 2
    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(out_dir, exist_ok=True)
    jsonl = jsonl_path(a.out)
    records = []
    t0 = time.perf_counter()
    with open(jsonl, "w", encoding="utf-8") as f:
        for i, w in enumerate(workloads):
            for rep in range(a.repeat):
                # Alternate which allocator goes first, against drift in clocks and heat.
                order = ("torch", "vramkit") if (i + rep) % 2 == 0 else ("vramkit", "torch")
                for allocator in order:
                    rec = run_child(a, w, allocator, lib)
                    records.append(rec)
                    f.write(json.dumps(rec, sort_keys=False) + "\n")
                    f.flush()
    meta = {
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "lib": lib,
        "host": platform.node(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "total_s": time.perf_counter() - t0,
    }
    text, passed, total, crashed = make_report(records, meta)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    log("wrote %s and %s" % (a.out, jsonl))
    return 1 if crashed else 0


def jsonl_path(md_path):
    base = md_path[:-3] if md_path.endswith(".md") else md_path
    return base + ".jsonl"


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------


def _mib(v):
    return "%.1f" % (v / MiB) if isinstance(v, (int, float)) else "-"


def _verdict(value, limit, at_most):
    if value is None:
        return "no result"
    ok = value <= limit if at_most else value >= limit
    return "%.3f %s" % (value, "PASS" if ok else "FAIL")


def make_report(records, meta):
    """Markdown: the targets table, a details table, the summary line.
    Returns (text, targets passed, targets counted, runs crashed)."""
    runs = {}
    order = []
    for r in records:
        runs.setdefault((r.get("workload"), r.get("allocator")), []).append(r)
        if r.get("workload") not in order:
            order.append(r.get("workload"))
    # Several runs of a pair (--repeat): the one with the median throughput
    # stands for it; the details table lists every run's.
    by = {}
    for key, rs in runs.items():
        ok = sorted((r for r in rs if "throughput" in r and not r.get("crashed")),
                    key=lambda r: r["throughput"])
        by[key] = ok[(len(ok) - 1) // 2] if ok else rs[-1]
    crashed = sum(1 for r in records if r.get("crashed") or "error" in r)
    passed = total = 0
    any_rec = next((r for r in records if "gpu" in r), {})
    lines = ["# PyTorch inference: PyTorch's caching allocator against vramkit", ""]
    lines.append("GPU %s, torch %s, torchvision %s, CUDA %s; %s on %s; library %s."
                 % (any_rec.get("gpu", "?"), any_rec.get("torch", "?"),
                    any_rec.get("torchvision", "?"), any_rec.get("cuda", "?"),
                    meta.get("date", "?"), meta.get("host", "?"), meta.get("lib", "?")))
    if meta.get("command"):
        lines.append("Command: `%s`%s." % (meta["command"],
                     " (%.0f s in all)" % meta["total_s"] if meta.get("total_s") else ""))
    lines += ["",
              "Peak held: what the allocator held from the driver at its most "
              "(torch: `max_memory_reserved`; vramkit: the pool's `peak_reserved_bytes`). "
              "Peak live: bytes in live tensors at their most (torch: "
              "`max_memory_allocated`, rounded to 512 B blocks; vramkit: as requested). "
              "Both include the weights and the warm-up; throughput excludes the warm-up. "
              "With several runs of a pair, the run with the median throughput stands for it.",
              "",
              "| workload | torch held MiB | vramkit held MiB | held vramkit/torch (<= %.2f) "
              "| torch live MiB | vramkit live MiB | vramkit held/live (<= %.2f) "
              "| torch img/s | vramkit img/s | img/s vramkit/torch (>= %.2f) |"
              % (TARGET_HELD_RATIO, TARGET_HELD_LIVE, TARGET_THROUGHPUT),
              "|---|---:|---:|---|---:|---:|---|---:|---:|---|"]
    for w in order:
        t = by.get((w, "torch"), {})
        v = by.get((w, "vramkit"), {})
        t_ok = "peak_held_bytes" in t and not t.get("crashed")
        v_ok = "peak_held_bytes" in v and not v.get("crashed")
        held_ratio = (v["peak_held_bytes"] / t["peak_held_bytes"]
                      if t_ok and v_ok and t["peak_held_bytes"] else None)
        held_live = v.get("held_over_live") if v_ok else None
        tput = (v["throughput"] / t["throughput"]
                if t_ok and v_ok and t["throughput"] else None)
        cells = [_verdict(held_ratio, TARGET_HELD_RATIO, True),
                 _verdict(held_live, TARGET_HELD_LIVE, True),
                 _verdict(tput, TARGET_THROUGHPUT, False)]
        total += 3
        passed += sum(c.endswith("PASS") for c in cells)
        name = w + ("" if t_ok and v_ok else " (%s)" % ", ".join(
            "%s crashed" % k for k, ok in (("torch", t_ok), ("vramkit", v_ok)) if not ok))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, _mib(t.get("peak_held_bytes")), _mib(v.get("peak_held_bytes")), cells[0],
            _mib(t.get("peak_live_bytes")), _mib(v.get("peak_live_bytes")), cells[1],
            "%.1f" % t["throughput"] if t_ok else "-",
            "%.1f" % v["throughput"] if v_ok else "-", cells[2]))
    lines += ["", "Throughput over every run of a pair: mean, spread (lowest and highest) "
              "and the ratio of the means.", "",
              "| workload | runs | torch img/s mean (spread) | vramkit img/s mean (spread) "
              "| mean vramkit/torch (>= %.2f) |" % TARGET_THROUGHPUT,
              "|---|---:|---:|---:|---|"]
    for w in order:
        stat = {}
        for al in ("torch", "vramkit"):
            xs = [x["throughput"] for x in runs.get((w, al), [])
                  if "throughput" in x and not x.get("crashed")]
            stat[al] = (sum(xs) / len(xs), min(xs), max(xs), len(xs)) if xs else None
        t, v = stat["torch"], stat["vramkit"]
        cell = lambda m: "%.1f (%.1f-%.1f)" % m[:3] if m else "-"
        ratio = v[0] / t[0] if t and v and t[0] else None
        lines.append("| %s | %s | %s | %s | %s |" % (
            w, "%d / %d" % (t[3] if t else 0, v[3] if v else 0), cell(t), cell(v),
            _verdict(ratio, TARGET_THROUGHPUT, False)))
    lines += ["",
              "Details: device memory in use after the run (`cudaMemGetInfo`: allocator, "
              "context and all), the context's stack limit after the run (`cuCtxGetLimit`), "
              "and vramkit's backend, policy, backend calls and waits for the GPU's work "
              "(a stream is waited for before memory it freed goes back to the driver).",
              "",
              "| workload | allocator | iterations | images | seconds | img/s of every run "
              "| torch held/live "
              "| device used MiB | stack limit B | backend | policy | backend calls | waits | note |",
              "|---|---|---:|---:|---:|---|---:|---:|---:|---|---|---:|---:|---|"]
    for w in order:
        for al in ("torch", "vramkit"):
            r = by.get((w, al))
            if r is None:
                continue
            vk = r.get("vramkit", {})
            note = r.get("error", "")
            if r.get("crashed") and not note:
                note = "exit status %s after its result line" % r.get("exit_status")
            if al == "vramkit" and r.get("torch_counters"):
                note = (note + "; " if note else "") + "torch counters " + \
                    r["torch_counters"].split(":")[0]
            hl = r.get("held_over_live")
            every = ", ".join("%.1f" % x["throughput"] for x in runs.get((w, al), [])
                              if "throughput" in x)
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                w, al, r.get("iterations", "-"), r.get("images", "-"), r.get("seconds", "-"),
                every or "-",
                "%.3f" % hl if al == "torch" and hl else "-",
                _mib(r.get("device_used_bytes")),
                r.get("stack_limit_bytes") if r.get("stack_limit_bytes") is not None else "-",
                vk.get("backend", "-"), vk.get("policy", "-"),
                int(vk["backend_calls_total"]) if "backend_calls_total" in vk else "-",
                int(vk["event_waits_total"]) if "event_waits_total" in vk else "-",
                note.replace("|", "/")))
    summary = "targets passed: %d of %d%s" % (
        passed, total, "; %d run(s) crashed" % crashed if crashed else "")
    lines += ["", "**%s**" % summary, ""]
    return "\n".join(lines), passed, total, crashed


def report_from(a):
    if not a.out:
        print("--report needs --out FILE.md", file=sys.stderr)
        return 2
    with open(a.report, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    text, _, _, crashed = make_report(records, {"lib": "see the raw lines"})
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return 1 if crashed else 0


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def parse(argv):
    ap = argparse.ArgumentParser(
        description="PyTorch inference under PyTorch's caching allocator and under vramkit.",
        epilog="See the module docstring for what each workload does.")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--workload", choices=WORKLOADS, help="run one workload in this process")
    mode.add_argument("--all", action="store_true",
                      help="run every workload under both allocators (one process each)")
    mode.add_argument("--report", metavar="JSONL", help="write the table from raw lines")
    ap.add_argument("--allocator", choices=("torch", "vramkit"), default="torch")
    ap.add_argument("--lib", help="path to libvramkit-core.so (vramkit and --all)")
    ap.add_argument("--out", help="--all/--report: the Markdown table (raw lines go to "
                                  "the same name with .jsonl)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="--all: comma-separated subset (default: all)")
    ap.add_argument("--iterations", type=int,
                    help="timed requests (per thread for retinanet); default: %s"
                         % ", ".join("%s %d" % kv for kv in DEFAULT_ITERATIONS.items()))
    for w in WORKLOADS:
        ap.add_argument("--iterations-" + w, type=int, dest="iterations_" + w,
                        help="--all: timed requests of %s (default %d)"
                             % (w, DEFAULT_ITERATIONS[w]))
    ap.add_argument("--threads", type=int, default=4, help="retinanet: threads and streams")
    ap.add_argument("--warmup", type=int, default=2,
                    help="retinanet: warm-up requests per thread (the others warm up on "
                         "every distinct shape once)")
    ap.add_argument("--deeplab-backbone", choices=("mobilenet_v3_large", "resnet50"),
                    default="mobilenet_v3_large")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1,
                    help="--all: runs of each (workload, allocator) pair, alternating; "
                         "the median throughput counts")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index")
    ap.add_argument("--timeout", type=int, default=600, help="--all: seconds per run")
    a = ap.parse_args(argv)
    if a.workload and a.iterations is None:
        a.iterations = DEFAULT_ITERATIONS[a.workload]
    return a


def main(argv=None):
    a = parse(argv)
    if a.report:
        return report_from(a)
    if a.all:
        return run_all(a)
    r = run_one(a)
    sys.stdout.write(json.dumps(r, sort_keys=False) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
