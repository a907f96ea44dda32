// The pairing link's fragment (`codedeck-bridge pair` prints it beside the codedeck:// link):
//   #pair=<bridge npub>&relays=<each percent-encoded, joined by ",">&machine=<pct>&token=<pct>
// Relays are split on the literal "," first and decoded afterwards (an encoded relay URL holds no
// raw comma), as the codedeck:// link is read (tests/support/phone_pairing.py). The token is a
// secret: no error text quotes it.
import { decode as nip19Decode } from "nostr-tools/nip19";

export interface PairLink {
  bridgeNpub: string;
  bridgeHex: string;
  relays: string[];
  machine: string;
  token: string;
}

export class PairLinkError extends Error {}

function decodePiece(raw: string, name: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, "%20"));
  } catch {
    throw new PairLinkError(`the pairing link's ${name} is not correctly encoded`);
  }
}

/** The bridge's hex pubkey for an npub (or 64-hex), or null when it is neither. */
export function npubToHex(value: string): string | null {
  const text = value.trim();
  if (/^[0-9a-f]{64}$/i.test(text)) return text.toLowerCase();
  try {
    const decoded = nip19Decode(text);
    return decoded.type === "npub" ? decoded.data : null;
  } catch {
    return null;
  }
}

/** A ws:// or wss:// URL, or null. */
export function relayUrl(value: string): string | null {
  const text = value.trim();
  try {
    const url = new URL(text);
    if ((url.protocol === "ws:" || url.protocol === "wss:") && url.host !== "") return text;
  } catch {
    return null;
  }
  return null;
}

export function parsePairFragment(fragment: string): PairLink {
  let text = fragment.trim();
  const hash = text.indexOf("#");
  if (hash >= 0) text = text.slice(hash + 1);
  const params = new Map<string, string>();
  for (const item of text.split("&")) {
    if (item === "") continue;
    const eq = item.indexOf("=");
    if (eq < 0) continue;
    const name = item.slice(0, eq);
    if (params.has(name)) throw new PairLinkError(`the pairing link gives ${name.slice(0, 32)} twice`);
    params.set(name, item.slice(eq + 1));
  }
  for (const name of ["pair", "relays", "machine", "token"]) {
    if (!params.get(name)) throw new PairLinkError(`the pairing link has no ${name === "pair" ? "bridge key" : name}`);
  }
  const bridgeNpub = decodePiece(params.get("pair")!, "bridge key").trim();
  const bridgeHex = npubToHex(bridgeNpub);
  if (bridgeHex === null || !bridgeNpub.startsWith("npub1")) throw new PairLinkError("the pairing link's bridge key is not an npub");
  const relays: string[] = [];
  for (const piece of params.get("relays")!.split(",")) {
    const decoded = decodePiece(piece, "relays").trim();
    const url = relayUrl(decoded);
    if (url === null) throw new PairLinkError(`relay ${JSON.stringify(decoded.slice(0, 80))} is not a ws:// or wss:// URL`);
    if (!relays.includes(url)) relays.push(url);
  }
  const machine = decodePiece(params.get("machine")!, "machine");
  const token = decodePiece(params.get("token")!, "token");
  if (machine.trim() === "") throw new PairLinkError("the pairing link has no machine");
  if (token.trim() === "") throw new PairLinkError("the pairing link has no token");
  return { bridgeNpub, bridgeHex, relays, machine, token };
}
