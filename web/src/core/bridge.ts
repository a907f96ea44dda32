// One paired bridge, live: a v10 phone as PROTOCOL.md describes the phone's side (the same
// behaviour as the project's phone simulator, tests/support/phone*.py).
//
// Inbound pipeline, for every event a relay hands over (relay.ts checked its NIP-01 shape):
// author must be the bridge and `p` this device → dedup by id (a bounded, persisted set) →
// signature → NIP-44 decrypt → `chunk` reassembly → strict decode (validate.ts) → the kind must be
// the message's storage class → apply. Anything malformed is dropped with a console.warn and
// changes nothing. Only stored (4516) events advance `lastStoredSeen`, the 4516 `since` cursor.
import { getPublicKey, type Event } from "nostr-tools/pure";
import { v2 as nip44 } from "nostr-tools/nip44";
import { npubEncode } from "nostr-tools/nip19";
import type {
  BridgeClient, BridgeRecord, Card, CreateSessionOptions, EffortLevel, MachineInfo, ModelEntry,
  OutboxItem, PendingSession, PermissionMode, Presence, SessionView, TranscriptItem, UsageData, ChangeTopic,
} from "./api";
import { Inbound, SeenIds } from "./inbound";
import { deriveCards } from "./cards";
import { RelayPool, type Filter } from "./relay";
import type { BridgeRow, BridgeStore, StoredOutbox } from "./store";
import { SyncTracker } from "./sync";
import { Transcript } from "./transcript";
import type { BridgeMessage, SessionsMsg } from "./validate";
import { LIVE_KIND, RESPONSE_KIND, SESSION_LIST_KIND, hexToBytes, nowSeconds, randomHex, sealCommand } from "./wire";
import { base64, base64Room, cut, mimeTypeOf } from "./upload";
import * as ranges from "./ranges";

export const STORED_SINCE_GRACE_SECONDS = 60;
export const HEARTBEAT_STALE_MS = 150_000;
const TOMBSTONE_CAPACITY = 200;
const OPENED_CAPACITY = 10;
const REPLY_TIMEOUT_MS = 30_000;
const SYNC_IDLE_MS = 30_000;
const SYNC_IDLE_RETRIES = 2;
const RESEND_SAME_EVENT_S = 240;

export const SUB_HEARTBEAT = "cd-sessions";
export const SUB_STORED = "cd-responses";
export const SUB_LIVE = "cd-live";

/** The three subscriptions of PROTOCOL.md §4, as filters built now. */
export function subscriptionFilters(bridge: string, phone: string, lastStoredSeen: number): Record<string, Filter[]> {
  const base = { authors: [bridge], "#p": [phone] };
  const stored: Filter = { kinds: [RESPONSE_KIND], ...base };
  if (lastStoredSeen > 0) stored.since = Math.max(0, lastStoredSeen - STORED_SINCE_GRACE_SECONDS);
  return {
    [SUB_HEARTBEAT]: [{ kinds: [SESSION_LIST_KIND], ...base }],
    [SUB_STORED]: [stored],
    [SUB_LIVE]: [{ kinds: [LIVE_KIND], ...base }],
  };
}

export { expectedKind } from "./inbound";

type Emit = (topic: ChangeTopic, sessionId?: string) => void;
type Command = { type: string } & Record<string, unknown>;

export function emptyRow(record: BridgeRecord, secretKey: string): BridgeRow {
  return {
    record, secretKey, lastStoredSeen: 0, seen: [], machine: null, lastHeartbeatAt: 0, sessions: [],
    tombstones: [], forgotten: [], opened: [], covered: {},
  };
}

export class BridgeClientImpl implements BridgeClient {
  readonly record: BridgeRecord;
  readonly phonePubkey: string;
  private readonly secret: Uint8Array;
  private readonly conversationKey: Uint8Array;
  private readonly pool: RelayPool;
  private readonly inbound: Inbound;
  private lastStoredSeen: number;
  private machineInfo: MachineInfo | null;
  private lastHeartbeatAt: number;
  /** When the last heartbeat was (ms, local clock): fresh heartbeats mean the bridge is up. */
  private heartbeatAt = 0;
  private heartbeatEose = new Set<string>();
  private sessionViews = new Map<string, SessionView>();
  private tombstones: string[];
  private forgotten: Set<string>;
  private opened: string[];
  private pendings: PendingSession[] = [];
  private transcripts = new Map<string, Transcript>();
  private loading = new Map<string, Promise<void>>();
  private trackers = new Map<string, { tracker: SyncTracker; activeAt: number; retries: number }>();
  private syncTimers = new Map<string, ReturnType<typeof setTimeout>>();
  private outboxItems = new Map<string, StoredOutbox>();
  private usageBySession = new Map<string, UsageData>();
  private modelList: { models: ModelEntry[]; defaultModel?: string; error?: string } | null = null;
  private answered = new Set<string>();
  private stateTicks = new Map<string, number>();
  private tick = 0;
  private folderWaiters = new Map<string, (r: { success: boolean; path?: string; error?: string }) => void>();
  private pushWaiters = new Map<string, ((r: { success: boolean; error?: string }) => void)[]>();
  private lastPresence: Presence = "connecting";
  private timer: ReturnType<typeof setInterval> | null = null;
  private reconnectSyncTimer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  /** Extra listeners for decoded messages (pairing waits on pair-ack and the first heartbeat). */
  readonly hooks = new Set<(message: BridgeMessage) => void>();

