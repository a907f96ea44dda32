// The cards a session waits on (PROTOCOL.md §14): permission, plan approval, question. The core
// derives which cards are still answerable; a card here only collects the answer and sends it.
import { useState } from "preact/hooks";
import type { BridgeClient, Card } from "../core/api";
import { Markdown } from "./markdown";
import { prettyJson } from "./entry";
import { useAction } from "./state";

type PermissionCard = Card & { kind: "permission" };
type PlanCard = Card & { kind: "plan" };
type QuestionCard = Card & { kind: "question" };

/** The most telling part of a tool input: a command, a path, or the whole input as JSON. */
function inputText(input: unknown): { lead?: string; full: string } {
  const full = prettyJson(input);
  if (input && typeof input === "object" && !Array.isArray(input)) {
    const o = input as Record<string, unknown>;
    for (const key of ["command", "file_path", "path", "url", "pattern"]) {
      const v = o[key];
      if (typeof v === "string" && v) return { lead: v, full };
    }
  }
  return { full };
}

function PermissionView({ client, card }: { client: BridgeClient; card: PermissionCard }) {
  const [busy, error, run] = useAction();
  const { lead, full } = inputText(card.toolInput);
  const answer = (allow: boolean, modifier?: "always") => run(() => client.answerPermission(card, allow, modifier));
  return (
    <section class="card card-perm" data-testid="card-permission" data-request-id={card.requestId} aria-label="Permission request">
      <div class="card-title"><span>Allow <span class="tool-name">{card.toolName}</span>?</span></div>
      {card.description ? <div class="pre">{card.description}</div> : null}
      {lead ? <pre class="mono card-lead">{lead}</pre> : null}
      {full && full !== lead ? (
        <details class="tool-input"><summary>Full input</summary><pre class="mono">{full}</pre></details>
      ) : null}
      {card.reasons.length > 0 ? (
        <div class="reasons">{card.reasons.map((r, i) => <span key={i} class="chip warn">{r}</span>)}</div>
      ) : null}
      {card.reasonText ? <div class="pre small">{card.reasonText}</div> : null}
      <div class="card-actions">
        <button type="button" class="btn primary" data-testid="card-allow" disabled={busy} onClick={() => answer(true)}>Allow</button>
        <button type="button" class="btn danger" data-testid="card-deny" disabled={busy} onClick={() => answer(false)}>Deny</button>
        <button type="button" class="btn" data-testid="card-always" disabled={busy} onClick={() => answer(true, "always")}>Always allow</button>
      </div>
      {error ? <div class="form-error" role="alert">{error}</div> : null}
    </section>
  );
}

function PlanView({ client, card }: { client: BridgeClient; card: PlanCard }) {
  const [busy, error, run] = useAction();
  const press = (key: "1" | "2" | "3") => run(() => client.answerPlan(card, key));
  return (
    <section class="card card-plan" data-testid="card-plan" data-request-id={card.requestId} aria-label="Plan approval">
      <div class="card-title">Approve the plan?</div>
      {card.plan ? <div class="plan-box scroll-box"><Markdown source={card.plan} /></div> : <div class="muted small">The plan is in the transcript above.</div>}
      <div class="card-actions">
        <button type="button" class="btn primary" data-testid="plan-1" disabled={busy} onClick={() => press("1")}>Approve, auto-accept edits</button>
        <button type="button" class="btn" data-testid="plan-2" disabled={busy} onClick={() => press("2")}>Approve, ask for each edit</button>
        <button type="button" class="btn" data-testid="plan-3" disabled={busy} onClick={() => press("3")}>Keep planning</button>
      </div>
      {error ? <div class="form-error" role="alert">{error}</div> : null}
    </section>
  );
}

function QuestionView({ client, card }: { client: BridgeClient; card: QuestionCard }) {
  const [busy, error, run] = useAction();
  const [chosen, setChosen] = useState<number[]>([]);
  const [free, setFree] = useState("");
  const toggle = (i: number) => {
    if (card.multiSelect) setChosen(chosen.includes(i) ? chosen.filter((x) => x !== i) : [...chosen, i].sort((a, b) => a - b));
    else setChosen(chosen[0] === i ? [] : [i]);
  };
  const canSubmit = !busy && (chosen.length > 0 || free.trim() !== "");
  const submit = (e: Event) => {
    e.preventDefault();
    if (!canSubmit) return;
    const text = free.trim();
    void run(() => client.answerQuestion(card, chosen, text ? text : undefined));
  };
  const freeId = `qf-${card.requestId}-${card.index}`;
  return (
    <form class="card card-question" data-testid="card-question" data-request-id={card.requestId} aria-label="Question" onSubmit={submit}>
      <div class="card-title">
        {card.header ? <span class="chip">{card.header}</span> : null}
        {card.count > 1 ? <span class="muted small"> question {card.index + 1} of {card.count}</span> : null}
      </div>
      <div class="pre question-text">{card.question}</div>
      <div class="options" role={card.multiSelect ? "group" : "radiogroup"}>
        {card.options.map((opt, i) => {
          const on = chosen.includes(i);
          return (
            <button
              key={i}
              type="button"
              class={`option${on ? " on" : ""}`}
              data-testid="question-option"
              data-index={String(i)}
              role={card.multiSelect ? "checkbox" : "radio"}
              aria-checked={on}
              disabled={busy}
              onClick={() => toggle(i)}
            >
              <span class="option-mark" aria-hidden="true">{card.multiSelect ? (on ? "☑" : "☐") : on ? "◉" : "○"}</span>
              <span class="option-text">
                <span class="option-label">{opt.label}</span>
                {opt.description ? <span class="option-desc">{opt.description}</span> : null}
              </span>
            </button>
          );
        })}
      </div>
      <label class="field" for={freeId}>
        <span>Or answer in your own words</span>
        <input id={freeId} type="text" data-testid="question-free-text" value={free} disabled={busy}
          onInput={(e) => setFree((e.currentTarget as HTMLInputElement).value)} />
      </label>
      <div class="card-actions">
        <button type="submit" class="btn primary" data-testid="question-submit" disabled={!canSubmit}>Answer</button>
      </div>
      {error ? <div class="form-error" role="alert">{error}</div> : null}
    </form>
  );
}

export function Cards({ client, cards }: { client: BridgeClient; cards: Card[] }) {
  if (cards.length === 0) return null;
  return (
    <div class="cards">
      {cards.map((card) => {
        const key = `${card.kind}:${card.requestId}:${card.kind === "question" ? card.index : 0}`;
        switch (card.kind) {
          case "permission":
            return <PermissionView key={key} client={client} card={card} />;
          case "plan":
            return <PlanView key={key} client={client} card={card} />;
          case "question":
            return <QuestionView key={key} client={client} card={card} />;
          default: {
            const never: never = card;
            return never;
          }
        }
      })}
    </div>
  );
}
