// ui.js: the RoPE playground's controls and drawing. It draws what OctlmRope.compute returns (in
// an exported page) or the same numbers computed by Go on the kernel (playground.Live), as one SVG:
// a dial per channel pair turned by position × θᵢ, and the query·key score as the query moves away
// from the key, under the pairing the weights were trained with and under the chosen one.
(function (root) {
  "use strict";
  const W = 760;
  const NS = "http://www.w3.org/2000/svg";

  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }

  // ropeColor shades pair i of n from dark blue (fast) to light orange (slow), as figures.ropeColor.
  function ropeColor(i, n) {
    const f = n > 1 ? i / (n - 1) : 0;
    const lerp = (a, b) => Math.round(a + f * (b - a)).toString(16).padStart(2, "0");
    return "#" + lerp(0x08, 0xfd) + lerp(0x30, 0xae) + lerp(0x6b, 0x6b);
  }

  function fmtBase(b) {
    const e = Math.log10(b);
    if (Math.abs(e - Math.round(e)) < 1e-9) return "10" + String(Math.round(e)).replace(/[0-9]/g, (d) => "⁰¹²³⁴⁵⁶⁷⁸⁹"[d]);
    return Math.round(b).toLocaleString("en-US");
  }

  function fmt(x) {
    if (x === 0) return "0";
    const a = Math.abs(x);
    if (a >= 1e4 || a < 1e-2) return x.toExponential(1);
    return x.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
  }

  // niceStep rounds x up to 1, 2 or 5 times a power of ten.
  function niceStep(x) {
    const p = Math.pow(10, Math.floor(Math.log10(x)));
    for (const m of [1, 2, 5, 10]) if (m * p >= x * 0.999) return m * p;
    return 10 * p;
  }

  // svg draws the playground for data (OctlmRope.compute's shape).
  function svg(data) {
    const n = data.dim / 2;
    const perRow = Math.min(n, 16);
    const rows = Math.ceil(n / perRow);
    const cell = 46;
    const r = 16;
    const dialTop = 52;
    const chartTop = dialTop + rows * (cell + 14) + 28;
    const chartH = 220;
    const H = chartTop + chartH + 62;
    const pairing = data.split ? "split halves (i, i+" + n + ")" : "neighbours (2i, 2i+1)";
    const out = [];
    out.push(`<svg xmlns="${NS}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`);
    const title = `RoPE at position ${data.position}: base ${fmtBase(data.base)}, head width ${data.dim}, ${pairing}`;
    out.push(`<title>${esc(title)}</title><rect width="${W}" height="${H}" fill="white"/>`);
    out.push(`<text class="title" x="${W / 2}" y="20" text-anchor="middle" font-size="13" font-weight="bold">${esc(title)}</text>`);
    out.push(`<text x="20" y="${dialTop - 14}" fill="#333">each dial: one channel pair (its channels below), turned by position × θᵢ; dark pairs turn fastest</text>`);
    const left = (W - perRow * cell) / 2;
    out.push('<g class="dials">');
    for (let i = 0; i < n; i++) {
      const cx = left + (i % perRow) * cell + cell / 2;
      const cy = dialTop + Math.floor(i / perRow) * (cell + 14) + r + 2;
      const a = data.angles[i] % (2 * Math.PI);
      const col = ropeColor(i, n);
      out.push(`<g class="dial" data-pair="${i}"><circle cx="${cx}" cy="${cy}" r="${r}" fill="none" stroke="#ccc"/>`);
      out.push(`<line class="hand" x1="${cx}" y1="${cy}" x2="${(cx + r * Math.cos(a)).toFixed(2)}" y2="${(cy - r * Math.sin(a)).toFixed(2)}" stroke="${col}" stroke-width="2.5" stroke-linecap="round"><title>pair ${i}: channels ${data.pairs[i][0]} and ${data.pairs[i][1]}, θ = ${data.invFreq[i].toPrecision(4)}, angle ${data.angles[i].toPrecision(5)} rad</title></line>`);
      out.push(`<text x="${cx}" y="${cy + r + 11}" text-anchor="middle" font-size="8" fill="#333">${data.pairs[i][0]}·${data.pairs[i][1]}</text></g>`);
    }
    out.push("</g>");

    // The score chart.
    const x0 = 72, x1 = W - 206, y0 = chartTop + chartH, y1 = chartTop;
    const ds = data.distances;
    const dmax = ds[ds.length - 1];
    let lo = Infinity, hi = -Infinity;
    for (const v of data.trained.concat(data.chosen)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    const step = niceStep((hi - lo) / 5 || 1);
    lo = Math.floor(lo / step) * step; hi = Math.ceil(hi / step) * step;
    if (hi <= lo) hi = lo + step;
    const X = (d) => x0 + ((x1 - x0) * d) / dmax;
    const Y = (v) => y0 - ((y0 - y1) * (v - lo)) / (hi - lo);
    out.push(`<text x="20" y="${chartTop - 12}" fill="#333">query·key score of the same vector as query and key, key at position 0, query at the distance</text>`);
    out.push('<g class="axes" stroke="#888">');
    const digits = Math.max(0, -Math.floor(Math.log10(step)));
    for (let v = lo; v <= hi + step / 2; v += step) {
      out.push(`<line x1="${x0}" x2="${x1}" y1="${Y(v).toFixed(1)}" y2="${Y(v).toFixed(1)}" stroke="#e5e5e5"/><text x="${x0 - 6}" y="${(Y(v) + 4).toFixed(1)}" text-anchor="end" stroke="none" fill="#333">${v.toFixed(digits)}</text>`);
    }
    const xstep = niceStep(dmax / 6);
    for (let d = 0; d <= dmax; d += xstep) {
      out.push(`<line x1="${X(d).toFixed(1)}" x2="${X(d).toFixed(1)}" y1="${y1}" y2="${y0}" stroke="#f0f0f0"/><text x="${X(d).toFixed(1)}" y="${y0 + 16}" text-anchor="middle" stroke="none" fill="#333">${d}</text>`);
    }
    out.push(`<rect x="${x0}" y="${y1}" width="${x1 - x0}" height="${y0 - y1}" fill="none"/></g>`);
    out.push(`<text x="${(x0 + x1) / 2}" y="${y0 + 36}" text-anchor="middle">distance between query and key (positions)</text>`);
    out.push(`<text transform="translate(18 ${(y0 + y1) / 2}) rotate(-90)" text-anchor="middle">q·k</text>`);
    const line = (vals, color, dash, label) => {
      const pts = ds.map((d, j) => X(d).toFixed(1) + "," + Y(vals[j]).toFixed(1)).join(" ");
      return `<g class="series" data-label="${esc(label)}"><polyline fill="none" stroke="${color}" stroke-width="${dash ? 1.5 : 2}"${dash ? ' stroke-dasharray="5 3"' : ""} points="${pts}"/></g>`;
    };
    const chosenLabel = data.split ? "loaded: split halves (right)" : "loaded: neighbours (wrong)";
    out.push(line(data.trained, "#4c78a8", false, "trained: split halves"));
    out.push(line(data.chosen, data.split ? "#54a24b" : "#e45756", true, chosenLabel));
    // The query's position on the chart.
    const j = ds.reduce((best, d, k) => (Math.abs(d - data.position) < Math.abs(ds[best] - data.position) ? k : best), 0);
    if (data.position <= dmax) {
      out.push(`<g class="marker"><line x1="${X(data.position).toFixed(1)}" x2="${X(data.position).toFixed(1)}" y1="${y1}" y2="${y0}" stroke="#555" stroke-dasharray="2 3"/>`);
      out.push(`<text x="${(X(data.position) + 4).toFixed(1)}" y="${y1 + 12}" font-size="10" fill="#555">position ${data.position}</text></g>`);
    }
    // Legend and readout.
    const lx = x1 + 14;
    out.push(`<g class="legend"><rect x="${lx}" y="${y1 + 4}" width="12" height="10" fill="#4c78a8"/><text x="${lx + 18}" y="${y1 + 13}">trained: split halves</text>`);
    out.push(`<rect x="${lx}" y="${y1 + 22}" width="12" height="10" fill="${data.split ? "#54a24b" : "#e45756"}"/><text x="${lx + 18}" y="${y1 + 31}">${esc(chosenLabel)}</text>`);
    const t = data.trained[j], c = data.chosen[j];
    out.push(`<text class="readout" x="${lx}" y="${y1 + 62}">at distance ${ds[j]}:</text>`);
    out.push(`<text x="${lx}" y="${y1 + 78}">trained  ${fmt(t)}</text><text x="${lx}" y="${y1 + 94}">loaded   ${fmt(c)}</text>`);
    out.push(`<text x="${lx}" y="${y1 + 110}">error    ${fmt(c - t)}</text>`);
    if (data.split) out.push(`<text x="${lx}" y="${y1 + 134}" font-size="10" fill="#555">right pairing: the lines coincide</text>`);
    out.push("</g>");
    out.push(`<text x="20" y="${H - 8}" font-size="10" fill="#555">at distance 0 every pairing gives the same score; the wrong pairing gives each frequency the energy of other channels</text>`);
    out.push("</svg>");
    return out.join("");
  }

  // draw replaces the drawing inside el (the playground's figure holder) with data's.
  function draw(el, data) {
    const fig = el.querySelector(".octlm-playground-figure") || el;
    fig.innerHTML = svg(data);
  }

  const widths = [8, 16, 32, 64, 128];

  // mount builds the controls and the drawing inside el, starting from settings
  // {position, base, dim, split}, and redraws on every change with OctlmRope.compute.
  function mount(el, settings) {
    const rope = root.OctlmRope;
    const s = Object.assign({ position: 16, base: 1e6, dim: 32, split: true }, settings);
    el.innerHTML =
      '<div class="octlm-playground-controls" style="font-family:sans-serif;font-size:13px;display:grid;grid-template-columns:max-content 320px max-content;gap:4px 10px;align-items:center;margin:6px 0">' +
      '<label for="' + el.id + '-position">position</label><input type="range" id="' + el.id + '-position" name="position" min="0" max="1024" step="1"><output name="position"></output>' +
      '<label for="' + el.id + '-base">base (rope_theta)</label><input type="range" id="' + el.id + '-base" name="base" min="4" max="6" step="0.05"><output name="base"></output>' +
      '<label for="' + el.id + '-dim">head width</label><select id="' + el.id + '-dim" name="dim">' + widths.map((w) => `<option value="${w}">${w}</option>`).join("") + "</select><span></span>" +
      '<label for="' + el.id + '-pairing">pairing</label><select id="' + el.id + '-pairing" name="pairing"><option value="split">split halves: i with i+d/2 (Qwen3)</option><option value="neighbour">neighbours: 2i with 2i+1 (classic)</option></select><span></span>' +
      '</div><div class="octlm-playground-figure"></div>';
    const get = (name) => el.querySelector(`[name="${name}"]`);
    get("position").value = s.position;
    get("base").value = Math.log10(s.base);
    get("dim").value = String(s.dim);
    get("pairing").value = s.split ? "split" : "neighbour";
    const update = () => {
      s.position = Number(get("position").value);
      s.base = Math.pow(10, Number(get("base").value));
      s.dim = Number(get("dim").value);
      s.split = get("pairing").value === "split";
      el.querySelector('output[name="position"]').textContent = String(s.position);
      el.querySelector('output[name="base"]').textContent = fmtBase(s.base);
      draw(el, rope.compute(s));
    };
    for (const name of ["position", "base", "dim", "pairing"]) {
      get(name).addEventListener("input", update);
      get(name).addEventListener("change", update);
    }
    update();
    return s;
  }

  root.OctlmRopePlayground = { mount, draw, svg, ropeColor };
})(typeof globalThis !== "undefined" ? globalThis : this);
