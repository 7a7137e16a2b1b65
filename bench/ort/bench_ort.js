#!/usr/bin/env node
// ONNX Runtime (onnxruntime-node, CPU) side of the Tactician benchmark harness.
//
// usage: node bench/ort/bench_ort.js MODEL [--threads N] [--sets K] [--seed S] [--random]
//            [--warmup-runs W] [--warmup-s T] [--min-runs R] [--min-s T] [--dim NAME=V ...]
//            [--no-spin] [--check] [--all-times] [--profile PREFIX]
//
// MODEL is a model.onnx file or a folder holding one. Session: graphOptimizationLevel 'all',
// intraOpNumThreads N, interOpNumThreads 1, executionMode 'sequential', CPU execution provider.
// Input sets: every MODEL_DIR/test_data_set_*/input_<K>.pb (ONNX TensorProto) first, then seeded random
// sets of the declared shapes until there are K sets (default 4); --random uses random sets only.
// Random floats are standard normal, ints uniform in the range seen in the .pb inputs of that name
// (or [0, 100) when there are none), bools fair coins; never zeros. Dynamic dims come from --dim,
// else from a .pb input of that name, else 1. Runs rotate among the sets (run i uses set i mod K).
// Warm-up runs until both W runs and T seconds (default 3 runs, 0.5 s); then timed runs until both
// R runs and T seconds (default 10 runs, 2 s). Each run is timed alone (wall clock around
// session.run, outputs included). Prints one JSON line on stdout:
//   {"median_ms":..,"p10_ms":..,"p90_ms":..,"cv":..,"runs":..,"engine":..,"threads":..,"sets":..}
// Everything else goes to stderr. --check compares the outputs of each .pb set with its
// output_<K>.pb (max abs, rel L2) on stderr. --profile: ORT's own per-node profile of the timed runs
// (enableProfiling; the warm-up runs first, so bench/compare_profile.py reads the last --min-runs
// runs) written to PREFIX_<date>.json. Exit status 1 on any error.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function die(msg) { process.stderr.write(`bench_ort: ${msg}\n`); process.exit(1); }

// ---- arguments ----
const args = { threads: 1, sets: 4, seed: 1, random: false, warmupRuns: 3, warmupS: 0.5, minRuns: 10, minS: 2,
  dims: {}, spin: true, check: false, allTimes: false, profile: null, model: null };
{
  const a = process.argv.slice(2);
  const num = (i, name) => { const v = Number(a[i]); if (a[i] === undefined || !Number.isFinite(v)) die(`${name} needs a number`); return v; };
  for (let i = 0; i < a.length; i++) {
    switch (a[i]) {
      case '--threads': args.threads = num(++i, '--threads'); break;
      case '--sets': args.sets = num(++i, '--sets'); break;
      case '--seed': args.seed = num(++i, '--seed'); break;
      case '--random': args.random = true; break;
      case '--warmup-runs': args.warmupRuns = num(++i, '--warmup-runs'); break;
      case '--warmup-s': args.warmupS = num(++i, '--warmup-s'); break;
      case '--min-runs': args.minRuns = num(++i, '--min-runs'); break;
      case '--min-s': args.minS = num(++i, '--min-s'); break;
      case '--dim': { const m = /^(.+)=(\d+)$/.exec(a[++i] || ''); if (!m) die('--dim wants NAME=VALUE'); args.dims[m[1]] = Number(m[2]); break; }
      case '--no-spin': args.spin = false; break;
      case '--check': args.check = true; break;
      case '--all-times': args.allTimes = true; break;
      case '--profile': args.profile = a[++i]; if (!args.profile) die('--profile needs a file prefix'); break;
      case '-h': case '--help': process.stdout.write(fs.readFileSync(__filename, 'utf8').split('\n').slice(1, 22).map(l => l.replace(/^\/\/ ?/, '')).join('\n') + '\n'); process.exit(0);
      default:
        if (a[i].startsWith('--') || args.model !== null) die(`unexpected argument ${a[i]}`);
        args.model = a[i];
    }
  }
  if (args.model === null) die('usage: node bench_ort.js MODEL [--threads N] ... (--help)');
  if (!(args.threads >= 1) || !(args.sets >= 1) || !(args.minRuns >= 1)) die('--threads, --sets, --min-runs must be >= 1');
}