  constructor(row: BridgeRow, readonly store: BridgeStore, private readonly emitChange: (change: { topic: ChangeTopic; sessionId?: string }) => void) {
    this.record = { ...row.record, relays: [...row.record.relays] };
    this.secret = hexToBytes(row.secretKey);
    this.phonePubkey = getPublicKey(this.secret);
    this.conversationKey = nip44.utils.getConversationKey(this.secret, this.record.id);
    this.inbound = new Inbound(this.record.id, this.phonePubkey, this.conversationKey, new SeenIds(row.seen));
    this.lastStoredSeen = row.lastStoredSeen;
    this.machineInfo = row.machine;
    this.lastHeartbeatAt = row.lastHeartbeatAt;
    this.heartbeatAt = Math.min(Date.now(), row.lastHeartbeatAt * 1000);
    for (const view of row.sessions) this.sessionViews.set(view.info.id, view);
    this.tombstones = [...row.tombstones];
    this.forgotten = new Set(row.forgotten);
    this.opened = [...row.opened];
    for (const [sessionId, covered] of Object.entries(row.covered)) this.book(sessionId).covered = ranges.normalize(covered);
    this.pool = new RelayPool({
      onEvent: (sub, event, relay) => this.onEvent(sub, event, relay),
      onEose: (sub, relay) => {
        if (sub === SUB_HEARTBEAT) {
          this.heartbeatEose.add(relay);
          this.updatePresence();
        }
      },
      onState: (relay, connected) => this.onRelayState(relay, connected),
    });
  }

  private emit: Emit = (topic, sessionId) => {
    this.emitChange(sessionId === undefined ? { topic } : { topic, sessionId });
  };

  // ---- lifecycle --------------------------------------------------------------------------------

  /** Restores the outbox, connects to the relays and opens the three subscriptions. */
  async start(): Promise<void> {
    for (const stored of await this.store.loadOutbox()) this.outboxItems.set(stored.item.inputId, stored);
    const filters = () => subscriptionFilters(this.record.id, this.phonePubkey, this.lastStoredSeen);
    for (const id of [SUB_HEARTBEAT, SUB_STORED, SUB_LIVE]) this.pool.subscribe({ id, filters: () => filters()[id]! });
    for (const url of this.record.relays) this.pool.add(url);
    this.timer = setInterval(() => this.housekeeping(), 5000);
  }

  close(): void {
    this.closed = true;
    this.pool.close();
    if (this.timer !== null) clearInterval(this.timer);
    if (this.reconnectSyncTimer !== null) clearTimeout(this.reconnectSyncTimer);
    for (const t of this.syncTimers.values()) clearTimeout(t);
  }

  wake(): void {
    this.pool.wake();
  }

  waitConnected(timeoutMs: number): Promise<boolean> {
    return this.pool.waitConnected(timeoutMs);
  }

  mergeRelays(relays: readonly string[]): void {
    let changed = false;
    for (const url of relays) {
      if (!this.record.relays.includes(url)) {
        this.record.relays.push(url);
        this.pool.add(url);
        changed = true;
      }
    }
    if (changed) {
      this.persist();
      this.emit("bridges");
    }
  }

  setMachineName(machine: string): void {
    if (machine && machine !== this.record.machine) {
      this.record.machine = machine;
      this.persist();
      this.emit("bridges");
    }
  }

  row(): BridgeRow {
    const covered: Record<string, [number, number][]> = {};
    for (const [sessionId, t] of this.transcripts) if (t.covered.length > 0) covered[sessionId] = t.covered;
    return {
      record: this.record, secretKey: bytesHex(this.secret), lastStoredSeen: this.lastStoredSeen,
      seen: this.inbound.seen.export(), machine: this.machineInfo, lastHeartbeatAt: this.lastHeartbeatAt,
      sessions: [...this.sessionViews.values()], tombstones: this.tombstones, forgotten: [...this.forgotten],
      opened: this.opened, covered,
    };
  }

