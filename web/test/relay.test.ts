// The relay pool against a stand-in WebSocket (node has none built in): REQ on every (re)connect
// with filters built then, the OK rules of PROTOCOL.md §3, reconnect with backoff, wake().
import { test } from "node:test";
import assert from "node:assert/strict";
import { finalizeEvent, generateSecretKey } from "nostr-tools/pure";
import { RelayPool, type Filter } from "../src/core/relay";

class FakeSocket {
  static OPEN = 1;
  static all: FakeSocket[] = [];
  readyState = 0;
  sent: unknown[] = [];
  onopen: (() => void) | null = null;
  onclose: (() => void) | null = null;
  onerror: (() => void) | null = null;
  onmessage: ((m: { data: unknown }) => void) | null = null;
  constructor(readonly url: string) {
    FakeSocket.all.push(this);
  }
  send(text: string) {
    this.sent.push(JSON.parse(text));
  }
  close() {
    this.readyState = 3;
  }
  open() {
    this.readyState = 1;
    this.onopen?.();
  }
  drop() {
    this.readyState = 3;
    this.onclose?.();
  }
  deliver(message: unknown) {
    this.onmessage?.({ data: typeof message === "string" ? message : JSON.stringify(message) });
  }
}
(globalThis as unknown as { WebSocket: unknown }).WebSocket = FakeSocket;

const sockets = (url: string) => FakeSocket.all.filter((s) => s.url === url);
const last = (url: string) => sockets(url).at(-1)!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const event = () => finalizeEvent({ kind: 4515, created_at: 1, tags: [], content: "x" }, generateSecretKey());

function pool() {
  const got: [string, string][] = [];
  const states: [string, boolean][] = [];
  const p = new RelayPool({
    onEvent: (sub, e) => got.push([sub, e.id]),
    onEose: () => {},
    onState: (relay, connected) => states.push([relay, connected]),
  });
  return { p, got, states };
}

test("subscriptions go out on every connect, with filters built at that moment", async () => {
  const { p, states } = pool();
  let since = 0;
  p.subscribe({ id: "s", filters: (): Filter[] => [since ? { kinds: [4516], since } : { kinds: [4516] }] });
  p.add("ws://a");
  last("ws://a").open();
  assert.deepEqual(last("ws://a").sent, [["REQ", "s", { kinds: [4516] }]]);
  since = 100;
  last("ws://a").drop();
  assert.deepEqual(states, [["ws://a", true], ["ws://a", false]]);
  p.wake(); // at once, not after the backoff
  assert.equal(sockets("ws://a").length, 2);
  last("ws://a").open();
  assert.deepEqual(last("ws://a").sent, [["REQ", "s", { kinds: [4516], since: 100 }]]);
  p.close();
});

test("a dropped connection comes back by itself, after a backoff", async () => {
  const { p } = pool();
  p.add("ws://b");
  last("ws://b").open();
  last("ws://b").drop();
  assert.equal(sockets("ws://b").length, 1);
  await sleep(600);
  assert.equal(sockets("ws://b").length, 2);
  p.close();
});

test("publish: accepted when one relay says OK true, or refuses as replaced / newer event", async () => {
  const { p } = pool();
  p.add("ws://c");
  p.add("ws://d");
  last("ws://c").open();
  last("ws://d").open();
  const e1 = event();
  const r1 = p.publish(e1);
  await sleep(0);
  last("ws://c").deliver(["OK", e1.id, false, "blocked: no"]);
  last("ws://d").deliver(["OK", e1.id, true, ""]);
  assert.equal((await r1).accepted, true);
  const e2 = event();
  const r2 = p.publish(e2);
  await sleep(0);
  last("ws://c").deliver(["OK", e2.id, false, "error: a newer event exists"]);
  assert.equal((await r2).accepted, true);
  const e3 = event();
  const r3 = p.publish(e3);
  await sleep(0);
  last("ws://c").deliver(["OK", e3.id, false, "blocked: not allowed"]);
  last("ws://d").deliver(["OK", e3.id, false, "invalid: bad"]);
  const result = await r3;
  assert.equal(result.accepted, false);
  assert.deepEqual(result.answers, { "ws://c": "blocked: not allowed", "ws://d": "invalid: bad" });
  p.close();
});

test("with no relay connected a publish waits for one, then gives up", async () => {
  const { p } = pool();
  p.add("ws://e");
  const e = event();
  const waiting = p.publish(e, 200);
  await sleep(50);
  last("ws://e").open();
  await sleep(0);
  assert.deepEqual(last("ws://e").sent.at(-1), ["EVENT", JSON.parse(JSON.stringify(e))]);
  last("ws://e").deliver(["OK", e.id, true, ""]);
  assert.equal((await waiting).accepted, true);
  p.close();
  const { p: q } = pool();
  q.add("ws://f");
  assert.equal((await q.publish(event(), 100)).accepted, false);
  q.close();
});

test("malformed relay messages and events of unknown subscriptions are dropped", () => {
  const { p, got } = pool();
  p.subscribe({ id: "s", filters: () => [{ kinds: [1] }] });
  p.add("ws://g");
  last("ws://g").open();
  const warn = console.warn;
  console.warn = () => {};
  try {
    const e = event();
    for (const message of ["not json", "{}", ["EVENT"], ["EVENT", "s", { ...e, id: "short" }], ["EVENT", "other", e], ["EVENT", "s", { ...e, tags: [[1]] }]]) {
      last("ws://g").deliver(message);
    }
    assert.equal(got.length, 0);
    last("ws://g").deliver(["EVENT", "s", e]);
    assert.deepEqual(got, [["s", e.id]]);
  } finally {
    console.warn = warn;
  }
  p.close();
});
