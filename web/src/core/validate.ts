// Decoding of the bridge's messages (PROTOCOL.md §5, §7, §8). The decrypted JSON is hostile input:
// every field this client uses is checked for its JSON type, bounds and vocabulary; unknown fields
// are stripped (objects are rebuilt from the known keys only); anything that does not fit throws a
// DecodeError whose text names the path, never the value.
import type {
  AgentDescriptor, DiffData, EffortLevel, ModelEntry, OutputEntry, OutputEntryType, PermissionMode,
  RemoteSessionInfo, SessionState, UsageData, UsageWindow,
} from "./api";
import type { Range } from "./ranges";

export class DecodeError extends Error {}

type Obj = Record<string, unknown>;
type V<T> = (value: unknown, path: string) => T;

function fail(path: string, message: string): never {
  throw new DecodeError(`${path || "(root)"} ${message}`);
}

const MAX_INT = Number.MAX_SAFE_INTEGER;

export const str: V<string> = (v, p) => (typeof v === "string" ? v : fail(p, "expected string"));
export const str1: V<string> = (v, p) => (str(v, p) === "" ? fail(p, "must not be empty") : (v as string));
export const bool: V<boolean> = (v, p) => (typeof v === "boolean" ? v : fail(p, "expected boolean"));
export const num: V<number> = (v, p) =>
  typeof v === "number" && Number.isFinite(v) ? v : fail(p, "expected number");
export const int: V<number> = (v, p) =>
  typeof v === "number" && Number.isInteger(v) && Math.abs(v) <= MAX_INT ? v : fail(p, "expected integer");
export const int0: V<number> = (v, p) => (int(v, p) < 0 ? fail(p, "must be >= 0") : (v as number));
export const intPos: V<number> = (v, p) => (int(v, p) <= 0 ? fail(p, "must be > 0") : (v as number));

export function oneOf<T extends string>(values: readonly T[]): V<T> {
  return (v, p) => (typeof v === "string" && (values as readonly string[]).includes(v) ? (v as T) : fail(p, "must be one of the allowed values"));
}
export function arr<T>(item: V<T>, max = Infinity): V<T[]> {
  return (v, p) => {
    if (!Array.isArray(v)) fail(p, "expected array");
    if (v.length > max) fail(p, `must have at most ${max} items`);
    return v.map((x, i) => item(x, `${p}.${i}`));
  };
}
export function nullable<T>(item: V<T>): V<T | null> {
  return (v, p) => (v === null ? null : item(v, p));
}
export const object: V<Obj> = (v, p) =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Obj) : fail(p, "expected object");

function join(p: string, key: string): string {
  return p ? `${p}.${key}` : key;
}
/** A required field. */
export function req<T>(o: Obj, key: string, item: V<T>, p: string): T {
  if (!Object.prototype.hasOwnProperty.call(o, key)) fail(join(p, key), "is required");
  return item(o[key], join(p, key));
}
/** An optional field: absent → undefined; JSON null is rejected (PROTOCOL.md §5). */
export function opt<T>(o: Obj, key: string, item: V<T>, p: string): T | undefined {
  if (!Object.prototype.hasOwnProperty.call(o, key)) return undefined;
  if (o[key] === null) fail(join(p, key), "must not be null (omit the key instead)");
  return item(o[key], join(p, key));
}
/** Copies the defined optional values onto `target` (so absent keys stay absent). */
function put<T extends object, E extends object>(target: T, extra: E): T & { [K in keyof E]?: Exclude<E[K], undefined> } {
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) (target as Obj)[k] = v;
  return target as T & { [K in keyof E]?: Exclude<E[K], undefined> };
}

export const seqRange: V<Range> = (v, p) => {
  if (!Array.isArray(v) || v.length !== 2 || !v.every((x) => typeof x === "number" && Number.isInteger(x) && x >= 0 && x <= MAX_INT)) {
    fail(p, "must be a [from, to] pair of integers >= 0");
  }
  return [v[0] as number, v[1] as number];
};

const PERMISSION_MODES = ["default", "acceptEdits", "plan"] as const satisfies readonly PermissionMode[];
const EFFORTS = ["low", "medium", "high", "xhigh", "max", "auto"] as const satisfies readonly EffortLevel[];
const STATES = ["idle", "running", "waiting_permission", "waiting_question", "offline"] as const satisfies readonly SessionState[];
const ENTRY_TYPES = ["text", "tool_use", "tool_result", "system", "error", "progress", "thinking", "diff"] as const satisfies readonly OutputEntryType[];
export const HOSTS = ["cli", "vscode", "service"] as const;
export const permissionMode = oneOf(PERMISSION_MODES);
export const effortLevel = oneOf(EFFORTS);

