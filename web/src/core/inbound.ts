// The inbound pipeline for one bridge, pure (PROTOCOL.md §2–§5, §10): author must be the bridge
// and `p` this device → one of the three kinds → dedup by id (a bounded set, persisted by the
// caller) → signature → NIP-44 decrypt → `chunk` reassembly → strict decode → the kind must be the
// message's storage class. Every refusal is a reason for a log line; nothing here throws.
import { verifyEvent, type Event } from "nostr-tools/pure";
import { v2 as nip44 } from "nostr-tools/nip44";
import { Assembler } from "./chunks";
import { DecodeError, decodeBridgeMessage, type BridgeMessage } from "./validate";
import { LIVE_KIND, RESPONSE_KIND, SESSION_LIST_KIND } from "./wire";

export const SEEN_CAPACITY = 5000;

/** The storage class each message type must arrive on (PROTOCOL.md §1). */
export function expectedKind(type: BridgeMessage["type"]): number | null {
  if (type === "sessions") return SESSION_LIST_KIND;
  if (type === "output" || type === "usage") return LIVE_KIND;
  if (type === "ignored") return null;
  return RESPONSE_KIND;
}

/** Event ids already handled, oldest first out past `capacity`. */
export class SeenIds {
  private order: string[];
  private set: Set<string>;

  constructor(initial: readonly string[] = [], private readonly capacity = SEEN_CAPACITY) {
    this.order = initial.slice(-capacity);
    this.set = new Set(this.order);
  }

  has(id: string): boolean {
    return this.set.has(id);
  }

  add(id: string): void {
    if (this.set.has(id)) return;
    this.set.add(id);
    this.order.push(id);
    if (this.order.length > this.capacity) {
      for (const old of this.order.splice(0, this.order.length - this.capacity)) this.set.delete(old);
    }
  }

  export(): string[] {
    return [...this.order];
  }
}

export type FeedResult =
  | { kind: "message"; message: BridgeMessage; fresh: boolean }
  | { kind: "pending"; fresh: boolean } // a fragment of an incomplete group
  | { kind: "duplicate" }
  | { kind: "dropped"; reason: string; fresh: boolean };

export class Inbound {
  readonly assembler = new Assembler();

  constructor(
    private readonly bridge: string,
    private readonly phone: string,
    private readonly conversationKey: Uint8Array,
    readonly seen: SeenIds,
  ) {}

  /** One event from a relay. `fresh` says the event was new and genuine (it moves cursors). */
  feed(event: Event, nowMs: number): FeedResult {
    const id = event.id.slice(0, 8);
    if (event.pubkey !== this.bridge) return { kind: "dropped", reason: `event ${id} is not from the bridge`, fresh: false };
    if (event.kind !== LIVE_KIND && event.kind !== RESPONSE_KIND && event.kind !== SESSION_LIST_KIND) {
      return { kind: "dropped", reason: `event ${id} has kind ${event.kind}`, fresh: false };
    }
    if (!event.tags.some((t) => t[0] === "p" && t[1] === this.phone)) {
      return { kind: "dropped", reason: `event ${id} is not addressed to this device`, fresh: false };
    }
    // Heartbeats are exempt from the dedup: the stored one replayed after a reload says the
    // bridge is up, and applying it again changes nothing else (an older one is ignored).
    const known = this.seen.has(event.id);
    if (known && event.kind !== SESSION_LIST_KIND) return { kind: "duplicate" };
    const copy = { id: event.id, pubkey: event.pubkey, created_at: event.created_at, kind: event.kind, tags: event.tags, content: event.content, sig: event.sig };
    if (!verifyEvent(copy)) return { kind: "dropped", reason: `event ${id} has a bad signature`, fresh: false };
    this.seen.add(event.id);
    const fresh = !known;
    let plaintext: string;
    try {
      plaintext = nip44.decrypt(event.content, this.conversationKey);
    } catch (err) {
      return { kind: "dropped", reason: `event ${id} does not decrypt: ${String(err).slice(0, 120)}`, fresh };
    }
    const joined = this.assembler.feed(plaintext, nowMs, event.pubkey, event.created_at);
    if (joined === null) return { kind: "pending", fresh };
    let message: BridgeMessage;
    try {
      message = decodeBridgeMessage(joined);
    } catch (err) {
      return { kind: "dropped", reason: `event ${id}: ${err instanceof DecodeError ? err.message : String(err).slice(0, 200)}`, fresh };
    }
    const kind = expectedKind(message.type);
    if (kind !== null && kind !== event.kind) {
      return { kind: "dropped", reason: `${message.type} arrived as kind ${event.kind}, expected ${kind}`, fresh };
    }
    return { kind: "message", message, fresh };
  }
}
