// What one paired bridge keeps in IndexedDB (layout: idb.ts), written in batches: every change
// marks what is dirty and one transaction a short moment later writes it all (the bridge row,
// the new transcript entries, outbox items), so a 5,000-entry sync costs a few dozen transactions,
// not 5,000. The row holds the cursors (lastStoredSeen, the seen-id set) together with the state
// they produced, so a reload never holds a cursor past effects that were not written.
import type { Event } from "nostr-tools/pure";
import type { BridgeRecord, MachineInfo, OutboxItem, OutputEntry, SessionView } from "./api";
import { getAllValues, prefixRange, transact } from "./idb";
import type { Range } from "./ranges";

export interface BridgeRow {
  record: BridgeRecord;
  /** This device's secret key for this bridge (hex). Never leaves IndexedDB. */
  secretKey: string;
  lastStoredSeen: number;
  seen: string[];
  machine: MachineInfo | null;
  lastHeartbeatAt: number;
  sessions: SessionView[];
  tombstones: string[];
  forgotten: string[];
  opened: string[];
  covered: Record<string, Range[]>;
}

export interface StoredOutbox {
  item: OutboxItem;
  /** The signed event(s) of the input, so a retry is the same event (the bridge dedupes by id). */
  events: Event[];
}

export interface StoredEntry { seq: number; entry: OutputEntry }

export function emptyRow(record: BridgeRecord, secretKey: string): BridgeRow {
  return {
    record, secretKey, lastStoredSeen: 0, seen: [], machine: null, lastHeartbeatAt: 0, sessions: [],
    tombstones: [], forgotten: [], opened: [], covered: {},
  };
}

const FLUSH_MS = 100;

export class BridgeStore {
  private rowBuilder: (() => BridgeRow) | null = null;
  private entries: { sessionId: string; seq: number; entry: OutputEntry }[] = [];
  private outbox = new Map<string, StoredOutbox | null>();
  private deletions: string[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private disabled = false;

  constructor(private readonly db: IDBDatabase, readonly bridgeId: string) {}

  /** Nothing is written any more (a forgotten bridge, or a pairing that never completed). */
  disable(): void {
    this.disabled = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  enable(): void {
    this.disabled = false;
  }

  row(build: () => BridgeRow): void {
    this.rowBuilder = build;
    this.schedule();
  }

  entry(sessionId: string, seq: number, entry: OutputEntry): void {
    this.entries.push({ sessionId, seq, entry });
    this.schedule();
  }

  outboxItem(inputId: string, value: StoredOutbox | null): void {
    this.outbox.set(inputId, value);
    this.schedule();
  }

  deleteSession(sessionId: string): void {
    this.entries = this.entries.filter((e) => e.sessionId !== sessionId);
    this.deletions.push(sessionId);
    this.schedule();
  }

  async loadEntries(sessionId: string): Promise<StoredEntry[]> {
    return getAllValues<StoredEntry>(this.db, "entries", prefixRange(this.bridgeId, sessionId));
  }

  async loadOutbox(): Promise<StoredOutbox[]> {
    return getAllValues<StoredOutbox>(this.db, "outbox", prefixRange(this.bridgeId));
  }

  /** Writes everything pending now; resolves when it is on disk. */
  flush(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.disabled) return this.flushing;
    const row = this.rowBuilder?.();
    const entries = this.entries;
    const outbox = this.outbox;
    const deletions = this.deletions;
    this.rowBuilder = null;
    this.entries = [];
    this.outbox = new Map();
    this.deletions = [];
    if (row === undefined && entries.length === 0 && outbox.size === 0 && deletions.length === 0) return this.flushing;
    const id = this.bridgeId;
    const write = transact(this.db, ["bridges", "entries", "outbox"], "readwrite", (tx) => {
      const entryStore = tx.objectStore("entries");
      const outboxStore = tx.objectStore("outbox");
      for (const sessionId of deletions) entryStore.delete(prefixRange(id, sessionId));
      if (row !== undefined) tx.objectStore("bridges").put(row, id);
      for (const e of entries) entryStore.put({ seq: e.seq, entry: e.entry }, [id, e.sessionId, e.seq]);
      for (const [inputId, value] of outbox) {
        if (value === null) outboxStore.delete([id, inputId]);
        else outboxStore.put(value, [id, inputId]);
      }
    });
    this.flushing = this.flushing.then(() => write).catch((err: unknown) => {
      console.error(`bridge ${id.slice(0, 8)}: writing to IndexedDB failed`, err);
    });
    return this.flushing;
  }

  private schedule(): void {
    if (this.disabled || this.timer !== null) return;
    this.timer = setTimeout(() => void this.flush(), FLUSH_MS);
  }
}

/** Deletes everything of one bridge (its row with the key, transcripts, outbox). */
export function deleteBridge(db: IDBDatabase, bridgeId: string): Promise<void> {
  return transact(db, ["bridges", "entries", "outbox"], "readwrite", (tx) => {
    tx.objectStore("bridges").delete(bridgeId);
    tx.objectStore("entries").delete(prefixRange(bridgeId));
    tx.objectStore("outbox").delete(prefixRange(bridgeId));
  });
}