  private persist(): void {
    this.store.row(() => this.row());
  }

  // ---- reads ------------------------------------------------------------------------------------

  presence(): Presence {
    const fresh = this.heartbeatAt > 0 && Date.now() - this.heartbeatAt < HEARTBEAT_STALE_MS;
    if (!this.pool.anyConnected()) return fresh ? "connecting" : this.everConnected ? "offline" : "connecting";
    if (this.machineInfo?.machineOffline) return "offline";
    if (fresh) return "online";
    return this.heartbeatEose.size > 0 ? "offline" : "connecting";
  }

  private everConnected = false;

  relayStates(): Record<string, boolean> {
    return this.pool.states();
  }

  machine(): MachineInfo | null {
    return this.machineInfo;
  }

  sessions(): SessionView[] {
    return [...this.sessionViews.values()]
      .filter((v) => !this.forgotten.has(v.info.id))
      .sort((a, b) => (a.info.lastActivity < b.info.lastActivity ? 1 : a.info.lastActivity > b.info.lastActivity ? -1 : 0));
  }

  pending(): PendingSession[] {
    return [...this.pendings];
  }

  transcript(sessionId: string): TranscriptItem[] {
    return this.transcripts.get(sessionId)?.items() ?? [];
  }

  /** The session's transcript book, made on first use. */
  private book(sessionId: string): Transcript {
    let t = this.transcripts.get(sessionId);
    if (t === undefined) {
      t = new Transcript(sessionId);
      this.transcripts.set(sessionId, t);
    }
    return t;
  }

  syncing(sessionId: string): boolean {
    const active = this.trackers.get(sessionId);
    return active !== undefined && !active.tracker.done;
  }

  outbox(sessionId: string): OutboxItem[] {
    return [...this.outboxItems.values()].map((s) => s.item).filter((i) => i.sessionId === sessionId)
      .sort((a, b) => a.createdAt - b.createdAt);
  }

  cards(sessionId: string): Card[] {
    const t = this.transcripts.get(sessionId);
    if (t === undefined) return [];
    const state = this.sessionViews.get(sessionId)?.info.state;
    return deriveCards(t.items(), {
      sessionId, stateTick: this.stateTicks.get(sessionId) ?? 0, arrival: (seq) => t.arrival(seq),
      answered: this.answered, ...(state !== undefined ? { state } : {}),
    });
  }

  usage(sessionId: string): UsageData | null {
    return this.usageBySession.get(sessionId) ?? null;
  }

  models(): { models: ModelEntry[]; defaultModel?: string; error?: string } | null {
    return this.modelList;
  }

  // ---- inbound ----------------------------------------------------------------------------------

  private onRelayState(_relay: string, connected: boolean): void {
    if (connected) {
      this.everConnected = true;
      this.scheduleReconnectWork();
    } else {
      this.heartbeatEose.delete(_relay);
    }
    this.emit("presence");
    this.updatePresence();
  }

  private onEvent(_sub: string, event: Event, relay: string): void {
    if (this.closed) return;
    const result = this.inbound.feed(event, Date.now());
    if (result.kind === "duplicate") return;
    if (result.fresh) {
      // Only stored responses move the 4516 cursor (PROTOCOL.md §4); it is written with the state.
      if (event.kind === RESPONSE_KIND && event.created_at > this.lastStoredSeen) this.lastStoredSeen = event.created_at;
      this.persist();
    }
    if (result.kind === "dropped") {
      console.warn(`bridge ${this.record.id.slice(0, 8)}: dropped: ${result.reason}`);
      return;
    }
    if (result.kind === "pending") return;
    const message = result.message;
    this.tick++;
    try {
      this.apply(message, event, relay);
      for (const hook of [...this.hooks]) hook(message);
    } catch (err) {
      console.error(`bridge ${this.record.id.slice(0, 8)}: handling ${message.type} failed`, err);
    }
  }

