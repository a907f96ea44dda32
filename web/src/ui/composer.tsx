// The input area of a session: the text box and send, the outbox with its states, interrupt, and
// the session's mode / model / effort, image attach with its progress. Only what the session's
// agent supports is offered.
import { useEffect, useState } from "preact/hooks";
import type { AgentDescriptor, BridgeClient, EffortLevel, OutboxItem, PermissionMode, RemoteSessionInfo } from "../core/api";
import { effortsOf, MODE_LABEL, modesOf } from "./agent";
import { useAction } from "./state";

const MAX_IMAGE_BYTES = 25 * 1024 * 1024;

function coarsePointer(): boolean {
  return typeof matchMedia === "function" && matchMedia("(pointer: coarse)").matches;
}

const OUTBOX_LABEL: Record<OutboxItem["state"], string> = {
  pending: "sending…",
  published: "sent",
  confirmed: "delivered",
  failed: "not delivered",
};

function Outbox({ client, items }: { client: BridgeClient; items: OutboxItem[] }) {
  const shown = items.filter((i) => i.state !== "confirmed").concat(items.filter((i) => i.state === "confirmed").slice(-1));
  shown.sort((a, b) => a.createdAt - b.createdAt);
  if (shown.length === 0) return null;
  return (
    <ul class="outbox" aria-label="Sent messages">
      {shown.slice(-4).map((item) => (
        <li key={item.inputId} class={`outbox-item ob-${item.state}`} data-testid="outbox-item" data-state={item.state}>
          <span class="ob-text">{item.text || "(empty input)"}</span>
          <span class="ob-state">{OUTBOX_LABEL[item.state]}{item.reason ? `: ${item.reason}` : ""}</span>
          {item.state === "failed" ? (
            <button type="button" class="btn small" onClick={() => void client.retryInput(item.inputId)}>Retry</button>
          ) : null}
        </li>
      ))}
    </ul>
  );
}

export interface ComposerProps {
  client: BridgeClient;
  info: RemoteSessionInfo;
  agent: AgentDescriptor;
  images: boolean;
}

export function Composer({ client, info, agent, images }: ComposerProps) {
  const sessionId = info.id;
  const [text, setText] = useState("");
  const [, error, run] = useAction();
  const [upload, setUpload] = useState<number | null>(null);
  const models = client.models();
  const running = info.state === "running" || info.state === "waiting_permission" || info.state === "waiting_question";
  const modes = modesOf(agent);
  const efforts = effortsOf(agent);

  useEffect(() => {
    if (agent.supports.models && !client.models()) void client.requestModels(agent.id).catch(() => undefined);
  }, [client, agent.id, agent.supports.models]);

  const send = () => {
    const value = text;
    if (value.trim() === "") return;
    setText("");
    void run(() => client.input(sessionId, value)).then((ok) => {
      if (!ok) setText((cur) => (cur === "" ? value : cur));
    });
  };

  const onKey = (e: KeyboardEvent) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !coarsePointer()) {
      e.preventDefault();
      send();
    }
  };

  const attach = (e: Event) => {
    const input = e.currentTarget as HTMLInputElement;
    const file = input.files?.[0];
    input.value = "";
    if (!file) return;
    if (!file.type.startsWith("image/")) return void run(() => Promise.reject(new Error("Only images can be attached.")));
    if (file.size > MAX_IMAGE_BYTES) return void run(() => Promise.reject(new Error("The image is larger than 25 MiB.")));
    const caption = text;
    setText("");
    setUpload(0);
    void run(() => client.uploadImage(sessionId, file, file.name || "image", caption, (done) => setUpload(done))).then(() => setUpload(null));
  };

  const modelOptions = models?.models ?? [];
  const currentModel = info.model ?? models?.defaultModel ?? "";
  const modelList = currentModel && !modelOptions.some((m) => m.id === currentModel) ? [{ id: currentModel }, ...modelOptions] : modelOptions;

  return (
    <div class="composer">
      <Outbox client={client} items={client.outbox(sessionId)} />
      <div class="controls">
        {modes.length > 0 ? (
          <label class="mini">
            <span class="vh">Mode</span>
            <select data-testid="mode-select" value={info.permissionMode ?? "default"}
              onChange={(e) => void run(() => client.setMode(sessionId, (e.currentTarget as HTMLSelectElement).value as PermissionMode))}>
              {modes.map((m) => <option key={m} value={m}>{MODE_LABEL[m]}</option>)}
            </select>
          </label>
        ) : null}
        {agent.supports.models ? (
          <label class="mini">
            <span class="vh">Model</span>
            <select data-testid="model-select" value={currentModel} disabled={modelList.length === 0}
              onChange={(e) => void run(() => client.setModel(sessionId, (e.currentTarget as HTMLSelectElement).value))}>
              {modelList.length === 0 ? <option value="">{models?.error ? "no models" : "models…"}</option> : null}
              {modelList.map((m) => <option key={m.id} value={m.id}>{"label" in m && m.label ? m.label : m.id}</option>)}
            </select>
          </label>
        ) : null}
        {efforts.length > 0 ? (
          <label class="mini">
            <span class="vh">Effort</span>
            <select data-testid="effort-select" value={info.effortLevel ?? ""}
              onChange={(e) => void run(() => client.setEffort(sessionId, (e.currentTarget as HTMLSelectElement).value as EffortLevel))}>
              {info.effortLevel ? null : <option value="">effort</option>}
              {efforts.map((x) => <option key={x} value={x}>{x}</option>)}
            </select>
          </label>
        ) : null}
        {running && agent.supports.interrupt ? (
          <button type="button" class="btn danger small" data-testid="interrupt" onClick={() => void run(() => client.interrupt(sessionId))}>Stop</button>
        ) : null}
      </div>
      {upload !== null ? (
        <div class="upload">
          <label class="small">Uploading image <progress data-testid="upload-progress" max={1} value={upload} /></label>
        </div>
      ) : null}
      <div class="compose-row">
        {images ? (
          <label class="btn icon attach" title="Attach an image">
            <svg viewBox="0 0 24 24" aria-hidden="true" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round"><path d="M21 11.5 12.5 20a5 5 0 0 1-7-7l9-9a3.3 3.3 0 0 1 4.7 4.7l-9 9a1.7 1.7 0 0 1-2.4-2.4l8.3-8.3" /></svg><span class="vh">Attach an image</span>
            <input type="file" accept="image/*" data-testid="attach-image" class="vh" onChange={attach} disabled={upload !== null} />
          </label>
        ) : null}
        <label class="vh" for={`composer-${sessionId}`}>Message</label>
        <textarea id={`composer-${sessionId}`} data-testid="composer-input" rows={1} placeholder="Message the agent…"
          value={text} onInput={(e) => setText((e.currentTarget as HTMLTextAreaElement).value)} onKeyDown={onKey} />
        <button type="button" class="btn primary" data-testid="composer-send" disabled={text.trim() === ""} onClick={send}>Send</button>
      </div>
      {error ? <div class="form-error" role="alert">{error}</div> : null}
    </div>
  );
}
