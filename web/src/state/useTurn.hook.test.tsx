// @vitest-environment jsdom
import { afterEach, describe, expect, it, vi } from "vitest";
import { render } from "preact";
import { act } from "preact/test-utils";
import type { TurnEvent } from "../protocol";
import { fixture } from "./fixtures";
import { useTurn } from "./useTurn";

class StubSource {
  static all: StubSource[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((m: MessageEvent) => void) | null = null;
  onerror: (() => void) | null = null;
  closed = false;
  listeners = new Map<string, (m: MessageEvent) => void>();
  constructor(readonly url: string) {
    StubSource.all.push(this);
  }
  addEventListener(type: string, f: (m: MessageEvent) => void) {
    this.listeners.set(type, f);
  }
  close() {
    this.closed = true;
  }
}

afterEach(() => {
  vi.unstubAllGlobals();
  StubSource.all = [];
});

function Probe(props: { turnId: string }) {
  const { state, connection } = useTurn(props.turnId);
  return (
    <p data-phase={state.phase} data-connection={connection}>
      {state.answer?.text ?? ""}
    </p>
  );
}

describe("useTurn", () => {
  it("renders the turn from its event stream, closing it at the end", async () => {
    vi.stubGlobal("EventSource", StubSource);
    const events = fixture("flaky-429");
    const root = document.createElement("div");
    act(() => render(<Probe turnId={events[0].turn_id} />, root));
    const source = StubSource.all[0];
    expect(source.url).toBe(`/api/v1/turns/${events[0].turn_id}/events`);
    expect(performance.getEntriesByName(`deepsolve:events-start:${events[0].turn_id}`)).toHaveLength(1);
    act(() => source.onopen?.());
    expect(root.querySelector("p")?.dataset.connection).toBe("open");
    for (const e of events) source.listeners.get(e.type)?.({ data: JSON.stringify(e) } as MessageEvent);
    await act(() => new Promise((resolve) => requestAnimationFrame(() => resolve(undefined))));
    await act(() => new Promise((resolve) => setTimeout(resolve, 0)));
    const p = root.querySelector("p");
    expect(p?.dataset.phase).toBe("finished");
    expect(p?.dataset.connection).toBe("closed");
    const answer = events.find((e): e is Extract<TurnEvent, { type: "answer" }> => e.type === "answer");
    expect(answer?.text).toBeTruthy();
    expect(p?.textContent).toBe(answer?.text);
    expect(source.closed).toBe(true);
    act(() => render(null, root));
  });
});