// ---- minimal ONNX TensorProto decoder (dims, data_type, name, raw_data and the typed *_data fields) ----
// TensorProto fields: 1 dims (int64, repeated), 2 data_type (int32), 4 float_data, 5 int32_data,
// 7 int64_data, 8 name, 9 raw_data, 10 double_data, 11 uint64_data; others are skipped.
const ONNX_TYPES = { 1: 'float32', 2: 'uint8', 3: 'int8', 4: 'uint16', 5: 'int16', 6: 'int32', 7: 'int64', 9: 'bool',
  10: 'float16', 11: 'float64', 12: 'uint32', 13: 'uint64' };
const ARRAYS = { float32: Float32Array, uint8: Uint8Array, int8: Int8Array, uint16: Uint16Array, int16: Int16Array,
  int32: Int32Array, int64: BigInt64Array, bool: Uint8Array, float16: Uint16Array, float64: Float64Array,
  uint32: Uint32Array, uint64: BigUint64Array };

function decodeTensorProto(buf) {
  let pos = 0;
  const varint = () => {  // as BigInt (uint64)
    let r = 0n, shift = 0n;
    for (;;) {
      if (pos >= buf.length) throw new Error('truncated varint');
      const b = buf[pos++];
      r |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return r;
      shift += 7n;
      if (shift > 63n) throw new Error('varint too long');
    }
  };
  const t = { dims: [], dataType: 0, name: '', raw: null, floats: [], ints: [], doubles: [] };
  while (pos < buf.length) {
    const key = Number(varint()), field = key >>> 3, wire = key & 7;
    const repeatedVarints = (sink, signed) => {  // packed (wire 2) or not (wire 0)
      const conv = v => (signed ? BigInt.asIntN(64, v) : v);
      if (wire === 0) { sink.push(conv(varint())); return; }
      const end = pos + Number(varint());
      while (pos < end) sink.push(conv(varint()));
    };
    if (field === 1 && (wire === 0 || wire === 2)) repeatedVarints(t.dims, true);
    else if (field === 2 && wire === 0) t.dataType = Number(varint());
    else if ((field === 5 || field === 7) && (wire === 0 || wire === 2)) repeatedVarints(t.ints, true);
    else if (field === 11 && (wire === 0 || wire === 2)) repeatedVarints(t.ints, false);
    else if (field === 4 && (wire === 5 || wire === 2)) {
      const n = wire === 5 ? 4 : Number(varint()), end = pos + n;
      for (; pos < end; pos += 4) t.floats.push(buf.readFloatLE(pos));
    } else if (field === 10 && (wire === 1 || wire === 2)) {
      const n = wire === 1 ? 8 : Number(varint()), end = pos + n;
      for (; pos < end; pos += 8) t.doubles.push(buf.readDoubleLE(pos));
    } else if ((field === 8 || field === 9) && wire === 2) {
      const n = Number(varint());
      if (pos + n > buf.length) throw new Error('truncated field');
      const bytes = buf.subarray(pos, pos + n); pos += n;
      if (field === 8) t.name = bytes.toString('utf8'); else t.raw = bytes;
    } else if (wire === 0) varint();
    else if (wire === 1) pos += 8;
    else if (wire === 2) pos += Number(varint());
    else if (wire === 5) pos += 4;
    else throw new Error(`unsupported wire type ${wire}`);
    if (pos > buf.length) throw new Error('truncated message');
  }
  const type = ONNX_TYPES[t.dataType];
  if (!type) throw new Error(`unsupported TensorProto data_type ${t.dataType}`);
  const dims = t.dims.map(Number), count = dims.reduce((a, b) => a * b, 1);
  const Arr = ARRAYS[type];
  let data;
  if (t.raw) {
    if (t.raw.length !== count * Arr.BYTES_PER_ELEMENT) throw new Error(`raw_data has ${t.raw.length} bytes, want ${count * Arr.BYTES_PER_ELEMENT}`);
    data = new Arr(count);  // copy: aligned, and independent of the file buffer (little-endian host)
    new Uint8Array(data.buffer).set(t.raw);
  } else {
    const src = type === 'float32' ? t.floats : type === 'float64' ? t.doubles : t.ints;
    if (src.length !== count) throw new Error(`${src.length} values for ${count} elements`);
    data = new Arr(count);
    for (let i = 0; i < count; i++) {
      const v = src[i];
      data[i] = Arr === BigInt64Array || Arr === BigUint64Array ? BigInt(v) : Number(v);
    }
  }
  if (type === 'bool') return { name: t.name, tensor: new ort.Tensor('bool', Uint8Array.from(data, v => (v ? 1 : 0)), dims) };
  return { name: t.name, tensor: new ort.Tensor(type, data, dims) };
}

