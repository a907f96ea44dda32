// CodeDeck Web's service worker: Web Push only. A push carries no content (PROTOCOL.md, push
// payload): the bridge, the machine's name, a reason from a fixed list and a count. It is hostile
// input like everything else: validated, the machine name cut, the reason looked up. A visible
// page of the app is told instead of notified. No caching: reloads always get the served files.
import { parsePushPayload, pushTitle, type PushFacts } from "./ui/pushpayload";

declare const self: ServiceWorkerGlobalScope;

function parsePush(data: PushMessageData | null): PushFacts | null {
  if (!data) return null;
  try {
    return parsePushPayload(data.json());
  } catch {
    return null;
  }
}

async function deliver(facts: PushFacts): Promise<void> {
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const visible = windows.filter((w) => w.visibilityState === "visible");
  if (visible.length > 0) {
    for (const w of visible) w.postMessage({ type: "codedeck-push", ...facts });
    return;
  }
  await self.registration.showNotification(pushTitle(facts), {
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
