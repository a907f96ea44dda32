// The contract between the client's core (web/src/core: keys, relays, the v10 phone state machine,
// IndexedDB) and its UI (web/src/ui). The UI reads state and calls methods of these interfaces only;
// the core never touches the DOM. Additions are fine on either side; changing a shape here means
// changing both sides in one commit.

// ---- v10 wire types the UI renders (PROTOCOL.md §8, §14) ----------------------------------------

export type PermissionMode = "default" | "acceptEdits" | "plan";
export type EffortLevel = "low" | "medium" | "high" | "xhigh" | "max" | "auto";
export type SessionState = "idle" | "running" | "waiting_permission" | "waiting_question" | "offline";
export type OutputEntryType =
  | "text" | "tool_use" | "tool_result" | "system" | "error" | "progress" | "thinking" | "diff";

export interface DiffLine { type: "add" | "del" | "context"; text: string }
export interface DiffData { path: string; lines: DiffLine[]; truncated?: boolean }

export interface OutputEntry {
  entryType: OutputEntryType;
  content: string;
  timestamp: string;
  metadata?: Record<string, unknown>;
  diff?: DiffData;
}

export interface RemoteSessionInfo {
  id: string;
  slug: string;
  cwd: string;
  lastActivity: string;
  lineCount: number;
  title: string | null;
  project: string;
  permissionMode?: PermissionMode;
  effortLevel?: EffortLevel;
  model?: string;
  contextWindow?: number;
  contextPercentage?: number;
  committed?: boolean;
  state?: SessionState;
  seqHigh?: number;
  providerId?: string;
  providerLabel?: string;
  backend?: "claude-code" | "opencode";
  agent?: string;
  sandboxed?: boolean;
}

export interface AgentDescriptor {
  id: string;
  label: string;
  modes: string[];
  efforts: string[];
  supports: { models: boolean; usage: boolean; providers: boolean; gsd: boolean; interrupt: boolean };
}

export interface UsageWindow { utilization: number | null; resetsAt: string | null }
export interface UsageData {
  available: boolean;
  subscriptionType: string | null;
  fiveHour?: UsageWindow;
  sevenDay?: UsageWindow;
  sevenDayOpus?: UsageWindow;
  sevenDaySonnet?: UsageWindow;
  sessionCostUsd?: number;
  fetchedAt: string;
}

export interface ModelEntry { id: string; label?: string }

// ---- what the core keeps per paired bridge ------------------------------------------------------

/** One paired bridge. `id` is the bridge's pubkey (hex): identity is always the event author. */
export interface BridgeRecord {
  id: string;
  npub: string;
  machine: string;
  relays: string[];
  pairedAt: number; // ms since epoch
}

/** The last heartbeat's machine-level fields (PROTOCOL.md §7 `sessions`). */
export interface MachineInfo {
  machine: string;
  host?: "cli" | "vscode" | "service";
  protocolVersion: number;
  capabilities: string[];
  folders: string[];
  roots: string[];
  agents: AgentDescriptor[];
  authStatus?: { hasAnthropicKey: boolean; hasGithubPat: boolean; hasEnvKey: boolean };
  machineOffline: boolean;
  /** The bridge's VAPID public key (base64url), present when it advertises `push`. */
  pushKey?: string;
  receivedAt: number; // ms since epoch, local clock
}

/** A session as the phone shows it: absence from a heartbeat marks it stale, only tombstones remove (bug B). */
export interface SessionView {
  info: RemoteSessionInfo;
  stale: boolean;
}

/** A create-session in flight (two-phase: session-pending, then session-ready / session-failed). */
export interface PendingSession {
  pendingId: string | null; // null until session-pending arrived
  cwd: string;
  createdAt: number;
  failed?: string; // the session-failed reason
}

export type OutboxState = "pending" | "published" | "confirmed" | "failed";
export interface OutboxItem {
  inputId: string;
  sessionId: string;
  text: string;
  state: OutboxState;
  reason?: string; // input-failed reason, or why publishing failed
  createdAt: number;
  /** The seq of the transcript's user entry for this input, once it arrived (the UI may then
   * show the entry instead of the outbox item). Matched by text, oldest item first. */
  seq?: number;
}

export interface TranscriptItem { seq: number; entry: OutputEntry }

/** A card the user can still answer (PROTOCOL.md §14): derived by the core from the transcript and
 * the session state; withdrawn (`card_withdrawn`), answered or superseded cards are not listed. */
export type Card =
  | { kind: "permission"; sessionId: string; requestId: string; seq: number; toolName: string;
      toolInput: unknown; reasons: string[]; reasonText?: string; description?: string }
  | { kind: "plan"; sessionId: string; requestId: string; seq: number; plan?: string }
  | { kind: "question"; sessionId: string; requestId: string; seq: number; question: string;
      header?: string; options: { label: string; description?: string }[]; multiSelect: boolean;
      index: number; count: number };

