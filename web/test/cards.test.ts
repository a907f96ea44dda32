import { test } from "node:test";
import assert from "node:assert/strict";
import type { OutputEntry, TranscriptItem } from "../src/core/api";
import { deriveCards, type CardContext } from "../src/core/cards";

const sys = (metadata: Record<string, unknown>, content = ""): OutputEntry => ({ entryType: "system", content, timestamp: "t", metadata });
const items = (...entries: OutputEntry[]): TranscriptItem[] => entries.map((entry, i) => ({ seq: i + 1, entry }));
const live = (overrides: Partial<CardContext> = {}): CardContext => ({
  sessionId: "s", stateTick: 0, arrival: () => 1, answered: new Set(), ...overrides,
});

const permission = sys({ special: "permission_request", tool_name: "Bash", tool_use_id: "t1", tool_input: { command: "ls" }, reasons: ["floor:shell"], reason_text: "runs a command" }, "Permission needed: Bash");

test("a permission request is a card with its metadata", () => {
  const cards = deriveCards(items(permission), live());
  assert.equal(cards.length, 1);
  const card = cards[0]!;
  assert.equal(card.kind, "permission");
  if (card.kind !== "permission") return;
  assert.equal(card.requestId, "t1");
  assert.equal(card.toolName, "Bash");
  assert.deepEqual(card.toolInput, { command: "ls" });
  assert.deepEqual(card.reasons, ["floor:shell"]);
  assert.equal(card.reasonText, "runs a command");
});

test("a card closes on tool_result, card_withdrawn, stream_end, session_died", () => {
  const result: OutputEntry = { entryType: "tool_result", content: "ok", timestamp: "t", metadata: { tool_use_id: "t1" } };
  assert.equal(deriveCards(items(permission, result), live()).length, 0);
  assert.equal(deriveCards(items(permission, sys({ special: "card_withdrawn", tool_use_id: "t1" })), live()).length, 0);
  assert.equal(deriveCards(items(permission, sys({ special: "card_withdrawn", tool_use_id: "other" })), live()).length, 1);
  assert.equal(deriveCards(items(permission, sys({ stream_end: true })), live()).length, 0);
  const died: OutputEntry = { entryType: "error", content: "x", timestamp: "t", metadata: { special: "session_died" } };
  assert.equal(deriveCards(items(permission, died), live()).length, 0);
});

test("answered here, the card is gone", () => {
  assert.equal(deriveCards(items(permission), live({ answered: new Set(["t1"]) })).length, 0);
});

test("a heartbeat after the card that says the session is not waiting hides it; a waiting one keeps it", () => {
  assert.equal(deriveCards(items(permission), live({ state: "running", stateTick: 5, arrival: () => 3 })).length, 0);
  assert.equal(deriveCards(items(permission), live({ state: "running", stateTick: 2, arrival: () => 3 })).length, 1);
  assert.equal(deriveCards(items(permission), live({ state: "waiting_permission", stateTick: 5, arrival: () => 0 })).length, 1);
  // restored from storage (arrival 0) while the session idles: an old card, not shown
  assert.equal(deriveCards(items(permission), live({ state: "idle", stateTick: 1, arrival: () => 0 })).length, 0);
});

test("a plan card carries the plan text of its tool_use_id", () => {
  const plan: OutputEntry = { entryType: "text", content: "# Plan", timestamp: "t", metadata: { role: "assistant", special: "plan", tool_use_id: "p1" } };
  const cards = deriveCards(items(plan, sys({ special: "plan_approval", tool_use_id: "p1", has_plan: true }, "Plan approval needed")), live());
  assert.equal(cards.length, 1);
  assert.deepEqual(cards[0], { kind: "plan", sessionId: "s", requestId: "p1", seq: 2, plan: "# Plan" });
});

test("a question group shows its first unanswered question; options are checked", () => {
  const q = (index: number, extra: Record<string, unknown> = {}) => sys({
    special: "ask_question", tool_use_id: "q1", question_index: index, question_count: 2,
    options: [{ label: "A", description: "first" }, "B", { nolabel: 1 }, 7], ...extra,
  }, `question ${index}`);
  const transcript = items(q(0, { header: "Pick", multiSelect: true }), q(1));
  const first = deriveCards(transcript, live());
  assert.equal(first.length, 1);
  const card = first[0]!;
  assert.equal(card.kind, "question");
  if (card.kind !== "question") return;
  assert.equal(card.index, 0);
  assert.equal(card.count, 2);
  assert.equal(card.header, "Pick");
  assert.equal(card.multiSelect, true);
  assert.deepEqual(card.options, [{ label: "A", description: "first" }, { label: "B" }]);
  const second = deriveCards(transcript, live({ answered: new Set(["q1#0"]) }));
  assert.equal(second.length, 1);
  assert.equal(second[0]!.kind === "question" && second[0]!.index, 1);
  assert.equal(deriveCards(transcript, live({ answered: new Set(["q1#0", "q1#1"]) })).length, 0);
});

test("hostile metadata is ignored, never trusted", () => {
  const weird = [
    sys({ special: "permission_request", tool_use_id: 5 }),
    sys({ special: "permission_request" }),
    { entryType: "system", content: "", timestamp: "t", metadata: ["special"] } as unknown as OutputEntry,
    sys({ special: "ask_question", tool_use_id: "q", question_index: -1, options: "nope" }),
  ];
  const cards = deriveCards(items(...weird), live());
  assert.equal(cards.length, 1);
  assert.equal(cards[0]!.kind === "question" && cards[0]!.index, 0);
  assert.deepEqual(cards[0]!.kind === "question" && cards[0]!.options, []);
});
