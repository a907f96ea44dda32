// Relay connections (NIP-01: REQ / EVENT / EOSE / OK / CLOSED / NOTICE) with reconnect and backoff,
// and a pool that publishes to every relay at once (PROTOCOL.md §3: delivered when one relay says
// OK true, or refuses with text containing "replaced" / "newer event"; a per-relay timeout of 5 s).
// Subscriptions are factories: their filters are built again on every (re)connect, so the 4516
// `since` follows the stored cursor (PROTOCOL.md §4).
import type { Event } from "nostr-tools/pure";

export interface Filter {
  kinds: number[];
  authors?: string[];
  "#p"?: string[];
  since?: number;
  limit?: number;
}

export interface Subscription {
  id: string;
  filters: () => Filter[];
}

export interface PoolHandlers {
  onEvent(subId: string, event: Event, relay: string): void;
  onEose(subId: string, relay: string): void;
  onState(relay: string, connected: boolean): void;
}

export interface PublishResult {
  accepted: boolean;
  /** Per relay, what it answered (or why it did not). */
  answers: Record<string, string>;
}

const OK_TIMEOUT_MS = 5000;
const BACKOFF_START_MS = 500;
const BACKOFF_MAX_MS = 10_000;
const HEX64 = /^[0-9a-f]{64}$/;
const HEX128 = /^[0-9a-f]{128}$/;

/** Checks the NIP-01 shape of an event from a relay (the signature is checked later). */
export function isEventShape(value: unknown): value is Event {
  if (typeof value !== "object" || value === null) return false;
  const e = value as Record<string, unknown>;
  return typeof e.id === "string" && HEX64.test(e.id)
    && typeof e.pubkey === "string" && HEX64.test(e.pubkey)
    && typeof e.sig === "string" && HEX128.test(e.sig)
    && typeof e.kind === "number" && Number.isInteger(e.kind)
    && typeof e.created_at === "number" && Number.isInteger(e.created_at)
    && typeof e.content === "string"
    && Array.isArray(e.tags) && e.tags.every((t) => Array.isArray(t) && t.every((x) => typeof x === "string"));
}

function accepted(ok: boolean, message: string): boolean {
  return ok || message.includes("replaced") || message.includes("newer event") || message.startsWith("duplicate");
}

class RelayConnection {
  private ws: WebSocket | null = null;
  private attempts = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  private oks = new Map<string, (answer: { ok: boolean; message: string }) => void>();
  private resubscribeTimers = new Map<string, ReturnType<typeof setTimeout>>();
  connected = false;

  constructor(
    readonly url: string,
    private readonly subs: Map<string, Subscription>,
    private readonly handlers: PoolHandlers,
  ) {}

  start(): void {
    this.closed = false;
    this.open();
  }

  /** Reconnect at once (network back, page visible again) unless connected or connecting. */
  wake(): void {
    if (this.closed || this.ws !== null) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.attempts = 0;
    this.open();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    for (const t of this.resubscribeTimers.values()) clearTimeout(t);
    this.resubscribeTimers.clear();
    const ws = this.ws;
    this.ws = null;
    if (ws !== null) {
      ws.onclose = null;
      ws.close();
    }
    this.setConnected(false);
  }

  subscribe(sub: Subscription): void {
    if (this.connected) this.send(["REQ", sub.id, ...sub.filters()]);
  }

  unsubscribe(id: string): void {
    if (this.connected) this.send(["CLOSE", id]);
  }

