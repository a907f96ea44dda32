// The push payload (PROTOCOL.md, Web Push): `{"v":1,"bridge","machine","reason","count"}` and no
// content. Read by the service worker from the push service and by the page from the worker, so
// it is validated in one place: reason from the fixed list, machine cut to 64 characters, bridge
// a pubkey hex or nothing, count a small positive integer.

export const PUSH_REASONS: Readonly<Record<string, string>> = {
  approval: "approval waiting",
  plan: "plan to approve",
  question: "question for you",
  "turn-ended": "turn finished",
  "session-died": "session stopped",
};

export interface PushFacts { bridge: string; machine: string; reason: string; count: number }

/** The facts of a push payload (already JSON-parsed), or null when it is not one. */
export function parsePushPayload(raw: unknown): PushFacts | null {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return null;
  const o = raw as Record<string, unknown>;
  if (o["v"] !== 1) return null;
  const reason = o["reason"];
  if (typeof reason !== "string" || !Object.hasOwn(PUSH_REASONS, reason)) return null;
  const bridge = typeof o["bridge"] === "string" && /^[0-9a-f]{64}$/.test(o["bridge"]) ? o["bridge"] : "";
  const name = typeof o["machine"] === "string" ? o["machine"].replace(/[\u0000-\u001f\u007f]/g, " ").trim() : "";
  const machine = name ? Array.from(name).slice(0, 64).join("") : "Your machine";
  const n = o["count"];
  const count = typeof n === "number" && Number.isInteger(n) && n > 0 ? Math.min(n, 999) : 1;
  return { bridge, machine, reason, count };
}

/** The notification's title: "<machine>: approval waiting (3)". */
export function pushTitle(facts: PushFacts): string {
  const words = PUSH_REASONS[facts.reason] ?? "needs you";
  return `${facts.machine}: ${words}${facts.count > 1 ? ` (${facts.count})` : ""}`;
}
