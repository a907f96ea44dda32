// A bridge client's state machine fed with genuine events of a bridge (no relay, no IndexedDB: a
// store that keeps nothing): the heartbeat merge of bug B, presence, two-phase creation, the
// outbox, transcripts and their conflicts, cards and the stored cursor.
import { test } from "node:test";
import assert from "node:assert/strict";
import { finalizeEvent, generateSecretKey, getPublicKey, type Event } from "nostr-tools/pure";
import { v2 as nip44 } from "nostr-tools/nip44";
import { BridgeClientImpl, emptyRow } from "../src/core/bridge";
import type { BridgeStore } from "../src/core/store";
import { bytesToHex } from "../src/core/wire";

const bridgeKey = generateSecretKey();
const bridge = getPublicKey(bridgeKey);

function client() {
  const phoneKey = generateSecretKey();
  const phone = getPublicKey(phoneKey);
  const key = nip44.utils.getConversationKey(bridgeKey, phone);
  const rows: unknown[] = [];
  const store = {
    row: (build: () => unknown) => rows.push(build()), entry() {}, outboxItem() {}, deleteSession() {},
    flush: async () => {}, loadEntries: async () => [], loadOutbox: async () => [], enable() {}, disable() {},
  } as unknown as BridgeStore;
  const changes: string[] = [];
  const c = new BridgeClientImpl(emptyRow({ id: bridge, npub: "npub", machine: "m", relays: [], pairedAt: 0 }, bytesToHex(phoneKey)), store, (ch) => changes.push(ch.topic));
  const sent: unknown[] = [];
  (c as unknown as { send: (cmd: unknown) => Promise<void> }).send = async (cmd) => {
    sent.push(cmd);
  };
  let clock = 1_800_000_000;
  const feed = (message: Record<string, unknown>, kind = 4516, createdAt?: number) => {
    const event: Event = finalizeEvent({ kind, created_at: createdAt ?? clock++, tags: [["p", phone]], content: nip44.encrypt(JSON.stringify(message), key) }, bridgeKey);
    (c as unknown as { onEvent: (sub: string, e: Event, relay: string) => void }).onEvent("sub", event, "ws://r");
    return event;
  };
  return { c, feed, sent, changes, rows };
}

const info = (id: string, extra: Record<string, unknown> = {}) => ({ id, slug: id.slice(0, 8), cwd: "/w", lastActivity: "2026-01-01T00:00:00Z", lineCount: 0, title: null, project: "w", state: "idle", ...extra });
const heartbeat = (sessions: unknown[], extra: Record<string, unknown> = {}) => ({ type: "sessions", machine: "box", sessions, protocolVersion: 10, capabilities: ["push"], pushKey: "BKEY", ...extra });

test("heartbeats: absence marks stale, only tombstones remove, an older heartbeat is ignored", () => {
  const { c, feed } = client();
  feed(heartbeat([info("a"), info("b")]), 30515, 100);
  assert.deepEqual(c.sessions().map((s) => [s.info.id, s.stale]).sort(), [["a", false], ["b", false]]);
  feed(heartbeat([info("a")]), 30515, 101);
  assert.deepEqual(c.sessions().map((s) => [s.info.id, s.stale]).sort(), [["a", false], ["b", true]]);
  feed(heartbeat([info("a")], { removedSessions: ["b"] }), 30515, 102);
  assert.deepEqual(c.sessions().map((s) => s.info.id), ["a"]);
  feed(heartbeat([info("a"), info("b")]), 30515, 99); // a lagging relay's older heartbeat
  assert.deepEqual(c.sessions().map((s) => s.info.id), ["a"]);
  assert.equal(c.machine()?.machine, "box");
  assert.equal(c.machine()?.pushKey, "BKEY");
  assert.equal(c.record.machine, "box");
});

test("machineOffline: presence offline, sessions kept", () => {
  const { c, feed } = client();
  feed(heartbeat([info("a")]), 30515);
  feed(heartbeat([info("a", { state: "offline" })], { machineOffline: true }), 30515);
  assert.equal(c.machine()?.machineOffline, true);
  assert.equal(c.sessions().length, 1);
  assert.equal(c.presence(), "offline");
});

