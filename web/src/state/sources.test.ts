import { describe, expect, it } from "vitest";
import type { CitedSource } from "../kb";
import type { TurnEvent } from "../protocol";
import { fixture } from "./fixtures";
import { initialTurnState, reduceAll, type TimelineItem, type ToolCardView } from "./view";

const CITED: CitedSource[] = [
  { n: 2, title: "notes.md", document_id: "doc_2", page: null, section: "Limits", excerpt: "Second." },
  { n: 1, title: "lecture.pdf", document_id: "doc_1", page: 12, chunk_id: "chk_1", excerpt: "First." },
];

/** A recorded log with sources put where the server puts them: on a tool result and on the answer. */
function withSources(events: TurnEvent[]): TurnEvent[] {
  let tagged = false;
  return events.map((e) => {
    if (e.type === "answer") return { ...e, sources: CITED } as TurnEvent;
    if (e.type === "tool_result" && !tagged) {
      tagged = true;
      return { ...e, sources: [CITED[1]] } as TurnEvent;
    }
    return e;
  });
}

function cards(timeline: TimelineItem[]): ToolCardView[] {
  return timeline.flatMap((item) => (item.kind === "tool" ? [item.card] : []));
}

describe("sources in the turn state", () => {
  const events = withSources(fixture("well-behaved-reason"));
  const state = reduceAll(initialTurnState(events[0].turn_id), events);

  it("the answer event's sources are the turn's cited sources, ordered by n", () => {
    expect(state.sources.map((s) => s.n)).toEqual([1, 2]);
    expect(state.sources[0]).toMatchObject({ title: "lecture.pdf", page: 12, excerpt: "First." });
    expect(state.sources[1]).toMatchObject({ title: "notes.md", section: "Limits" });
  });

  it("a tool result keeps the sources it numbered on its card", () => {
    const all = [...cards(state.planning), ...(state.plan?.steps ?? []).flatMap((s) => cards(s.timeline))];
    expect(all.filter((c) => c.sources.length > 0).map((c) => c.sources.map((s) => s.title))).toEqual([["lecture.pdf"]]);
  });

  it("every source numbered so far is known, for step summaries citing them", () => {
    expect(state.numbered.map((s) => s.n)).toEqual([1, 2]);
    const beforeAnswer = events.slice(0, events.findIndex((e) => e.type === "answer"));
    const early = reduceAll(initialTurnState(events[0].turn_id), beforeAnswer);
    expect(early.numbered.map((s) => s.title)).toEqual(["lecture.pdf"]);
  });

  it("a log without sources (or before the answer) has none", () => {
    const plain = fixture("well-behaved-reason");
    expect(reduceAll(initialTurnState(plain[0].turn_id), plain).sources).toEqual([]);
    const beforeAnswer = events.slice(0, events.findIndex((e) => e.type === "answer"));
    expect(reduceAll(initialTurnState(events[0].turn_id), beforeAnswer).sources).toEqual([]);
  });

  it("malformed entries are dropped, not shown", () => {
    const broken = events.map((e) => (e.type === "answer" ? ({ ...e, sources: [{ n: "x" }, null, CITED[0]] } as unknown as TurnEvent) : e));
    expect(reduceAll(initialTurnState(events[0].turn_id), broken).sources.map((s) => s.n)).toEqual([2]);
  });
});
