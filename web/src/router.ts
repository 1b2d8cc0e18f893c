import { createStore, useStore } from "./store";

/** Client-side routes over the history API. */
export type Route =
  | { page: "solve" }
  | { page: "session"; id: string }
  | { page: "history" }
  | { page: "settings" }
  | { page: "knowledge" }
  | { page: "kb"; id: string }
  | { page: "evals" }
  | { page: "eval"; id: string }
  | { page: "turn"; id: string }
  | { page: "login" }
  | { page: "missing" };

const path = createStore(location.pathname);

window.addEventListener("popstate", () => path.set(location.pathname));

export function parseRoute(pathname: string): Route {
  const clean = pathname.replace(/\/+$/, "") || "/";
  if (clean === "/") return { page: "solve" };
  if (clean === "/history") return { page: "history" };
  if (clean === "/settings") return { page: "settings" };
  if (clean === "/knowledge") return { page: "knowledge" };
  const kb = /^\/knowledge\/([^/]+)$/.exec(clean);
  if (kb) return { page: "kb", id: decodeURIComponent(kb[1]) };
  if (clean === "/evals") return { page: "evals" };
  const run = /^\/evals\/([^/]+)$/.exec(clean);
  if (run) return { page: "eval", id: decodeURIComponent(run[1]) };
  const turn = /^\/turns\/([^/]+)$/.exec(clean);
  if (turn) return { page: "turn", id: decodeURIComponent(turn[1]) };
  if (clean === "/login") return { page: "login" };
  const session = /^\/sessions\/([^/]+)$/.exec(clean);
  if (session) return { page: "session", id: decodeURIComponent(session[1]) };
  return { page: "missing" };
}

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (to === location.pathname && !options.replace) return;
  if (options.replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  path.set(location.pathname);
  if (!options.replace) window.scrollTo(0, 0);
}

export function useRoute(): Route {
  return parseRoute(useStore(path));
}

export function usePath(): string {
  return useStore(path);
}

/** A click on an in-app link: follow it without a page load, unless the user asked for a new tab. */
export function followLink(event: MouseEvent, to: string): void {
  if (event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(to);
}
