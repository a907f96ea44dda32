// One paired bridge, live (api.ts BridgeClient): the commands a v10 phone sends (PROTOCOL.md §7)
// and the outbox of inputs (pending → published → confirmed / failed, kept in IndexedDB), on top
// of the state and the inbound side of state.ts. Every command carries `v: 10` and
// `caps` and goes out as kind 4515 to the bridge (wire.ts); a send resolves once a relay accepted it.
import type { Event } from "nostr-tools/pure";
import { npubEncode } from "nostr-tools/nip19";
import type {
  BridgeClient, Card, CreateSessionOptions, EffortLevel, OutboxItem, PendingSession, PermissionMode, TranscriptItem,
} from "./api";
import { BridgeState, OfflineError, OPENED_CAPACITY, type Command } from "./state";
import type { StoredOutbox } from "./store";
import { base64, base64Room, cut, mimeTypeOf } from "./upload";
import { nowSeconds, randomHex, sealCommand } from "./wire";

export { emptyRow } from "./store";
export { subscriptionFilters } from "./wire";
export { expectedKind } from "./inbound";

const REPLY_TIMEOUT_MS = 30_000;
/** An input event older than this is not sent again (the bridge drops commands older than 300 s). */
export const RESEND_SAME_EVENT_S = 240;
const OUTBOX_KEEP_MS = 3_600_000;

export class BridgeClientImpl extends BridgeState implements BridgeClient {
  // ---- commands ---------------------------------------------------------------------------------

  async open(sessionId: string): Promise<void> {
    this.opened = [sessionId, ...this.opened.filter((s) => s !== sessionId)].slice(0, OPENED_CAPACITY);
    this.persist();
    await this.load(sessionId);
    this.startSync(sessionId);
  }

  async createSession(options: CreateSessionOptions): Promise<void> {
    const command: Command = { type: "create-session" };
    if (options.defaultEffort !== undefined) command.defaultEffort = options.defaultEffort;
    if (options.model) command.model = options.model;
    if (options.cwd) command.cwd = options.cwd;
    if (options.createCwd !== undefined) command.createCwd = options.createCwd;
    if (options.agent) command.agent = options.agent;
    const placeholder: PendingSession = { pendingId: null, cwd: options.cwd ?? "", createdAt: Date.now() };
    // A failed creation is shown until the user tries again.
    this.pendings = [...this.pendings.filter((p) => p.failed === undefined), placeholder];
    this.emit("pending");
    try {
      await this.send(command);
    } catch (err) {
      placeholder.failed = err instanceof Error ? err.message : String(err);
      this.emit("pending");
      throw err;
    }
  }

  async input(sessionId: string, text: string): Promise<void> {
    const inputId = randomHex(16);
    const item: OutboxItem = { inputId, sessionId, text, state: "pending", createdAt: Date.now() };
    const stored: StoredOutbox = { item, events: this.sealInput(item) };
    this.outboxItems.set(inputId, stored);
    this.store.outboxItem(inputId, stored);
    this.emit("outbox", sessionId);
    await this.publishInput(stored);
  }

  async retryInput(inputId: string): Promise<void> {
    const stored = this.outboxItems.get(inputId);
    if (stored === undefined) throw new Error("No such message to retry");
    if (stored.item.state === "confirmed") return;
    const first = stored.events[0];
    if (first === undefined || nowSeconds() - first.created_at > RESEND_SAME_EVENT_S) stored.events = this.sealInput(stored.item);
    this.setOutbox(inputId, "pending");
    await this.publishInput(stored);
  }

  protected async answer(key: string, sessionId: string, command: Command): Promise<void> {
    this.answered.add(key);
    this.emit("cards", sessionId);
    try {
      await this.send(command);
    } catch (err) {
      this.answered.delete(key);
      this.emit("cards", sessionId);
      throw err;
    }
  }

  answerPermission(card: Card & { kind: "permission" }, allow: boolean, modifier?: "always" | "never"): Promise<void> {
    const command: Command = { type: "permission-res", sessionId: card.sessionId, requestId: card.requestId, allow };
    if (modifier !== undefined) command.modifier = modifier;
    return this.answer(card.requestId, card.sessionId, command);
  }

  answerPlan(card: Card & { kind: "plan" }, key: "1" | "2" | "3"): Promise<void> {
    return this.answer(card.requestId, card.sessionId, { type: "keypress", sessionId: card.sessionId, key, context: "plan-approval" });
  }

