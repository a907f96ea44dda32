// The decoder against the project's conformance corpus (tests/conformance/corpus.json): every
// valid bridge → phone fixture decodes; every rejected fixture of a type this client decodes fails;
// forward-compatible fixtures decode with the unknown fields stripped.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { decodeBridgeMessage, DecodeError } from "../src/core/validate";

const corpusPath = join(import.meta.dirname, "..", "..", "tests", "conformance", "corpus.json");
const corpus = JSON.parse(readFileSync(corpusPath, "utf8")) as {
  bridgeToPhone: { valid: Record<string, unknown>[]; rejected: Record<string, unknown>[] };
  forwardCompatible: { dir: string; msg: Record<string, unknown> }[];
};
const IGNORED = new Set(["gsd-state", "credentials-ack", "device-config-ack", "provider-profiles", "provider-profile-ack", "session-replaced"]);

test("every valid bridge → phone fixture decodes", () => {
  assert.ok(corpus.bridgeToPhone.valid.length > 30);
  for (const msg of corpus.bridgeToPhone.valid) {
    const decoded = decodeBridgeMessage(JSON.stringify(msg));
    assert.equal(decoded.type, IGNORED.has(msg.type as string) ? "ignored" : msg.type);
  }
});

test("every rejected fixture of a decoded type is refused with a DecodeError", () => {
  let checked = 0;
  for (const msg of corpus.bridgeToPhone.rejected) {
    if (typeof msg === "object" && msg !== null && IGNORED.has(msg.type as string)) continue;
    assert.throws(() => decodeBridgeMessage(JSON.stringify(msg)), DecodeError, JSON.stringify(msg).slice(0, 200));
    checked++;
  }
  assert.ok(checked > 30, `${checked}`);
});

test("forward-compatible fixtures decode, unknown fields stripped", () => {
  for (const { dir, msg } of corpus.forwardCompatible) {
    if (dir !== "b2p") continue;
    const decoded = decodeBridgeMessage(JSON.stringify(msg)) as unknown as Record<string, unknown>;
    for (const key of Object.keys(decoded)) if (decoded.type !== "ignored") assert.ok(key in msg, key);
  }
});

test("garbage is a DecodeError, never another exception", () => {
  for (const text of ["", "[]", "null", "{", '{"type":7}', '{"type":"teleport"}', "1e999", '{"type":"output","sessionId":"s","seq":-1,"entry":{}}']) {
    assert.throws(() => decodeBridgeMessage(text), DecodeError, text);
  }
  const deep = '{"type":"output","sessionId":"s","seq":1,"entry":{"entryType":"text","content":"","timestamp":"t","metadata":' + '{"a":'.repeat(70) + "1" + "}".repeat(70) + "}}";
  assert.throws(() => decodeBridgeMessage(deep), /64 levels/);
});

test("a value outside a vocabulary rejects the message; the error names the path, not the value", () => {
  const msg = { type: "sessions", machine: "m", protocolVersion: 10, sessions: [{ id: "x", slug: "x", cwd: "/", lastActivity: "t", lineCount: 0, title: null, project: "p", state: "SECRET" }] };
  assert.throws(() => decodeBridgeMessage(JSON.stringify(msg)), (err: unknown) => {
    assert.ok(err instanceof DecodeError);
    assert.match(err.message, /sessions\.0\.state/);
    assert.ok(!err.message.includes("SECRET"));
    return true;
  });
});