function depth(value: unknown, level: number): number {
  if (level > 64) return level;
  if (typeof value !== "object" || value === null) return level;
  let deepest = level;
  for (const child of Array.isArray(value) ? value : Object.values(value)) {
    deepest = Math.max(deepest, depth(child, level + 1));
    if (deepest > 64) break;
  }
  return deepest;
}

const metadata: V<Obj> = (v, p) => {
  const o = object(v, p);
  if (depth(o, 1) > 64) fail(p, "nests deeper than 64 levels");
  return o;
};

const diffData: V<DiffData> = (v, p) => {
  const o = object(v, p);
  const lines = req(o, "lines", arr((x, lp) => {
    const line = object(x, lp);
    return { type: req(line, "type", oneOf(["add", "del", "context"] as const), lp), text: req(line, "text", str, lp) };
  }), p);
  return put({ path: req(o, "path", str1, p), lines }, { truncated: opt(o, "truncated", bool, p) });
};

export const outputEntry: V<OutputEntry> = (v, p) => {
  const o = object(v, p);
  const entry: OutputEntry = {
    entryType: req(o, "entryType", oneOf(ENTRY_TYPES), p),
    content: req(o, "content", str, p),
    timestamp: req(o, "timestamp", str, p),
  };
  return put(entry, { metadata: opt(o, "metadata", metadata, p), diff: opt(o, "diff", diffData, p) });
};

export const sessionInfo: V<RemoteSessionInfo> = (v, p) => {
  const o = object(v, p);
  const info: RemoteSessionInfo = {
    id: req(o, "id", str1, p),
    slug: req(o, "slug", str, p),
    cwd: req(o, "cwd", str, p),
    lastActivity: req(o, "lastActivity", str, p),
    lineCount: req(o, "lineCount", int0, p),
    title: req(o, "title", nullable(str), p),
    project: req(o, "project", str, p),
  };
  const pct = opt(o, "contextPercentage", num, p);
  if (pct !== undefined && (pct < 0 || pct > 100)) fail(join(p, "contextPercentage"), "must be between 0 and 100");
  return put(info, {
    permissionMode: opt(o, "permissionMode", permissionMode, p),
    effortLevel: opt(o, "effortLevel", effortLevel, p),
    model: opt(o, "model", str, p),
    contextWindow: opt(o, "contextWindow", intPos, p),
    contextPercentage: pct,
    committed: opt(o, "committed", bool, p),
    state: opt(o, "state", oneOf(STATES), p),
    seqHigh: opt(o, "seqHigh", int0, p),
    providerId: opt(o, "providerId", str, p),
    providerLabel: opt(o, "providerLabel", str, p),
    backend: opt(o, "backend", oneOf(["claude-code", "opencode"] as const), p),
    agent: opt(o, "agent", str, p),
    sandboxed: opt(o, "sandboxed", bool, p),
  });
};

const agentDescriptor: V<AgentDescriptor> = (v, p) => {
  const o = object(v, p);
  const s = req(o, "supports", object, p);
  const sp = join(p, "supports");
  return {
    id: req(o, "id", str1, p),
    label: req(o, "label", str1, p),
    modes: req(o, "modes", arr(str), p),
    efforts: req(o, "efforts", arr(str), p),
    supports: {
      models: req(s, "models", bool, sp),
      usage: req(s, "usage", bool, sp),
      providers: req(s, "providers", bool, sp),
      gsd: req(s, "gsd", bool, sp),
      interrupt: req(s, "interrupt", bool, sp),
    },
  };
};

const usageWindow: V<UsageWindow> = (v, p) => {
  const o = object(v, p);
  return { utilization: req(o, "utilization", nullable(num), p), resetsAt: req(o, "resetsAt", nullable(str), p) };
};

const usageData: V<UsageData> = (v, p) => {
  const o = object(v, p);
  const usage: UsageData = {
    available: req(o, "available", bool, p),
    subscriptionType: req(o, "subscriptionType", nullable(str), p),
    fetchedAt: req(o, "fetchedAt", str, p),
  };
  return put(usage, {
    fiveHour: opt(o, "fiveHour", usageWindow, p),
    sevenDay: opt(o, "sevenDay", usageWindow, p),
    sevenDayOpus: opt(o, "sevenDayOpus", usageWindow, p),
    sevenDaySonnet: opt(o, "sevenDaySonnet", usageWindow, p),
    sessionCostUsd: opt(o, "sessionCostUsd", num, p),
  });
};

