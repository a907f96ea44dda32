// The `chunk` transport envelope (PROTOCOL.md §10): reassembly of the bridge's oversize messages
// and splitting of our own oversize commands. Pure; the clock is passed in.
//   {"type":"chunk","cid":"<hex>","i":0,"n":3,"part":"<slice of the JSON text>"}

export const NIP44_SAFE_PLAINTEXT_BYTES = 40960;
export const CHUNK_ENVELOPE_BUDGET = NIP44_SAFE_PLAINTEXT_BYTES - 64;
export const CHUNK_ASSEMBLY_TTL_MS = 60_000;
export const MAX_OPEN_GROUPS = 64;
export const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;
export const CHUNK_PREFIX = '{"type":"chunk"';

const encoder = new TextEncoder();
export function utf8Length(text: string): number {
  return encoder.encode(text).length;
}

interface Envelope { cid: string; i: number; n: number; part: string }

function parseEnvelope(plaintext: string): Envelope | null {
  let obj: unknown;
  try {
    obj = JSON.parse(plaintext);
  } catch {
    return null;
  }
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) return null;
  const o = obj as Record<string, unknown>;
  const { cid, i, n, part } = o;
  if (o.type !== "chunk" || typeof cid !== "string" || cid === "" || typeof part !== "string") return null;
  if (typeof i !== "number" || typeof n !== "number" || !Number.isSafeInteger(i) || !Number.isSafeInteger(n)) return null;
  if (!(i >= 0 && i < n && n >= 2)) return null;
  return { cid, i, n, part };
}

interface Group { count: number; expiresAt: number; sentAt: number; parts: Map<number, string>; size: number }

/** Reassembles fragments: groups keyed by (sender, cid); see PROTOCOL.md §10 for each rule. */
export class Assembler {
  private groups = new Map<string, Group>();
  private buffered = 0;
  evicted = 0;
  expired = 0;
  restarted = 0;
  duplicates = 0;

  constructor(
    private readonly ttlMs = CHUNK_ASSEMBLY_TTL_MS,
    private readonly maxGroups = MAX_OPEN_GROUPS,
    private readonly maxBytes = MAX_BUFFERED_BYTES,
  ) {}

  get openGroups(): number {
    return this.groups.size;
  }

  get bufferedBytes(): number {
    return this.buffered;
  }

  sweep(now: number): void {
    for (const [key, group] of [...this.groups]) {
      if (group.expiresAt <= now) {
        this.drop(key);
        this.expired++;
      }
    }
  }

  /**
   * One decrypted plaintext. Returns it unchanged when it is not a (valid) chunk envelope, the
   * joined message when this fragment completes a group, or null while the group is incomplete.
   * `sentAt` is the carrying event's created_at (seconds): eviction takes the oldest by it.
   */
  feed(plaintext: string, now: number, sender: string, sentAt?: number): string | null {
    this.sweep(now);
    if (!plaintext.startsWith(CHUNK_PREFIX)) return plaintext;
    const envelope = parseEnvelope(plaintext);
    if (envelope === null) return plaintext;
    const { cid, i, n, part } = envelope;
    const key = `${sender}\u0000${cid}`;
    let group = this.groups.get(key);
    if (group !== undefined && group.count !== n) {
      this.drop(key);
      this.restarted++;
      group = undefined;
    }
    const age = sentAt ?? now / 1000;
    if (group === undefined) {
      group = { count: n, expiresAt: now + this.ttlMs, sentAt: age, parts: new Map(), size: 0 };
      this.groups.set(key, group);
    } else {
      group.sentAt = Math.min(group.sentAt, age);
    }
    if (group.parts.has(i)) {
      this.duplicates++;
      return null;
    }
    const bytes = utf8Length(part);
    group.parts.set(i, part);
    group.size += bytes;
    this.buffered += bytes;
    if (group.parts.size === group.count) {
      this.drop(key);
      let joined = "";
      for (let index = 0; index < group.count; index++) joined += group.parts.get(index)!;
      return joined;
    }
    while (this.groups.size > 0 && (this.groups.size > this.maxGroups || this.buffered > this.maxBytes)) {
      let oldestKey: string | null = null;
      let oldest = Infinity;
      for (const [k, g] of this.groups) {
        if (g.sentAt < oldest) {
          oldest = g.sentAt;
          oldestKey = k;
        }
      }
      this.drop(oldestKey!);
      this.evicted++;
    }
    return null;
  }

  private drop(key: string): void {
    const group = this.groups.get(key);
    if (group === undefined) return;
    this.groups.delete(key);
    this.buffered -= group.size;
  }
}

function escapedSize(text: string): number {
  return utf8Length(JSON.stringify(text)) - 2;
}

/**
 * Cuts an encoded command into chunk envelopes when it is over the NIP-44 safe size (else returns
 * it unchanged). Slices are cut between code points; joining the parts gives the text back.
 */
export function split(jsonText: string, cid: string): string[] {
  if (utf8Length(jsonText) <= NIP44_SAFE_PLAINTEXT_BYTES) return [jsonText];
  const codePoints = Array.from(jsonText);
  const costs = codePoints.map(escapedSize);
  const cidJson = JSON.stringify(cid);
  let digits = 1;
  for (;;) {
    const parts: string[] = [];
    let start = 0;
    while (start < codePoints.length) {
      const prefix = `${CHUNK_PREFIX},"cid":${cidJson},"i":${parts.length},"n":${10 ** (digits - 1)},"part":`;
      let room = CHUNK_ENVELOPE_BUDGET - utf8Length(prefix) - 3;
      let end = start;
      while (end < codePoints.length && costs[end]! <= room) {
        room -= costs[end]!;
        end++;
      }
      if (end === start) throw new Error("chunk envelope has no room for a part");
      parts.push(codePoints.slice(start, end).join(""));
      start = end;
    }
    if (String(parts.length).length === digits) {
      return parts.map(
        (part, i) => `${CHUNK_PREFIX},"cid":${cidJson},"i":${i},"n":${parts.length},"part":${JSON.stringify(part)}}`,
      );
    }
    digits = String(parts.length).length;
  }
}
