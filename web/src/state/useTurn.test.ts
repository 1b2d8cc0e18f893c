import { describe, expect, it } from "vitest";
import type { TurnEvent } from "../protocol";
import { fixture } from "./fixtures";
import { BACKOFF_FIRST_MS, BACKOFF_MAX_MS, EVENT_TYPES, eventsUrl, followTurn, type FollowEnv, type TurnFeed, type TurnProbe } from "./useTurn";
import { initialTurnState, reduceAll } from "./view";

/** An EventSource the test drives by hand. */
class FakeSource {
  onopen: (() => void) | null = null;
  onmessage: ((m: MessageEvent) => void) | null = null;
  onerror: (() => void) | null = null;
  closed = false;
  listeners = new Map<string, ((m: MessageEvent) => void)[]>();
  constructor(readonly url: string) {}
  addEventListener(type: string, f: (m: MessageEvent) => void) {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), f]);
  }
  close() {
    this.closed = true;
  }
  open() {
    this.onopen?.();
  }
  /** A named frame (`event: <type>`), as the server sends them now. */
  send(e: TurnEvent) {
    for (const f of this.listeners.get(e.type) ?? []) f({ data: JSON.stringify(e) } as MessageEvent);
  }
  /** A data-only frame (older servers). */
  sendUnnamed(e: TurnEvent) {
    this.onmessage?.({ data: JSON.stringify(e) } as MessageEvent);
  }
  fail() {
    this.onerror?.();
  }
}

function harness(turnId: string) {
  const sources: FakeSource[] = [];
  const frames: (() => void)[] = [];
  const timers: { f: () => void; ms: number; cancelled: boolean }[] = [];
  const marks: string[] = [];
  const updates: TurnFeed[] = [];
  const probes: string[] = [];
  let probeAnswer: TurnProbe = { status: "running" };
  const env: FollowEnv = {
    probe: (id) => {
      probes.push(id);
      return Promise.resolve(probeAnswer);
    },
    openSource: (url) => {
      const s = new FakeSource(url);
      sources.push(s);
      return s as unknown as EventSource;
    },
    schedule: (f) => {
      frames.push(f);
      return () => frames.splice(frames.indexOf(f), 1);
    },
    setTimer: (f, ms) => {
      const t = { f, ms, cancelled: false };
      timers.push(t);
      return () => {
        t.cancelled = true;
      };
    },
    mark: (name) => marks.push(name),
  };
  const stop = followTurn(turnId, (feed) => updates.push(feed), env);
  return {
    sources,
    timers,
    probes,
    answerProbes: (p: TurnProbe) => {
      probeAnswer = p;
    },
    marks,
    updates,
    stop,
    last: () => sources[sources.length - 1],
    feed: () => updates[updates.length - 1],
    frame: () => frames.splice(0).forEach((f) => f()),
    fireTimer: () => {
      const t = timers.find((x) => !x.cancelled);
      if (!t) throw new Error("no timer");
      t.cancelled = true;
      t.f();
    },
  };
}