  private apply(message: BridgeMessage, event: Event, relay: string): void {
    switch (message.type) {
      case "sessions":
        return this.applyHeartbeat(message, event.created_at, relay);
      case "output":
        return this.applyOutput(message.sessionId, message.seq, message.entry);
      case "input-ack":
        return this.setOutbox(message.inputId, "confirmed");
      case "input-failed":
        if (message.inputId) this.setOutbox(message.inputId, "failed", message.reason);
        return;
      case "sync-begin": {
        const active = this.trackers.get(message.sessionId);
        if (active !== undefined && !active.tracker.done) {
          active.tracker.onBegin(message.syncId, message.seqHigh);
          active.activeAt = Date.now();
        }
        return;
      }
      case "sync-chunk":
        return this.applyChunk(message.sessionId, message.syncId, message.range, message.entries);
      case "sync-end": {
        const active = this.trackers.get(message.sessionId);
        if (active === undefined || active.tracker.done) return;
        active.activeAt = Date.now();
        const outcome = active.tracker.onEnd(message.syncId, message.deliveredRanges);
        if (outcome === "rerequest") this.sendSyncRequest(message.sessionId);
        else if (outcome === "done") {
          if (!active.tracker.complete) console.warn(`session ${message.sessionId}: sync ended with seqs missing: ${JSON.stringify(active.tracker.missing).slice(0, 200)}`);
          this.emit("sync", message.sessionId);
        }
        return;
      }
      case "session-pending": {
        if (this.sessionViews.has(message.pendingId) && !this.sessionViews.get(message.pendingId)!.stale) return;
        const existing = this.pendings.find((p) => p.pendingId === message.pendingId);
        if (existing !== undefined) return;
        const placeholder = this.pendings.find((p) => p.pendingId === null);
        if (placeholder !== undefined) placeholder.pendingId = message.pendingId;
        else this.pendings.push({ pendingId: message.pendingId, cwd: "", createdAt: Date.now() });
        this.emit("pending");
        return;
      }
      case "session-ready": {
        this.resolvePending(message.pendingId);
        const info = message.session;
        if (!this.tombstones.includes(info.id)) {
          this.sessionViews.set(info.id, { info, stale: false });
          this.persist();
          this.emit("sessions");
        }
        return;
      }
      case "session-failed": {
        const item = this.pendings.find((p) => p.pendingId === message.pendingId) ?? this.pendings.find((p) => p.pendingId === null);
        if (item !== undefined) {
          item.pendingId = message.pendingId;
          item.failed = message.reason || "the session could not be created";
        } else {
          this.pendings.push({ pendingId: message.pendingId, cwd: "", createdAt: Date.now(), failed: message.reason || "the session could not be created" });
        }
        this.emit("pending");
        return;
      }
      case "mode-confirmed":
        return this.patchSession(message.sessionId, { permissionMode: message.mode });
      case "effort-confirmed":
        return this.patchSession(message.sessionId, { effortLevel: message.level });
      case "model-confirmed":
        return this.patchSession(message.sessionId, { model: message.model });
      case "close-session-ack":
        return;
      case "folder-ack": {
        const waiter = this.folderWaiters.get(message.requestId);
        this.folderWaiters.delete(message.requestId);
        const result: { success: boolean; path?: string; error?: string } = { success: message.success };
        if (message.path !== undefined) result.path = message.path;
        if (message.error !== undefined) result.error = message.error;
        waiter?.(result);
        this.emit("folders");
        return;
      }
      case "usage":
        this.usageBySession.set(message.sessionId, message.usage);
        this.emit("usage", message.sessionId);
        return;
      case "models": {
        const list: { models: ModelEntry[]; defaultModel?: string; error?: string } = { models: message.models };
        if (message.defaultModel !== undefined) list.defaultModel = message.defaultModel;
        if (message.error !== undefined) list.error = message.error;
        this.modelList = list;
        this.emit("models");
        return;
      }
      case "pair-ack":
        if (message.ok) {
          if (message.relays) this.mergeRelays(message.relays);
          this.setMachineName(message.machine);
        }
        return;
      case "push-ack": {
        const waiters = this.pushWaiters.get(message.endpoint) ?? [];
        this.pushWaiters.delete(message.endpoint);
        const result: { success: boolean; error?: string } = { success: message.success };
        if (message.error !== undefined) result.error = message.error;
        for (const w of waiters) w(result);
        return;
      }
      case "ignored":
        return;
      default: {
        const never: never = message;
        return never;
      }
    }
  }

  private applyHeartbeat(message: SessionsMsg, createdAt: number, relay: string): void {
    if (createdAt < this.lastHeartbeatAt) return; // a lagging relay must not roll the list back
    this.lastHeartbeatAt = createdAt;
    const now = Date.now();
    // A stored heartbeat replayed at subscribe time is as old as its created_at says.
    this.heartbeatAt = this.heartbeatEose.has(relay) ? now : Math.max(this.heartbeatAt, Math.min(now, createdAt * 1000));
    const machine: MachineInfo = {
      machine: message.machine, protocolVersion: message.protocolVersion,
      capabilities: message.capabilities ?? [], folders: message.folders ?? [], roots: message.roots ?? [],
      agents: message.agents ?? [], machineOffline: message.machineOffline === true, receivedAt: now,
    };
    if (message.host !== undefined) machine.host = message.host;
    if (message.authStatus !== undefined) machine.authStatus = message.authStatus;
    if (message.pushKey !== undefined) machine.pushKey = message.pushKey;
    this.machineInfo = machine;
    this.setMachineName(message.machine);
    const listed = new Set(message.sessions.map((s) => s.id));
    for (const [id, view] of this.sessionViews) {
      if (!listed.has(id) && !view.stale) this.sessionViews.set(id, { info: view.info, stale: true });
    }
    for (const info of message.sessions) {
      this.sessionViews.set(info.id, { info, stale: false });
      this.stateTicks.set(info.id, this.tick);
      if (this.pendings.some((p) => p.pendingId === info.id)) this.resolvePending(info.id);
      this.maybeCatchUp(info.id, info.seqHigh ?? info.lineCount);
    }
    for (const id of message.removedSessions ?? []) this.tombstone(id);
    this.persist();
    this.emit("machine");
    this.emit("sessions");
    this.emit("cards");
    for (const id of listed) this.emit("cards", id);
    this.updatePresence();
  }

