#!/usr/bin/env node
// tools/onnx/ort_run.js - run one ONNX model through ONNX Runtime (CPU) and
// write its inputs and outputs as .npy files: the reference that vramkit's
// engine is compared against (tests/onnx/README.md).
//
//   node tools/onnx/ort_run.js MODEL.onnx OUTDIR [--input NAME=FILE.npy]...
//                              [--seed S] [--dim NAME=VALUE]... [--bench N] [--optimize]
//                              [--threads N]
//   node tools/onnx/ort_run.js --manifest MODELDIR/manifest.json REFDIR [--seed S]
//
// The second form runs every model of a tools/onnx/gen_models.py manifest
// into REFDIR/<model name>/, each with the manifest's "dims", loading ONNX
// Runtime once (a few seconds for all, where one process per model takes
// most of a minute on a small machine).
//
// --seed S (default 1) seeds the random inputs; --dim NAME=VALUE gives a
// symbolic input dimension its value (default 1). --bench N runs the model
// N more times on the same inputs and records their latency (median, p90,
// lowest) in ort_run.json as bench_ms; --optimize lets ONNX Runtime apply
// every graph optimization (fusions included: its speed as users run it)
// instead of none (the exact reference); --threads N gives it N intra-op
// threads (default 1). All three single-model form only.
// Inputs not given with --input are filled with the seeded rule of
// tests/onnx/README.md ("Random inputs"), which vramkit's `model run`
// implements too. Every input fed (given or generated) is written as
// OUTDIR/input_<name>.npy, every output as OUTDIR/<name>.npy, names
// sanitized (anything but letters, digits, '.', '-', '_' becomes '_'), and
// OUTDIR/ort_run.json records the version, seed, shapes, files and timings.
//
// onnxruntime-node is taken from ORT_PREFIX/node_modules when ORT_PREFIX is
// set (scripts/onnx_ref.sh's folder, build/onnxref by default), else looked
// up the usual way.
'use strict';

const fs = require('fs');
const path = require('path');

// Errors are thrown as plain Errors and printed once, "ort_run: <message>".
function fail(msg) {
  throw new Error(msg);
}

function loadOrt() {
  const tries = ['onnxruntime-node'];
  if (process.env.ORT_PREFIX) {
    tries.unshift(path.join(path.resolve(process.env.ORT_PREFIX), 'node_modules', 'onnxruntime-node'));
  }
  for (const t of tries) {
    try {
      return require(t);
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  fail('onnxruntime-node not found: run scripts/onnx_ref.sh and set ORT_PREFIX to its folder');
  return null;
}

// ---------------------------------------------------------------- .npy

// dtype name (ORT's) <-> numpy descr, typed array, bytes per element.
const DTYPES = {
  float32: { descr: '<f4', size: 4, Array: Float32Array },
  int64: { descr: '<i8', size: 8, Array: BigInt64Array },
  int32: { descr: '<i4', size: 4, Array: Int32Array },
  uint8: { descr: '|u1', size: 1, Array: Uint8Array },
  bool: { descr: '|b1', size: 1, Array: Uint8Array },
};
const BY_DESCR = {};
for (const [name, d] of Object.entries(DTYPES)) BY_DESCR[d.descr] = name;
// numpy also spells the one-byte types with '<' or '=' and little-endian
// types with '='; this machine reads little-endian only.
for (const [alias, name] of [['<u1', 'uint8'], ['=u1', 'uint8'], ['<b1', 'bool'], ['=b1', 'bool'],
  ['=f4', 'float32'], ['=i8', 'int64'], ['=i4', 'int32']]) BY_DESCR[alias] = name;

// Parse a .npy file (format 1.0 or 2.0, C order, one of DTYPES).
// Returns { dtype, shape, data } with data a typed array over a copy.
function readNpy(file) {
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    fail(`${file}: ${e.message}`);
  }
  const bad = (why) => fail(`${file}: not a supported .npy file: ${why}`);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') bad('no \\x93NUMPY magic');
  const major = buf[6];
  let hlen;
  let hstart;
  if (major === 1) {
    hlen = buf.readUInt16LE(8);
    hstart = 10;
  } else if (major === 2) {
    if (buf.length < 12) bad('truncated header');
    hlen = buf.readUInt32LE(8);
    hstart = 12;
  } else {
    bad(`format version ${major}.${buf[7]}`);
  }
  if (hstart + hlen > buf.length) bad(`header of ${hlen} bytes runs past the end (${buf.length} bytes)`);
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shapeM = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shapeM) bad(`header ${JSON.stringify(header.trim())}`);
  if (fortran[1] !== 'False') bad('Fortran order');
  const dtype = BY_DESCR[descr[1]];
  if (!dtype) bad(`dtype '${descr[1]}' (supported: <f4 <i8 <i4 |u1 |b1)`);
  const shape = shapeM[1].split(',').map((s) => s.trim()).filter((s) => s !== '').map((s) => {
    if (!/^\d+$/.test(s)) bad(`shape entry '${s}'`);
    return Number(s);
  });
  const n = shape.reduce((a, b) => a * b, 1);
  const d = DTYPES[dtype];
  const off = hstart + hlen;
  if (buf.length - off !== n * d.size) {
    bad(`shape (${shape.join(', ')}) needs ${n * d.size} data bytes, file has ${buf.length - off}`);
  }
  const copy = new ArrayBuffer(n * d.size);
  new Uint8Array(copy).set(buf.subarray(off));
  return { dtype, shape, data: new d.Array(copy) };
}

