// rope.test.mjs checks rope.js against octlm's own RoPE: the angles and rotated vectors of
// octlm.InvFreq and octlm.RoPE (the graph's rotation), and the numbers the playground draws
// (playground.Compute), written to the JSON file $ROPE_GOLDEN by playground_test.go, which runs
//
//   ROPE_GOLDEN=golden.json node --test rope.test.mjs
//
// (go test ./notebooks/playground does both).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const rope = require("./rope.js");

const path = process.env.ROPE_GOLDEN;
if (!path) throw new Error("ROPE_GOLDEN is not set: run go test ./notebooks/playground, which writes the Go side's numbers");
const golden = JSON.parse(readFileSync(path, "utf8"));

// close asserts |got − want| ≤ tol · max(1, |want|) for every element.
function close(got, want, tol, what) {
  assert.equal(got.length, want.length, `${what}: ${got.length} values, want ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= tol * Math.max(1, Math.abs(want[i])))) {
      assert.fail(`${what}[${i}] = ${got[i]}, want ${want[i]} (off by ${d})`);
    }
  }
}

test("golden file covers the grid", () => {
  assert.ok(golden.rotations.length >= 24, `${golden.rotations.length} rotation cases`);
  assert.ok(golden.playground.length >= 4, `${golden.playground.length} playground cases`);
});

for (const c of golden.rotations) {
  const name = `position ${c.position}, base ${c.base}, width ${c.dim}, ${c.split ? "split halves" : "neighbours"}`;
  test(name, () => {
    const inv = rope.invFreq(c.dim, c.base);
    close(inv, c.invFreq, 1e-6, "invFreq");
    close(rope.angles(c.position, inv), c.angles, 1e-6, "angles");
    close(rope.rotate(c.x, c.position, c.base, c.split), c.rotated, 1e-6, "rotated");
    const pairs = rope.pairs(c.dim, c.split);
    pairs.forEach(([a, b], i) => {
      assert.deepEqual(rope.partner(a, c.dim, c.split), [b, i]);
      assert.deepEqual(rope.partner(b, c.dim, c.split), [a, i]);
    });
  });
}

for (const want of golden.playground) {
  test(`playground: position ${want.position}, base ${want.base}, width ${want.dim}, split ${want.split}`, () => {
    const got = rope.compute({ position: want.position, base: want.base, dim: want.dim, split: want.split });
    assert.deepEqual(got.pairs, want.pairs);
    assert.deepEqual(got.distances, want.distances);
    close(got.invFreq, want.invFreq, 1e-6, "invFreq");
    close(got.angles, want.angles, 1e-6, "angles");
    // A score sums dim products of float32 values: float32 rounding of the sum's order.
    close(got.trained, want.trained, 1e-5, "trained scores");
    close(got.chosen, want.chosen, 1e-5, "chosen scores");
  });
}
