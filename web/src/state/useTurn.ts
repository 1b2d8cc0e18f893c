// The live (and replay) view of a turn: its SSE event stream folded by `reduce`.
import { useEffect, useState } from "preact/hooks";
import { EVENT_TYPES, type ErrorBody, type TurnEvent, type TurnStatus, type TurnView } from "../protocol";
import { initialTurnState, reduceAll, type TurnState } from "./view";

export type Connection = "connecting" | "open" | "reconnecting" | "closed";

export type TurnFeed = { state: TurnState; connection: Connection; error: string | null };

/** The SSE event names the server sends (`event: <type>`): the protocol's one list. */
export { EVENT_TYPES };

export const BACKOFF_FIRST_MS = 250;
export const BACKOFF_MAX_MS = 5000;

/** The events URL, resuming after `lastSeq` (nothing to skip at the start). */
export function eventsUrl(turnId: string, lastSeq: number): string {
  const base = `/api/v1/turns/${encodeURIComponent(turnId)}/events`;
  return lastSeq >= 0 ? `${base}?after=${lastSeq}` : base;
}

/**
 * Where a turn stands when its stream ended without `turn_finished`: running (read on), ended
 * without one (failed or interrupted: its log is complete), or not readable (`error`, e.g. 404
 * or 401). `null` when the server could not be asked (read on, after the backoff).
 */
export type TurnProbe = { status: TurnStatus } | { error: string } | null;

/** What the follower needs from the page; the tests pass fakes. */
export type FollowEnv = {
  openSource: (url: string) => EventSource;
  probe: (turnId: string) => Promise<TurnProbe>;
  schedule: (f: () => void) => () => void;
  setTimer: (f: () => void, ms: number) => () => void;
  mark: (name: string) => void;
};

async function probeTurn(turnId: string): Promise<TurnProbe> {
  try {
    const response = await fetch(`/api/v1/turns/${encodeURIComponent(turnId)}`, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    const body: unknown = await response.json().catch(() => null);
    if (response.ok && body && typeof (body as TurnView).status === "string") return { status: (body as TurnView).status };
    if (response.status >= 400 && response.status < 500 && response.status !== 408 && response.status !== 429) {
      const message = (body as Partial<ErrorBody> | null)?.error?.message;
      return { error: message ?? `${response.status} ${response.statusText}`.trim() };
    }
    return null;
  } catch {
    return null;
  }
}

export function browserEnv(): FollowEnv {
  return {
    openSource: (url) => new EventSource(url),
    probe: probeTurn,
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
 * Follow a turn's events: one EventSource at a time (the browser's own retry is never used),
 * reopened after a backoff from the last applied seq on an error or a gap, closed for good on
 * `turn_finished` — or, for a turn that ended without one (failed, interrupted), once a
 * stream from the last seq brings nothing new. Events are buffered and folded once per
 * animation frame. Returns the function that stops following.
 */
export function followTurn(
  turnId: string,
  onUpdate: (feed: TurnFeed) => void,
  env: FollowEnv = browserEnv(),
): () => void {
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
  // The current connection brought an event: its end may still leave more to read.
  let delivered = false;

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

  /** Stop following: what was received is applied, the connection is closed. */
  const finish = (error: string | null) => {
    flush();
    if (stopped) return;
    stopped = true;
    closeSource();
    cancelFrame?.();
    cancelRetry?.();
    publish({ ...feed, connection: "closed", error });
  };

  const reopenLater = (error: string | null) => {
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

  function flush() {
    cancelFrame = null;
    if (stopped || pending.length === 0) return;
    const batch = pending;
    pending = [];
    const before = feed.state.lastSeq;
    const state = reduceAll(feed.state, batch);
    if (state.lastSeq > before) backoff = BACKOFF_FIRST_MS;
    if (state.gap) {
      // Something went missing: drop the rest and read again from what was applied.
      sawFinish = false;
      publish({ ...feed, state: { ...state, gap: false } });
      reopenLater(null);
      return;
    }
    if (state.phase === "finished") {
      stopped = true;
      closeSource();
      cancelRetry?.();
      publish({ state, connection: "closed", error: null });
      return;
    }
    publish({ ...feed, state });
  }

  const receive = (message: MessageEvent) => {
    if (stopped || typeof message.data !== "string") return;
    let event: TurnEvent;
    try {
      event = JSON.parse(message.data) as TurnEvent;
    } catch {
      return;
    }
    if (typeof event.seq !== "number" || typeof event.type !== "string") return;
    if (event.seq > feed.state.lastSeq) delivered = true;
    if (event.type === "turn_finished") sawFinish = true;
    pending.push(event);
    if (!cancelFrame) cancelFrame = env.schedule(flush);
  };

  /** The stream ended or broke before turn_finished: read on, or stop if the turn is over. */
  const ended = () => {
    const broughtSomething = delivered;
    closeSource();
    void env.probe(turnId).then((probe) => {
      if (stopped || source || cancelRetry) return;
      if (probe && "error" in probe) return finish(probe.error);
      if (probe && probe.status !== "running" && !broughtSomething) return finish(null);
      reopenLater("connection lost; reconnecting");
    });
  };

  function open() {
    if (stopped) return;
    if (!marked) {
      marked = true;
      env.mark(`deepsolve:events-start:${turnId}`);
    }
    // From the last applied seq: anything received but not yet applied comes again, and goes.
    const es = env.openSource(eventsUrl(turnId, feed.state.lastSeq));
    source = es;
    delivered = false;
    es.onopen = () => {
      if (source !== es) return;
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
      ended();
    };
  }

  open();
  return () => {
    stopped = true;
    closeSource();
    cancelFrame?.();
    cancelRetry?.();
  };
}

function startingFeed(turnId: string): TurnFeed {
  return { state: initialTurnState(turnId), connection: "connecting", error: null };
}

/** The hook: the turn's state, live, from its event stream. */
export function useTurn(turnId: string): TurnFeed {
  const [feed, setFeed] = useState<TurnFeed>(() => startingFeed(turnId));
  useEffect(() => {
    setFeed((current) => (current.state.turnId === turnId ? current : startingFeed(turnId)));
    return followTurn(turnId, setFeed);
  }, [turnId]);
  // A new turn id shows its own (empty) state at once, not the previous turn's.
  return feed.state.turnId === turnId ? feed : startingFeed(turnId);
}
