// Change notifications, batched: many changes of one (bridge, topic, session) within a burst
// (a 5,000-entry sync, a heartbeat touching every session) reach listeners once, on a short timer.
import type { Change } from "./api";

const FLUSH_MS = 16;

export class Notifier {
  private listeners = new Set<(change: Change) => void>();
  private queued = new Map<string, Change>();
  private timer: ReturnType<typeof setTimeout> | null = null;

  subscribe(listener: (change: Change) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  emit(change: Change): void {
    const key = `${change.bridgeId}\u0000${change.topic}\u0000${change.sessionId ?? ""}`;
    if (!this.queued.has(key)) this.queued.set(key, change);
    if (this.timer === null) this.timer = setTimeout(() => this.flush(), FLUSH_MS);
  }

  private flush(): void {
    this.timer = null;
    const changes = [...this.queued.values()];
    this.queued.clear();
    for (const change of changes) {
      for (const listener of [...this.listeners]) {
        try {
          listener(change);
        } catch (err) {
          console.error("a change listener failed", err);
        }
      }
    }
  }
}
