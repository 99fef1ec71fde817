// check.mjs opens notebooks exported to HTML (jupyter nbconvert --to html) in Debian's headless
// chromium, driven by playwright-core, and checks them as a reader would see them:
//
//   - every figure (<img class="octlm-figure">) has loaded and has a non-zero rendered size;
//   - no console error and no uncaught exception in the page;
//   - the RoPE playground (.octlm-playground) has drawn, and moving its position slider, its base
//     slider and its pairing select each changes what it draws;
//   - a full-page screenshot of each page (and the same in parts a screen high), and the playground
//     before and after, in OUT, to look at.
//
// The page may ask for nothing outside itself: requests other than file: and data: URLs are
// blocked (nbconvert's template links require.js and MathJax from a CDN; those blocked loads are
// listed, not failed). No browser is downloaded: chromium comes from Debian (apt-get install
// chromium), at $CHROMIUM or /usr/bin/chromium.
//
// Usage: node check.mjs [--out DIR] PAGE.html...
// Exit status: 0 all good, 1 a check failed, 2 bad usage or no browser.
import { existsSync, mkdirSync } from "node:fs";
import { basename, resolve } from "node:path";
import { pathToFileURL } from "node:url";

// playwright-core is loaded here rather than imported, so that a fresh clone without it says how
// to install it instead of dying with ERR_MODULE_NOT_FOUND.
const { chromium } = await import("playwright-core").catch((err) => {
  if (err?.code !== "ERR_MODULE_NOT_FOUND") throw err;
  console.error("browsercheck: playwright-core is not installed. Install it (and Debian's chromium) first:\n" +
    "  bash docker/install.sh --browser\n" +
    "or only the driver: npm ci --ignore-scripts --prefix notebooks/browsercheck");
  process.exit(2);
});

const args = process.argv.slice(2);
let out = "browsercheck-shots";
const pages = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--out") out = args[++i];
  else if (args[i].startsWith("-")) usage(`unknown flag ${args[i]}`);
  else pages.push(args[i]);
}
if (pages.length === 0 || !out) usage("no pages given");
function usage(msg) {
  console.error(`check.mjs: ${msg}\nusage: node check.mjs [--out DIR] PAGE.html...`);
  process.exit(2);
}
for (const p of pages) {
  if (!existsSync(p)) usage(`${p}: no such file`);
}
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
if (!existsSync(executablePath)) {
  console.error(`check.mjs: no chromium at ${executablePath}: apt-get install chromium (or set CHROMIUM)`);
  process.exit(2);
}
mkdirSync(out, { recursive: true });