// ---- seeded random inputs ----
function rng(seed) {  // mulberry32
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return ((z ^ (z >>> 14)) >>> 0) / 4294967296;
  };
}

function f32ToF16Bits(f) {  // round to nearest even, enough for N(0,1) samples
  const b = new DataView(new ArrayBuffer(4)); b.setFloat32(0, f);
  const x = b.getUint32(0), sign = (x >>> 16) & 0x8000, e = ((x >>> 23) & 0xff) - 127 + 15, m = x & 0x7fffff;
  if (e <= 0) return sign;
  if (e >= 31) return sign | 0x7c00;
  let h = sign | (e << 10) | (m >>> 13);
  const rest = m & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h++;
  return h;
}

function randomTensor(meta, r, pbRef) {
  if (!meta.isTensor) throw new Error(`input ${meta.name} is not a tensor`);
  const shape = meta.shape.map((d, i) => {
    if (typeof d === 'number' && d >= 0) return d;
    if (typeof d === 'string' && d in args.dims) return args.dims[d];
    if (pbRef) return pbRef.dims[i];
    return 1;
  });
  const n = shape.reduce((a, b) => a * b, 1), type = meta.type, Arr = ARRAYS[type];
  if (!Arr) throw new Error(`cannot make random data of type ${type} for input ${meta.name}`);
  const data = new Arr(n);
  const normal = () => {
    for (;;) {  // Box-Muller, never exactly 0
      const v = Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
      if (v !== 0) return v;
    }
  };
  if (type === 'float32' || type === 'float64') for (let i = 0; i < n; i++) data[i] = normal();
  else if (type === 'float16') for (let i = 0; i < n; i++) data[i] = f32ToF16Bits(normal());
  else if (type === 'bool') for (let i = 0; i < n; i++) data[i] = r() < 0.5 ? 1 : 0;
  else {
    let lo = 0, hi = 100;  // [lo, hi)
    if (pbRef && pbRef.data.length) {
      let mn = Infinity, mx = -Infinity;
      for (const v of pbRef.data) { const x = Number(v); if (x < mn) mn = x; if (x > mx) mx = x; }
      lo = mn; hi = mx + 1;
    }
    const big = Arr === BigInt64Array || Arr === BigUint64Array;
    for (let i = 0; i < n; i++) {
      const v = lo + Math.floor(r() * (hi - lo));
      data[i] = big ? BigInt(v) : v;
    }
  }
  return new ort.Tensor(type, data, shape);
}

// ---- main ----
function stats(ms) {
  const s = [...ms].sort((a, b) => a - b), n = s.length;
  const q = p => { const x = p * (n - 1), i = Math.floor(x), f = x - i; return i + 1 < n ? s[i] * (1 - f) + s[i + 1] * f : s[i]; };
  const mean = s.reduce((a, b) => a + b, 0) / n;
  const sd = n > 1 ? Math.sqrt(s.reduce((a, b) => a + (b - mean) * (b - mean), 0) / (n - 1)) : 0;
  const r4 = x => Math.round(x * 1e4) / 1e4;
  return { median_ms: r4(q(0.5)), p10_ms: r4(q(0.1)), p90_ms: r4(q(0.9)), cv: r4(sd / mean), runs: n };
}

function compare(name, got, ref) {
  if (got.dims.join() !== ref.dims.join()) return `${name}: shape ${got.dims} != reference ${ref.dims}`;
  let maxAbs = 0, num = 0, den = 0;
  for (let i = 0; i < ref.data.length; i++) {
    const a = Number(got.data[i]), b = Number(ref.data[i]), d = a - b;
    if (!(Math.abs(d) <= maxAbs)) maxAbs = Math.abs(d);  // NaN-propagating
    num += d * d; den += b * b;
  }
  return `${name}: max abs ${maxAbs.toExponential(2)}, rel L2 ${(Math.sqrt(num) / (Math.sqrt(den) || 1)).toExponential(2)}`;
}