  private tombstone(id: string): void {
    if (!this.tombstones.includes(id)) {
      this.tombstones.push(id);
      if (this.tombstones.length > TOMBSTONE_CAPACITY) this.tombstones.splice(0, this.tombstones.length - TOMBSTONE_CAPACITY);
    }
    if (this.sessionViews.delete(id)) this.dropSessionData(id);
  }

  private dropSessionData(id: string): void {
    this.transcripts.delete(id);
    this.trackers.delete(id);
    this.usageBySession.delete(id);
    this.opened = this.opened.filter((s) => s !== id);
    for (const [inputId, stored] of this.outboxItems) {
      if (stored.item.sessionId === id) {
        this.outboxItems.delete(inputId);
        this.store.outboxItem(inputId, null);
      }
    }
    this.store.deleteSession(id);
    this.emit("transcript", id);
    this.emit("outbox", id);
  }

  private resolvePending(pendingId: string): void {
    const before = this.pendings.length;
    this.pendings = this.pendings.filter((p) => p.pendingId !== pendingId);
    if (this.pendings.length !== before) this.emit("pending");
  }

  private patchSession(sessionId: string, patch: Partial<SessionView["info"]>): void {
    const view = this.sessionViews.get(sessionId);
    if (view === undefined) return;
    this.sessionViews.set(sessionId, { info: { ...view.info, ...patch }, stale: view.stale });
    this.persist();
    this.emit("sessions");
  }

  private applyOutput(sessionId: string, seq: number, entry: TranscriptItem["entry"]): void {
    if (this.tombstones.includes(sessionId)) return;
    const t = this.book(sessionId);
    const result = t.insert(seq, entry, "live", this.tick);
    if (result !== "inserted") return;
    this.store.entry(sessionId, seq, entry);
    this.emit("transcript", sessionId);
    this.emit("cards", sessionId);
    if (entry.metadata?.role === "user") this.emit("outbox", sessionId);
    // A live seq that jumps over a gap: repair it (only for sessions this device shows).
    if (this.opened.includes(sessionId) && t.loaded && seq > 1 && !t.has(seq - 1) && !this.syncing(sessionId)) {
      this.scheduleSync(sessionId, 500);
    }
  }

  private applyChunk(sessionId: string, syncId: string, range: [number, number], entries: { seq: number; entry: TranscriptItem["entry"] }[]): void {
    // Every chunk is acked, whatever sync it belongs to (the bridge ignores acks it does not know).
    void this.send({ type: "sync-ack", syncId, range }).catch((err: unknown) => console.warn(`sync-ack not delivered: ${String(err)}`));
    if (this.tombstones.includes(sessionId)) return;
    const t = this.book(sessionId);
    let inserted = 0;
    for (const { seq, entry } of entries) {
      if (seq < range[0] || seq > range[1]) console.warn(`session ${sessionId}: sync entry seq ${seq} outside its chunk [${range[0]}, ${range[1]}]`);
      if (t.insert(seq, entry, "sync") === "inserted") {
        this.store.entry(sessionId, seq, entry);
        inserted++;
      }
    }
    t.cover(range);
    this.persist();
    const active = this.trackers.get(sessionId);
    if (active !== undefined) active.activeAt = Date.now();
    if (inserted > 0) {
      this.emit("transcript", sessionId);
      this.emit("cards", sessionId);
    }
  }

  // ---- sync -------------------------------------------------------------------------------------

  /** A heartbeat says the session has seqs this device lacks: catch up when nothing else will. */
  private maybeCatchUp(sessionId: string, seqHigh: number): void {
    if (!this.opened.includes(sessionId)) return;
    const t = this.transcripts.get(sessionId);
    if (t === undefined || !t.loaded || this.syncing(sessionId)) return;
    if (ranges.missing(t.haveRanges(), 1, seqHigh).length > 0) this.scheduleSync(sessionId, 2000, seqHigh);
  }

