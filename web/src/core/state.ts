// The state of one paired bridge and what changes it: the relays and the three subscriptions,
// the inbound pipeline (inbound.ts) applied to the session list (bug B: absence marks stale, only
// tombstones remove), transcripts, sync (repairing gaps after every reconnect), presence, and the
// outbox's publishing. Behaves as the project's phone simulator (tests/support/phone*.py).
// Only stored (4516) events advance `lastStoredSeen`, the 4516 `since` cursor (PROTOCOL.md §4).
import { getPublicKey, type Event } from "nostr-tools/pure";
import { v2 as nip44 } from "nostr-tools/nip44";
import type {
  BridgeRecord, Card, MachineInfo, ModelEntry, OutboxItem, PendingSession, Presence, SessionView,
  TranscriptItem, UsageData, ChangeTopic,
} from "./api";
import { Inbound, SeenIds } from "./inbound";
import { deriveCards } from "./cards";
import { RelayPool } from "./relay";
import type { BridgeRow, BridgeStore, StoredOutbox } from "./store";
import { SyncTracker } from "./sync";
import { Transcript } from "./transcript";
import type { BridgeMessage, SessionsMsg } from "./validate";
import { RESPONSE_KIND, SUB_HEARTBEAT, SUB_LIVE, SUB_STORED, bytesToHex, hexToBytes, nowSeconds, sealCommand, subscriptionFilters } from "./wire";
import * as ranges from "./ranges";

export const HEARTBEAT_STALE_MS = 150_000;
/** How long a machine whose relays all dropped still shows "connecting" (a relay's blip, a
 * bridge restarting) before it shows "offline": the embedded relay stops with its bridge. */
export const RECONNECT_GRACE_MS = 10_000;
const TOMBSTONE_CAPACITY = 200;
export const OPENED_CAPACITY = 10;
/** A sync that got chunks and then nothing for this long is asked again (the bridge resends at 10 s and 20 s). */
const SYNC_IDLE_MS = 30_000;
/** A request with no sync-begin for this long is asked again: the bridge drops a sync-request for
 * a session it has not adopted yet (the seconds after a restart). */
const SYNC_BEGIN_MS = 5_000;
const SYNC_RETRIES = 6;


type Emit = (topic: ChangeTopic, sessionId?: string) => void;
export type Command = { type: string } & Record<string, unknown>;

/** The state of one bridge and everything that changes it; bridge.ts adds the commands. */
export abstract class BridgeState {
  readonly record: BridgeRecord;
  readonly phonePubkey: string;
  protected readonly secret: Uint8Array;
  protected readonly conversationKey: Uint8Array;
  protected readonly pool: RelayPool;
  protected readonly inbound: Inbound;
  protected lastStoredSeen: number;
  protected machineInfo: MachineInfo | null;
  protected lastHeartbeatAt: number;
  /** When the last heartbeat was (ms, local clock): fresh heartbeats mean the bridge is up. */
  protected heartbeatAt = 0;
  protected heartbeatEose = new Set<string>();
  protected sessionViews = new Map<string, SessionView>();
  protected tombstones: string[];
  protected forgotten: Set<string>;
  protected opened: string[];
  protected pendings: PendingSession[] = [];
  protected transcripts = new Map<string, Transcript>();
  protected loading = new Map<string, Promise<void>>();
  protected trackers = new Map<string, { tracker: SyncTracker; activeAt: number; retries: number; again: boolean }>();
  protected syncTimers = new Map<string, ReturnType<typeof setTimeout>>();
  protected outboxItems = new Map<string, StoredOutbox>();
  protected usageBySession = new Map<string, UsageData>();
  protected modelList: { models: ModelEntry[]; defaultModel?: string; error?: string } | null = null;
  protected answered = new Set<string>();
  protected stateTicks = new Map<string, number>();
  protected tick = 0;
  protected folderWaiters = new Map<string, (r: { success: boolean; path?: string; error?: string }) => void>();
  protected pushWaiters = new Map<string, ((r: { success: boolean; error?: string }) => void)[]>();
  protected lastPresence: Presence = "connecting";
  protected timer: ReturnType<typeof setInterval> | null = null;
  protected reconnectSyncTimer: ReturnType<typeof setTimeout> | null = null;
  protected closed = false;
  /** Extra listeners for decoded messages (pairing waits on pair-ack and the first heartbeat). */
  readonly hooks = new Set<(message: BridgeMessage) => void>();

