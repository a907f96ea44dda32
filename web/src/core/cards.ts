// Open cards (PROTOCOL.md §14), derived from a session's transcript and state. A card opens with
// its `permission_request` / `plan_approval` / `ask_question` entry and closes when:
// - `card_withdrawn` names its tool_use_id, or a `tool_result` for that id arrives (the turn went on);
// - a `stream_end` entry, or a `session_died` / `session_failed` error, ends the turn;
// - it was answered on this device (a question group shows its first unanswered question);
// - a heartbeat applied after the card arrived says the session is no longer waiting.
// Metadata is free-form hostile JSON: every field is checked before use.
import type { Card, SessionState, TranscriptItem } from "./api";

export interface CardContext {
  sessionId: string;
  /** The session's state in the last heartbeat (undefined: none heard). */
  state?: SessionState;
  /** When (a local tick) that state was applied; compared with `arrival`. */
  stateTick: number;
  /** When (a local tick) the entry of a seq arrived; 0 for entries loaded from storage. */
  arrival: (seq: number) => number;
  /** Answered here: a requestId, or `${requestId}#${index}` for one question of a group. */
  answered: ReadonlySet<string>;
}

type QuestionCard = Card & { kind: "question" };

function meta(item: TranscriptItem): Record<string, unknown> | undefined {
  const m = item.entry.metadata;
  return typeof m === "object" && m !== null && !Array.isArray(m) ? m : undefined;
}
function s(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}
function natural(v: unknown): number | undefined {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : undefined;
}
function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}
function options(v: unknown): { label: string; description?: string }[] {
  if (!Array.isArray(v)) return [];
  const out: { label: string; description?: string }[] = [];
  for (const item of v) {
    if (typeof item === "string") out.push({ label: item });
    else if (typeof item === "object" && item !== null && typeof (item as Record<string, unknown>).label === "string") {
      const o = item as Record<string, unknown>;
      const description = s(o.description);
      out.push(description !== undefined ? { label: o.label as string, description } : { label: o.label as string });
    }
  }
  return out;
}

const WAITING: readonly (SessionState | undefined)[] = ["waiting_permission", "waiting_question"];

export function deriveCards(items: readonly TranscriptItem[], ctx: CardContext): Card[] {
  const { sessionId } = ctx;
  const plans = new Map<string, string>();
  const open = new Map<string, Card | QuestionCard[]>();
  for (const item of items) {
    const m = meta(item);
    if (m === undefined) continue;
    const special = s(m.special);
    const id = s(m.tool_use_id);
    const { entryType, content } = item.entry;
    if (entryType === "text" && special === "plan" && id !== undefined) {
      plans.set(id, content);
    } else if (entryType === "system" && special === "permission_request" && id) {
      const card: Card = {
        kind: "permission", sessionId, requestId: id, seq: item.seq,
        toolName: s(m.tool_name) ?? "tool", toolInput: m.tool_input, reasons: strings(m.reasons),
      };
      const reasonText = s(m.reason_text);
      const description = s(m.description);
      if (reasonText !== undefined) card.reasonText = reasonText;
      if (description !== undefined) card.description = description;
      open.set(id, card);
    } else if (entryType === "system" && special === "plan_approval" && id) {
      const card: Card = { kind: "plan", sessionId, requestId: id, seq: item.seq };
      const plan = plans.get(id);
      if (plan !== undefined) card.plan = plan;
      open.set(id, card);
    } else if (entryType === "system" && special === "ask_question" && id) {
      const index = natural(m.question_index) ?? 0;
      const count = Math.max(natural(m.question_count) ?? 1, index + 1);
      const card: QuestionCard = {
        kind: "question", sessionId, requestId: id, seq: item.seq, question: content,
        options: options(m.options), multiSelect: m.multiSelect === true, index, count,
      };
      const header = s(m.header);
      if (header !== undefined) card.header = header;
      const group = open.get(id);
      const list = Array.isArray(group) ? group.filter((q) => q.index !== index) : [];
      list.push(card);
      open.set(id, list);
    } else if (special === "card_withdrawn" && id !== undefined) {
      open.delete(id);
    } else if (entryType === "tool_result" && id !== undefined) {
      open.delete(id);
    } else if ((entryType === "system" && m.stream_end === true)
      || (entryType === "error" && (special === "session_died" || special === "session_failed"))) {
      open.clear();
    }
  }
  const cards: Card[] = [];
  const waiting = WAITING.includes(ctx.state);
  for (const [id, value] of open) {
    const group = Array.isArray(value) ? [...value].sort((a, b) => a.index - b.index) : [value];
    const newest = Math.max(...group.map((c) => ctx.arrival(c.seq)));
    if (ctx.state !== undefined && !waiting && ctx.stateTick > newest) continue;
    if (!Array.isArray(value)) {
      if (!ctx.answered.has(id)) cards.push(value);
      continue;
    }
    const next = group.find((c) => c.kind === "question" && !ctx.answered.has(`${id}#${c.index}`));
    if (next !== undefined) cards.push(next);
  }
  return cards.sort((a, b) => a.seq - b.seq);
}
