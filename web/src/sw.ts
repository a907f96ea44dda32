// CodeDeck Web's service worker: Web Push only. A push carries no content (PROTOCOL.md, push
// payload): the bridge, the machine's name, a reason from a fixed list and a count. It is hostile
// input like everything else: validated, the machine name cut, the reason looked up. A visible
// page of the app is told instead of notified. No caching: reloads always get the served files.
export {};
declare const self: ServiceWorkerGlobalScope;

const REASONS: Record<string, string> = {
  approval: "approval waiting",
  plan: "plan to approve",
  question: "question for you",
  "turn-ended": "turn finished",
  "session-died": "session stopped",
};

interface PushFacts { bridge: string; machine: string; reason: string; count: number }

function parsePush(data: PushMessageData | null): PushFacts | null {
  if (!data) return null;
  let raw: unknown;
  try {
    raw = data.json();
  } catch {
    return null;
  }
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return null;
  const o = raw as Record<string, unknown>;
  if (o["v"] !== 1) return null;
  const reason = o["reason"];
  if (typeof reason !== "string" || !Object.hasOwn(REASONS, reason)) return null;
  const bridge = typeof o["bridge"] === "string" && /^[0-9a-f]{64}$/.test(o["bridge"]) ? o["bridge"] : "";
  const machine = typeof o["machine"] === "string" && o["machine"].trim() ? o["machine"].trim().slice(0, 64) : "Your machine";
  const n = o["count"];
  const count = typeof n === "number" && Number.isInteger(n) && n > 0 ? Math.min(n, 999) : 1;
  return { bridge, machine, reason, count };
}

async function deliver(facts: PushFacts): Promise<void> {
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const visible = windows.filter((w) => w.visibilityState === "visible");
  if (visible.length > 0) {
    for (const w of visible) w.postMessage({ type: "codedeck-push", ...facts });
    return;
  }
  const words = REASONS[facts.reason] ?? "needs you";
  const title = `${facts.machine}: ${words}${facts.count > 1 ? ` (${facts.count})` : ""}`;
  await self.registration.showNotification(title, {
    body: "Open CodeDeck to see it.",
    tag: `codedeck-${facts.bridge || "bridge"}`,
    icon: "/icon-192.png",
    badge: "/icon-192.png",
    data: { bridge: facts.bridge },
  });
}

self.addEventListener("install", () => {
  void self.skipWaiting();
});

self.addEventListener("activate", (event) => {
  event.waitUntil(self.clients.claim());
});

self.addEventListener("push", (event) => {
  const facts = parsePush(event.data);
  if (!facts) return;
  event.waitUntil(deliver(facts));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    const own = windows.find((w) => new URL(w.url).origin === self.location.origin);
    if (own) {
      await own.focus();
      return;
    }
    await self.clients.openWindow("/");
  })());
});
