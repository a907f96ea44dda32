// The Markdown renderer: every token becomes an element or a text node, and hostile input is text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { h } from "preact";
import { decodeEntities, isPlain, lex, Markdown, safeHref } from "../src/ui/markdown";
import { elements, expand, hazards, text } from "./ui_tree";

const md = (source: string) => expand(h(Markdown, { source }));

const HOSTILE = [
  '<img src=x onerror="window.__pwned=1">',
  "<script>window.__pwned=2</script>",
  "[click me](javascript:window.__pwned=3)",
  "[data](data:text/html,<script>alert(1)</script>)",
  "![tracker](https://evil.example/pixel.png)",
  '<iframe src="javascript:top.__pwned=4"></iframe>',
  '<a href="javascript:alert(5)">raw link</a>',
  '<svg onload="alert(6)"><circle r="1"/></svg>',
  '<link rel="stylesheet" href="https://evil.example/s.css">',
  "[relative](/etc/passwd) [proto](//evil.example/x) [vb](vbscript:msgbox)",
  "<https://ok.example/auto> and <javascript:alert(7)>",
  "```html\n<script>alert(8)</script>\n```",
  "| a | b |\n|---|---|\n| <img src=x onerror=alert(9)> | [x](javascript:1) |",
  "> <style>body{display:none}</style>\n> quoted",
  "- [ ] task <b onmouseover=alert(10)>x</b>",
  "[ref]\n\n[ref]: javascript:alert(11)",
];

test("hostile Markdown renders as inert text", () => {
  for (const source of HOSTILE) {
    const tree = md(source);
    assert.deepEqual(hazards(tree), [], source);
  }
  const all = text(md(HOSTILE.join("\n\n")));
  assert.match(all, /<img src=x onerror="window.__pwned=1">/);
  assert.match(all, /<script>window.__pwned=2<\/script>/);
  assert.match(all, /\[image: tracker\]/);
});

test("only http(s) links become links, with rel and a new tab", () => {
  const links = elements(md("[ok](https://example.org/a?b=1) [no](javascript:alert(1)) ![pic](http://example.org/p.png)")).filter((e) => e.tag === "a");
  assert.deepEqual(links.map((a) => a.props["href"]), ["https://example.org/a?b=1", "http://example.org/p.png"]);
  for (const a of links) {
    assert.equal(a.props["rel"], "noopener noreferrer nofollow");
    assert.equal(a.props["target"], "_blank");
  }
  assert.equal(text(md("[no](javascript:alert(1))")), "no");
});

test("safeHref keeps absolute http(s) only", () => {
  assert.equal(safeHref("https://example.org/x"), "https://example.org/x");
  assert.equal(safeHref(" HTTP://Example.org"), "http://example.org/");
  for (const bad of ["javascript:alert(1)", "JaVaScRiPt:1", "data:text/html,x", "//evil.example", "/local", "mailto:a@b", "https:", "ftp://x"]) {
    assert.equal(safeHref(bad), null, bad);
  }
});

test("the Markdown vocabulary maps to its elements", () => {
  const source = [
    "# Title", "## Sub", "para with **bold**, *em*, ~~del~~, `code` and a  \nbreak", "",
    "1. one\n2. two", "", "- a\n- b", "", "> quote", "", "```py\nx = 1\n```", "", "---", "",
    "| h1 | h2 |\n|:--|--:|\n| c1 | c2 |",
  ].join("\n");
  const tags = new Set(elements(md(source)).map((e) => e.tag));
  for (const tag of ["h3", "h4", "p", "strong", "em", "del", "code", "br", "ol", "ul", "li", "blockquote", "pre", "hr", "table", "th", "td"]) {
    assert.ok(tags.has(tag), tag);
  }
  const cells = elements(md("| h1 | h2 |\n|:--|--:|\n| c1 | c2 |")).filter((e) => e.tag === "td");
  assert.deepEqual(cells.map((c) => c.props["class"]), ["al-left", "al-right"]);
});

test("entities in text are decoded as characters, never markup", () => {
  assert.equal(decodeEntities("a &amp; &lt;b&gt; &#x3c;i&#62; &quot;q&quot; &bogus; &#xD800;"), 'a & <b> <i> "q" &bogus; &#xD800;');
  assert.equal(text(md("&lt;script&gt;")), "<script>");
});

test("deeply nested or huge input does not throw", () => {
  assert.doesNotThrow(() => md(">".repeat(5000) + " deep"));
  assert.doesNotThrow(() => md("*".repeat(20000)));
  assert.doesNotThrow(() => md("[".repeat(5000) + "x" + "](y)".repeat(5000)));
});

test("the plain-line shortcut shows exactly what the lexer would", () => {
  const samples = [
    "line 1 of 5", "hello world.", "a.b c", "plain, text (with) parens? yes; ok", "Hello. World", "x y z 100%", "it's \"quoted\"",
    "echo: hi", "1. x", "2) y", "see www.example.org", "    code", "x\ny", "https://x.example", "a*b", "a_b_c", "#h", "> q",
    "<b>x</b>", "&amp;", "a\\*b", "x | y", "~~d~~", "[l](u)", "a@b.example", "- item", "+ item", "===", "", " lead", "\tlead",
  ];
  for (const source of samples) {
    const plain = isPlain(source);
    const tokens = (lex(source) ?? []).filter((t) => t.type !== "space");
    const single = tokens.length === 1 && tokens[0]!.type === "paragraph"
      && (tokens[0] as { tokens?: { type: string; text: string }[] }).tokens?.every((t) => t.type === "text") === true
      && (tokens[0] as { text: string }).text === source;
    if (plain) assert.ok(single, `shortcut taken for ${JSON.stringify(source)} but the lexer reads syntax`);
  }
  assert.ok(isPlain("line 1 of 5"));
  assert.ok(!isPlain("echo: <img src=x onerror=alert(1)>"));
});
