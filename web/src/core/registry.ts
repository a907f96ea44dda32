// All paired bridges of this browser (api.ts ClientRegistry): loads them from IndexedDB, connects
// each, pairs new ones (by the `#pair=` link, or by npub), forgets them. Keys are made here, one
// per bridge, and stay in IndexedDB.
import { generateSecretKey, getPublicKey } from "nostr-tools/pure";
import { npubEncode } from "nostr-tools/nip19";
import type { BridgeClient, Change, ClientRegistry } from "./api";
import { BridgeClientImpl, emptyRow } from "./bridge";
import { parsePairFragment, npubToHex, relayUrl } from "./fragment";
import { getAllValues, getValue, openDatabase, transact } from "./idb";
import { Notifier } from "./notify";
import { BridgeStore, deleteBridge, type BridgeRow } from "./store";
import type { BridgeMessage } from "./validate";
import { bytesToHex, hexToBytes } from "./wire";

export const PAIR_TIMEOUT_MS = 30_000;
export const MANUAL_PAIR_TIMEOUT_MS = 15 * 60_000;
const CONNECT_TIMEOUT_MS = 10_000;

class Registry implements ClientRegistry {
  private clients = new Map<string, BridgeClientImpl>();
  private readonly notifier = new Notifier();

  constructor(private readonly db: IDBDatabase) {}

  async load(): Promise<void> {
    const rows = await getAllValues<BridgeRow>(this.db, "bridges");
    for (const row of rows) {
      if (!row || typeof row.secretKey !== "string" || typeof row.record?.id !== "string") {
        console.warn("a stored bridge row is malformed; skipped");
        continue;
      }
      try {
        const client = this.make(row);
        this.clients.set(row.record.id, client);
        await client.start();
      } catch (err) {
        console.error("a stored bridge could not be loaded; skipped", err);
        this.clients.delete(row.record.id);
      }
    }
    const wake = () => {
      for (const client of this.clients.values()) client.wake();
    };
    globalThis.addEventListener?.("online", wake);
    const doc = (globalThis as { document?: { visibilityState?: string; addEventListener(t: string, f: () => void): void } }).document;
    doc?.addEventListener("visibilitychange", () => {
      if (doc.visibilityState === "visible") wake();
      // A page being hidden may be closed next: write what is pending now.
      else for (const client of this.clients.values()) void client.store.flush();
    });
  }

  private make(row: BridgeRow, persistNow = true): BridgeClientImpl {
    const store = new BridgeStore(this.db, row.record.id);
    if (!persistNow) store.disable();
    const id = row.record.id;
    return new BridgeClientImpl(row, store, (c) => this.notifier.emit({ bridgeId: id, ...c }));
  }

  bridges(): BridgeClient[] {
    return [...this.clients.values()].sort((a, b) => a.record.pairedAt - b.record.pairedAt);
  }

  get(bridgeId: string): BridgeClient | undefined {
    return this.clients.get(bridgeId);
  }

  subscribe(listener: (change: Change) => void): () => void {
    return this.notifier.subscribe(listener);
  }

  /** Waits for a decoded message of `client` that `pick` accepts (a non-undefined result). */
  private waitMessage<T>(client: BridgeClientImpl, timeoutMs: number, timeoutText: string, pick: (m: BridgeMessage) => T | undefined): Promise<T> {
    return new Promise((resolve, reject) => {
      const hook = (message: BridgeMessage) => {
        const result = pick(message);
        if (result === undefined) return;
        clearTimeout(timer);
        client.hooks.delete(hook);
        resolve(result);
      };
      const timer = setTimeout(() => {
        client.hooks.delete(hook);
        reject(new Error(timeoutText));
      }, timeoutMs);
      client.hooks.add(hook);
    });
  }

  private async adopt(client: BridgeClientImpl): Promise<void> {
    const store = client.store;
    store.enable();
    store.row(() => client.row());
    await store.flush();
    this.clients.set(client.record.id, client);
    this.notifier.emit({ bridgeId: client.record.id, topic: "bridges" });
  }

