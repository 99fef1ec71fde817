// rope.js: RoPE as octlm's graph computes it (octlm.InvFreq, rotaryTables and applyRotary in
// octlm/graph.go), in JavaScript for the notebooks' playground. Every float32 step of the graph is
// rounded with Math.fround, so angles and rotated vectors match the Go side to float32 rounding;
// rope.test.mjs checks them against the graph's own numbers.
//
// A plain script: in a page it defines globalThis.OctlmRope; under Node, module.exports.
(function (root) {
  "use strict";
  const f32 = Math.fround;

  // invFreq returns 1 / base^(2i/dim) for i < dim/2, rounded to float32 at each step as
  // transformers' _compute_default_rope_parameters (and octlm.InvFreq) computes it.
  function invFreq(dim, base) {
    const out = new Array(dim / 2);
    for (let i = 0; i < dim / 2; i++) {
      const exponent = f32(f32(2 * i) / f32(dim));
      const p = f32(Math.pow(f32(base), exponent));
      out[i] = f32(1 / p);
    }
    return out;
  }

  // angles returns position × inv_freq per pair, in float32 as the graph multiplies them.
  function angles(position, inv) {
    return inv.map((f) => f32(f32(position) * f));
  }

  // partner returns the channel that turns with channel c in a head of dim channels, and the
  // pair's frequency index: c ± dim/2 with split halves (Hugging Face's rotate_half, Qwen3),
  // c ± 1 with neighbours (the classic decoder).
  function partner(c, dim, split) {
    const half = dim / 2;
    if (split) return c < half ? [c + half, c] : [c - half, c - half];
    return c % 2 === 0 ? [c + 1, c / 2] : [c - 1, (c - 1) / 2];
  }

  // pairs lists the two channels of every pair i under a pairing.
  function pairs(dim, split) {
    const out = [];
    for (let i = 0; i < dim / 2; i++) out.push(split ? [i, i + dim / 2] : [2 * i, 2 * i + 1]);
    return out;
  }

  // rotate turns the head vector x (dim channels) by the angles of a position, as applyRotary:
  // out[a] = x[a]·cos − x[b]·sin, out[b] = x[b]·cos + x[a]·sin for each pair (a, b), in float32.
  function rotate(x, position, base, split) {
    const dim = x.length;
    const ang = angles(position, invFreq(dim, base));
    const out = new Array(dim);
    pairs(dim, split).forEach(([a, b], i) => {
      const c = f32(Math.cos(ang[i]));
      const s = f32(Math.sin(ang[i]));
      const xa = f32(x[a]);
      const xb = f32(x[b]);
      out[a] = f32(f32(xa * c) - f32(xb * s));
      out[b] = f32(f32(xb * c) + f32(xa * s));
    });
    return out;
  }

  // dot is the query·key score of two rotated vectors (in float64).
  function dot(a, b) {
    let s = 0;
    for (let i = 0; i < a.length; i++) s += a[i] * b[i];
    return s;
  }

  // demoVector is the query (and key) the playground scores: a fixed vector of dim channels,
  // the same in Go (playground.DemoVector).
  function demoVector(dim) {
    const out = new Array(dim);
    for (let c = 0; c < dim; c++) out[c] = f32(Math.sin(1.3 * c + 0.7) + 0.5 * Math.cos(0.37 * c));
    return out;
  }

  // distances are the query–key distances the score curve samples for a query at position p:
  // 0 to max(128, 1.25 p), at most 257 whole numbers.
  function distances(position) {
    const end = Math.max(128, Math.ceil(1.25 * position));
    const n = Math.min(end, 256);
    const out = [];
    for (let i = 0; i <= n; i++) out.push(Math.round((i * end) / n));
    return out;
  }

  // compute returns everything the playground draws for settings {position, base, dim, split}:
  // each pair's channels and angle, and the score q·k of the demo vector with itself at each
  // distance (key at 0, query at the distance) under the pairing the weights were trained with
  // (split halves) and under the chosen one.
  function compute(s) {
    const inv = invFreq(s.dim, s.base);
    const q = demoVector(s.dim);
    const k0 = rotate(q, 0, s.base, true);
    const k0chosen = rotate(q, 0, s.base, s.split);
    const ds = distances(s.position);
    return {
      position: s.position,
      base: s.base,
      dim: s.dim,
      split: s.split,
      invFreq: inv,
      angles: angles(s.position, inv),
      pairs: pairs(s.dim, s.split),
      distances: ds,
      trained: ds.map((d) => dot(rotate(q, d, s.base, true), k0)),
      chosen: ds.map((d) => dot(rotate(q, d, s.base, s.split), k0chosen)),
    };
  }

  const api = { invFreq, angles, partner, pairs, rotate, dot, demoVector, distances, compute };
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else root.OctlmRope = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
