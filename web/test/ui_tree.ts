// Expands a Preact element tree into plain elements and strings without a DOM, for the UI's
// node-tier tests: function components are called, class components rendered (the rows and the
// Markdown under test use no hooks). What would reach the DOM is then inspected as data.
import type { VNode } from "preact";

export interface El { tag: string; props: Record<string, unknown>; children: Node[] }
export type Node = El | string;

export function expand(node: unknown): Node[] {
  if (node === null || node === undefined || typeof node === "boolean") return [];
  if (typeof node === "string" || typeof node === "number" || typeof node === "bigint") return [String(node)];
  if (Array.isArray(node)) return node.flatMap(expand);
  const v = node as VNode<Record<string, unknown>>;
  const type = v.type as unknown;
  if (typeof type === "string") {
    const { children, ...props } = v.props;
    return [{ tag: type, props, children: expand(children) }];
  }
  if (typeof type === "function") {
    const proto = (type as { prototype?: { render?: unknown } }).prototype;
    if (proto && typeof proto.render === "function") {
      const Cls = type as new (props: unknown) => { props: unknown; render(props: unknown): unknown };
      const instance = new Cls(v.props);
      instance.props = v.props;
      return expand(instance.render(v.props));
    }
    return expand((type as (props: unknown) => unknown)(v.props));
  }
  throw new Error(`not an element: ${JSON.stringify(node).slice(0, 80)}`);
}

export function elements(nodes: Node[]): El[] {
  const out: El[] = [];
  const walk = (n: Node) => {
    if (typeof n === "string") return;
    out.push(n);
    n.children.forEach(walk);
  };
  nodes.forEach(walk);
  return out;
}

export function text(nodes: Node[]): string {
  return nodes.map((n) => (typeof n === "string" ? n : text(n.children))).join("");
}

/** Every way a tree could run script or load from elsewhere; [] when it is inert. */
export function hazards(nodes: Node[]): string[] {
  const found: string[] = [];
  for (const el of elements(nodes)) {
    if (["script", "img", "iframe", "svg", "link", "style", "object", "embed", "video", "audio", "source", "base", "meta", "form"].includes(el.tag)) {
      found.push(`<${el.tag}>`);
    }
    for (const [name, value] of Object.entries(el.props)) {
      if (name === "dangerouslySetInnerHTML") found.push(`${el.tag} ${name}`);
      if (/^on/i.test(name)) found.push(`${el.tag} ${name}`);
      if (["src", "srcset", "srcSet", "action", "formaction", "style"].includes(name)) found.push(`${el.tag} ${name}`);
      if (name === "href" && !/^https?:\/\//i.test(String(value))) found.push(`${el.tag} href=${String(value)}`);
    }
    if (el.tag === "a" && el.props["href"] !== undefined && el.props["rel"] !== "noopener noreferrer nofollow") found.push("a without rel");
  }
  return found;
}