export type Presence = "connecting" | "online" | "offline";

export type ChangeTopic =
  | "bridges" | "presence" | "machine" | "sessions" | "pending" | "transcript" | "outbox"
  | "cards" | "usage" | "models" | "sync" | "folders";

/** What `subscribe` callbacks get: which part of the state changed (and for which session). */
export interface Change { bridgeId: string; topic: ChangeTopic; sessionId?: string }

export interface CreateSessionOptions {
  cwd?: string;
  createCwd?: boolean;
  model?: string;
  defaultEffort?: EffortLevel;
  agent?: string;
}

/** One paired bridge, live. Every send returns once the command is published to at least one
 * relay (or rejects with an Error whose message is for the user). */
export interface BridgeClient {
  readonly record: BridgeRecord;
  readonly phonePubkey: string; // this client's own key for this bridge (hex)
  presence(): Presence;
  /** Per relay URL: connected or not (for a status line). */
  relayStates(): Record<string, boolean>;
  machine(): MachineInfo | null;
  sessions(): SessionView[]; // newest activity first
  pending(): PendingSession[];
  transcript(sessionId: string): TranscriptItem[]; // ascending seq, no duplicates
  /** Seqs the client knows it is missing (gaps below seqHigh), while a sync repairs them. */
  syncing(sessionId: string): boolean;
  /** How many seqs below the highest this device knows of (the heartbeat's seqHigh, the live
   * stream's) it does not hold: after a sync this is 0, unless the bridge is out of reach. */
  missing(sessionId: string): number;
  outbox(sessionId: string): OutboxItem[];
  cards(sessionId: string): Card[];
  usage(sessionId: string): UsageData | null;
  models(): { models: ModelEntry[]; defaultModel?: string; error?: string } | null;

  /** Open a session's transcript: loads it from IndexedDB and starts a sync-request for the gaps. */
  open(sessionId: string): Promise<void>;
  createSession(options: CreateSessionOptions): Promise<void>;
  input(sessionId: string, text: string): Promise<void>; // adds an outbox item with a fresh inputId
  retryInput(inputId: string): Promise<void>;
  answerPermission(card: Card & { kind: "permission" }, allow: boolean, modifier?: "always" | "never"): Promise<void>;
  answerPlan(card: Card & { kind: "plan" }, key: "1" | "2" | "3"): Promise<void>;
  answerQuestion(card: Card & { kind: "question" }, optionIndexes: number[], freeText?: string): Promise<void>;
  interrupt(sessionId: string): Promise<void>;
  setMode(sessionId: string, mode: PermissionMode): Promise<void>;
  setModel(sessionId: string, model: string): Promise<void>;
  setEffort(sessionId: string, level: EffortLevel): Promise<void>;
  closeSession(sessionId: string): Promise<void>;
  /** Removes a session on this device only (a user delete, PROTOCOL.md §15). */
  forgetSession(sessionId: string): Promise<void>;
  createFolder(path: string, root?: string): Promise<{ success: boolean; path?: string; error?: string }>;
  /** Chunked upload (`upload-image`, chunked shape); `onProgress` gets 0..1. */
  uploadImage(sessionId: string, file: Blob, filename: string, text: string,
              onProgress?: (done: number) => void): Promise<void>;
  refresh(): Promise<void>; // refresh-sessions
  requestModels(agent?: string): Promise<void>;
  requestUsage(sessionId: string): Promise<void>;
  /** Hands a Web Push subscription to the bridge (`push-subscribe`); resolves with the push-ack. */
  pushSubscribe(subscription: PushSubscriptionJSON): Promise<{ success: boolean; error?: string }>;
}

/** All paired bridges of this browser. Keys live in IndexedDB and never leave the device. */
export interface ClientRegistry {
  bridges(): BridgeClient[];
  get(bridgeId: string): BridgeClient | undefined;
  /** Pairs from a `#pair=…` fragment (the link `codedeck-bridge pair` prints); resolves on pair-ack ok. */
  pairFromFragment(fragment: string, label: string): Promise<BridgeClient>;
  /** Manual pairing: the bridge's npub and relays; `codedeck-bridge pair --npub <ours>` on the machine. */
  pairByNpub(bridgeNpub: string, relays: string[], label: string): Promise<BridgeClient>;
  /** This device's public key for manual pairing (a key made for the next manual pair). */
  manualPairKey(): Promise<{ npub: string; hex: string }>;
  /** Forgets a bridge on this device (its key, transcripts and outbox). */
  forget(bridgeId: string): Promise<void>;
  subscribe(listener: (change: Change) => void): () => void;
}

/** Creates the registry: opens IndexedDB, loads every paired bridge and connects to its relays. */
export type OpenRegistry = () => Promise<ClientRegistry>;