test("every relay gone: connecting for a grace, then offline", () => {
  const { c, feed } = client();
  const inner = c as unknown as {
    pool: { anyConnected: () => boolean }; disconnectedAt: number;
    onRelayState: (relay: string, connected: boolean) => void; everConnected: boolean;
  };
  let up = true;
  inner.pool.anyConnected = () => up;
  inner.everConnected = true;
  feed(heartbeat([info("a")]), 30515);
  assert.equal(c.presence(), "online");
  up = false;
  inner.onRelayState("ws://r", false);
  assert.equal(c.presence(), "connecting");
  inner.disconnectedAt -= 10_001;
  assert.equal(c.presence(), "offline");
});

test("create-session: the placeholder gets the pendingId, and a heartbeat listing it resolves it", async () => {
  const { c, feed, sent } = client();
  await c.createSession({ cwd: "proj", agent: "claude" });
  assert.deepEqual(sent.at(-1), { type: "create-session", cwd: "proj", agent: "claude" });
  assert.equal(c.pending()[0]!.pendingId, null);
  feed({ type: "session-pending", pendingId: "s1", machine: "box", createdAt: "t" });
  assert.equal(c.pending()[0]!.pendingId, "s1");
  feed(heartbeat([info("s1")]), 30515);
  assert.equal(c.pending().length, 0);
  await c.createSession({});
  feed({ type: "session-failed", pendingId: "s2", reason: "no such folder" });
  assert.equal(c.pending()[0]!.failed, "no such folder");
});

test("the outbox: pending → published → confirmed, or failed with the bridge's reason", async () => {
  const { c, feed } = client();
  const published: Event[][] = [];
  (c as unknown as { publishEvents: (e: Event[]) => Promise<void> }).publishEvents = async (e) => {
    published.push(e);
  };
  await c.input("s", "hello");
  await c.input("s", "again");
  const [one, two] = c.outbox("s");
  assert.equal(one!.state, "published");
  assert.equal(published.length, 2);
  assert.equal(published[0]![0]!.kind, 4515);
  feed({ type: "input-ack", sessionId: "s", inputId: one!.inputId });
  feed({ type: "input-failed", sessionId: "s", inputId: two!.inputId, reason: "no-session" });
  assert.deepEqual(c.outbox("s").map((o) => [o.state, o.reason]), [["confirmed", undefined], ["failed", "no-session"]]);
  feed({ type: "input-failed", sessionId: "s", inputId: one!.inputId, reason: "error" }); // an ack is final
  assert.equal(c.outbox("s")[0]!.state, "confirmed");
});

test("live output and sync chunks fill the transcript; a conflicting seq keeps the first copy", () => {
  const { c, feed, sent } = client();
  const entry = (content: string) => ({ entryType: "text", content, timestamp: "t", metadata: { role: "assistant" } });
  feed({ type: "output", sessionId: "s", seq: 1, entry: entry("one") }, 24515);
  feed({ type: "sync-chunk", sessionId: "s", syncId: "y", range: [1, 50], entries: [{ seq: 1, entry: entry("ONE?") }, { seq: 2, entry: entry("two") }] });
  assert.deepEqual(c.transcript("s").map((i) => i.entry.content), ["one", "two"]);
  assert.deepEqual(sent.at(-1), { type: "sync-ack", syncId: "y", range: [1, 50] });
  feed({ type: "output", sessionId: "s", seq: 3, entry: entry("three") }, 4516); // wrong storage class
  assert.equal(c.transcript("s").length, 2);
});

test("only stored responses move the since cursor", () => {
  const { c, feed } = client();
  const cursor = () => (c as unknown as { lastStoredSeen: number }).lastStoredSeen;
  feed(heartbeat([]), 30515, 1_900_000_000);
  feed({ type: "output", sessionId: "s", seq: 1, entry: { entryType: "text", content: "", timestamp: "t" } }, 24515, 1_900_000_001);
  assert.equal(cursor(), 0);
  feed({ type: "close-session-ack", sessionId: "s", success: true }, 4516, 1_800_000_500);
  assert.equal(cursor(), 1_800_000_500);
  feed({ type: "close-session-ack", sessionId: "s", success: true }, 4516, 1_800_000_400);
  assert.equal(cursor(), 1_800_000_500);
});