  private scheduleSync(sessionId: string, delayMs: number, seqHigh?: number): void {
    if (this.syncTimers.has(sessionId)) return;
    this.syncTimers.set(sessionId, setTimeout(() => {
      this.syncTimers.delete(sessionId);
      if (this.closed) return;
      const t = this.book(sessionId);
      if (seqHigh !== undefined && ranges.missing(t.haveRanges(), 1, seqHigh).length === 0) return;
      this.startSync(sessionId);
    }, delayMs));
  }

  /**
   * A new sync for the session, or a new request within the running one. `fresh` (after a
   * reconnect, or a sync that went quiet) starts over: a request sent on a connection that died
   * may never have reached the bridge, and the tracker would wait for its sync-begin forever.
   */
  private startSync(sessionId: string, fresh = false, retries = 0): void {
    const active = this.trackers.get(sessionId);
    if (fresh || active === undefined || active.tracker.done) {
      this.trackers.set(sessionId, { tracker: new SyncTracker(sessionId), activeAt: Date.now(), retries });
      this.emit("sync", sessionId);
    }
    this.sendSyncRequest(sessionId);
  }

  private sendSyncRequest(sessionId: string): void {
    const active = this.trackers.get(sessionId);
    if (active === undefined) return;
    const have = this.book(sessionId).haveRanges();
    active.tracker.request(have);
    active.activeAt = Date.now();
    void this.send({ type: "sync-request", sessionId, haveRanges: have }).catch((err: unknown) => {
      console.warn(`sync-request for ${sessionId} not delivered: ${String(err)}`);
      active.tracker.done = true;
      this.emit("sync", sessionId);
    });
  }

  private scheduleReconnectWork(): void {
    if (this.reconnectSyncTimer !== null) return;
    this.reconnectSyncTimer = setTimeout(() => {
      this.reconnectSyncTimer = null;
      if (this.closed) return;
      for (const sessionId of this.opened) {
        void this.load(sessionId).then(() => {
          if (!this.sessionViews.has(sessionId) && this.tombstones.includes(sessionId)) return;
          this.startSync(sessionId, true);
        });
      }
      this.republishPending();
    }, 300);
  }

  private housekeeping(): void {
    const now = Date.now();
    for (const [sessionId, active] of this.trackers) {
      if (!active.tracker.done && now - active.activeAt > SYNC_IDLE_MS) {
        active.tracker.done = true;
        if (active.retries < SYNC_IDLE_RETRIES && this.pool.anyConnected()) {
          console.warn(`session ${sessionId}: sync got no answer for ${SYNC_IDLE_MS / 1000} s; asking again`);
          this.startSync(sessionId, true, active.retries + 1);
        } else {
          console.warn(`session ${sessionId}: sync got no answer for ${SYNC_IDLE_MS / 1000} s; it ends incomplete`);
          this.emit("sync", sessionId);
        }
      }
    }
    this.updatePresence();
  }

  private updatePresence(): void {
    const presence = this.presence();
    if (presence !== this.lastPresence) {
      this.lastPresence = presence;
      this.emit("presence");
    }
  }

  /** Loads a session's transcript from IndexedDB once (merging anything received meanwhile). */
  load(sessionId: string): Promise<void> {
    const t = this.book(sessionId);
    if (t.loaded) return Promise.resolve();
    let pending = this.loading.get(sessionId);
    if (pending === undefined) {
      pending = this.store.loadEntries(sessionId).then((rows) => {
        for (const row of rows) t.insert(row.seq, row.entry, "restored");
        t.loaded = true;
        this.loading.delete(sessionId);
        this.emit("transcript", sessionId);
        this.emit("cards", sessionId);
      });
      this.loading.set(sessionId, pending);
    }
    return pending;
  }

  // ---- commands ---------------------------------------------------------------------------------

  /** Publishes one command; rejects with a message for the user when no relay accepted it. */
  async send(command: Command): Promise<void> {
    const events = sealCommand(this.secret, this.conversationKey, this.record.id, command);
    await this.publishEvents(events);
  }

  private async publishEvents(events: Event[]): Promise<void> {
    for (const event of events) {
      const result = await this.pool.publish(event);
      if (!result.accepted) {
        const why = Object.entries(result.answers).map(([url, answer]) => `${url}: ${answer}`).join("; ");
        throw new Error(`Not delivered: no relay accepted it (${why || "no relay"})`);
      }
    }
  }

  async open(sessionId: string): Promise<void> {
    this.opened = [sessionId, ...this.opened.filter((s) => s !== sessionId)].slice(0, OPENED_CAPACITY);
    this.persist();
    await this.load(sessionId);
    this.startSync(sessionId);
  }