  publish(event: Event): Promise<{ ok: boolean; message: string }> {
    if (!this.connected) return Promise.resolve({ ok: false, message: "not connected" });
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.oks.delete(event.id);
        resolve({ ok: false, message: "no answer (timeout)" });
      }, OK_TIMEOUT_MS);
      this.oks.set(event.id, (answer) => {
        clearTimeout(timer);
        resolve(answer);
      });
      if (!this.send(["EVENT", event])) {
        clearTimeout(timer);
        this.oks.delete(event.id);
        resolve({ ok: false, message: "send failed" });
      }
    });
  }

  private open(): void {
    let ws: WebSocket;
    try {
      ws = new WebSocket(this.url);
    } catch (err) {
      console.warn(`relay ${this.url}: cannot connect: ${String(err)}`);
      this.schedule();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      this.attempts = 0;
      this.setConnected(true);
      for (const sub of this.subs.values()) this.subscribe(sub);
    };
    ws.onmessage = (message) => this.receive(message.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.setConnected(false);
      this.schedule();
    };
    ws.onerror = () => {
      // onclose follows and schedules the reconnect
    };
  }

  private schedule(): void {
    if (this.closed || this.timer !== null) return;
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_START_MS * 2 ** this.attempts);
    this.attempts++;
    const delay = base / 2 + Math.random() * (base / 2);
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.closed && this.ws === null) this.open();
    }, delay);
  }

  private setConnected(connected: boolean): void {
    if (this.connected === connected) return;
    this.connected = connected;
    if (!connected) {
      for (const resolve of this.oks.values()) resolve({ ok: false, message: "disconnected" });
      this.oks.clear();
    }
    this.handlers.onState(this.url, connected);
  }

  private send(message: unknown): boolean {
    const ws = this.ws;
    if (ws === null || ws.readyState !== WebSocket.OPEN) return false;
    try {
      ws.send(JSON.stringify(message));
      return true;
    } catch {
      return false;
    }
  }

  private receive(data: unknown): void {
    if (typeof data !== "string") return;
    let message: unknown;
    try {
      message = JSON.parse(data);
    } catch {
      console.warn(`relay ${this.url}: a message that is not JSON`);
      return;
    }
    if (!Array.isArray(message) || typeof message[0] !== "string") return;
    const [verb, a, b, c] = message as unknown[];
    switch (verb) {
      case "EVENT":
        if (typeof a === "string" && this.subs.has(a) && isEventShape(b)) this.handlers.onEvent(a, b, this.url);
        else console.warn(`relay ${this.url}: malformed EVENT dropped`);
        return;
      case "EOSE":
        if (typeof a === "string") this.handlers.onEose(a, this.url);
        return;
      case "OK":
        if (typeof a === "string" && typeof b === "boolean") {
          this.oks.get(a)?.({ ok: b, message: typeof c === "string" ? c : "" });
          this.oks.delete(a);
        }
        return;
      case "CLOSED":
        if (typeof a === "string") this.closedBy(a, typeof b === "string" ? b : "");
        return;
      case "NOTICE":
        console.warn(`relay ${this.url} notice: ${String(a).slice(0, 200)}`);
        return;
      default:
        return;
    }
  }

  private closedBy(id: string, reason: string): void {
    const sub = this.subs.get(id);
    if (sub === undefined || this.resubscribeTimers.has(id)) return;
    console.warn(`relay ${this.url} closed subscription ${id}: ${reason.slice(0, 200)}`);
    this.resubscribeTimers.set(id, setTimeout(() => {
      this.resubscribeTimers.delete(id);
      const current = this.subs.get(id);
      if (current !== undefined) this.subscribe(current);
    }, 5000));
  }
}

export class RelayPool {
  private relays = new Map<string, RelayConnection>();
  private subs = new Map<string, Subscription>();
  private waiters: (() => void)[] = [];

  constructor(private readonly handlers: PoolHandlers) {}

  get urls(): string[] {
    return [...this.relays.keys()];
  }

  states(): Record<string, boolean> {
    const out: Record<string, boolean> = {};
    for (const [url, relay] of this.relays) out[url] = relay.connected;
    return out;
  }

  anyConnected(): boolean {
    for (const relay of this.relays.values()) if (relay.connected) return true;
    return false;
  }

  add(url: string): void {
    if (this.relays.has(url)) return;
    const relay = new RelayConnection(url, this.subs, {
      onEvent: (s, e, r) => this.handlers.onEvent(s, e, r),
      onEose: (s, r) => this.handlers.onEose(s, r),
      onState: (r, connected) => {
        if (connected) {
          const waiters = this.waiters;
          this.waiters = [];
          for (const wake of waiters) wake();
        }
        this.handlers.onState(r, connected);
      },
    });
    this.relays.set(url, relay);
    relay.start();
  }

  subscribe(sub: Subscription): void {
    this.subs.set(sub.id, sub);
    for (const relay of this.relays.values()) relay.subscribe(sub);
  }

  unsubscribe(id: string): void {
    this.subs.delete(id);
    for (const relay of this.relays.values()) relay.unsubscribe(id);
  }

  wake(): void {
    for (const relay of this.relays.values()) relay.wake();
  }

  close(): void {
    for (const relay of this.relays.values()) relay.close();
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves once a relay is connected (true) or after `timeoutMs` (false). */
  waitConnected(timeoutMs: number): Promise<boolean> {
    if (this.anyConnected()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== wake);
        resolve(this.anyConnected());
      }, timeoutMs);
      const wake = () => {
        clearTimeout(timer);
        resolve(this.anyConnected());
      };
      this.waiters.push(wake);
    });
  }

  /** Sends to every connected relay (waiting up to `connectMs` for one); accepted when one accepts. */
  async publish(event: Event, connectMs = 10_000): Promise<PublishResult> {
    await this.waitConnected(connectMs);
    const answers: Record<string, string> = {};
    const live = [...this.relays.values()].filter((r) => r.connected);
    if (live.length === 0) {
      for (const url of this.relays.keys()) answers[url] = "not connected";
      return { accepted: false, answers };
    }
    return new Promise((resolve) => {
      let left = live.length;
      let done = false;
      for (const relay of live) {
        void relay.publish(event).then(({ ok, message }) => {
          answers[relay.url] = ok ? "ok" : message || "refused";
          left--;
          if (done) return;
          if (accepted(ok, message)) {
            done = true;
            resolve({ accepted: true, answers });
          } else if (left === 0) {
            done = true;
            resolve({ accepted: false, answers });
          }
        });
      }
    });
  }
}
