// Event construction for this phone's commands (PROTOCOL.md §2, §3, §5): the command's JSON with
// `v: 10` and `caps` last, NIP-44 v2 encrypted to the bridge, signed as kind 4515 with
// ["p", bridge] and ["expiration", created_at + 3600]; a command over 40,960 bytes goes as `chunk`
// fragments sharing one created_at. created_at is the wall clock.
import { finalizeEvent, type Event } from "nostr-tools/pure";
import { v2 as nip44 } from "nostr-tools/nip44";
import { split } from "./chunks";
import type { Filter } from "./relay";

export const COMMAND_KIND = 4515;
export const RESPONSE_KIND = 4516;
export const SESSION_LIST_KIND = 30515;
export const LIVE_KIND = 24515;
export const PROTOCOL_VERSION = 10;
export const CAPS = ["diff", "chunked"];
export const EXPIRY_SECONDS = 3600;

export function randomHex(bytes: number): string {
  const buf = new Uint8Array(bytes);
  crypto.getRandomValues(buf);
  return Array.from(buf, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function hexToBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

export function bytesToHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** The plaintext of a command as sent: the command's fields, then `v` and `caps`. */
export function commandText(command: { type: string } & Record<string, unknown>): string {
  return JSON.stringify({ ...command, v: PROTOCOL_VERSION, caps: CAPS });
}

/** The signed event(s) of one command: one, or chunk fragments sharing created_at. */
export function sealCommand(
  secret: Uint8Array,
  conversationKey: Uint8Array,
  bridgeHex: string,
  command: { type: string } & Record<string, unknown>,
  createdAt = nowSeconds(),
): Event[] {
  const tags = [["p", bridgeHex], ["expiration", String(createdAt + EXPIRY_SECONDS)]];
  return split(commandText(command), randomHex(16)).map((plaintext) =>
    finalizeEvent(
      { kind: COMMAND_KIND, created_at: createdAt, tags, content: nip44.encrypt(plaintext, conversationKey) },
      secret,
    ),
  );
}

export const STORED_SINCE_GRACE_SECONDS = 60;
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

