// Web Push for one bridge: the page subscribes with the bridge's VAPID key and hands the
// subscription to the bridge (`push-subscribe`). Each bridge gets its own service worker
// registration (scope /push/<bridge>/) because a registration holds one subscription per
// application server key, and a browser may be paired with several bridges.
import { useEffect, useState } from "preact/hooks";
import type { BridgeClient } from "../core/api";

/** The bytes of a base64url string (no padding), or null when it is not base64url. */
export function base64UrlBytes(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) return null;
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  try {
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    return null;
  }
}

/** Why push cannot work on this page, or null when it can. */
export function pushUnavailable(): string | null {
  if (!window.isSecureContext) return "Push needs https: open this page over https (or on this computer as localhost).";
  if (!("serviceWorker" in navigator)) return "This browser has no service workers, so no push.";
  if (!("PushManager" in window) || !("Notification" in window)) {
    return "This browser has no Web Push here (on an iPhone, add the page to the Home Screen first).";
  }
  return null;
}

export function pushScope(bridgeId: string): string {
  return `/push/${bridgeId}/`;
}

function sameKey(sub: PushSubscription, key: Uint8Array): boolean {
  const have = sub.options.applicationServerKey;
  if (!have) return false;
  const bytes = new Uint8Array(have);
  return bytes.length === key.length && bytes.every((b, i) => b === key[i]);
}

/** Resolves once the registration has an active worker (subscribe needs one). */
function activated(reg: ServiceWorkerRegistration): Promise<void> {
  if (reg.active) return Promise.resolve();
  const worker = reg.installing ?? reg.waiting;
  if (!worker) return Promise.resolve();
  return new Promise((resolve) => {
    const check = () => {
      if (worker.state === "activated" || worker.state === "redundant") {
        worker.removeEventListener("statechange", check);
        resolve();
      }
    };
    worker.addEventListener("statechange", check);
    check();
  });
}

export function PushControl({ client }: { client: BridgeClient }) {
  const machine = client.machine();
  const offered = !!machine && machine.capabilities.includes("push") && !!machine.pushKey;
  const reason = offered ? pushUnavailable() : null;
  const [status, setStatus] = useState<string | null>(null);
  const [on, setOn] = useState(false);
  const [busy, setBusy] = useState(false);
  const pushKey = machine?.pushKey;

  useEffect(() => {
    if (!offered || reason || !pushKey) return;
    let live = true;
    const key = base64UrlBytes(pushKey);
    void navigator.serviceWorker.getRegistration(pushScope(client.record.id)).then(async (reg) => {
      const sub = reg ? await reg.pushManager.getSubscription() : null;
      if (live && sub && key && sameKey(sub, key)) {
        setOn(true);
        setStatus("Notifications are on for this machine.");
      }
    }).catch(() => undefined);
    return () => { live = false; };
  }, [offered, reason, pushKey, client.record.id]);

  if (!machine) return null;
  if (!offered) {
    return <div class="push small muted" data-testid="push-status">This bridge does not offer notifications.</div>;
  }
  if (reason) {
    return <div class="push small muted" data-testid="push-status">{reason}</div>;
  }

  const enable = async () => {
    setBusy(true);
    setStatus("Turning notifications on…");
    try {
      const key = base64UrlBytes(pushKey ?? "");
      if (!key || key.length !== 65) throw new Error("The bridge's push key is not valid.");
      const permission = await Notification.requestPermission();
      if (permission !== "granted") throw new Error("Notifications are blocked for this page in the browser's settings.");
      const reg = await navigator.serviceWorker.register("/sw.js", { scope: pushScope(client.record.id) });
      await activated(reg);
      let sub = await reg.pushManager.getSubscription();
      if (sub && !sameKey(sub, key)) {
        await sub.unsubscribe();
        sub = null;
      }
      sub ??= await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
      const ack = await client.pushSubscribe(sub.toJSON());
      if (!ack.success) throw new Error(`The bridge refused the subscription${ack.error ? `: ${ack.error}` : "."}`);
      setOn(true);
      setStatus("Notifications are on for this machine.");
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      setStatus(/^(The bridge|Notifications are blocked|The bridge's push key)/.test(message) ? message : `This browser could not subscribe to push: ${message}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="push">
      {on ? null : (
        <button type="button" class="btn small" data-testid="push-enable" disabled={busy} onClick={() => void enable()}>
          Notify me on this device
        </button>
      )}
      <span class="small muted" data-testid="push-status" role="status">{status ?? "Notifications are off."}</span>
    </div>
  );
}