  async createSession(options: CreateSessionOptions): Promise<void> {
    const command: Command = { type: "create-session" };
    if (options.defaultEffort !== undefined) command.defaultEffort = options.defaultEffort;
    if (options.model) command.model = options.model;
    if (options.cwd) command.cwd = options.cwd;
    if (options.createCwd !== undefined) command.createCwd = options.createCwd;
    if (options.agent) command.agent = options.agent;
    const placeholder: PendingSession = { pendingId: null, cwd: options.cwd ?? "", createdAt: Date.now() };
    this.pendings.push(placeholder);
    this.emit("pending");
    try {
      await this.send(command);
    } catch (err) {
      placeholder.failed = err instanceof Error ? err.message : String(err);
      this.emit("pending");
      throw err;
    }
  }

  async input(sessionId: string, text: string): Promise<void> {
    const inputId = randomHex(16);
    const item: OutboxItem = { inputId, sessionId, text, state: "pending", createdAt: Date.now() };
    const stored: StoredOutbox = { item, events: this.sealInput(item) };
    this.outboxItems.set(inputId, stored);
    this.store.outboxItem(inputId, stored);
    this.emit("outbox", sessionId);
    await this.publishInput(stored);
  }

  private sealInput(item: OutboxItem): Event[] {
    return sealCommand(this.secret, this.conversationKey, this.record.id, { type: "input", sessionId: item.sessionId, text: item.text, inputId: item.inputId });
  }

  private async publishInput(stored: StoredOutbox): Promise<void> {
    try {
      await this.publishEvents(stored.events);
    } catch (err) {
      if (stored.item.state === "pending") this.setOutbox(stored.item.inputId, "failed", err instanceof Error ? err.message : String(err));
      throw err;
    }
    if (stored.item.state === "pending") this.setOutbox(stored.item.inputId, "published");
  }

  private setOutbox(inputId: string, state: OutboxItem["state"], reason?: string): void {
    const stored = this.outboxItems.get(inputId);
    if (stored === undefined) return;
    if (stored.item.state === "confirmed" && state !== "confirmed") return; // an ack is final
    const item: OutboxItem = { ...stored.item, state };
    if (reason !== undefined) item.reason = reason;
    else delete item.reason;
    stored.item = item;
    this.store.outboxItem(inputId, stored);
    this.emit("outbox", item.sessionId);
  }

  async retryInput(inputId: string): Promise<void> {
    const stored = this.outboxItems.get(inputId);
    if (stored === undefined) throw new Error("No such message to retry");
    if (stored.item.state === "confirmed") return;
    const first = stored.events[0];
    if (first === undefined || nowSeconds() - first.created_at > RESEND_SAME_EVENT_S) stored.events = this.sealInput(stored.item);
    this.setOutbox(inputId, "pending");
    await this.publishInput(stored);
  }

  /** After a (re)connect: inputs that never reached a relay go out again (the same events). */
  private republishPending(): void {
    for (const stored of this.outboxItems.values()) {
      if (stored.item.state !== "pending") continue;
      const first = stored.events[0];
      if (first === undefined || nowSeconds() - first.created_at > RESEND_SAME_EVENT_S) {
        this.setOutbox(stored.item.inputId, "failed", "Not delivered before the page closed");
        continue;
      }
      void this.publishInput(stored).catch(() => undefined);
    }
  }

  private async answer(key: string, sessionId: string, command: Command): Promise<void> {
    this.answered.add(key);
    this.emit("cards", sessionId);
    try {
      await this.send(command);
    } catch (err) {
      this.answered.delete(key);
      this.emit("cards", sessionId);
      throw err;
    }
  }

  answerPermission(card: Card & { kind: "permission" }, allow: boolean, modifier?: "always" | "never"): Promise<void> {
    const command: Command = { type: "permission-res", sessionId: card.sessionId, requestId: card.requestId, allow };
    if (modifier !== undefined) command.modifier = modifier;
    return this.answer(card.requestId, card.sessionId, command);
  }

  answerPlan(card: Card & { kind: "plan" }, key: "1" | "2" | "3"): Promise<void> {
    return this.answer(card.requestId, card.sessionId, { type: "keypress", sessionId: card.sessionId, key, context: "plan-approval" });
  }