  /**
   * One option alone goes as keypress{context:"question"} (1-based); several options (a
   * multi-select) as question-input with their labels joined by ", "; free text as question-input.
   * The bridge answers the group's questions in order (bridge/engine/sessions/broker.py).
   */
  answerQuestion(card: Card & { kind: "question" }, optionIndexes: number[], freeText?: string): Promise<void> {
    const key = `${card.requestId}#${card.index}`;
    const valid = [...new Set(optionIndexes)].filter((i) => Number.isInteger(i) && i >= 0 && i < card.options.length).sort((a, b) => a - b);
    const text = freeText?.trim() ?? "";
    if (text === "" && valid.length === 0) return Promise.reject(new Error("Choose an option or type an answer"));
    if (text === "" && valid.length === 1) {
      return this.answer(key, card.sessionId, { type: "keypress", sessionId: card.sessionId, key: String(valid[0]! + 1), context: "question" });
    }
    const answerText = text !== "" ? text : valid.map((i) => card.options[i]!.label).join(", ");
    return this.answer(key, card.sessionId, { type: "question-input", sessionId: card.sessionId, text: answerText, optionCount: card.options.length });
  }

  interrupt(sessionId: string): Promise<void> {
    return this.send({ type: "interrupt", sessionId });
  }

  setMode(sessionId: string, mode: PermissionMode): Promise<void> {
    return this.send({ type: "mode", sessionId, mode });
  }

  setModel(sessionId: string, model: string): Promise<void> {
    return this.send({ type: "model", sessionId, model });
  }

  setEffort(sessionId: string, level: EffortLevel): Promise<void> {
    return this.send({ type: "effort", sessionId, level });
  }

  closeSession(sessionId: string): Promise<void> {
    return this.send({ type: "close-session", sessionId });
  }

  async forgetSession(sessionId: string): Promise<void> {
    this.forgotten.add(sessionId);
    this.sessionViews.delete(sessionId);
    this.dropSessionData(sessionId);
    this.persist();
    this.emit("sessions");
    await this.store.flush();
  }

  async createFolder(path: string, root?: string): Promise<{ success: boolean; path?: string; error?: string }> {
    const requestId = randomHex(8);
    const command: Command = { type: "create-folder", path, requestId };
    if (root !== undefined) command.root = root;
    const answer = this.waitFor(this.folderWaiters, requestId);
    await this.send(command).catch((err: unknown) => {
      this.folderWaiters.delete(requestId);
      throw err;
    });
    return answer;
  }

