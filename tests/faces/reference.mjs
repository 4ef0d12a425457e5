// tests/faces/reference.mjs - the faces vramkit should find, computed apart
// from it: ONNX Runtime (onnxruntime-node, CPU) runs a BlazeFace model on
// each frame of a raw RGB24 file after a letterbox written here, and the
// outputs are decoded here from MediaPipe's description of its face
// detection graphs. Writes JSON Lines in the service's schema, boxes and
// keypoints in source pixels:
//   {"stream": ID, "frame": N, "pts": S, "width": W, "height": H,
//    "detections": [{"box": [x0, y0, x1, y1], "score": S,
//                    "keypoints": [[x, y] x 6]}]}
//
//   node tests/faces/reference.mjs --model M.onnx --raw FRAMES.rgb
//        --width W --height H [--fps 25] [--stream ID] [--out OUT.jsonl]
//        [--threshold T] [--size S] [--ort DIR]
//
// FRAMES.rgb: `ffmpeg -i CLIP -pix_fmt rgb24 -f rawvideo FRAMES.rgb`.
// onnxruntime-node comes from DIR/node_modules (--ort, else ORT_PREFIX,
// else build/onnxref), as scripts/onnx_ref.sh installs it. The model's
// input size S comes from its file name (..._256x256...) unless --size
// gives it.
//
// The letterbox (the rule of vramkit/video.h): s = min(S / w, S / h); the
// frame covers round(w s) x round(h s) pixels from floor of half the rest
// on each axis; each model pixel samples the frame bilinearly at
// (x - ox + 0.5) / s - 0.5 (clamped to the frame); value = p / 127.5 - 1,
// R, G, B, NHWC; the bars are -1 (black), as MediaPipe's letterbox pads
// with zero pixels before normalizing.
//
// The decoding (MediaPipe's SsdAnchorsCalculator, TensorsToDetections and
// NonMaxSuppression options in its graphs for these models): anchors with
// fixed size 1 at cell centres, two per cell and layer, layers of one
// stride sharing cells (strides 16, 32, 32, 32 for the 256 model; 8, 16,
// 16, 16 for the 128 one); raw values in model pixels relative to the
// anchor (x_scale = ... = the input size); scores clipped to +-100 and put
// through the sigmoid, kept at min_score_thresh (0.65 for the 256 model,
// 0.5 for the 128 one) and above; boxes of negative size dropped; then
// weighted suppression: the best remaining detection gathers every
// remaining one whose IoU with it exceeds 0.3 and becomes their
// score-weighted mean, keeping its own score.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