test("a live permission card shows until answered; the answer is permission-res", async () => {
  const { c, feed, sent } = client();
  feed(heartbeat([info("s", { state: "running" })]), 30515);
  feed({ type: "output", sessionId: "s", seq: 1, entry: { entryType: "system", content: "Permission needed: Bash", timestamp: "t", metadata: { special: "permission_request", tool_use_id: "tu1", tool_name: "Bash", tool_input: { command: "ls" }, reasons: [] } } }, 24515);
  const [card] = c.cards("s");
  assert.equal(card?.kind, "permission");
  if (card?.kind !== "permission") return;
  await c.answerPermission(card, true, "always");
  assert.deepEqual(sent.at(-1), { type: "permission-res", sessionId: "s", requestId: "tu1", allow: true, modifier: "always" });
  assert.equal(c.cards("s").length, 0);
});

test("a heartbeat that says the session stopped waiting closes a card answered elsewhere", () => {
  const { c, feed } = client();
  feed({ type: "output", sessionId: "s", seq: 1, entry: { entryType: "system", content: "q", timestamp: "t", metadata: { special: "ask_question", tool_use_id: "q1", question_index: 0, question_count: 1, options: ["a", "b"] } } }, 24515);
  assert.equal(c.cards("s").length, 1);
  feed(heartbeat([info("s", { state: "waiting_question" })]), 30515);
  assert.equal(c.cards("s").length, 1);
  feed(heartbeat([info("s", { state: "running" })]), 30515);
  assert.equal(c.cards("s").length, 0);
});

test("question answers: one option by keypress, several or free text by question-input", async () => {
  const { c, feed, sent } = client();
  feed({ type: "output", sessionId: "s", seq: 1, entry: { entryType: "system", content: "q", timestamp: "t", metadata: { special: "ask_question", tool_use_id: "q1", question_index: 0, question_count: 2, multiSelect: true, options: [{ label: "A" }, { label: "B" }, { label: "C" }] } } }, 24515);
  feed({ type: "output", sessionId: "s", seq: 2, entry: { entryType: "system", content: "r", timestamp: "t", metadata: { special: "ask_question", tool_use_id: "q1", question_index: 1, question_count: 2, options: [{ label: "X" }] } } }, 24515);
  const first = c.cards("s")[0]!;
  assert.ok(first.kind === "question" && first.index === 0);
  if (first.kind !== "question") return;
  await c.answerQuestion(first, [2, 0]);
  assert.deepEqual(sent.at(-1), { type: "question-input", sessionId: "s", text: "A, C", optionCount: 3 });
  const second = c.cards("s")[0]!;
  assert.ok(second.kind === "question" && second.index === 1);
  if (second.kind !== "question") return;
  await c.answerQuestion(second, [0]);
  assert.deepEqual(sent.at(-1), { type: "keypress", sessionId: "s", key: "1", context: "question" });
  await assert.rejects(c.answerQuestion(second, []));
});

test("an outbox item learns the seq of its user entry (oldest item with that text first)", async () => {
  const { c, feed } = client();
  (c as unknown as { publishEvents: () => Promise<void> }).publishEvents = async () => {};
  await c.input("s", "same");
  await c.input("s", "same");
  feed({ type: "output", sessionId: "s", seq: 7, entry: { entryType: "text", content: "same", timestamp: "t", metadata: { role: "user" } } }, 24515);
  assert.deepEqual(c.outbox("s").map((o) => o.seq), [7, undefined]);
  feed({ type: "output", sessionId: "s", seq: 8, entry: { entryType: "text", content: "same", timestamp: "t", metadata: { role: "assistant" } } }, 24515);
  assert.deepEqual(c.outbox("s").map((o) => o.seq), [7, undefined]);
});

test("missing: the seqs below the heartbeat's seqHigh this device does not hold", () => {
  const { c, feed } = client();
  const book = (c as unknown as { book: (id: string) => { loaded: boolean; insert: (seq: number, e: unknown, src: string) => void } }).book("a");
  book.loaded = true;
  feed(heartbeat([info("a", { seqHigh: 10, lineCount: 10 })]), 30515);
  const entry = { entryType: "text", content: "x", timestamp: "t" };
  for (const seq of [1, 2, 3, 7]) book.insert(seq, entry, "test");
  assert.equal(c.missing("a"), 6);
  for (const seq of [4, 5, 6, 8, 9, 10]) book.insert(seq, entry, "test");
  assert.equal(c.missing("a"), 0);
  assert.equal(c.missing("unknown"), 0);
});
