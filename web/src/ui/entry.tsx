// One transcript entry (PROTOCOL.md §14) as a small DOM row. Entries never change once written
// (a seq names one entry for good), so a row re-renders only when its seq or content differs:
// a 5,000-entry transcript re-renders in constant work per new entry.
import { Component } from "preact";
import type { OutputEntry, TranscriptItem } from "../core/api";
import { Markdown } from "./markdown";

const LONG_RESULT_CHARS = 600;
const LONG_RESULT_LINES = 10;

function str(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** Pretty JSON of a tool input as text (never parsed as markup). */
export function prettyJson(value: unknown): string {
  if (value === undefined) return "";
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

function firstLine(text: string, max = 120): string {
  const line = text.split("\n", 1)[0] ?? "";
  return line.length > max ? `${line.slice(0, max)}…` : line;
}

const ERROR_WORDS: Record<string, string> = {
  session_died: "The session stopped",
  session_failed: "The session could not start",
  auth_error: "The agent could not sign in",
};

function EntryBody({ entry }: { entry: OutputEntry }) {
  const meta = entry.metadata ?? {};
  const special = str(meta["special"]);
  switch (entry.entryType) {
    case "text": {
      if (special === "plan") {
        return (
          <div class="plan-box">
            <div class="plan-title">Plan</div>
            <Markdown source={entry.content} />
          </div>
        );
      }
      if (meta["role"] === "user") {
        const editor = meta["source"] === "editor";
        if (!editor) return <div class="bubble user pre">{entry.content}</div>;
        return (
          <div class="bubble user">
            <div class="note">from the editor</div>
            <div class="pre">{entry.content}</div>
          </div>
        );
      }
      const sub = str(meta["subagent"]);
      if (!sub) return <Markdown source={entry.content} className="bubble assistant" />;
      return (
        <div class="bubble assistant">
          <div class="note">subagent {sub}</div>
          <Markdown source={entry.content} />
        </div>
      );
    }
    case "thinking": {
      const redacted = meta["redacted"] === true || entry.content === "";
      return redacted ? (
        <div class="muted small">Thinking (hidden)</div>
      ) : (
        <details class="thinking">
          <summary>Thinking</summary>
          <div class="pre">{entry.content}</div>
        </details>
      );
    }
    case "tool_use": {
      const tool = str(meta["tool_name"]) ?? firstLine(entry.content, 40).split(":")[0] ?? "tool";
      const prefix = `${tool}: `;
      const summary = entry.content.startsWith(prefix) ? entry.content.slice(prefix.length) : entry.content;
      const input = prettyJson(meta["tool_input"]);
      return (
        <div class="tool">
          <div class="tool-head"><span class="tool-name">{tool}</span> <span class="tool-summary">{summary}</span></div>
          {input ? (
            <details class="tool-input">
              <summary>Input</summary>
              <pre class="mono">{input}</pre>
            </details>
          ) : null}
        </div>
      );
    }
    case "tool_result": {
      const text = entry.content;
      const long = text.length > LONG_RESULT_CHARS || text.split("\n", LONG_RESULT_LINES + 1).length > LONG_RESULT_LINES;
      if (!long) return <pre class="mono result">{text || "(no output)"}</pre>;
      return (
        <details class="result-long">
          <summary class="mono">{firstLine(text, 80) || "Result"} <span class="muted">({text.length} chars)</span></summary>
          <pre class="mono result">{text}</pre>
        </details>
      );
    }
    case "diff": {
      const diff = entry.diff;
      if (!diff) return <pre class="mono diff-fallback">{entry.content}</pre>;
      return (
        <div class="diff">
          <div class="diff-path mono">{diff.path}</div>
          <pre class="mono diff-lines">
            {diff.lines.map((line, i) => (
              <span key={i} class={`dl-${line.type === "add" || line.type === "del" ? line.type : "ctx"}`}>
                {line.type === "add" ? "+" : line.type === "del" ? "-" : " "}
                {line.text}
                {"\n"}
              </span>
            ))}
          </pre>
          {diff.truncated ? <div class="note">diff truncated</div> : null}
        </div>
      );
    }
    case "error": {
      const words = special ? ERROR_WORDS[special] : undefined;
      const kind = str(meta["error_type"]);
      return (
        <div class="error-box" role="alert">
          <strong>{words ?? (kind ? `Error (${kind})` : "Error")}</strong>
          {entry.content ? <div class="pre">{entry.content}</div> : null}
        </div>
      );
    }
    case "progress":
      return <div class="progress-line muted small">{entry.content || "…"}</div>;
    case "system":
      return <SystemLine entry={entry} special={special} />;
    default:
      return <div class="pre muted">{entry.content}</div>;
  }
}

function SystemLine({ entry, special }: { entry: OutputEntry; special: string | undefined }) {
  const meta = entry.metadata ?? {};
  if (meta["stream_end"] === true) {
    return <div class="turn-end" role="separator"><span>turn ended</span></div>;
  }
  switch (special) {
    case "session_restart": {
      const interrupted = Array.isArray(meta["interrupted"]) ? (meta["interrupted"] as unknown[]).length : 0;
      return (
        <div class="marker restart">
          <strong>Agent restarted</strong>
          <div class="pre">{entry.content}</div>
          {interrupted > 0 ? (
            <div class="note">
              {interrupted === 1 ? "An input" : `${interrupted} inputs`} was cut short: its work may be partly done.
            </div>
          ) : null}
        </div>
      );
    }
    case "card_withdrawn":
      return (
        <div class="marker withdrawn">
          <strong>Request withdrawn</strong>
          <div class="pre">{entry.content}</div>
        </div>
      );
    case "edit_review":
      return <div class="sys-line">✎ {entry.content}</div>;
    case "permission_request":
    case "plan_approval":
    case "ask_question":
      return <div class="sys-line card-line">{firstLine(entry.content, 200) || special}</div>;
    default: {
      const subtype = str(meta["subtype"]);
      const text = firstLine(entry.content, 200);
      if (!text && !subtype) return <div class="sys-line muted">·</div>;
      return <div class="sys-line muted small">{text || subtype}</div>;
    }
  }
}

export interface EntryProps {
  item: TranscriptItem;
}

/** A transcript row; `data-testid=entry` with its seq, type and `metadata.special`. */
export class Entry extends Component<EntryProps> {
  override shouldComponentUpdate(next: EntryProps): boolean {
    const a = this.props.item;
    const b = next.item;
    if (a === b) return false;
    return a.seq !== b.seq || a.entry.entryType !== b.entry.entryType || a.entry.content !== b.entry.content;
  }

  override render() {
    const { seq, entry } = this.props.item;
    const special = str(entry.metadata?.["special"]);
    const role = str(entry.metadata?.["role"]);
    const cls = `entry e-${entry.entryType}${role === "user" ? " from-user" : ""}`;
    return (
      <div class={cls} data-testid="entry" data-seq={String(seq)} data-entry-type={entry.entryType} data-special={special}>
        <EntryBody entry={entry} />
      </div>
    );
  }
}
