// The inbound pipeline against hostile and odd events: only genuine, well-formed messages of the
// bridge, addressed to this device and on their storage class, come out; the rest are refused
// with a reason, and duplicates are recognised (also across a reload, by the exported ids).
import { test } from "node:test";
import assert from "node:assert/strict";
import { finalizeEvent, generateSecretKey, getPublicKey, type Event } from "nostr-tools/pure";
import { v2 as nip44 } from "nostr-tools/nip44";
import { Inbound, SeenIds } from "../src/core/inbound";
import { split } from "../src/core/chunks";

const bridgeKey = generateSecretKey();
const phoneKey = generateSecretKey();
const bridge = getPublicKey(bridgeKey);
const phone = getPublicKey(phoneKey);
const key = nip44.utils.getConversationKey(phoneKey, bridge);
const bridgeSide = nip44.utils.getConversationKey(bridgeKey, phone);

function event(plaintext: string, kind = 4516, opts: { signer?: Uint8Array; p?: string; content?: string; created_at?: number } = {}): Event {
  return finalizeEvent({
    kind, created_at: opts.created_at ?? 1_800_000_000, tags: [["p", opts.p ?? phone]],
    content: opts.content ?? nip44.encrypt(plaintext, bridgeSide),
  }, opts.signer ?? bridgeKey);
}
const ack = JSON.stringify({ type: "input-ack", sessionId: "s", inputId: "i1" });
const output = (content: string) => JSON.stringify({ type: "output", sessionId: "s", seq: 1, entry: { entryType: "text", content, timestamp: "t" } });

test("a genuine message comes out once; its replay is a duplicate, also after a reload", () => {
  const inbound = new Inbound(bridge, phone, key, new SeenIds());
  const e = event(ack);
  const first = inbound.feed(e, 0);
  assert.equal(first.kind, "message");
  assert.equal(first.kind === "message" && first.message.type, "input-ack");
  assert.equal(first.kind === "message" && first.fresh, true);
  assert.equal(inbound.feed(e, 0).kind, "duplicate");
  const reloaded = new Inbound(bridge, phone, key, new SeenIds(inbound.seen.export()));
  assert.equal(reloaded.feed(e, 0).kind, "duplicate");
});

test("a replayed heartbeat is handed on again, not counted as fresh", () => {
  const inbound = new Inbound(bridge, phone, key, new SeenIds());
  const hb = event(JSON.stringify({ type: "sessions", machine: "m", sessions: [], protocolVersion: 10 }), 30515);
  assert.equal(inbound.feed(hb, 0).kind, "message");
  const again = inbound.feed(hb, 0);
  assert.equal(again.kind, "message");
  assert.equal(again.kind === "message" && again.fresh, false);
});

test("hostile events are dropped with a reason", () => {
  const inbound = new Inbound(bridge, phone, key, new SeenIds());
  const stranger = generateSecretKey();
  const forged = { ...event(ack), content: nip44.encrypt(JSON.stringify({ type: "input-ack", sessionId: "s", inputId: "forged" }), bridgeSide) };
  const cases: [Event, RegExp][] = [
    [event(ack, 4516, { signer: stranger }), /not from the bridge/],
    [{ ...event(ack, 4516, { signer: stranger }), pubkey: bridge }, /bad signature/],
    [forged, /bad signature/],
    [event(ack, 4516, { p: getPublicKey(stranger) }), /not addressed/],
    [event(ack, 1), /kind 1/],
    [event("", 4516, { content: "not nip44" }), /does not decrypt/],
    [event("", 4516, { content: nip44.encrypt(ack, nip44.utils.getConversationKey(stranger, phone)) }), /does not decrypt/],
    [event("{nope"), /invalid JSON/],
    [event(JSON.stringify({ type: "input-ack", sessionId: "s" })), /inputId is required/],
    [event(JSON.stringify({ type: "teleport" })), /unknown message type/],
    [event(output("x"), 4516), /output arrived as kind 4516/],
    [event(ack, 24515), /input-ack arrived as kind 24515/],
  ];
  for (const [e, reason] of cases) {
    const result = inbound.feed(e, 0);
    assert.equal(result.kind, "dropped", String(reason));
    assert.match(result.kind === "dropped" ? result.reason : "", reason);
  }
});

test("a fragmented message is joined from its chunks, in any order", () => {
  const inbound = new Inbound(bridge, phone, key, new SeenIds());
  const text = output("y".repeat(100_000));
  const parts = split(text, "c1").map((part) => event(part, 24515));
  assert.ok(parts.length >= 3);
  const results = [parts[2]!, parts[0]!, ...parts.slice(3), parts[1]!].map((e) => inbound.feed(e, 0));
  assert.ok(results.slice(0, -1).every((r) => r.kind === "pending"));
  const last = results[results.length - 1]!;
  assert.equal(last.kind, "message");
  assert.equal(last.kind === "message" && last.message.type === "output" && last.message.entry.content.length, 100_000);
});

test("the seen set is bounded, oldest out first", () => {
  const seen = new SeenIds([], 3);
  for (const id of ["a", "b", "c", "d"]) seen.add(id);
  assert.deepEqual(seen.export(), ["b", "c", "d"]);
  assert.equal(seen.has("a"), false);
});