  protected waitFor<T>(waiters: Map<string, (r: T) => void>, key: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(key);
        reject(new Error("No answer from the bridge (is it running?)"));
      }, REPLY_TIMEOUT_MS);
      waiters.set(key, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
  }

  async uploadImage(sessionId: string, file: Blob, filename: string, text: string, onProgress?: (done: number) => void): Promise<void> {
    const data = base64(new Uint8Array(await file.arrayBuffer()));
    const fields = { sessionId, uploadId: randomHex(16), filename, mimeType: mimeTypeOf(filename, file.type), text };
    const pieces = cut(data, base64Room(fields));
    onProgress?.(0);
    for (let index = 0; index < pieces.length; index++) {
      await this.send({ type: "upload-image", ...fields, base64Data: pieces[index]!, chunkIndex: index, totalChunks: pieces.length });
      onProgress?.((index + 1) / pieces.length);
    }
  }

  refresh(): Promise<void> {
    return this.send({ type: "refresh-sessions" });
  }

  requestModels(agent?: string): Promise<void> {
    return this.send(agent ? { type: "models-request", agent } : { type: "models-request" });
  }

  requestUsage(sessionId: string): Promise<void> {
    return this.send({ type: "usage-request", sessionId });
  }

  async pushSubscribe(subscription: PushSubscriptionJSON): Promise<{ success: boolean; error?: string }> {
    const { endpoint, keys } = subscription;
    const p256dh = keys?.p256dh;
    const auth = keys?.auth;
    if (!endpoint || !p256dh || !auth) throw new Error("The browser gave an incomplete push subscription");
    const answer = new Promise<{ success: boolean; error?: string }>((resolve, reject) => {
      const timer = setTimeout(() => {
        const list = (this.pushWaiters.get(endpoint) ?? []).filter((w) => w !== waiter);
        if (list.length > 0) this.pushWaiters.set(endpoint, list);
        else this.pushWaiters.delete(endpoint);
        reject(new Error("No answer from the bridge (does it support push?)"));
      }, REPLY_TIMEOUT_MS);
      const waiter = (r: { success: boolean; error?: string }) => {
        clearTimeout(timer);
        resolve(r);
      };
      this.pushWaiters.set(endpoint, [...(this.pushWaiters.get(endpoint) ?? []), waiter]);
    });
    await this.send({ type: "push-subscribe", subscription: { endpoint, keys: { p256dh, auth } } });
    return answer;
  }

  /** The npub of this device's key for this bridge. */
  get phoneNpub(): string {
    return npubEncode(this.phonePubkey);
  }

  // ---- the outbox ----------------------------------------------------------------------------------

  protected sealInput(item: OutboxItem): Event[] {
    return sealCommand(this.secret, this.conversationKey, this.record.id, { type: "input", sessionId: item.sessionId, text: item.text, inputId: item.inputId });
  }

  /**
   * Publishes an input's events. Offline, the item stays pending and goes out (the same events)
   * when a relay connects, or fails once it is too old to send; a relay's refusal fails it now.
   */
  protected async publishInput(stored: StoredOutbox): Promise<void> {
    try {
      await this.publishEvents(stored.events);
    } catch (err) {
      if (stored.item.state === "pending" && !(err instanceof OfflineError)) {
        this.setOutbox(stored.item.inputId, "failed", err instanceof Error ? err.message : String(err));
      }
      throw err;
    }
    if (stored.item.state === "pending") this.setOutbox(stored.item.inputId, "published");
  }

  protected setOutbox(inputId: string, state: OutboxItem["state"], reason?: string): void {
    const stored = this.outboxItems.get(inputId);
    if (stored === undefined) return;
    if (stored.item.state === "confirmed" && state !== "confirmed") return; // an ack is final
    const item: OutboxItem = { ...stored.item, state };
    if (reason !== undefined) item.reason = reason;
    else delete item.reason;
    stored.item = item;
    this.store.outboxItem(inputId, stored);
    this.emit("outbox", item.sessionId);
  }

  /** After a (re)connect: inputs that never reached a relay go out again (the same events). */
  protected republishPending(): void {
    for (const stored of this.outboxItems.values()) {
      if (stored.item.state !== "pending") continue;
      const first = stored.events[0];
      if (first === undefined || nowSeconds() - first.created_at > RESEND_SAME_EVENT_S) {
        this.setOutbox(stored.item.inputId, "failed", "Not delivered before the page closed");
        continue;
      }
      void this.publishInput(stored).catch(() => undefined);
    }
  }

  /** A user entry of the transcript: the oldest outbox item of the session with its text gets its seq. */
  protected matchOutbox(sessionId: string, seq: number, entry: TranscriptItem["entry"]): void {
    if (entry.entryType !== "text" || entry.metadata?.role !== "user") return;
    let match: StoredOutbox | undefined;
    for (const stored of this.outboxItems.values()) {
      const item = stored.item;
      if (item.sessionId !== sessionId || item.seq !== undefined || item.text !== entry.content) continue;
      if (match === undefined || item.createdAt < match.item.createdAt) match = stored;
    }
    if (match === undefined) return;
    match.item = { ...match.item, seq };
    this.store.outboxItem(match.item.inputId, match);
    this.emit("outbox", sessionId);
  }

  protected outboxHousekeeping(now: number): void {
    for (const [inputId, stored] of this.outboxItems) {
      // Confirmed inputs whose entry is in the transcript are kept an hour, then dropped.
      if (stored.item.state === "confirmed" && stored.item.seq !== undefined && now - stored.item.createdAt > OUTBOX_KEEP_MS) {
        this.outboxItems.delete(inputId);
        this.store.outboxItem(inputId, null);
      }
    }
    for (const stored of this.outboxItems.values()) {
      const first = stored.events[0];
      if (stored.item.state === "pending" && (first === undefined || nowSeconds() - first.created_at > RESEND_SAME_EVENT_S)) {
        this.setOutbox(stored.item.inputId, "failed", "Not delivered: no relay was reachable");
      }
    }
  }
}