  /**
   * One option alone goes as keypress{context:"question"} (1-based); several options (a
   * multi-select) as question-input with their labels joined by ", "; free text as question-input.
   * The bridge answers the group's questions in order (bridge/engine/sessions/broker.py).
   */
  answerQuestion(card: Card & { kind: "question" }, optionIndexes: number[], freeText?: string): Promise<void> {
    const key = `${card.requestId}#${card.index}`;
    const valid = [...new Set(optionIndexes)].filter((i) => Number.isInteger(i) && i >= 0 && i < card.options.length).sort((a, b) => a - b);
    const text = freeText?.trim() ?? "";
    if (text === "" && valid.length === 0) return Promise.reject(new Error("Choose an option or type an answer"));
    if (text === "" && valid.length === 1) {
      return this.answer(key, card.sessionId, { type: "keypress", sessionId: card.sessionId, key: String(valid[0]! + 1), context: "question" });
    }
    const answerText = text !== "" ? text : valid.map((i) => card.options[i]!.label).join(", ");
    return this.answer(key, card.sessionId, { type: "question-input", sessionId: card.sessionId, text: answerText, optionCount: card.options.length });
  }

  interrupt(sessionId: string): Promise<void> {
    return this.send({ type: "interrupt", sessionId });
  }

  setMode(sessionId: string, mode: PermissionMode): Promise<void> {
    return this.send({ type: "mode", sessionId, mode });
  }

  setModel(sessionId: string, model: string): Promise<void> {
    return this.send({ type: "model", sessionId, model });
  }

  setEffort(sessionId: string, level: EffortLevel): Promise<void> {
    return this.send({ type: "effort", sessionId, level });
  }

  closeSession(sessionId: string): Promise<void> {
    return this.send({ type: "close-session", sessionId });
  }

  async forgetSession(sessionId: string): Promise<void> {
    this.forgotten.add(sessionId);
    this.sessionViews.delete(sessionId);
    this.dropSessionData(sessionId);
    this.persist();
    this.emit("sessions");
    await this.store.flush();
  }

  async createFolder(path: string, root?: string): Promise<{ success: boolean; path?: string; error?: string }> {
    const requestId = randomHex(8);
    const command: Command = { type: "create-folder", path, requestId };
    if (root !== undefined) command.root = root;
    const answer = this.waitFor(this.folderWaiters, requestId);
    await this.send(command).catch((err: unknown) => {
      this.folderWaiters.delete(requestId);
      throw err;
    });
    return answer;
  }

  private waitFor<T>(waiters: Map<string, (r: T) => void>, key: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(key);
        reject(new Error("No answer from the bridge (is it running?)"));
      }, REPLY_TIMEOUT_MS);
      waiters.set(key, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
  }

  async uploadImage(sessionId: string, file: Blob, filename: string, text: string, onProgress?: (done: number) => void): Promise<void> {
    const data = base64(new Uint8Array(await file.arrayBuffer()));
    const fields = { sessionId, uploadId: randomHex(16), filename, mimeType: mimeTypeOf(filename, file.type), text };
    const pieces = cut(data, base64Room(fields));
    onProgress?.(0);
    for (let index = 0; index < pieces.length; index++) {
      await this.send({ type: "upload-image", ...fields, base64Data: pieces[index]!, chunkIndex: index, totalChunks: pieces.length });
      onProgress?.((index + 1) / pieces.length);
    }
  }

  refresh(): Promise<void> {
    return this.send({ type: "refresh-sessions" });
  }

  requestModels(agent?: string): Promise<void> {
    return this.send(agent ? { type: "models-request", agent } : { type: "models-request" });
  }

  requestUsage(sessionId: string): Promise<void> {
    return this.send({ type: "usage-request", sessionId });
  }

  async pushSubscribe(subscription: PushSubscriptionJSON): Promise<{ success: boolean; error?: string }> {
    const { endpoint, keys } = subscription;
    const p256dh = keys?.p256dh;
    const auth = keys?.auth;
    if (!endpoint || !p256dh || !auth) throw new Error("The browser gave an incomplete push subscription");
    const answer = new Promise<{ success: boolean; error?: string }>((resolve, reject) => {
      const timer = setTimeout(() => {
        const list = (this.pushWaiters.get(endpoint) ?? []).filter((w) => w !== waiter);
        if (list.length > 0) this.pushWaiters.set(endpoint, list);
        else this.pushWaiters.delete(endpoint);
        reject(new Error("No answer from the bridge (does it support push?)"));
      }, REPLY_TIMEOUT_MS);
      const waiter = (r: { success: boolean; error?: string }) => {
        clearTimeout(timer);
        resolve(r);
      };
      this.pushWaiters.set(endpoint, [...(this.pushWaiters.get(endpoint) ?? []), waiter]);
    });
    await this.send({ type: "push-subscribe", subscription: { endpoint, keys: { p256dh, auth } } });
    return answer;
  }

  /** The npub of this device's key for this bridge. */
  get phoneNpub(): string {
    return npubEncode(this.phonePubkey);
  }
}

function bytesHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
