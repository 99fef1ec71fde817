// check.test.mjs tests check.mjs itself in chromium: a page with a working figure and playground
// passes; broken figures, console errors and a playground that does not redraw are each reported.
// Run: node --test notebooks/browsercheck/ (CI does, after installing chromium).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const playground = join(here, "..", "playground");
const svg = (w, h, body) => `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}">${body}</svg>`;
const img = (alt, s, style = "") => `<img class="octlm-figure" alt="${alt}" style="${style}" src="data:image/svg+xml;base64,${Buffer.from(s).toString("base64")}">`;
const figure = img("good", svg(200, 100, '<rect width="200" height="100" fill="white"/><line x1="0" y1="0" x2="200" y2="100" stroke="black"/>'));
// The real playground, as playground.HTML writes it.
const livePlayground = `<div id="pg" class="octlm-playground"></div><script>${readFileSync(join(playground, "rope.js"), "utf8")}\n${readFileSync(join(playground, "ui.js"), "utf8")}\nOctlmRopePlayground.mount(document.getElementById("pg"), {"position":16,"base":1000000,"dim":32,"split":true});</script>`;
// A playground that draws once and ignores its controls.
const deadPlayground = `<div id="dead" class="octlm-playground"><div class="octlm-playground-figure">${svg(100, 100, "<rect width='100' height='100'/><title>static</title>")}</div>
<input type="range" name="position" min="0" max="1024"><input type="range" name="base" min="4" max="6" step="0.05">
<select name="dim"><option>32</option><option>64</option></select><select name="pairing"><option value="split">s</option><option value="neighbour">n</option></select></div>`;

function check(html) {
  const dir = mkdtempSync(join(tmpdir(), "browsercheck-test-"));
  const page = join(dir, "page.html");
  writeFileSync(page, `<!DOCTYPE html><html><body>${html}</body></html>`);
  const r = spawnSync(process.execPath, [join(here, "check.mjs"), "--out", join(dir, "shots"), page], { encoding: "utf8" });
  return { status: r.status, stderr: r.stderr };
}

const cases = [
  { name: "a drawn figure and the real playground pass", html: figure + livePlayground, status: 0, says: [/1 figures, 1 playgrounds/] },
  { name: "a figure that does not decode", html: img("broken", "<svg>"), status: 1, says: [/figure "broken" did not load/] },
  { name: "a figure squeezed to nothing", html: img("tiny", svg(200, 100, "<rect width='9' height='9'/>"), "width:2px"), status: 1, says: [/figure "tiny" renders at 2x1 px/] },
  { name: "a console error and an exception", html: figure + "<script>console.error('boom'); nothere();</script>", status: 1, says: [/console error: boom/, /uncaught exception: nothere is not defined/] },
  { name: "a playground that ignores its controls", html: deadPlayground, status: 1, says: [/moving the position slider to 500 changed nothing/, /moving the pairing select to neighbour changed nothing/] },
];
for (const c of cases) {
  test(c.name, () => {
    const r = check(c.html);
    assert.equal(r.status, c.status, r.stderr);
    for (const re of c.says) assert.match(r.stderr, re);
  });
}

test("without playwright-core (a fresh clone), it says to run the install step", () => {
  const dir = mkdtempSync(join(tmpdir(), "browsercheck-fresh-"));
  for (const name of ["check.mjs", "live.mjs"]) {
    writeFileSync(join(dir, name), readFileSync(join(here, name)));
    const r = spawnSync(process.execPath, [join(dir, name), "page.html"], { encoding: "utf8", cwd: dir });
    assert.equal(r.status, 2, `${name}: ${r.stderr}`);
    assert.match(r.stderr, /bash docker\/install\.sh --browser/, name);
    assert.doesNotMatch(r.stderr, /ERR_MODULE_NOT_FOUND/, name);
  }
});
