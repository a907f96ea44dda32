// One session's transcript as this device holds it: seq → entry, insert-or-ignore. A seq that
// arrives again with the same content is a duplicate (live output and sync overlap); with
// different content it is a conflict (PROTOCOL.md §11: a contract violation), logged, and the
// first copy is kept. Ranges covered by sync chunks count as held even where the bridge pruned
// seqs, so the next haveRanges does not ask for them again.
import type { OutputEntry, TranscriptItem } from "./api";
import * as ranges from "./ranges";
import type { Range } from "./ranges";

export type InsertResult = "inserted" | "duplicate" | "conflict";

export class Transcript {
  private entries = new Map<number, OutputEntry>();
  private canonical = new Map<number, string>();
  private sorted: TranscriptItem[] | null = [];
  /** Entries after the last sorted one, appended on the next read (live output arrives in order). */
  private tail: TranscriptItem[] = [];
  private top = 0;
  private arrivals = new Map<number, number>();
  covered: Range[] = [];
  conflicts = 0;
  /** Loaded from storage (or nothing to load). */
  loaded = false;

  constructor(readonly sessionId: string) {}

  get size(): number {
    return this.entries.size;
  }

  /** Stores `entry` under `seq` unless held; `tick` is when it arrived (for card derivation). */
  insert(seq: number, entry: OutputEntry, source: string, tick = 0): InsertResult {
    const text = JSON.stringify(entry);
    const held = this.canonical.get(seq);
    if (held === undefined) {
      this.canonical.set(seq, text);
      this.entries.set(seq, entry);
      if (tick > 0) this.arrivals.set(seq, tick);
      if (this.sorted !== null && seq > this.top) this.tail.push({ seq, entry });
      else this.sorted = null;
      this.top = Math.max(this.top, seq);
      return "inserted";
    }
    if (held === text) return "duplicate";
    this.conflicts++;
    console.error(`session ${this.sessionId}: seq ${seq} arrived again (${source}) with different content; the first copy is kept`);
    return "conflict";
  }

  cover(range: Range): void {
    this.covered = ranges.union(this.covered, [range]);
  }

  arrival(seq: number): number {
    return this.arrivals.get(seq) ?? 0;
  }

  /** Ascending by seq; a new array whenever something was inserted (the UI compares by identity). */
  items(): TranscriptItem[] {
    if (this.sorted === null) {
      const seqs = [...this.entries.keys()].sort((a, b) => a - b);
      this.sorted = seqs.map((seq) => ({ seq, entry: this.entries.get(seq)! }));
      this.tail = [];
    } else if (this.tail.length > 0) {
      this.sorted = this.sorted.concat(this.tail);
      this.tail = [];
    }
    return this.sorted;
  }

  highest(): number {
    return this.top;
  }

  has(seq: number): boolean {
    return this.entries.has(seq) || ranges.covers(this.covered, seq);
  }

  /** What to send as sync-request.haveRanges: held seqs plus chunk-covered ranges. */
  haveRanges(): Range[] {
    return ranges.union(ranges.fromSeqs(this.items().map((i) => i.seq)), this.covered);
  }
}
