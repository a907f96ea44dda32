// Markdown from the bridge rendered as Preact elements. Everything in a transcript is hostile: the
// text is tokenised by marked's lexer only and each token becomes an element or a text node here,
// so no string ever reaches the DOM as HTML. Raw HTML tokens render as their source text, links
// only for http(s) targets, images as a link-shaped text (nothing remote is ever loaded).
import { marked, type Token, type Tokens } from "marked";
import type { ComponentChildren } from "preact";

/** The absolute http(s) URL of `href`, or null for every other scheme (javascript:, data:, relative). */
export function safeHref(href: string): string | null {
  const trimmed = href.trim();
  if (!/^https?:\/\//i.test(trimmed)) return null;
  try {
    const url = new URL(trimmed);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

const NAMED: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" };

/** Decodes the character references marked leaves in text tokens (as text, never as markup). */
export function decodeEntities(text: string): string {
  if (!text.includes("&")) return text;
  return text.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]{2,6});/gi, (whole, ref: string) => {
    if (ref[0] === "#") {
      const code = ref[1] === "x" || ref[1] === "X" ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : whole;
    }
    return NAMED[ref.toLowerCase()] ?? whole;
  });
}

const MAX_DEPTH = 24;

function inline(tokens: Token[] | undefined, depth: number): ComponentChildren {
  if (!tokens) return null;
  return tokens.map((t, k) => inlineToken(t, k, depth));
}

function inlineToken(t: Token, k: number, depth: number): ComponentChildren {
  if (depth > MAX_DEPTH) return t.raw;
  const tok = t as Tokens.Generic;
  switch (t.type) {
    case "text":
      return tok.tokens ? inline(tok.tokens as Token[], depth + 1) : decodeEntities(String(tok.text));
    case "escape":
      return decodeEntities(String(tok.text));
    case "strong":
      return <strong key={k}>{inline(tok.tokens, depth + 1)}</strong>;
    case "em":
      return <em key={k}>{inline(tok.tokens, depth + 1)}</em>;
    case "del":
      return <del key={k}>{inline(tok.tokens, depth + 1)}</del>;
    case "codespan":
      return <code key={k}>{decodeEntities(String(tok.text))}</code>;
    case "br":
      return <br key={k} />;
    case "link": {
      const href = safeHref(String(tok.href));
      const label = inline(tok.tokens, depth + 1);
      return href
        ? <a key={k} href={href} target="_blank" rel="noopener noreferrer nofollow">{label}</a>
        : <span key={k} class="md-nolink">{label}</span>;
    }
    case "image": {
      // Never loaded: the alt text and the address as text, a link only for http(s).
      const href = safeHref(String(tok.href));
      const alt = decodeEntities(String(tok.text || "image"));
      return href
        ? <a key={k} class="md-image" href={href} target="_blank" rel="noopener noreferrer nofollow">[image: {alt}]</a>
        : <span key={k} class="md-image">[image: {alt}]</span>;
    }
    case "checkbox":
      return <span key={k}>{tok.checked ? "☑ " : "☐ "}</span>;
    case "html":
      return String(tok.text);
    default:
      return String(tok.raw ?? "");
  }
}

function blocks(tokens: Token[] | undefined, depth: number): ComponentChildren {
  if (!tokens) return null;
  return tokens.map((t, k) => blockToken(t, k, depth));
}

const ALIGN: Record<string, string> = { left: "al-left", center: "al-center", right: "al-right" };

function blockToken(t: Token, k: number, depth: number): ComponentChildren {
  if (depth > MAX_DEPTH) return <p key={k}>{t.raw}</p>;
  switch (t.type) {
    case "space":
    case "def":
      return null;
    case "paragraph":
      return <p key={k}>{inline((t as Tokens.Paragraph).tokens, depth + 1)}</p>;
    case "heading": {
      const h = t as Tokens.Heading;
      const level = Math.min(6, Math.max(1, h.depth));
      const content = inline(h.tokens, depth + 1);
      // Headings keep their order but stay small inside a chat bubble.
      if (level === 1) return <h3 key={k}>{content}</h3>;
      if (level === 2) return <h4 key={k}>{content}</h4>;
      if (level === 3) return <h5 key={k}>{content}</h5>;
      return <h6 key={k}>{content}</h6>;
    }
    case "code":
      return <pre key={k} class="md-code"><code>{(t as Tokens.Code).text}</code></pre>;
    case "blockquote":
      return <blockquote key={k}>{blocks((t as Tokens.Blockquote).tokens, depth + 1)}</blockquote>;
    case "list": {
      const l = t as Tokens.List;
      const items = l.items.map((item, i) => (
        <li key={i}>
          {item.task ? <span>{item.checked ? "☑ " : "☐ "}</span> : null}
          {blocks(item.tokens.filter((x) => x.type !== "checkbox"), depth + 1)}
        </li>
      ));
      if (!l.ordered) return <ul key={k}>{items}</ul>;
      const start = typeof l.start === "number" && l.start !== 1 ? l.start : undefined;
      return <ol key={k} start={start}>{items}</ol>;
    }
    case "table": {
      const tb = t as Tokens.Table;
      return (
        <div key={k} class="md-table">
          <table>
            <thead>
              <tr>
                {tb.header.map((c, i) => <th key={i} class={c.align ? ALIGN[c.align] : undefined}>{inline(c.tokens, depth + 1)}</th>)}
              </tr>
            </thead>
            <tbody>
              {tb.rows.map((row, r) => (
                <tr key={r}>
                  {row.map((c, i) => <td key={i} class={c.align ? ALIGN[c.align] : undefined}>{inline(c.tokens, depth + 1)}</td>)}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      );
    }
    case "hr":
      return <hr key={k} />;
    case "html":
      return <p key={k} class="md-html">{(t as Tokens.HTML).text}</p>;
    case "text": {
      const tok = t as Tokens.Text;
      return <span key={k} class="md-text">{tok.tokens ? inline(tok.tokens, depth + 1) : decodeEntities(tok.text)}</span>;
    }
    default:
      return <p key={k}>{String(t.raw ?? "")}</p>;
  }
}

/** Tokens of `source`, or null when the lexer gives up (then the text is shown as is). */
export function lex(source: string): Token[] | null {
  try {
    return marked.lexer(source);
  } catch {
    return null;
  }
}

// One line with nothing Markdown could read as syntax (no markup characters, no autolink, no list
// number, no indent): marked would make it one paragraph of the same text, so it is shown as is.
const PLAIN = /^(?!\d+[.)])[^\s*_`#>[\]!|~<&\\=+\-:@][^\n*_`#>[\]!|~<&\\=+\-:@]*$/;

/** Whether `source` renders as itself (a single plain paragraph) without lexing. */
export function isPlain(source: string): boolean {
  return source.length < 2000 && PLAIN.test(source) && !/www\./i.test(source);
}

/** The Markdown `source` as Preact children of a `div` with class `md` (plus `className`): never
 * HTML, never a remote load, never script. */
export function Markdown({ source, className }: { source: string; className?: string }) {
  const cls = className ? `md ${className}` : "md";
  if (isPlain(source)) return <div class={cls}>{source}</div>;
  const tokens = lex(source);
  return <div class={cls}>{tokens ? blocks(tokens, 0) : <p class="pre">{source}</p>}</div>;
}
