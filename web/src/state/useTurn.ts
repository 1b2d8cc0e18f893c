// The live (and replay) view of a turn: its SSE event stream folded by `reduce`.
import { useEffect, useState } from "preact/hooks";
import type { EventKind, TurnEvent } from "../protocol";
import { initialTurnState, reduceAll, type TurnState } from "./view";

export type Connection = "connecting" | "open" | "reconnecting" | "closed";

export type TurnFeed = { state: TurnState; connection: Connection; error: string | null };

// Every event type, checked against the protocol: a new kind fails to compile until listed.
const EVENT_TYPE_SET: Record<EventKind["type"], true> = {
  turn_started: true,
  round_started: true,
  reasoning_delta: true,
  text_delta: true,
  round_finished: true,
  tool_call: true,
  tool_progress: true,
  tool_result: true,
  plan: true,
  step_finished: true,
  checkpoint: true,
  replanned: true,
  context_folded: true,
  retrying: true,
  warning: true,
  answer: true,
  turn_finished: true,
  error: true,
};

/** The SSE event names the server sends (`event: <type>`). */
export const EVENT_TYPES = Object.keys(EVENT_TYPE_SET) as EventKind["type"][];

export const BACKOFF_FIRST_MS = 250;
export const BACKOFF_MAX_MS = 5000;

/** The events URL, resuming after `lastSeq` (nothing to skip at the start). */
export function eventsUrl(turnId: string, lastSeq: number): string {
  const base = `/api/v1/turns/${encodeURIComponent(turnId)}/events`;
  return lastSeq >= 0 ? `${base}?after=${lastSeq}` : base;
}

/** What the follower needs from the page; the tests pass fakes. */
export type FollowEnv = {
  openSource: (url: string) => EventSource;
  schedule: (f: () => void) => () => void;
  setTimer: (f: () => void, ms: number) => () => void;
  mark: (name: string) => void;
};

export function browserEnv(): FollowEnv {
  return {
    openSource: (url) => new EventSource(url),
    schedule: (f) => {
      if (typeof requestAnimationFrame === "function") {
        const id = requestAnimationFrame(() => f());
        return () => cancelAnimationFrame(id);
      }
      const id = setTimeout(f, 16);
      return () => clearTimeout(id);
    },
    setTimer: (f, ms) => {
      const id = setTimeout(f, ms);
      return () => clearTimeout(id);
    },
    mark: (name) => {
      if (typeof performance !== "undefined" && typeof performance.mark === "function") performance.mark(name);
    },
  };
}

/**
 * Follow a turn's events: one EventSource at a time, reopened after a backoff from the last
 * applied seq on error or gap, closed for good on `turn_finished`; events are buffered and
 * folded once per animation frame. Returns the function that stops following.
 */
export function followTurn(turnId: string, onUpdate: (feed: TurnFeed) => void, env: FollowEnv = browserEnv()): () => void {
  let feed: TurnFeed = { state: initialTurnState(turnId), connection: "connecting", error: null };
  let source: EventSource | null = null;
  let pending: TurnEvent[] = [];
  let cancelFrame: (() => void) | null = null;
  let cancelRetry: (() => void) | null = null;
  let backoff = BACKOFF_FIRST_MS;
  let stopped = false;
  let marked = false;
  // turn_finished was received (maybe not applied yet): the stream's end is not an error.
  let sawFinish = false;

  const publish = (next: TurnFeed) => {
    feed = next;
    onUpdate(feed);
  };

  const closeSource = () => {
    if (source) {
      source.close();
      source = null;
    }
  };

  const reconnectLater = (error: string | null) => {
    closeSource();
    if (stopped || cancelRetry) return;
    publish({ ...feed, connection: "reconnecting", error });
    const delay = backoff;
    backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
    cancelRetry = env.setTimer(() => {
      cancelRetry = null;
      open();
    }, delay);
  };

  const flush = () => {
    cancelFrame = null;
    if (stopped || pending.length === 0) return;
    const batch = pending;
    pending = [];
    const state = reduceAll(feed.state, batch);
    if (state.gap) {
      // Something went missing: drop the rest and read again from what was applied.
      sawFinish = false;
      publish({ ...feed, state: { ...state, gap: false } });
      reconnectLater(null);
      return;
    }
    if (state.phase === "finished") {
      closeSource();
      stopped = true;
      publish({ state, connection: "closed", error: null });
      return;
    }
    publish({ ...feed, state });
  };

  const receive = (message: MessageEvent) => {
    if (stopped || typeof message.data !== "string") return;
    let event: TurnEvent;
    try {
      event = JSON.parse(message.data) as TurnEvent;
    } catch {
      return;
    }
    if (typeof event.seq !== "number" || typeof event.type !== "string") return;
    if (event.type === "turn_finished") sawFinish = true;
    pending.push(event);
    if (!cancelFrame) cancelFrame = env.schedule(flush);
  };

  const open = () => {
    if (stopped) return;
    if (!marked) {
      marked = true;
      env.mark(`deepsolve:events-start:${turnId}`);
    }
    const lastPending = pending.length > 0 ? pending[pending.length - 1].seq : -1;
    const es = env.openSource(eventsUrl(turnId, Math.max(feed.state.lastSeq, lastPending)));
    source = es;
    es.onopen = () => {
      if (source !== es) return;
      backoff = BACKOFF_FIRST_MS;
      publish({ ...feed, connection: "open", error: null });
    };
    es.onmessage = receive;
    for (const type of EVENT_TYPES) es.addEventListener(type, receive as EventListener);
    es.onerror = () => {
      if (source !== es) return;
      if (sawFinish) {
        closeSource();
        return;
      }
      reconnectLater("connection lost; reconnecting");
    };
  };

  open();
  return () => {
    stopped = true;
    closeSource();
    cancelFrame?.();
    cancelRetry?.();
  };
}

/** The hook: the turn's state, live, from its event stream. */
export function useTurn(turnId: string): TurnFeed {
  const [feed, setFeed] = useState<TurnFeed>(() => ({ state: initialTurnState(turnId), connection: "connecting", error: null }));
  useEffect(() => {
    setFeed({ state: initialTurnState(turnId), connection: "connecting", error: null });
    return followTurn(turnId, setFeed);
  }, [turnId]);
  return feed;
}
