// The push payload as the service worker and the page read it: hostile input, validated.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parsePushPayload, pushTitle } from "../src/ui/pushpayload";
import { base64UrlBytes } from "../src/ui/push";

const bridge = "ab".repeat(32);

test("each reason has its words; a count above one is shown", () => {
  const words: Record<string, string> = {
    approval: "workstation: approval waiting", plan: "workstation: plan to approve", question: "workstation: question for you",
    "turn-ended": "workstation: turn finished", "session-died": "workstation: session stopped",
  };
  for (const [reason, title] of Object.entries(words)) {
    const facts = parsePushPayload({ v: 1, bridge, machine: "workstation", reason, count: 1 });
    assert.ok(facts);
    assert.equal(pushTitle(facts), title);
  }
  assert.equal(pushTitle(parsePushPayload({ v: 1, bridge, machine: "m", reason: "approval", count: 3 })!), "m: approval waiting (3)");
});

test("anything else is refused or cut down", () => {
  for (const bad of [null, 1, "x", [], {}, { v: 2, reason: "plan" }, { v: 1, reason: "rm -rf" }, { v: 1, reason: "toString" },
    { v: 1, reason: "__proto__" }, { v: 1, reason: ["plan"] }]) {
    assert.equal(parsePushPayload(bad), null, JSON.stringify(bad));
  }
  const facts = parsePushPayload({ v: 1, bridge: "not hex", machine: `${"é".repeat(100)}\n<b>`, reason: "plan", count: 1e9, text: "secret" });
  assert.ok(facts);
  assert.equal(facts.bridge, "");
  assert.equal(Array.from(facts.machine).length, 64);
  assert.equal(facts.count, 999);
  assert.ok(!("text" in facts));
  assert.equal(parsePushPayload({ v: 1, reason: "plan", machine: 5, count: -1 })!.machine, "Your machine");
  assert.equal(parsePushPayload({ v: 1, reason: "plan", count: 2.5 })!.count, 1);
});

test("the VAPID key decodes from base64url without padding", () => {
  const key = base64UrlBytes("BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM");
  assert.ok(key);
  assert.equal(key.length, 65);
  assert.equal(key[0], 4);
  assert.equal(base64UrlBytes("not+base64/url="), null);
  assert.deepEqual(Array.from(base64UrlBytes("AQID")!), [1, 2, 3]);
});