  constructor(row: BridgeRow, readonly store: BridgeStore, protected readonly emitChange: (change: { topic: ChangeTopic; sessionId?: string }) => void) {
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

  protected emit: Emit = (topic, sessionId) => {
    this.emitChange(sessionId === undefined ? { topic } : { topic, sessionId });
  };

  // ---- lifecycle --------------------------------------------------------------------------------

  /** Restores the outbox, connects to the relays and opens the three subscriptions. */
  async start(): Promise<void> {
    for (const stored of await this.store.loadOutbox()) this.outboxItems.set(stored.item.inputId, stored);
    const filters = () => subscriptionFilters(this.record.id, this.phonePubkey, this.lastStoredSeen);
    for (const id of [SUB_HEARTBEAT, SUB_STORED, SUB_LIVE]) this.pool.subscribe({ id, filters: () => filters()[id]! });
    for (const url of this.record.relays) this.pool.add(url);
    this.timer = setInterval(() => this.housekeeping(), 2000);
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
      record: this.record, secretKey: bytesToHex(this.secret), lastStoredSeen: this.lastStoredSeen,
      seen: this.inbound.seen.export(), machine: this.machineInfo, lastHeartbeatAt: this.lastHeartbeatAt,
      sessions: [...this.sessionViews.values()], tombstones: this.tombstones, forgotten: [...this.forgotten],
      opened: this.opened, covered,
    };
  }

  protected persist(): void {
    this.store.row(() => this.row());
  }

  // ---- reads ------------------------------------------------------------------------------------

  presence(): Presence {
    const now = Date.now();
    const fresh = this.heartbeatAt > 0 && now - this.heartbeatAt < HEARTBEAT_STALE_MS;
    // A clean stop says so in its last heartbeat, whether or not a relay is still connected.
    if (this.machineInfo?.machineOffline) return "offline";
    if (!this.pool.anyConnected()) {
      if (!this.everConnected) return "connecting";
      return fresh && now - this.disconnectedAt < RECONNECT_GRACE_MS ? "connecting" : "offline";
    }
    if (fresh) return "online";
    return this.heartbeatEose.size > 0 ? "offline" : "connecting";
  }

