// The phone side of one session's transcript sync (PROTOCOL.md §11), after
// tests/support/phone_sync.py: requests wait in a FIFO and a `sync-begin` takes the oldest one.
// The bridge keeps one sync per (session, phone) and a newer request replaces the running one, also
// one sent by another tab with the same key: so the latest `sync-begin` is the sync, whoever asked,
// and only its `sync-end` counts. On it, [1, seqHigh] is checked against what was held at the
// request plus `deliveredRanges`; a gap is re-requested at once, a bounded number of times.
import * as ranges from "./ranges";
import type { Range } from "./ranges";

export const MAX_REREQUESTS = 3;

export type SyncOutcome = "ignored" | "rerequest" | "done";

export class SyncTracker {
  requests = 0;
  rerequests = 0;
  done = false;
  complete = false;
  missing: Range[] = [];
  private waiting: Range[][] = [];
  private current: { syncId: string; seqHigh: number; have: Range[] } | null = null;

  constructor(readonly sessionId: string, readonly maxRerequests = MAX_REREQUESTS) {}

  get currentSyncId(): string | null {
    return this.current?.syncId ?? null;
  }

  request(have: Iterable<readonly [number, number]>): void {
    if (this.done) throw new Error("this sync is over; start a new tracker");
    this.requests++;
    this.waiting.push(ranges.normalize(have));
  }

  onBegin(syncId: string, seqHigh: number): void {
    if (this.done) return;
    const have = this.waiting.shift() ?? this.current?.have ?? [];
    this.current = { syncId, seqHigh, have };
  }

  onEnd(syncId: string, delivered: Iterable<readonly [number, number]>): SyncOutcome {
    const current = this.current;
    if (current === null || syncId !== current.syncId || this.done) return "ignored";
    this.current = null;
    const gap = ranges.missing(ranges.union(current.have, delivered), 1, current.seqHigh);
    if (gap.length > 0 && this.rerequests < this.maxRerequests) {
      this.rerequests++;
      return "rerequest";
    }
    this.done = true;
    this.complete = gap.length === 0;
    this.missing = gap;
    return "done";
  }
}