const modelEntry: V<ModelEntry> = (v, p) => {
  const o = object(v, p);
  return put({ id: req(o, "id", str1, p) } as ModelEntry, { label: opt(o, "label", str, p) });
};

// ---- the messages --------------------------------------------------------------------------------

export interface SessionsMsg {
  type: "sessions"; machine: string; host?: (typeof HOSTS)[number]; sessions: RemoteSessionInfo[];
  authStatus?: { hasAnthropicKey: boolean; hasGithubPat: boolean; hasEnvKey: boolean };
  protocolVersion: number; capabilities?: string[]; folders?: string[]; roots?: string[];
  removedSessions?: string[]; machineOffline?: boolean; agents?: AgentDescriptor[]; pushKey?: string;
}
export type BridgeMessage =
  | SessionsMsg
  | { type: "output"; sessionId: string; seq: number; entry: OutputEntry }
  | { type: "input-ack"; sessionId: string; inputId: string }
  | { type: "input-failed"; sessionId: string; reason: "no-session" | "expired" | "busy" | "error"; inputId?: string }
  | { type: "sync-begin"; sessionId: string; syncId: string; seqHigh: number; ranges: Range[] }
  | { type: "sync-chunk"; sessionId: string; syncId: string; range: Range; entries: { seq: number; entry: OutputEntry }[] }
  | { type: "sync-end"; sessionId: string; syncId: string; deliveredRanges: Range[] }
  | { type: "session-pending"; pendingId: string; machine: string; createdAt: string }
  | { type: "session-ready"; pendingId: string; session: RemoteSessionInfo }
  | { type: "session-failed"; pendingId: string; reason: string }
  | { type: "close-session-ack"; sessionId: string; success: boolean }
  | { type: "mode-confirmed"; sessionId: string; mode: PermissionMode }
  | { type: "effort-confirmed"; sessionId: string; level: EffortLevel }
  | { type: "model-confirmed"; sessionId: string; model: string }
  | { type: "folder-ack"; requestId: string; success: boolean; path?: string; error?: string }
  | { type: "usage"; sessionId: string; usage: UsageData }
  | { type: "models"; models: ModelEntry[]; defaultModel?: string; error?: string; agent?: string }
  | { type: "pair-ack"; machine: string; ok: boolean; reason?: "bad-token" | "window-closed"; relays?: string[]; host?: (typeof HOSTS)[number] }
  | { type: "push-ack"; endpoint: string; success: boolean; error?: string }
  | { type: "ignored"; original: string };

/** Types of the v10 union this client has no use for: decoded as `ignored`, not as errors. */
const IGNORED = new Set(["gsd-state", "credentials-ack", "device-config-ack", "provider-profiles", "provider-profile-ack", "session-replaced"]);

