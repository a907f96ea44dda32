import { test } from "node:test";
import assert from "node:assert/strict";
import { covers, fromSeqs, missing, normalize, size, subtract, union } from "../src/core/ranges";

test("normalize drops inverted ranges, sorts, merges overlapping and adjacent ones", () => {
  assert.deepEqual(normalize([[5, 3], [4, 6], [1, 3], [10, 12], [11, 11]]), [[1, 6], [10, 12]]);
  assert.deepEqual(normalize([]), []);
});

test("missing is what [low, high] lacks", () => {
  assert.deepEqual(missing([[1, 3], [7, 9]], 1, 10), [[4, 6], [10, 10]]);
  assert.deepEqual(missing([], 1, 5), [[1, 5]]);
  assert.deepEqual(missing([[1, 5]], 1, 5), []);
  assert.deepEqual(missing([], 1, 0), []);
});

test("subtract, union, size, covers", () => {
  assert.deepEqual(subtract([[1, 100]], [[10, 20], [30, 40], [95, 200]]), [[1, 9], [21, 29], [41, 94]]);
  assert.deepEqual(union([[1, 2]], [[3, 4]], [[8, 9]]), [[1, 4], [8, 9]]);
  assert.equal(size([[1, 3], [2, 5], [10, 10]]), 6);
  assert.equal(covers([[1, 5], [7, 9]], 6), false);
  assert.equal(covers([[1, 5], [6, 9]], [2, 8]), true);
  assert.equal(covers([], [5, 4]), true);
});

test("fromSeqs turns held seqs into ranges", () => {
  assert.deepEqual(fromSeqs([1, 2, 3, 5, 7, 8]), [[1, 3], [5, 5], [7, 8]]);
  assert.deepEqual(fromSeqs([]), []);
});
