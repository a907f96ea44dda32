// Hash routes: `#/` (machines and sessions) and `#/b/<bridgeHex>/s/<sessionId>` (a session);
// `#pair=…` is a pairing link (its token is taken out of the URL once paired).
export type Route =
  | { kind: "home" }
  | { kind: "session"; bridgeId: string; sessionId: string }
  | { kind: "pair"; fragment: string };

export function parseRoute(hash: string): Route {
  if (hash.startsWith("#pair=")) return { kind: "pair", fragment: hash };
  const m = /^#\/b\/([0-9a-f]{64})\/s\/([^/?#]+)$/.exec(hash);
  if (m) {
    try {
      return { kind: "session", bridgeId: m[1]!, sessionId: decodeURIComponent(m[2]!) };
    } catch {
      return { kind: "home" };
    }
  }
  return { kind: "home" };
}

export function sessionHash(bridgeId: string, sessionId: string): string {
  return `#/b/${bridgeId}/s/${encodeURIComponent(sessionId)}`;
}