function decodeObject(o: Obj): BridgeMessage {
  const type = o.type;
  const p = "";
  switch (type) {
    case "sessions": {
      const auth = opt(o, "authStatus", object, p);
      const msg: SessionsMsg = {
        type, machine: req(o, "machine", str1, p), sessions: req(o, "sessions", arr(sessionInfo), p),
        protocolVersion: req(o, "protocolVersion", intPos, p),
      };
      return put(msg, {
        host: opt(o, "host", oneOf(HOSTS), p),
        authStatus: auth === undefined ? undefined : {
          hasAnthropicKey: req(auth, "hasAnthropicKey", bool, "authStatus"),
          hasGithubPat: req(auth, "hasGithubPat", bool, "authStatus"),
          hasEnvKey: req(auth, "hasEnvKey", bool, "authStatus"),
        },
        capabilities: opt(o, "capabilities", arr(str), p),
        folders: opt(o, "folders", arr(str, 200), p),
        roots: opt(o, "roots", arr(str), p),
        removedSessions: opt(o, "removedSessions", arr(str, 100), p),
        machineOffline: opt(o, "machineOffline", bool, p),
        agents: opt(o, "agents", arr(agentDescriptor), p),
        pushKey: opt(o, "pushKey", str1, p),
      });
    }
    case "output":
      return { type, sessionId: req(o, "sessionId", str1, p), seq: req(o, "seq", int0, p), entry: req(o, "entry", outputEntry, p) };
    case "input-ack":
      return { type, sessionId: req(o, "sessionId", str1, p), inputId: req(o, "inputId", str1, p) };
    case "input-failed":
      return put({ type, sessionId: req(o, "sessionId", str1, p), reason: req(o, "reason", oneOf(["no-session", "expired", "busy", "error"] as const), p) }, { inputId: opt(o, "inputId", str, p) });
    case "sync-begin":
      return { type, sessionId: req(o, "sessionId", str1, p), syncId: req(o, "syncId", str1, p), seqHigh: req(o, "seqHigh", int0, p), ranges: req(o, "ranges", arr(seqRange), p) };
    case "sync-chunk":
      return {
        type, sessionId: req(o, "sessionId", str1, p), syncId: req(o, "syncId", str1, p), range: req(o, "range", seqRange, p),
        entries: req(o, "entries", arr((x, ep) => {
          const e = object(x, ep);
          return { seq: req(e, "seq", int0, ep), entry: req(e, "entry", outputEntry, ep) };
        }), p),
      };
    case "sync-end":
      return { type, sessionId: req(o, "sessionId", str1, p), syncId: req(o, "syncId", str1, p), deliveredRanges: req(o, "deliveredRanges", arr(seqRange), p) };
    case "session-pending":
      return { type, pendingId: req(o, "pendingId", str1, p), machine: req(o, "machine", str, p), createdAt: req(o, "createdAt", str, p) };
    case "session-ready":
      return { type, pendingId: req(o, "pendingId", str1, p), session: req(o, "session", sessionInfo, p) };
    case "session-failed":
      return { type, pendingId: req(o, "pendingId", str1, p), reason: req(o, "reason", str, p) };
    case "close-session-ack":
      return { type, sessionId: req(o, "sessionId", str1, p), success: req(o, "success", bool, p) };
    case "mode-confirmed":
      return { type, sessionId: req(o, "sessionId", str1, p), mode: req(o, "mode", permissionMode, p) };
    case "effort-confirmed":
      return { type, sessionId: req(o, "sessionId", str1, p), level: req(o, "level", effortLevel, p) };
    case "model-confirmed":
      return { type, sessionId: req(o, "sessionId", str1, p), model: req(o, "model", str1, p) };
    case "folder-ack":
      return put({ type, requestId: req(o, "requestId", str1, p), success: req(o, "success", bool, p) }, { path: opt(o, "path", str, p), error: opt(o, "error", str, p) });
    case "usage":
      return { type, sessionId: req(o, "sessionId", str1, p), usage: req(o, "usage", usageData, p) };
    case "models":
      return put({ type, models: req(o, "models", arr(modelEntry), p) }, { defaultModel: opt(o, "defaultModel", str, p), error: opt(o, "error", str, p), agent: opt(o, "agent", str, p) });
    case "pair-ack":
      return put({ type, machine: req(o, "machine", str, p), ok: req(o, "ok", bool, p) }, {
        reason: opt(o, "reason", oneOf(["bad-token", "window-closed"] as const), p),
        relays: opt(o, "relays", arr(str), p),
        host: opt(o, "host", oneOf(HOSTS), p),
      });
    case "push-ack":
      return put({ type, endpoint: req(o, "endpoint", str1, p), success: req(o, "success", bool, p) }, { error: opt(o, "error", str, p) });
    default:
      if (typeof type === "string" && IGNORED.has(type)) return { type: "ignored", original: type };
      if (typeof type !== "string") fail("type", "is required");
      return fail("type", "unknown message type");
  }
}

/** Decodes one bridge → phone plaintext. Throws DecodeError (never anything else). */
export function decodeBridgeMessage(text: string): BridgeMessage {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new DecodeError(`invalid JSON: ${err instanceof Error ? err.message.slice(0, 100) : "parse error"}`);
  }
  const o = object(value, "");
  // The type as text for logs: control characters escaped, cut at 64 characters.
  const typeName = typeof o.type === "string" ? JSON.stringify(o.type.slice(0, 64)).slice(1, -1) : "<missing>";
  try {
    return decodeObject(o);
  } catch (err) {
    if (err instanceof DecodeError) throw new DecodeError(`schema mismatch for type "${typeName}": ${err.message}`);
    throw new DecodeError(`schema mismatch for type "${typeName}": ${String(err).slice(0, 100)}`);
  }
}
