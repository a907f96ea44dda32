import { test } from "node:test";
import assert from "node:assert/strict";
import { Assembler, CHUNK_ENVELOPE_BUDGET, NIP44_SAFE_PLAINTEXT_BYTES, split, utf8Length } from "../src/core/chunks";

const big = JSON.stringify({ type: "output", sessionId: "s", seq: 1, entry: { entryType: "text", content: "ä€😀\"\\\n".repeat(12000), timestamp: "t" } });

test("a text within the threshold is not split", () => {
  assert.deepEqual(split('{"type":"input"}', "c"), ['{"type":"input"}']);
});

test("split cuts between code points, each envelope within the budget, and joins back", () => {
  const parts = split(big, "abc123");
  assert.ok(parts.length >= 2);
  for (const p of parts) assert.ok(utf8Length(p) <= CHUNK_ENVELOPE_BUDGET, `${utf8Length(p)}`);
  const joined = parts.map((p) => JSON.parse(p).part).join("");
  assert.equal(joined, big);
  assert.ok(parts.every((p, i) => JSON.parse(p).i === i && JSON.parse(p).n === parts.length));
  assert.ok(utf8Length(big) > NIP44_SAFE_PLAINTEXT_BYTES);
});

test("the assembler joins out of order, ignores duplicates, and keys by sender", () => {
  const parts = split(big, "cid1");
  const a = new Assembler();
  const order = [...parts.keys()].reverse();
  const last = order.pop()!;
  for (const i of order) {
    assert.equal(a.feed(parts[i]!, 1000, "bridge"), null);
    assert.equal(a.feed(parts[i]!, 1000, "bridge"), null); // a duplicate (cid, i) is ignored
  }
  assert.ok(a.duplicates === order.length);
  assert.equal(a.feed(parts[last]!, 1000, "someone-else"), null); // another sender's group never mixes in
  assert.ok(a.feed(parts[last]!, 1000, "bridge") === big);
  assert.equal(a.openGroups, 1); // someone-else's lone part waits until it expires
});

test("non-chunks and malformed envelopes pass through", () => {
  const a = new Assembler();
  assert.equal(a.feed('{"type":"output"}', 0, "b"), '{"type":"output"}');
  const bad = '{"type":"chunk","cid":"x","i":2,"n":2,"part":"a"}';
  assert.equal(a.feed(bad, 0, "b"), bad);
  const one = '{"type":"chunk","cid":"x","i":0,"n":1,"part":"a"}';
  assert.equal(a.feed(one, 0, "b"), one);
});

test("a different n restarts the group; incomplete groups expire after 60 s", () => {
  const a = new Assembler();
  const env = (i: number, n: number, part: string) => JSON.stringify({ type: "chunk", cid: "g", i, n, part });
  assert.equal(a.feed(env(0, 3, "A"), 0, "b"), null);
  assert.equal(a.feed(env(0, 2, "x"), 10, "b"), null);
  assert.equal(a.restarted, 1);
  assert.equal(a.feed(env(1, 2, "y"), 20, "b"), "xy");
  assert.equal(a.feed(env(0, 2, "p"), 0, "b"), null);
  assert.equal(a.feed(env(1, 2, "q"), 60_001, "b"), null); // the first part expired
  assert.equal(a.expired, 1);
});

test("past 64 open groups the oldest (by created_at) is evicted", () => {
  const a = new Assembler();
  for (let g = 0; g < 65; g++) a.feed(JSON.stringify({ type: "chunk", cid: `g${g}`, i: 0, n: 2, part: "x" }), 0, "b", 1000 - g);
  assert.equal(a.openGroups, 64);
  assert.equal(a.evicted, 1);
  // g64 was sent first (created_at 936): it is the one evicted
  assert.equal(a.feed(JSON.stringify({ type: "chunk", cid: "g64", i: 1, n: 2, part: "y" }), 0, "b", 1000), null);
  assert.equal(a.feed(JSON.stringify({ type: "chunk", cid: "g0", i: 1, n: 2, part: "y" }), 0, "b", 1000), "xy");
});
