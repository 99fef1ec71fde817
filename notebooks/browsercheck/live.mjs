// live.mjs drives 02-rope's live playground (gonb widgets) in a running Jupyter notebook server, as a
// reader would: it opens the notebook in headless chromium, runs the setup cells and the live cell,
// waits for gonb's sliders and the drawing, moves the position slider and checks that the kernel
// redraws. It needs `jupyter notebook` (docker/install.sh --server) serving the notebooks folder
// without a token; it is a manual check, not part of CI (a notebook server in CI is one more thing
// to start and stop).
//
// Usage: node live.mjs URL OUT_DIR
//   URL      e.g. http://127.0.0.1:8899/notebooks/02-rope.ipynb
import { mkdirSync } from "node:fs";

// playwright-core is loaded here rather than imported, so that a fresh clone without it says how
// to install it instead of dying with ERR_MODULE_NOT_FOUND.
const { chromium } = await import("playwright-core").catch((err) => {
  if (err?.code !== "ERR_MODULE_NOT_FOUND") throw err;
  console.error("browsercheck: playwright-core is not installed. Install it (and Debian's chromium) first:\n" +
    "  bash docker/install.sh --browser\n" +
    "or only the driver: npm ci --ignore-scripts --prefix notebooks/browsercheck");
  process.exit(2);
});

const [url, out = "live-shots"] = process.argv.slice(2);
if (!url) {
  console.error("usage: node live.mjs URL [OUT_DIR]");
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const problems = [];
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  page.on("console", (m) => { if (m.type() === "error") console.error("console error:", m.text()); });
  page.on("pageerror", (e) => console.error("page error:", e.message));
  await page.goto(url, { waitUntil: "load" });
  await page.waitForFunction(() => globalThis.Jupyter?.notebook?.kernel?.is_connected?.(), null, { timeout: 60000 });
  // Run the setup cell, the helpers and the live cell, in order.
  const cells = await page.evaluate(() => Jupyter.notebook.get_cells().map((c, i) => ({ i, type: c.cell_type, src: c.get_text() })));
  const want = cells.filter((c) => c.type === "code" && (c.src.includes("gonb_setup.sh") || c.src.includes("func must(") || c.src.includes("playground.Live(")));
  for (const c of want) {
    await page.evaluate((i) => Jupyter.notebook.get_cell(i).execute(), c.i);
    if (!c.src.includes("playground.Live(")) {
      await page.waitForFunction((i) => Jupyter.notebook.get_cell(i).input_prompt_number > 0 && Jupyter.notebook.kernel_busy === false || Jupyter.notebook.get_cell(i).input_prompt_number > 0, c.i, { timeout: 180000 });
      await page.waitForTimeout(1000);
    }
  }
  const fig = '[id^="octlm_rope_live_"] .octlm-playground-figure svg';
  await page.waitForSelector(fig, { timeout: 180000 });
  await page.waitForSelector('input[type="range"][id^="gonb_slider_"]', { timeout: 30000 });
  const title = () => page.$eval(fig + " title", (t) => t.textContent);
  const before = await title();
  const live = await page.$('[id^="octlm_rope_live_"]');
  await live.scrollIntoViewIfNeeded();
  await live.screenshot({ path: `${out}/live-start.png` });
  const slider = await page.$('input[type="range"][id^="gonb_slider_"]');
  await slider.fill("300");
  await page.waitForFunction((b) => document.querySelector('[id^="octlm_rope_live_"] .octlm-playground-figure svg title')?.textContent !== b, before, { timeout: 30000 });
  const after = await title();
  await live.screenshot({ path: `${out}/live-moved.png` });
  console.error(`live playground: "${before}" → "${after}"`);
  if (!after.includes("position 300")) problems.push(`after moving the slider to 300 the title says "${after}"`);
  await page.evaluate(() => Jupyter.notebook.kernel.interrupt());
} catch (e) {
  problems.push(String(e));
} finally {
  await browser.close();
}
if (problems.length) {
  console.error("live.mjs: FAIL\n  - " + problems.join("\n  - "));
  process.exit(1);
}
console.error("live.mjs: ok");