  protected everConnected = false;
  /** When the last connected relay dropped (ms since epoch). */
  protected disconnectedAt = 0;

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
  protected book(sessionId: string): Transcript {
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

  missing(sessionId: string): number {
    const t = this.transcripts.get(sessionId);
    if (t === undefined || !t.loaded) return 0;
    const info = this.sessionViews.get(sessionId)?.info;
    const seqHigh = Math.max(t.highest(), info?.seqHigh ?? info?.lineCount ?? 0);
    return ranges.size(ranges.missing(t.haveRanges(), 1, seqHigh));
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

  protected onRelayState(_relay: string, connected: boolean): void {
    if (connected) {
      this.everConnected = true;
      this.scheduleReconnectWork();
    } else {
      this.heartbeatEose.delete(_relay);
      if (!this.pool.anyConnected()) this.disconnectedAt = Date.now();
    }
    this.emit("presence");
    this.updatePresence();
  }

  protected onEvent(_sub: string, event: Event, relay: string): void {
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

  protected apply(message: BridgeMessage, event: Event, relay: string): void {
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
          if (active.again) this.startSync(message.sessionId, true);
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

  protected applyHeartbeat(message: SessionsMsg, createdAt: number, relay: string): void {
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

  protected tombstone(id: string): void {
    if (!this.tombstones.includes(id)) {
      this.tombstones.push(id);
      if (this.tombstones.length > TOMBSTONE_CAPACITY) this.tombstones.splice(0, this.tombstones.length - TOMBSTONE_CAPACITY);
    }
    if (this.sessionViews.delete(id)) this.dropSessionData(id);
  }

  protected dropSessionData(id: string): void {
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

  protected resolvePending(pendingId: string): void {
    const before = this.pendings.length;
    this.pendings = this.pendings.filter((p) => p.pendingId !== pendingId);
    if (this.pendings.length !== before) this.emit("pending");
  }

  protected patchSession(sessionId: string, patch: Partial<SessionView["info"]>): void {
    const view = this.sessionViews.get(sessionId);
    if (view === undefined) return;
    this.sessionViews.set(sessionId, { info: { ...view.info, ...patch }, stale: view.stale });
    this.persist();
    this.emit("sessions");
  }

  protected applyOutput(sessionId: string, seq: number, entry: TranscriptItem["entry"]): void {
    if (this.tombstones.includes(sessionId)) return;
    const t = this.book(sessionId);
    const result = t.insert(seq, entry, "live", this.tick);
    if (result !== "inserted") return;
    this.store.entry(sessionId, seq, entry);
    this.emit("transcript", sessionId);
    this.emit("cards", sessionId);
    this.matchOutbox(sessionId, seq, entry);
    // A live seq that jumps over a gap: repair it (only for sessions this device shows).
    if (this.opened.includes(sessionId) && t.loaded && seq > 1 && !t.has(seq - 1) && !this.syncing(sessionId)) {
      this.scheduleSync(sessionId, 500);
    }
  }

  protected applyChunk(sessionId: string, syncId: string, range: [number, number], entries: { seq: number; entry: TranscriptItem["entry"] }[]): void {
    // Every chunk is acked, whatever sync it belongs to (the bridge ignores acks it does not know).
    void this.send({ type: "sync-ack", syncId, range }).catch((err: unknown) => console.warn(`sync-ack not delivered: ${String(err)}`));
    if (this.tombstones.includes(sessionId)) return;
    const t = this.book(sessionId);
    let inserted = 0;
    for (const { seq, entry } of entries) {
      if (seq < range[0] || seq > range[1]) console.warn(`session ${sessionId}: sync entry seq ${seq} outside its chunk [${range[0]}, ${range[1]}]`);
      if (t.insert(seq, entry, "sync") === "inserted") {
        this.store.entry(sessionId, seq, entry);
        this.matchOutbox(sessionId, seq, entry);
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
  protected maybeCatchUp(sessionId: string, seqHigh: number): void {
    if (!this.opened.includes(sessionId)) return;
    const t = this.transcripts.get(sessionId);
    if (t === undefined || !t.loaded || this.syncing(sessionId)) return;
    if (ranges.missing(t.haveRanges(), 1, seqHigh).length > 0) this.scheduleSync(sessionId, 2000, seqHigh);
  }

  protected scheduleSync(sessionId: string, delayMs: number, seqHigh?: number): void {
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
   * A sync for the session. One request is outstanding at a time: the bridge keeps one sync per
   * (session, phone) and drops a request for a session it has not adopted yet, so a second request
   * would leave the first's sync-begin unattributable. A sync asked for while one runs is done
   * once it ends. `fresh` (after a reconnect, or a request that got no answer) starts over.
   */
  protected startSync(sessionId: string, fresh = false, retries = 0): void {
    const active = this.trackers.get(sessionId);
    if (!fresh && active !== undefined && !active.tracker.done) {
      active.again = true;
      return;
    }
    this.trackers.set(sessionId, { tracker: new SyncTracker(sessionId), activeAt: Date.now(), retries, again: false });
    this.emit("sync", sessionId);
    this.sendSyncRequest(sessionId);
  }

  protected sendSyncRequest(sessionId: string): void {
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

  protected scheduleReconnectWork(): void {
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

  protected housekeeping(): void {
    const now = Date.now();
    this.outboxHousekeeping(now);
    for (const [sessionId, active] of this.trackers) {
      if (active.tracker.done) continue;
      const quiet = now - active.activeAt;
      const begun = active.tracker.currentSyncId !== null || active.tracker.requests > 1;
      if (quiet > SYNC_IDLE_MS || (!begun && quiet > SYNC_BEGIN_MS)) {
        active.tracker.done = true;
        if (!this.pool.anyConnected()) {
          this.emit("sync", sessionId); // the next connect starts a fresh sync
        } else if (active.retries < SYNC_RETRIES) {
          this.startSync(sessionId, true, active.retries + 1);
        } else {
          console.warn(`session ${sessionId}: the bridge does not answer sync requests; the transcript may have gaps`);
          this.emit("sync", sessionId);
        }
      }
    }
    this.updatePresence();
  }

  protected updatePresence(): void {
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

  // ---- publishing and the outbox ----------------------------------------------------------------

  /** Publishes one command; rejects with a message for the user when no relay accepted it. */
  async send(command: Command): Promise<void> {
    const events = sealCommand(this.secret, this.conversationKey, this.record.id, command);
    await this.publishEvents(events);
  }

  protected async publishEvents(events: Event[]): Promise<void> {
    for (const event of events) {
      const result = await this.pool.publish(event);
      if (!result.accepted) {
        if (!this.pool.anyConnected()) throw new OfflineError("Not sent yet: no relay is connected");
        const why = Object.entries(result.answers).map(([url, answer]) => `${url}: ${answer}`).join("; ");
        throw new Error(`Not delivered: no relay accepted it (${why || "no relay"})`);
      }
    }
  }

  /** After a (re)connect: inputs that never reached a relay go out again. */
  protected abstract republishPending(): void;
  /** A user entry arrived: the outbox item it answers learns its seq. */
  protected abstract matchOutbox(sessionId: string, seq: number, entry: TranscriptItem["entry"]): void;
  /** Every few seconds: outbox items that are too old to send, or done with. */
  protected abstract outboxHousekeeping(now: number): void;
  /** An input-ack or input-failed for an input of this device. */
  protected abstract setOutbox(inputId: string, state: OutboxItem["state"], reason?: string): void;

}


/** No relay is connected: an input stays pending until one is. */
export class OfflineError extends Error {}