// Write a .npy file, format 1.0, header padded to a multiple of 64 bytes.
function writeNpy(file, dtype, shape, data) {
  const d = DTYPES[dtype];
  if (!d) fail(`${file}: cannot write dtype ${dtype}`);
  const shapeStr = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${d.descr}', 'fortran_order': False, 'shape': ${shapeStr}, }`;
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header + ' '.repeat(total - 10 - header.length - 1) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

// ---------------------------------------------------------------- random inputs

const MASK64 = (1n << 64n) - 1n;
const GOLDEN = 0x9E3779B97F4A7C15n;

// xorshift64* (Vigna 2016): the generator of the rule in tests/onnx/README.md.
class XorShift64Star {
  constructor(seed, index) {
    let s = (seed + BigInt(index + 1) * GOLDEN) & MASK64;
    if (s === 0n) s = GOLDEN;
    this.s = s;
  }

  next() {
    let x = this.s;
    x ^= x >> 12n;
    x ^= (x << 25n) & MASK64;
    x ^= x >> 27n;
    this.s = x;
    return (x * 0x2545F4914F6CDD1Dn) & MASK64;
  }
}

// Fill `n` elements of `dtype` from input number `index`'s own stream.
function randomData(dtype, n, seed, index) {
  const g = new XorShift64Star(seed, index);
  const d = DTYPES[dtype];
  const out = new d.Array(n);
  for (let i = 0; i < n; i++) {
    const r = g.next();
    switch (dtype) {
      case 'float32':
        // Top 24 bits u: (u - 2^23) / 2^23, exact in float32, in [-1, 1).
        out[i] = (Number(r >> 40n) - 8388608) / 8388608;
        break;
      case 'int64':
        out[i] = r >> 62n;
        break;
      case 'int32':
        out[i] = Number(r >> 62n);
        break;
      case 'uint8':
        out[i] = Number(r >> 56n);
        break;
      case 'bool':
        out[i] = Number(r >> 63n);
        break;
      default:
        fail(`no random rule for dtype ${dtype}`);
    }
  }
  return out;
}

// ---------------------------------------------------------------- main

function sanitize(name) {
  return name.replace(/[^A-Za-z0-9._-]/g, '_');
}

const USAGE = `usage: ort_run.js MODEL.onnx OUTDIR [--input NAME=FILE.npy]... [--seed S] [--dim NAME=VALUE]...
                  [--bench N] [--optimize] [--threads N]
       ort_run.js --manifest MODELDIR/manifest.json REFDIR [--seed S]`;

function parseArgs(argv) {
  const a = { pos: [], inputs: new Map(), seed: 1n, dims: new Map(), manifest: false, bench: 0,
    optimize: false, threads: 1 };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${arg} needs a value\n${USAGE}`);
      return argv[++i];
    };
    const pair = (v) => {
      const eq = v.indexOf('=');
      if (eq <= 0 || eq === v.length - 1) fail(`${arg} wants NAME=VALUE, got '${v}'`);
      return [v.slice(0, eq), v.slice(eq + 1)];
    };
    if (arg === '--input') {
      const [k, v] = pair(value());
      if (a.inputs.has(k)) fail(`--input ${k} given twice`);
      a.inputs.set(k, v);
    } else if (arg === '--seed') {
      const v = value();
      if (!/^\d+$/.test(v) || BigInt(v) > MASK64) fail(`--seed wants an integer in [0, 2^64), got '${v}'`);
      a.seed = BigInt(v);
    } else if (arg === '--dim') {
      const [k, v] = pair(value());
      if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 2 ** 30) {
        fail(`--dim ${k} wants a positive integer, got '${v}'`);
      }
      a.dims.set(k, Number(v));
    } else if (arg === '--manifest') {
      a.manifest = true;
    } else if (arg === '--bench') {
      const v = value();
      if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 100000) fail(`--bench wants a count from 1 to 100000, got '${v}'`);
      a.bench = Number(v);
    } else if (arg === '--optimize') {
      a.optimize = true;
    } else if (arg === '--threads') {
      const v = value();
      if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 256) fail(`--threads wants a count from 1 to 256, got '${v}'`);
      a.threads = Number(v);
    } else if (arg === '-h' || arg === '--help') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else if (arg.startsWith('--')) {
      fail(`unknown option ${arg}\n${USAGE}`);
    } else {
      a.pos.push(arg);
    }
  }
  if (a.pos.length !== 2) fail(USAGE);
  if (a.manifest && (a.inputs.size || a.dims.size)) fail('--manifest takes neither --input nor --dim (dims come from the manifest)');
  if (a.manifest && (a.bench || a.optimize || a.threads !== 1)) fail('--manifest takes neither --bench nor --optimize nor --threads');
  return a;
}

// 'disabled': ORT runs the graph node by node as written, without fusing
// Conv+BatchNormalization, Conv+activation or other rewrites that change
// rounding and hide what the model itself computes. One thread: results that
// do not depend on the machine's core count, and a fair share of a small
// shared machine. Log level fatal: errors are reported once, by ort_run.
const SESSION_OPTIONS = {
  executionProviders: ['cpu'],
  graphOptimizationLevel: 'disabled',
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  logSeverityLevel: 4,
};

// Run one model: inputs from `inputs` (name -> .npy path) or the random rule,
// files into outDir. Returns the record written as ort_run.json.
async function runOne(ort, modelPath, outDir, inputs, seed, dims, bench = 0, optimize = false,
  threads = 1) {
  const options = { ...SESSION_OPTIONS, intraOpNumThreads: threads,
    graphOptimizationLevel: optimize ? 'all' : SESSION_OPTIONS.graphOptimizationLevel };
  if (!fs.existsSync(modelPath)) fail(`${modelPath}: no such file`);
  const t0 = process.hrtime.bigint();
  let session;
  try {
    session = await ort.InferenceSession.create(modelPath, options);
  } catch (e) {
    fail(`${modelPath}: ONNX Runtime refused the model: ${e.message}`);
  }
  const t1 = process.hrtime.bigint();
  const meta = session.inputMetadata;
  if (!Array.isArray(meta) || meta.length !== session.inputNames.length) {
    fail(`onnxruntime-node ${ort.env.versions.node} has no inputMetadata (need 1.22 or newer)`);
  }
  for (const k of inputs.keys()) {
    if (!session.inputNames.includes(k)) {
      fail(`--input ${k}: the model has no such input (inputs: ${session.inputNames.join(', ')})`);
    }
  }

  // Inputs in the model's order (graph inputs that are not initializers);
  // the position is the stream index of the random rule.
  const feeds = {};
  const record = { model: path.resolve(modelPath), ort_version: ort.env.versions.node, seed: seed.toString(),
    graph_optimization_level: options.graphOptimizationLevel,
    intra_op_threads: options.intraOpNumThreads, inputs: [], outputs: [] };
  const usedDims = new Set();
  meta.forEach((m, index) => {
    if (!m.isTensor) fail(`input ${m.name} is not a tensor`);
    if (!DTYPES[m.type]) fail(`input ${m.name} has type ${m.type}, which ort_run.js does not handle`);
    const declared = m.shape.map((d) => {
      if (typeof d === 'number' && d >= 0) return d;
      if (typeof d === 'string' && d !== '') {
        usedDims.add(d);
        return dims.has(d) ? dims.get(d) : 1;
      }
      return 1; // an unnamed unknown dimension
    });
    let data;
    let shape;
    let source;
    if (inputs.has(m.name)) {
      const file = inputs.get(m.name);
      const npy = readNpy(file);
      if (npy.dtype !== m.type) fail(`--input ${m.name}=${file}: dtype ${npy.dtype}, the model wants ${m.type}`);
      const ok = npy.shape.length === m.shape.length
        && m.shape.every((d, k) => typeof d !== 'number' || d < 0 || d === npy.shape[k]);
      if (!ok) fail(`--input ${m.name}=${file}: shape (${npy.shape}), the model wants (${m.shape})`);
      ({ data, shape } = npy);
      source = path.resolve(file);
    } else {
      shape = declared;
      data = randomData(m.type, shape.reduce((x, y) => x * y, 1), seed, index);
      source = 'random';
    }
    feeds[m.name] = new ort.Tensor(m.type, data, shape);
    record.inputs.push({ name: m.name, index, dtype: m.type, shape, declared_shape: m.shape, source,
      file: `input_${sanitize(m.name)}.npy` });
  });
  for (const k of dims.keys()) {
    if (!usedDims.has(k)) fail(`--dim ${k}: no input has a dimension named ${k}`);
  }

  const t2 = process.hrtime.bigint();
  let results;
  try {
    results = await session.run(feeds);
  } catch (e) {
    fail(`${modelPath}: run failed: ${e.message}`);
  }
  const t3 = process.hrtime.bigint();
  const times = [];
  for (let k = 0; k < bench; k++) {
    const a0 = process.hrtime.bigint();
    try {
      results = await session.run(feeds);
    } catch (e) {
      fail(`${modelPath}: run ${k + 2} failed: ${e.message}`);
    }
    times.push(Number(process.hrtime.bigint() - a0) / 1e6);
  }
  await session.release();

  // Check every name before writing anything.
  const files = new Map();
  const claim = (file, what) => {
    if (files.has(file)) fail(`${what} and ${files.get(file)} both sanitize to ${file}`);
    files.set(file, what);
  };
  record.inputs.forEach((inp) => claim(inp.file, `input ${inp.name}`));
  for (const name of session.outputNames) {
    const t = results[name];
    if (!DTYPES[t.type]) fail(`output ${name} has type ${t.type}, which ort_run.js does not write`);
    const file = `${sanitize(name)}.npy`;
    claim(file, `output ${name}`);
    record.outputs.push({ name, dtype: t.type, shape: Array.from(t.dims), file });
  }
  fs.mkdirSync(outDir, { recursive: true });
  for (const inp of record.inputs) {
    writeNpy(path.join(outDir, inp.file), inp.dtype, inp.shape, feeds[inp.name].data);
  }
  for (const o of record.outputs) {
    writeNpy(path.join(outDir, o.file), o.dtype, o.shape, results[o.name].data);
  }
  const ms = (a, b) => Number(b - a) / 1e6;
  record.load_ms = ms(t0, t1);
  record.run_ms = ms(t2, t3);
  if (times.length) {
    times.sort((x, y) => x - y);
    const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
    record.bench_ms = { runs: times.length, median: at(0.5), p90: at(0.9), min: times[0] };
  }
  fs.writeFileSync(path.join(outDir, 'ort_run.json'), `${JSON.stringify(record, null, 1)}\n`);
  return record;
}

function summary(modelPath, r) {
  const outs = r.outputs.map((o) => `${o.name}[${o.shape.join('x')}]`).join(' ');
  return `${path.basename(modelPath)}: ort ${r.ort_version}, load ${r.load_ms.toFixed(1)} ms, `
    + `run ${r.run_ms.toFixed(1)} ms -> ${outs}\n`;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  ort.env.logLevel = 'fatal';
  if (!args.manifest) {
    const [modelPath, outDir] = args.pos;
    process.stdout.write(summary(modelPath, await runOne(ort, modelPath, outDir, args.inputs, args.seed,
      args.dims, args.bench, args.optimize, args.threads)));
    return 0;
  }
  // --manifest: every model of a gen_models.py manifest into REFDIR/<name>/,
  // with the manifest's "dims"; one ONNX Runtime load for all of them.
  const [manifestPath, refDir] = args.pos;
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  } catch (e) {
    fail(`${manifestPath}: ${e.message}`);
  }
  if (!Array.isArray(manifest.models)) fail(`${manifestPath}: no "models" list`);
  let failed = 0;
  for (const m of manifest.models) {
    const modelPath = path.join(path.dirname(manifestPath), m.file);
    try {
      const r = await runOne(ort, modelPath, path.join(refDir, m.name), new Map(), args.seed,
        new Map(Object.entries(m.dims || {})));
      process.stdout.write(summary(modelPath, r));
    } catch (e) {
      process.stderr.write(`ort_run: ${m.name}: ${e.message}\n`);
      failed++;
    }
  }
  process.stdout.write(`ort_run: ${manifest.models.length - failed} of ${manifest.models.length} models run\n`);
  return failed ? 1 : 0;
}

main().then((rc) => { process.exitCode = rc; }, (e) => {
  process.stderr.write(`ort_run: ${e.message}\n`);
  process.exitCode = 1;
});