const browser = await chromium.launch({
  executablePath,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let failed = 0;
try {
  for (const p of pages) {
    let problems;
    try {
      problems = await checkPage(p);
    } catch (e) {
      problems = [`the check itself failed: ${e.message.split("\n")[0]}`];
    }
    if (problems.length > 0) {
      failed++;
      console.error(`check.mjs: FAIL ${p}:\n  - ${problems.join("\n  - ")}`);
    }
  }
} finally {
  await browser.close();
}
if (failed > 0) {
  console.error(`check.mjs: ${failed} of ${pages.length} pages failed`);
  process.exit(1);
}
console.error(`check.mjs: ${pages.length} pages passed; screenshots in ${resolve(out)}`);

async function checkPage(path) {
  const name = basename(path, ".html");
  const problems = [];
  const blocked = [];
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith("file:") || url.startsWith("data:")) return route.continue();
    blocked.push(url);
    return route.abort();
  });
  page.on("console", (msg) => {
    if (msg.type() !== "error") return;
    const where = msg.location()?.url || "";
    // A load the route above blocked reports "Failed to load resource"; it is listed below.
    if (/Failed to load resource/.test(msg.text()) && !where.startsWith("file:")) return;
    if (blocked.some((u) => where === u)) return;
    problems.push(`console error: ${msg.text()} (${where || "the page"})`);
  });
  page.on("pageerror", (err) => problems.push(`uncaught exception: ${err.message}`));
  await page.goto(pathToFileURL(resolve(path)).href, { waitUntil: "load" });

  // Figures: loaded, decoded, and drawn at a non-zero size.
  const figures = await page.$$eval("img.octlm-figure", (imgs) =>
    imgs.map((img) => {
      const r = img.getBoundingClientRect();
      return { alt: img.alt, complete: img.complete, natural: [img.naturalWidth, img.naturalHeight], size: [r.width, r.height] };
    }));
  for (const f of figures) {
    if (!f.complete || f.natural[0] === 0 || f.natural[1] === 0) problems.push(`figure "${f.alt}" did not load (natural size ${f.natural.join("x")})`);
    else if (f.size[0] < 10 || f.size[1] < 10) problems.push(`figure "${f.alt}" renders at ${f.size.map(Math.round).join("x")} px`);
  }
  // Inline SVG in the page (the playground draws one) must have a size too.
  const svgs = await page.$$eval(".jp-OutputArea svg, .output_area svg, .octlm-playground svg", (els) =>
    els.map((s) => { const r = s.getBoundingClientRect(); return [r.width, r.height]; }));
  svgs.forEach(([w, h], i) => { if (w < 10 || h < 10) problems.push(`inline svg ${i + 1} renders at ${Math.round(w)}x${Math.round(h)} px`); });

  // The playground: drawn, and redrawn by each control.
  const playgrounds = await page.$$(".octlm-playground");
  for (const [i, pg] of playgrounds.entries()) {
    const id = await pg.getAttribute("id");
    const drawing = () => pg.$eval(".octlm-playground-figure", (el) => el.innerHTML).catch(() => "");
    const before = await drawing();
    if (!before.includes("<svg")) {
      problems.push(`playground #${id} drew nothing`);
      continue;
    }
    await pg.scrollIntoViewIfNeeded();
    await pg.screenshot({ path: `${out}/${name}-playground-${i}-start.png` });
    const moves = [
      ["position slider", "input[name=position]", "500"],
      ["base slider", "input[name=base]", "4"],
      ["head width select", "select[name=dim]", "64"],
      ["pairing select", "select[name=pairing]", "neighbour"],
    ];
    let last = before;
    for (const [what, sel, value] of moves) {
      const el = await pg.$(sel);
      if (!el) {
        problems.push(`playground #${id} has no ${what} (${sel})`);
        continue;
      }
      try {
        if (sel.startsWith("select")) await el.selectOption(value, { timeout: 5000 });
        else await el.fill(value, { timeout: 5000 });
      } catch (e) {
        problems.push(`playground #${id}: cannot move the ${what} to ${value}: ${e.message.split("\n")[0]}`);
        continue;
      }
      const now = await drawing();
      if (now === last) problems.push(`playground #${id}: moving the ${what} to ${value} changed nothing`);
      last = now;
    }
    const title = await pg.$eval("svg title", (t) => t.textContent).catch(() => "");
    if (!/position 500: base 10⁴, head width 64, neighbours/.test(title)) problems.push(`playground #${id}: after the moves its title says "${title}"`);
    await pg.screenshot({ path: `${out}/${name}-playground-${i}-moved.png` });
  }
  // The whole page, and the same in parts a screen high (easier to read at full size).
  await page.screenshot({ path: `${out}/${name}.png`, fullPage: true });
  const height = await page.evaluate(() => document.documentElement.scrollHeight);
  for (let y = 0, part = 1; y < height; y += 1200, part++) {
    await page.screenshot({ path: `${out}/${name}-part${part}.png`, fullPage: true, clip: { x: 0, y, width: 1100, height: Math.min(1200, height - y) } });
  }
  console.error(`check.mjs: ${problems.length === 0 ? "ok  " : "FAIL"} ${path}: ${figures.length} figures, ${playgrounds.length} playgrounds, ${svgs.length} inline svg; ${blocked.length} outside requests blocked${blocked.length ? " (" + [...new Set(blocked.map((u) => new URL(u).host))].join(", ") + ")" : ""}`);
  await context.close();
  return problems;
}