/** Let the probe's promise settle. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

const events = fixture("well-behaved-code");
const turnId = events[0].turn_id;
const final = reduceAll(initialTurnState(turnId), events);

describe("following a turn's events", () => {
  it("lists every event type once", () => {
    expect(new Set(EVENT_TYPES).size).toBe(EVENT_TYPES.length);
    expect(EVENT_TYPES).toContain("turn_finished");
    for (const e of events) expect(EVENT_TYPES).toContain(e.type);
  });

  it("builds the events URL, resuming after the last seq", () => {
    expect(eventsUrl("turn_1", -1)).toBe("/api/v1/turns/turn_1/events");
    expect(eventsUrl("turn_1", 41)).toBe("/api/v1/turns/turn_1/events?after=41");
  });

  it("marks the start, batches one update per frame and closes on turn_finished", () => {
    const h = harness(turnId);
    expect(h.marks).toEqual([`deepsolve:events-start:${turnId}`]);
    expect(h.sources[0].url).toBe(`/api/v1/turns/${turnId}/events`);
    h.last().open();
    expect(h.feed().connection).toBe("open");
    const before = h.updates.length;
    for (const e of events.slice(0, 20)) h.last().send(e);
    expect(h.updates.length).toBe(before);
    h.frame();
    expect(h.updates.length).toBe(before + 1);
    expect(h.feed().state.lastSeq).toBe(19);
    for (const e of events.slice(20)) h.last().send(e);
    h.last().fail(); // the server ends the stream after turn_finished
    h.frame();
    expect(h.feed().connection).toBe("closed");
    expect(h.feed().state).toEqual(final);
    expect(h.last().closed).toBe(true);
    expect(h.sources).toHaveLength(1);
    expect(h.timers.filter((t) => !t.cancelled)).toHaveLength(0);
  });

  it("reads data-only frames of older servers too", () => {
    const h = harness(turnId);
    for (const e of events) h.last().sendUnnamed(e);
    h.frame();
    expect(h.feed().state).toEqual(final);
  });

  it("reconnects after an error from the last applied seq, with a doubling backoff, and drops duplicates", async () => {
    const h = harness(turnId);
    h.last().open();
    for (const e of events.slice(0, 10)) h.last().send(e);
    h.frame();
    const delays: number[] = [];
    for (let i = 0; i < 7; i++) {
      h.last().fail();
      await settle();
      expect(h.feed().connection).toBe("reconnecting");
      expect(h.feed().error).toBeTruthy();
      delays.push(h.timers[h.timers.length - 1].ms);
      h.fireTimer();
      expect(h.last().url).toBe(`/api/v1/turns/${turnId}/events?after=9`);
      h.last().open();
    }
    expect(h.probes).toHaveLength(7);
    expect(delays).toEqual([BACKOFF_FIRST_MS, 500, 1000, 2000, 4000, BACKOFF_MAX_MS, BACKOFF_MAX_MS]);
    expect(h.sources.slice(0, -1).every((s) => s.closed)).toBe(true);
    expect(h.feed()).toMatchObject({ connection: "open", error: null });
    // The new stream starts a little early (as a browser's own retry from Last-Event-ID might).
    for (const e of events.slice(5)) h.last().send(e);
    h.frame();
    expect(h.feed().state).toEqual(final);
    expect(h.feed().connection).toBe("closed");
  });

  it("new events reset the backoff; an open connection alone does not", async () => {
    const h = harness(turnId);
    h.last().fail();
    await settle();
    h.fireTimer();
    h.last().open();
    h.last().fail();
    await settle();
    h.fireTimer();
    h.last().open();
    h.last().send(events[0]);
    h.frame();
    h.last().fail();
    await settle();
    expect(h.timers.map((t) => t.ms)).toEqual([BACKOFF_FIRST_MS, 2 * BACKOFF_FIRST_MS, BACKOFF_FIRST_MS]);
  });

  it("a turn that ended without turn_finished: one more read, then closed", async () => {
    const events = fixture("cancelled").filter((e) => e.type !== "turn_finished");
    const h = harness(turnId);
    h.answerProbes({ status: "interrupted" });
    h.last().open();
    for (const e of events) h.last().send(e);
    h.last().fail(); // the server ends a finished log's stream
    h.frame();
    await settle();
    // That stream brought events: read once more from the last one.
    h.fireTimer();
    expect(h.last().url).toBe(`/api/v1/turns/${turnId}/events?after=${events.length - 1}`);
    h.last().open();
    h.last().fail();
    await settle();
    expect(h.feed()).toMatchObject({ connection: "closed", error: null });
    expect(h.feed().state.lastSeq).toBe(events.length - 1);
    expect(h.timers.filter((t) => !t.cancelled)).toHaveLength(0);
    expect(h.sources).toHaveLength(2);
  });

  it("a turn that cannot be read stops with the server's message", async () => {
    const h = harness("turn_gone");
    h.answerProbes({ error: "no turn turn_gone" });
    h.last().fail();
    await settle();
    expect(h.feed()).toMatchObject({ connection: "closed", error: "no turn turn_gone" });
    expect(h.timers).toHaveLength(0);
  });

  it("keeps trying while the server cannot be asked", async () => {
    const h = harness(turnId);
    h.answerProbes(null);
    h.last().fail();
    await settle();
    h.fireTimer();
    h.last().fail();
    await settle();
    expect(h.sources).toHaveLength(2);
    expect(h.feed().connection).toBe("reconnecting");
    expect(h.timers.filter((t) => !t.cancelled)).toHaveLength(1);
  });

  it("on a gap reconnects from the last applied seq and heals", () => {
    const h = harness(turnId);
    h.last().open();
    for (const e of events.slice(0, 10)) h.last().send(e);
    for (const e of events.slice(12, 20)) h.last().send(e);
    h.frame();
    expect(h.feed().state.lastSeq).toBe(9);
    expect(h.feed().state.gap).toBe(false);
    expect(h.sources[0].closed).toBe(true);
    h.fireTimer();
    expect(h.last().url).toBe(`/api/v1/turns/${turnId}/events?after=9`);
    h.last().open();
    for (const e of events.slice(10)) h.last().send(e);
    h.frame();
    expect(h.feed().state).toEqual(final);
  });

  it("stops on request: the source is closed and nothing more is reported", () => {
    const h = harness(turnId);
    h.last().send(events[0]);
    h.stop();
    expect(h.last().closed).toBe(true);
    const n = h.updates.length;
    h.frame();
    h.last().send(events[1]);
    expect(h.updates.length).toBe(n);
  });

  it("ignores frames that are not events", () => {
    const h = harness(turnId);
    h.last().onmessage?.({ data: "not json" } as MessageEvent);
    h.last().onmessage?.({ data: '{"hello": 1}' } as MessageEvent);
    h.frame();
    expect(h.updates).toEqual([]);
  });
});