function fail(msg) {
  process.stderr.write(`reference: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const a = { fps: 25, stream: 'ref', threshold: 0 };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (!k.startsWith('--') || v === undefined) fail(`bad argument ${k}`);
    a[k.slice(2)] = v;
  }
  for (const k of ['model', 'raw', 'width', 'height'])
    if (a[k] === undefined) fail(`--${k} is required`);
  a.width = Number(a.width);
  a.height = Number(a.height);
  a.fps = Number(a.fps);
  a.threshold = Number(a.threshold);
  if (!(a.width > 0 && a.height > 0 && a.fps > 0)) fail('bad --width, --height or --fps');
  return a;
}

function loadOrt(dir) {
  const tries = [];
  if (dir) tries.push(dir);
  if (process.env.ORT_PREFIX) tries.push(process.env.ORT_PREFIX);
  tries.push(path.join(here, '..', '..', 'build', 'onnxref'));
  for (const t of tries) {
    const pkg = path.join(path.resolve(t), 'node_modules', 'onnxruntime-node');
    if (fs.existsSync(pkg)) return createRequire(import.meta.url)(pkg);
  }
  fail('onnxruntime-node not found: run scripts/onnx_ref.sh DIR and pass --ort DIR');
}

// ---- letterbox -------------------------------------------------------

function letterboxGeometry(S, w, h) {
  const s = Math.min(S / w, S / h);
  const rw = Math.min(S, Math.max(1, Math.round(w * s)));
  const rh = Math.min(S, Math.max(1, Math.round(h * s)));
  return { s, rw, rh, ox: Math.floor((S - rw) / 2), oy: Math.floor((S - rh) / 2) };
}

function letterbox(rgb, w, h, S, g, out) {
  out.fill(-1);
  const clamp = (v, hi) => (v < 0 ? 0 : v > hi ? hi : v);
  for (let y = g.oy; y < g.oy + g.rh; y++) {
    const sy = clamp((y - g.oy + 0.5) / g.s - 0.5, h - 1);
    const y0 = Math.floor(sy), y1 = Math.min(y0 + 1, h - 1), fy = sy - y0;
    for (let x = g.ox; x < g.ox + g.rw; x++) {
      const sx = clamp((x - g.ox + 0.5) / g.s - 0.5, w - 1);
      const x0 = Math.floor(sx), x1 = Math.min(x0 + 1, w - 1), fx = sx - x0;
      const o = (y * S + x) * 3;
      for (let c = 0; c < 3; c++) {
        const p = (xx, yy) => rgb[(yy * w + xx) * 3 + c];
        const v = (1 - fy) * ((1 - fx) * p(x0, y0) + fx * p(x1, y0)) +
                  fy * ((1 - fx) * p(x0, y1) + fx * p(x1, y1));
        out[o + c] = v / 127.5 - 1;
      }
    }
  }
}

// ---- anchors ---------------------------------------------------------

// The model's output tensors in order, each a grid of cells: the 256 model
// has a stride-16 layer (2 anchors a cell) and three stride-32 layers
// sharing cells (6 a cell); the 128 model the same at half the strides.
function anchorCentre(S, index) {
  const strides = S === 256 ? [16, 32, 32, 32] : [8, 16, 16, 16];
  const groups = [];
  for (const st of strides) {
    const last = groups[groups.length - 1];
    if (last && last.stride === st) last.perCell += 2;
    else groups.push({ stride: st, perCell: 2 });
  }
  let i = index;
  for (const grp of groups) {
    const side = Math.ceil(S / grp.stride), n = side * side * grp.perCell;
    if (i < n) {
      const cell = Math.floor(i / grp.perCell);
      return [((cell % side) + 0.5) / side, (Math.floor(cell / side) + 0.5) / side];
    }
    i -= n;
  }
  fail(`anchor ${index} out of range`);
}

// ---- decoding --------------------------------------------------------

function decode(S, threshold, scores, regs) {
  const dets = [];
  for (let i = 0; i < scores.length; i++) {
    const raw = Math.max(-100, Math.min(100, scores[i]));
    const score = 1 / (1 + Math.exp(-raw));
    if (!(score >= threshold)) continue;
    const [ax, ay] = anchorCentre(S, i).map((v) => v * S); // in model pixels
    const r = regs.subarray(i * 16, i * 16 + 16);
    const cx = ax + r[0], cy = ay + r[1], w = r[2], h = r[3];
    if (!(w >= 0 && h >= 0)) continue;
    const kps = [];
    for (let k = 0; k < 6; k++) kps.push([ax + r[4 + 2 * k], ay + r[5 + 2 * k]]);
    dets.push({ score, box: [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], kps });
  }
  dets.sort((a, b) => b.score - a.score); // stable: ties keep the anchors' order
  const area = (b) => (b[2] - b[0]) * (b[3] - b[1]);
  const iou = (a, b) => {
    const w = Math.min(a[2], b[2]) - Math.max(a[0], b[0]);
    const h = Math.min(a[3], b[3]) - Math.max(a[1], b[1]);
    if (w <= 0 || h <= 0) return 0;
    const u = area(a) + area(b) - w * h;
    return u > 0 ? (w * h) / u : 0;
  };
  const faces = [];
  let rest = dets;
  while (rest.length) {
    const top = rest[0];
    const group = [top], others = [];
    for (const d of rest.slice(1)) (iou(d.box, top.box) > 0.3 ? group : others).push(d);
    const total = group.reduce((t, d) => t + d.score, 0);
    const mean = (get) => group.reduce((t, d) => t + get(d) * d.score, 0) / total;
    faces.push({
      score: top.score,
      box: [0, 1, 2, 3].map((j) => mean((d) => d.box[j])),
      kps: top.kps.map((_, k) => [mean((d) => d.kps[k][0]), mean((d) => d.kps[k][1])]),
    });
    rest = others;
  }
  return faces;
}

// ---- main ------------------------------------------------------------

const args = parseArgs(process.argv.slice(2));
const ort = loadOrt(args.ort);
const session = await ort.InferenceSession.create(args.model, {
  logSeverityLevel: 3, intraOpNumThreads: 2, interOpNumThreads: 1,
});
const inName = session.inputNames[0];
const named = /_(\d+)x\1[_.]/.exec(path.basename(args.model));
const S = Number(args.size ?? (named ? named[1] : NaN));
if (S !== 256 && S !== 128) fail(`input size ${S}: give --size 256 or 128`);
const threshold = args.threshold > 0 ? args.threshold : S === 256 ? 0.65 : 0.5;
const g = letterboxGeometry(S, args.width, args.height);
const frameBytes = args.width * args.height * 3;
const fd = fs.openSync(args.raw, 'r');
const rgb = Buffer.alloc(frameBytes);
const input = new Float32Array(S * S * 3);
const lines = [];
for (let frame = 0; ; frame++) {
  const got = fs.readSync(fd, rgb, 0, frameBytes, null);
  if (got === 0) break;
  if (got !== frameBytes) fail(`${args.raw}: frame ${frame} is cut short (${got} bytes)`);
  letterbox(rgb, args.width, args.height, S, g, input);
  const out = await session.run({ [inName]: new ort.Tensor('float32', input, [1, S, S, 3]) });
  // The four outputs told apart by their shapes.
  const pick = (n, c) => {
    const t = Object.values(out).find((v) => v.dims[1] === n && v.dims[2] === c);
    if (!t) fail(`the model has no [1, ${n}, ${c}] output`);
    return t.data;
  };
  const scores = new Float32Array(896), regs = new Float32Array(896 * 16);
  scores.set(pick(512, 1), 0);
  scores.set(pick(384, 1), 512);
  regs.set(pick(512, 16), 0);
  regs.set(pick(384, 16), 512 * 16);
  const toSource = (v, off) => (v - off) / g.s;
  const detections = decode(S, threshold, scores, regs).map((f) => ({
    box: f.box.map((v, j) => +toSource(v, j % 2 ? g.oy : g.ox).toFixed(2)),
    score: +f.score.toFixed(5),
    keypoints: f.kps.map(([x, y]) => [+toSource(x, g.ox).toFixed(2), +toSource(y, g.oy).toFixed(2)]),
  }));
  lines.push(JSON.stringify({
    stream: args.stream, frame, pts: +(frame / args.fps).toFixed(6),
    width: args.width, height: args.height, detections,
  }));
}
fs.closeSync(fd);
const text = lines.join('\n') + (lines.length ? '\n' : '');
if (args.out) fs.writeFileSync(args.out, text);
else process.stdout.write(text);
process.stderr.write(`reference: ${lines.length} frames of ${args.raw} through ${path.basename(args.model)}\n`);
