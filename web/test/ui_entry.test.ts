// Transcript rows: every entryType and lifecycle marker renders as a small, inert row carrying
// the data-testid contract (entry, data-seq, data-entry-type, data-special).
import { test } from "node:test";
import assert from "node:assert/strict";
import { h } from "preact";
import type { OutputEntry } from "../src/core/api";
import { Entry } from "../src/ui/entry";
import { elements, expand, hazards, text, type El } from "./ui_tree";

const BAD = '<img src=x onerror="window.__pwned=1"><script>alert(2)</script>[x](javascript:alert(3))';

function row(entry: OutputEntry, seq = 7): El {
  const [el] = expand(h(Entry, { item: { seq, entry } }));
  assert.ok(el && typeof el !== "string");
  return el;
}
const e = (entryType: OutputEntry["entryType"], content: string, metadata?: Record<string, unknown>, extra: Partial<OutputEntry> = {}): OutputEntry =>
  ({ entryType, content, timestamp: "2026-12-04T10:00:00Z", ...(metadata ? { metadata } : {}), ...extra });

const CASES: [string, OutputEntry, RegExp, string?][] = [
  ["user text", e("text", BAD, { role: "user" }), /onerror/],
  ["assistant markdown", e("text", `**bold** ${BAD}`, { role: "assistant" }), /bold/],
  ["plan", e("text", "- step one", { role: "assistant", special: "plan", tool_use_id: "t" }), /Plan.*step one/, "plan"],
  ["thinking", e("thinking", `weighing ${BAD}`, { role: "assistant" }), /Thinking.*weighing/],
  ["redacted thinking", e("thinking", "", { redacted: true }), /hidden/],
  ["tool use", e("tool_use", "Bash: ls -la", { tool_name: "Bash", tool_input: { command: BAD } }), /Bash.*ls -la.*onerror/],
  ["tool result", e("tool_result", BAD, { tool_use_id: "t" }), /script/],
  ["long tool result", e("tool_result", "x\n".repeat(50), { tool_use_id: "t" }), /100 chars/],
  ["diff", e("diff", "+a", { tool_name: "Edit" }, { diff: { path: "a.py", truncated: true, lines: [{ type: "add", text: BAD }, { type: "del", text: "old" }, { type: "context", text: "same" }] } }), /a\.py.*\+<img.*-old.* same.*truncated/],
  ["diff without data", e("diff", "+a\n-b"), /\+a/],
  ["error", e("error", BAD, { error_type: "api_error" }), /Error \(api_error\)/],
  ["session died", e("error", "gave up", { special: "session_died" }), /The session stopped/, "session_died"],
  ["session failed", e("error", "no cli", { special: "session_failed" }), /could not start/, "session_failed"],
  ["auth error", e("error", "401", { special: "auth_error" }), /could not sign in/, "auth_error"],
  ["progress", e("progress", "12/40"), /12\/40/],
  ["turn end", e("system", "", { stream_end: true }), /turn ended/],
  ["restart", e("system", "the host stopped — restarting (1 of 2)", { special: "session_restart", reason: "x", interrupted: ["i1", "i2"] }), /restarted.*2 inputs/, "session_restart"],
  ["withdrawn", e("system", "The request to use Bash was withdrawn: x", { special: "card_withdrawn", tool_use_id: "t" }), /withdrawn/, "card_withdrawn"],
  ["edit review", e("system", "Edit proposed (2 files): review it in the editor", { special: "edit_review" }), /Edit proposed/, "edit_review"],
  ["permission line", e("system", "Permission needed: Bash", { special: "permission_request" }), /Permission needed/, "permission_request"],
  ["init line", e("system", "", { subtype: "init" }), /init/],
  ["usage line", e("system", "Tokens: 10 in / 2 out", { usage: {} }), /Tokens/],
];

for (const [name, entry, pattern, special] of CASES) {
  test(`a ${name} row`, () => {
    const el = row(entry);
    assert.equal(el.props["data-testid"], "entry");
    assert.equal(el.props["data-seq"], "7");
    assert.equal(el.props["data-entry-type"], entry.entryType);
    assert.equal(el.props["data-special"], special);
    assert.deepEqual(hazards([el]), []);
    assert.match(text([el]).replace(/\s+/g, " "), pattern);
  });
}

test("thinking is collapsed and long results are collapsible", () => {
  const thinking = elements([row(e("thinking", "deep"))]);
  assert.ok(thinking.some((x) => x.tag === "details" && !x.props["open"]));
  const long = elements([row(e("tool_result", "y".repeat(2000)))]);
  assert.ok(long.some((x) => x.tag === "details"));
  const short = elements([row(e("tool_result", "ok"))]);
  assert.ok(!short.some((x) => x.tag === "details"));
});

test("a row re-renders only when its entry changes", () => {
  const item = { seq: 1, entry: e("text", "a", { role: "assistant" }) };
  const r = new Entry({ item });
  r.props = { item };
  assert.equal(r.shouldComponentUpdate({ item: { seq: 1, entry: { ...item.entry } } }), false);
  assert.equal(r.shouldComponentUpdate({ item: { seq: 2, entry: item.entry } }), true);
  assert.equal(r.shouldComponentUpdate({ item: { seq: 1, entry: e("text", "b") } }), true);
});
