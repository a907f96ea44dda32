import { test } from "node:test";
import assert from "node:assert/strict";
import { SyncTracker } from "../src/core/sync";
import { subscriptionFilters, expectedKind } from "../src/core/bridge";
import { Transcript } from "../src/core/transcript";

test("a complete sync is done after its sync-end", () => {
  const t = new SyncTracker("s");
  t.request([[1, 10]]);
  t.onBegin("a", 20);
  assert.equal(t.onEnd("a", [[11, 20]]), "done");
  assert.equal(t.complete, true);
});

test("a gap in deliveredRanges is re-requested, at most 3 times, then ends incomplete", () => {
  const t = new SyncTracker("s");
  t.request([]);
  for (let round = 0; round < 3; round++) {
    t.onBegin(`x${round}`, 100);
    assert.equal(t.onEnd(`x${round}`, [[1, 50]]), "rerequest");
    t.request([[1, 50]]);
  }
  t.onBegin("last", 100);
  assert.equal(t.onEnd("last", [[51, 90]]), "done");
  assert.equal(t.complete, false);
  assert.deepEqual(t.missing, [[91, 100]]);
});

test("only the sync-end of the latest sync-begin counts (a newer sync replaces the old one)", () => {
  const t = new SyncTracker("s");
  t.request([]);
  t.onBegin("old", 10);
  t.onBegin("other-tab", 10); // another tab with the same key asked: the bridge replaced our sync
  assert.equal(t.onEnd("old", [[1, 10]]), "ignored");
  assert.equal(t.onEnd("other-tab", [[1, 10]]), "done");
  assert.equal(t.complete, true);
});

test("a sync-begin nobody here asked for is still the sync to follow", () => {
  const t = new SyncTracker("s");
  t.onBegin("x", 5);
  assert.equal(t.onEnd("x", [[1, 5]]), "done");
});

test("since rules: 30515 and 24515 never; 4516 lastStoredSeen - 60, omitted while 0", () => {
  const fresh = subscriptionFilters("b".repeat(64), "p".repeat(64), 0);
  assert.deepEqual(Object.values(fresh).map((f) => f[0]!.kinds[0]).sort((a, b) => a! - b!), [4516, 24515, 30515]);
  for (const filters of Object.values(fresh)) {
    assert.equal(filters[0]!.since, undefined);
    assert.deepEqual(filters[0]!.authors, ["b".repeat(64)]);
    assert.deepEqual(filters[0]!["#p"], ["p".repeat(64)]);
  }
  const later = subscriptionFilters("b".repeat(64), "p".repeat(64), 1_700_000_000);
  const byKind = new Map(Object.values(later).map((f) => [f[0]!.kinds[0], f[0]!]));
  assert.equal(byKind.get(4516)!.since, 1_700_000_000 - 60);
  assert.equal(byKind.get(30515)!.since, undefined);
  assert.equal(byKind.get(24515)!.since, undefined);
});

test("each message type has its storage class", () => {
  assert.equal(expectedKind("sessions"), 30515);
  assert.equal(expectedKind("output"), 24515);
  assert.equal(expectedKind("usage"), 24515);
  assert.equal(expectedKind("sync-chunk"), 4516);
  assert.equal(expectedKind("input-ack"), 4516);
});

test("a transcript keeps the first copy of a seq, and chunk-covered ranges count as held", () => {
  const t = new Transcript("s");
  const entry = { entryType: "text" as const, content: "a", timestamp: "t" };
  const errors: unknown[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => errors.push(args);
  try {
    assert.equal(t.insert(2, entry, "live"), "inserted");
    assert.equal(t.insert(2, { ...entry }, "sync"), "duplicate");
    assert.equal(t.insert(2, { ...entry, content: "b" }, "sync"), "conflict");
  } finally {
    console.error = original;
  }
  assert.equal(errors.length, 1);
  assert.equal(t.items()[0]!.entry.content, "a");
  t.insert(3, entry, "live");
  t.cover([5, 10]);
  assert.deepEqual(t.haveRanges(), [[2, 3], [5, 10]]);
  assert.equal(t.has(7), true);
  assert.equal(t.has(4), false);
});

test("transcript items stay sorted whether seqs arrive in order or not", () => {
  const t = new Transcript("s");
  const e = (c: string) => ({ entryType: "text" as const, content: c, timestamp: "t" });
  t.insert(1, e("1"), "live");
  const first = t.items();
  t.insert(2, e("2"), "live");
  t.insert(3, e("3"), "live");
  const second = t.items();
  assert.notEqual(first, second);
  assert.deepEqual(second.map((i) => i.seq), [1, 2, 3]);
  t.insert(10, e("10"), "live");
  t.insert(5, e("5"), "sync");
  assert.deepEqual(t.items().map((i) => i.seq), [1, 2, 3, 5, 10]);
  assert.equal(t.highest(), 10);
  t.insert(11, e("11"), "live");
  assert.deepEqual(t.items().map((i) => i.seq), [1, 2, 3, 5, 10, 11]);
});