  async pairFromFragment(fragment: string, label: string): Promise<BridgeClient> {
    const link = parsePairFragment(fragment);
    const existing = this.clients.get(link.bridgeHex);
    const secret = existing === undefined ? generateSecretKey() : null;
    const client = existing ?? this.make(emptyRow(
      { id: link.bridgeHex, npub: link.bridgeNpub, machine: link.machine, relays: link.relays, pairedAt: Date.now() },
      bytesToHex(secret!),
    ), false);
    if (existing !== undefined) client.mergeRelays(link.relays);
    else await client.start();
    try {
      const ack = this.waitMessage(client, PAIR_TIMEOUT_MS,
        "The bridge did not answer within 30 s. Is it running, and is the pairing window still open?",
        (m) => (m.type === "pair-ack" ? m : undefined));
      ack.catch(() => undefined);
      // The subscriptions go out as soon as a relay connects, before the request on the same socket.
      if (!(await client.waitConnected(CONNECT_TIMEOUT_MS))) {
        throw new Error(`Could not reach the bridge's relay (${link.relays.join(", ")})`);
      }
      await client.send({ type: "pair-request", npub: npubEncode(client.phonePubkey), pubkeyHex: client.phonePubkey, label, token: link.token });
      const answer = await ack;
      if (!answer.ok) {
        const reason = answer.reason === "bad-token" ? "the pairing code is wrong or was already used"
          : answer.reason === "window-closed" ? "the pairing window is closed: run `codedeck-bridge pair` again"
          : "the bridge refused";
        throw new Error(`Pairing refused: ${reason}`);
      }
    } catch (err) {
      if (existing === undefined) client.close();
      throw err;
    }
    if (existing === undefined) await this.adopt(client);
    return client;
  }

  async pairByNpub(bridgeNpub: string, relays: string[], label: string): Promise<BridgeClient> {
    void label; // the label is given on the machine (`codedeck-bridge pair --npub … --label …`)
    const bridgeHex = npubToHex(bridgeNpub);
    if (bridgeHex === null) throw new Error("That is not a bridge npub (npub1…)");
    const urls: string[] = [];
    for (const raw of relays) {
      const url = relayUrl(raw);
      if (url === null) throw new Error(`${JSON.stringify(raw.slice(0, 80))} is not a ws:// or wss:// relay URL`);
      if (!urls.includes(url)) urls.push(url);
    }
    if (urls.length === 0) throw new Error("Give at least one relay");
    if (this.clients.has(bridgeHex)) throw new Error("This bridge is already paired");
    const key = await this.manualKey();
    const client = this.make(emptyRow(
      { id: bridgeHex, npub: npubEncode(bridgeHex), machine: "", relays: urls, pairedAt: Date.now() },
      key,
    ), false);
    await client.start();
    try {
      await this.waitMessage(client, MANUAL_PAIR_TIMEOUT_MS,
        "No heartbeat from the bridge: run `codedeck-bridge pair --npub <this device's npub>` on the machine",
        (m) => (m.type === "sessions" ? true : undefined));
    } catch (err) {
      client.close();
      throw err;
    }
    await transact(this.db, ["meta"], "readwrite", (tx) => tx.objectStore("meta").delete("manualKey"));
    await this.adopt(client);
    return client;
  }

  private async manualKey(): Promise<string> {
    const stored = await getValue<{ secretKey: string }>(this.db, "meta", "manualKey");
    if (stored !== undefined && typeof stored.secretKey === "string" && /^[0-9a-f]{64}$/.test(stored.secretKey)) return stored.secretKey;
    const secretKey = bytesToHex(generateSecretKey());
    await transact(this.db, ["meta"], "readwrite", (tx) => tx.objectStore("meta").put({ secretKey }, "manualKey"));
    return secretKey;
  }

  async manualPairKey(): Promise<{ npub: string; hex: string }> {
    const hex = getPublicKey(hexToBytes(await this.manualKey()));
    return { npub: npubEncode(hex), hex };
  }

  async forget(bridgeId: string): Promise<void> {
    const client = this.clients.get(bridgeId);
    if (client !== undefined) {
      client.close();
      client.store.disable();
      this.clients.delete(bridgeId);
    }
    await deleteBridge(this.db, bridgeId);
    this.notifier.emit({ bridgeId, topic: "bridges" });
  }
}

/** Opens IndexedDB, loads every paired bridge and connects to its relays. */
export async function openRegistry(): Promise<ClientRegistry> {
  const registry = new Registry(await openDatabase());
  await registry.load();
  return registry;
}