async function main() {
  let modelPath = args.model;
  if (fs.existsSync(modelPath) && fs.statSync(modelPath).isDirectory()) modelPath = path.join(modelPath, 'model.onnx');
  if (!fs.existsSync(modelPath)) die(`no model at ${modelPath}`);
  const dir = path.dirname(modelPath);

  const opts = { executionProviders: ['cpu'], graphOptimizationLevel: 'all', intraOpNumThreads: args.threads,
    interOpNumThreads: 1, executionMode: 'sequential' };
  if (!args.spin) opts.extra = { session: { intra_op: { allow_spinning: '0' } } };
  if (args.profile) Object.assign(opts, { enableProfiling: true, profileFilePrefix: args.profile });
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(modelPath, opts);
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const metas = session.inputMetadata;

  // input sets from test_data_set_*/input_K.pb, K = position among the graph inputs
  const pbSets = [];
  for (const d of fs.readdirSync(dir).filter(n => /^test_data_set_\d+$/.test(n)).sort((a, b) => Number(a.slice(14)) - Number(b.slice(14)))) {
    const feeds = {}, refs = [];
    let ok = true;
    for (let k = 0; k < session.inputNames.length; k++) {
      const f = path.join(dir, d, `input_${k}.pb`);
      if (!fs.existsSync(f)) { ok = false; break; }
      const { tensor } = decodeTensorProto(fs.readFileSync(f));
      feeds[session.inputNames[k]] = tensor;  // position decides, as in the ONNX backend-test layout
    }
    for (let k = 0; fs.existsSync(path.join(dir, d, `output_${k}.pb`)); k++)
      refs.push(decodeTensorProto(fs.readFileSync(path.join(dir, d, `output_${k}.pb`))).tensor);
    if (ok) pbSets.push({ feeds, refs, from: d });
  }
  const pbRef = name => { const s = pbSets.find(p => p.feeds[name]); return s ? s.feeds[name] : null; };

  if (args.check) {
    if (!pbSets.length) die('--check: no test_data_set_* with inputs next to the model');
    for (const s of pbSets) {
      const out = await session.run(s.feeds);
      session.outputNames.forEach((n, k) => {
        if (s.refs[k]) process.stderr.write(`check ${s.from} ${compare(n, out[n], s.refs[k])}\n`);
      });
    }
  }

  const sets = args.random ? [] : pbSets.slice(0, args.sets).map(s => s.feeds);
  const r = rng(args.seed);
  while (sets.length < args.sets) {
    const feeds = {};
    for (const m of metas) feeds[m.name] = randomTensor(m, r, pbRef(m.name));
    sets.push(feeds);
  }
  const nFromPb = args.random ? 0 : Math.min(pbSets.length, args.sets);

  const timed = async (minRuns, minS, keep) => {
    const times = [];
    const start = process.hrtime.bigint();
    for (let i = 0; ; i++) {
      const a = process.hrtime.bigint();
      await session.run(sets[i % sets.length]);
      const b = process.hrtime.bigint();
      times.push(Number(b - a) / 1e6);
      if (times.length >= minRuns && Number(b - start) / 1e9 >= minS) return times;
    }
  };
  const warm = await timed(args.warmupRuns, args.warmupS);
  const times = await timed(args.minRuns, args.minS);
  process.stderr.write(`bench_ort: ${modelPath}: load ${loadMs.toFixed(0)} ms, ${sets.length} input sets (${nFromPb} from .pb), ` +
    `${warm.length} warm-up runs, ${times.length} timed runs, threads ${args.threads}\n`);
  const res = { ...stats(times), engine: `onnxruntime-node ${require('onnxruntime-node/package.json').version} cpu`,
    threads: args.threads, sets: sets.length, warmup_runs: warm.length };
  if (args.allTimes) res.times_ms = times.map(t => Math.round(t * 1e4) / 1e4);
  if (args.profile) session.endProfiling();
  process.stdout.write(JSON.stringify(res) + '\n');
}

main().catch(e => die(e && e.stack ? e.stack : String(e)));
