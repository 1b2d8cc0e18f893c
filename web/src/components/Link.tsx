import type { ComponentChildren } from "preact";
import { followLink } from "../router";

export function Link(props: {
  href: string;
  class?: string;
  children: ComponentChildren;
  current?: boolean;
}) {
  return (
    <a
      href={props.href}
      class={props.class}
      aria-current={props.current ? "page" : undefined}
      onClick={(event) => followLink(event, props.href)}
    >
      {props.children}
    </a>
  );
}
