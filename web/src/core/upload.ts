// Chunked image upload (PROTOCOL.md §7 `upload-image`, chunked shape): the file's base64 cut into
// pieces small enough that each command, with its caption and names, stays under the 40,960-byte
// plaintext threshold (so no command needs `chunk` fragments).
import { NIP44_SAFE_PLAINTEXT_BYTES, utf8Length } from "./chunks";

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

export function base64(bytes: Uint8Array): string {
  let out = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += B64[(n >> 18) & 63]! + B64[(n >> 12) & 63]! + B64[(n >> 6) & 63]! + B64[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += B64[(n >> 18) & 63]! + B64[(n >> 12) & 63]! + "==";
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += B64[(n >> 18) & 63]! + B64[(n >> 12) & 63]! + B64[(n >> 6) & 63]! + "=";
  }
  return out;
}

/** Room left for base64 in one chunk command whose other fields are these. */
export function base64Room(fields: { sessionId: string; uploadId: string; filename: string; mimeType: string; text: string }): number {
  const skeleton = JSON.stringify({
    type: "upload-image", ...fields, base64Data: "", chunkIndex: 999999, totalChunks: 999999, v: 10, caps: ["diff", "chunked"],
  });
  // 30,000 leaves room under the threshold and keeps each event small for slow relays.
  const room = Math.min(30_000, NIP44_SAFE_PLAINTEXT_BYTES - 512 - utf8Length(skeleton));
  return Math.max(0, room - (room % 4));
}

/** The base64 text cut into pieces of at most `room` characters (at least one piece). */
export function cut(text: string, room: number): string[] {
  if (room <= 0) throw new Error("the caption is too long to send with an image");
  const pieces: string[] = [];
  for (let at = 0; at < text.length; at += room) pieces.push(text.slice(at, at + room));
  return pieces.length > 0 ? pieces : [""];
}

const TYPES: Record<string, string> = {
  png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg", gif: "image/gif", webp: "image/webp",
  heic: "image/heic", bmp: "image/bmp", svg: "image/svg+xml",
};

export function mimeTypeOf(filename: string, declared: string): string {
  if (declared) return declared;
  const ext = filename.toLowerCase().split(".").pop() ?? "";
  return TYPES[ext] ?? "application/octet-stream";
}
