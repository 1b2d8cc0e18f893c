import { describe, expect, it } from "vitest";
import type { TurnEvent } from "../protocol";
import { FIXTURES, fixture } from "./fixtures";
import { initialTurnState, reduce, reduceAll, type TimelineItem, type ToolCardView, type TurnState } from "./view";

function replay(events: TurnEvent[]): TurnState {
  return reduceAll(initialTurnState(events[0].turn_id), events);
}

function cards(timeline: TimelineItem[]): ToolCardView[] {
  return timeline.flatMap((item) => (item.kind === "tool" ? [item.card] : []));
}

function texts(timeline: TimelineItem[], kind: "narration" | "reasoning"): string[] {
  return timeline.flatMap((item) => (item.kind === kind ? [item.text] : []));
}

function eventsOf<T extends TurnEvent["type"]>(events: TurnEvent[], type: T): Extract<TurnEvent, { type: T }>[] {
  return events.filter((e): e is Extract<TurnEvent, { type: T }> => e.type === type);
}

function expectFinishedLike(state: TurnState, events: TurnEvent[]) {
  const end = eventsOf(events, "turn_finished")[0];
  expect(state.phase).toBe("finished");
  expect(state.finished).toEqual({ stopReason: end.stop_reason, usage: end.usage, rounds: end.rounds, elapsedMs: end.elapsed_ms });
  expect(state.lastSeq).toBe(events.length - 1);
  expect(state.gap).toBe(false);
}

describe("the recorded logs", () => {
  it("are all there and well formed", () => {
    const names = [
      "well-behaved-code",
      "well-behaved-reason",
      "second-plan",
      "replan-past-budget",
      "identical-loop",
      "never-answers",
      "tags",
      "flaky-429",
      "cancelled",
      "parallel-flood",
      "reasoning-model",
      "answer-with-open-steps",
      "plan-skipper",
      "kb-cite",
    ];
    for (const name of names) {
      const events = fixture(name);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
      expect(events[events.length - 1].type).toBe("turn_finished");
    }
  });
});

describe("a well-behaved turn with code_execution", () => {
  const events = fixture("well-behaved-code");
  const state = replay(events);

  it("fills the header from turn_started and round_started", () => {
    const started = eventsOf(events, "turn_started")[0];
    const rounds = eventsOf(events, "round_started");
    const last = rounds[rounds.length - 1];
    expect(state.problem).toBe("Sum the integers from 1 to 10.");
    expect(state.model).toBe(started.model);
    expect(state.tools).toContain("code_execution");
    expect(state.language).toBe("en");
    expect(state.resumed).toBe(false);
    expect(state.round).toBe(last.round);
    expect(state.maxRounds).toBe(last.max_rounds);
    expect(state.contextTokens).toBe(last.context_tokens);
    expect(state.contextWindow).toBe(last.context_window);
  });

  it("shows the plan with every step done and summarised", () => {
    const finished = eventsOf(events, "step_finished");
    expect(state.plan?.steps.map((s) => s.id)).toEqual(["S1", "S2", "S3"]);
    expect(state.plan?.steps.map((s) => s.status)).toEqual(["done", "done", "done"]);
    expect(state.plan?.steps.map((s) => s.summary)).toEqual(finished.map((f) => f.summary));
    expect(state.plan?.analysis).toContain("3 part(s)");
    expect(state.superseded).toEqual([]);
    expect(state.replansUsed).toBe(0);
    expect(state.replansMax).toBe(2);
  });

  it("puts each step's tool calls into that step, with status and duration", () => {
    expect(cards(state.planning).map((c) => c.name)).toEqual(["solve_plan"]);
    for (const [i, step] of (state.plan?.steps ?? []).entries()) {
      const own = cards(step.timeline);
      expect(own.map((c) => c.name)).toEqual(["code_execution", "solve_finish_step"]);
      expect(own.every((c) => c.status === "ok" && c.durationMs !== null)).toBe(true);
      expect(own[0].args).toMatchObject({ code: expect.stringContaining(`[S${i + 1}]`) });
      expect(own[0].content).toContain("result: 42");
      expect(own[1].args).toMatchObject({ step_id: step.id });
      expect(texts(step.timeline, "narration")).toHaveLength(1);
    }
    const results = eventsOf(events, "tool_result").filter((r) => r.name === "code_execution");
    const shown = (state.plan?.steps ?? []).flatMap((s) => cards(s.timeline)).filter((c) => c.name === "code_execution");
    expect(shown.map((c) => c.durationMs)).toEqual(results.map((r) => r.duration_ms));
  });

  it("ends with the authoritative answer and the footer data", () => {
    const answer = eventsOf(events, "answer")[0];
    expect(state.answer).toEqual({ text: answer.text, streaming: false, forced: false });
    expectFinishedLike(state, events);
    expect(state.finished?.stopReason).toBe("answered");
    expect(state.notices).toEqual([]);
  });

  it("streams the last round's text into the answer before the answer event", () => {
    const answerAt = events.findIndex((e) => e.type === "answer");
    const before = reduceAll(initialTurnState("t"), events.slice(0, answerAt));
    const lastRound = events.map((e) => e.type).lastIndexOf("round_started");
    const deltas = eventsOf(events.slice(lastRound), "text_delta");
    expect(before.answer).toEqual({ text: deltas.map((d) => d.text).join(""), streaming: true, forced: false });
    expect(before.phase).toBe("running");
    expect(before.finished).toBeNull();
  });

  it("ticks the checklist as the steps finish", () => {
    const statuses: string[] = [];
    let s = initialTurnState("t");
    for (const e of events) {
      s = reduce(s, e);
      if (e.type === "plan") statuses.push((s.plan?.steps ?? []).map((st) => st.status[0]).join(""));
    }
    expect(statuses).toEqual(["cpp", "dcp", "ddc", "ddd"]);
  });
});

describe("other behaviours", () => {
  it("a well-behaved turn with reason", () => {
    const events = fixture("well-behaved-reason");
    const state = replay(events);
    expect(state.plan?.steps).toHaveLength(2);
    for (const step of state.plan?.steps ?? []) {
      expect(step.status).toBe("done");
      expect(step.summary).toBeTruthy();
      expect(cards(step.timeline).map((c) => `${c.name}:${c.status}`)).toEqual(["reason:ok", "solve_finish_step:ok"]);
    }
    expect(state.answer?.text).toBe(eventsOf(events, "answer")[0].text);
    expectFinishedLike(state, events);
  });

  it("a refused second plan is an error card, not a new plan", () => {
    const events = fixture("second-plan");
    const state = replay(events);
    expect(state.superseded).toEqual([]);
    const s1 = cards(state.plan?.steps[0].timeline ?? []);
    expect(s1.map((c) => `${c.name}:${c.status}`)).toEqual(["solve_plan:error", "reason:ok", "solve_finish_step:ok"]);
    expect(state.plan?.steps.every((s) => s.status === "done")).toBe(true);
    expectFinishedLike(state, events);
  });

  it("replans keep the old plans, with their reasons", () => {
    const events = fixture("replan-past-budget");
    const state = replay(events);
    const reasons = eventsOf(events, "replanned").map((r) => r.reason);
    expect(reasons).toHaveLength(2);
    expect(state.superseded.map((s) => s.reason)).toEqual(reasons);
    const plans = eventsOf(events, "plan");
    expect(state.superseded[0].plan.analysis).toBe(plans[0].analysis);
    expect(state.superseded[0].plan.steps.map((s) => s.goal)).toEqual(plans[0].steps.map((s) => s.goal));
    // The replan call belongs to the step that was current when it was made.
    expect(cards(state.superseded[0].plan.steps[0].timeline).map((c) => c.name)).toEqual(["solve_replan"]);
    expect(state.replansUsed).toBe(2);
    expect(state.replansMax).toBe(2);
    // The third replan was refused: an error card in the last plan's first step.
    const s1 = cards(state.plan?.steps[0].timeline ?? []);
    expect(s1[0]).toMatchObject({ name: "solve_replan", status: "error" });
    expect(state.plan?.steps.every((s) => s.status === "done" && s.summary)).toBe(true);
    expect(state.answer?.forced).toBe(false);
    expectFinishedLike(state, events);
  });

  it("a forced answer after a loop streams into the answer and is marked forced", () => {
    const events = fixture("identical-loop");
    const state = replay(events);
    const warning = eventsOf(events, "warning")[0];
    expect(warning.kind).toBe("forced_answer");
    expect(state.notices).toEqual([{ level: "warning", text: warning.message }]);
    expect(state.plan?.steps[0].timeline).toContainEqual({ kind: "notice", level: "warning", text: warning.message });
    const errors = cards(state.plan?.steps[0].timeline ?? []).filter((c) => c.status === "error");
    expect(errors.length).toBeGreaterThan(0);
    expect(state.answer).toEqual({ text: eventsOf(events, "answer")[0].text, streaming: false, forced: true });
    const beforeAnswer = reduceAll(initialTurnState("t"), events.slice(0, events.findIndex((e) => e.type === "answer")));
    expect(beforeAnswer.answer?.streaming).toBe(true);
    expect(beforeAnswer.answer?.forced).toBe(true);
    expect(state.finished?.stopReason).toBe("repetition");
  });

  it("a model that never answers: reasoning before any plan, warnings, no answer", () => {
    const events = fixture("never-answers");
    const state = replay(events);
    expect(state.plan).toBeNull();
    const reasoning = texts(state.planning, "reasoning");
    expect(reasoning.length).toBeGreaterThan(0);
    expect(reasoning.join("")).toBe(eventsOf(events, "reasoning_delta").map((d) => d.text).join(""));
    expect(state.notices.map((n) => n.level)).toEqual(["warning", "warning"]);
    expect(state.answer).toBeNull();
    expect(state.finished?.stopReason).toBe("empty_rounds");
  });

  it("the text-tag protocol gives the same view as native tools", () => {
    const tags = replay(fixture("tags"));
    const native = replay(fixture("well-behaved-reason"));
    const shape = (s: TurnState) => s.plan?.steps.map((st) => [st.status, cards(st.timeline).map((c) => `${c.name}:${c.status}`)]);
    expect(shape(tags)).toEqual(shape(native));
    expect(tags.answer?.streaming).toBe(false);
  });

  it("rate-limit retries are notices", () => {
    const events = fixture("flaky-429");
    const state = replay(events);
    expect(state.notices).toHaveLength(eventsOf(events, "retrying").length);
    expect(state.notices.map((n) => n.level)).toEqual(["info", "info"]);
    expect(state.notices[0].text).toBe("HTTP 429: Rate limit reached: retry 2/4 in 1 s");
    expect(state.answer?.text).toBe(eventsOf(events, "answer")[0].text);
  });

  it("a cancelled turn ends cancelled with its step still open", () => {
    const events = fixture("cancelled");
    const state = replay(events);
    expect(state.finished?.stopReason).toBe("cancelled");
    expect(state.phase).toBe("finished");
    expect(state.answer).toBeNull();
    expect(state.plan?.steps[0].status).toBe("current");
    expect(texts(state.plan?.steps[0].timeline ?? [], "narration").join("")).toBe(
      eventsOf(events, "text_delta").map((d) => d.text).join(""),
    );
  });

  it("parallel calls are matched to their results by call id", () => {
    const events = fixture("parallel-flood");
    const state = replay(events);
    const shown = cards(state.plan?.steps[0].timeline ?? []).filter((c) => c.name === "code_execution");
    const results = new Map(eventsOf(events, "tool_result").map((r) => [r.call_id, r]));
    expect(shown).toHaveLength(10);
    for (const card of shown) {
      const r = results.get(card.callId);
      expect(card.status).toBe(r?.ok ? "ok" : "error");
      expect(card.content).toBe(r?.content);
    }
    expect(shown.filter((c) => c.status === "error")).toHaveLength(2);
  });

  it("reasoning models: reasoning and narration are separate items, merged while consecutive", () => {
    const events = fixture("reasoning-model");
    const state = replay(events);
    const s1 = state.plan?.steps[0].timeline ?? [];
    // The answer round's reasoning follows the last step's work (its text is the answer).
    expect(s1.map((i) => i.kind)).toEqual(["reasoning", "narration", "tool", "reasoning", "narration", "tool", "reasoning"]);
    expect(texts(state.planning, "reasoning")).toHaveLength(1);
  });
});

describe("answers written as narration", () => {
  it("an answer refused for open steps stays in the work; the accepted one moves to the answer", () => {
    const events = fixture("answer-with-open-steps");
    const state = replay(events);
    const s2 = state.plan?.steps[1];
    expect(s2?.status).toBe("current");
    const narration = texts(s2?.timeline ?? [], "narration");
    // Each round's text is an item of its own; the refused answer stays, the accepted one does not.
    expect(narration).toHaveLength(1);
    expect(narration[0]).toMatch(/^\*\*Answer:\*\*/);
    expect(state.answer?.text).toMatch(/^I am confident/);
    expect(state.answer?.streaming).toBe(false);
    expect(state.finished?.stopReason).toBe("answered_with_open_steps");
  });

  it("a turn that worked before planning keeps that work in planning", () => {
    const events = fixture("plan-skipper");
    const state = replay(events);
    expect(cards(state.planning).map((c) => c.name)).toEqual(["reason", "solve_plan"]);
    expect(state.plan?.steps.map((s) => s.status)).toEqual(["done"]);
    expect(state.answer?.text).toBe(eventsOf(events, "answer")[0].text);
  });

  it("a direct answer without a plan is shown once, as the answer", () => {
    const base = { turn_id: "t", ts: 0 };
    const kinds: Record<string, unknown>[] = [
      { type: "round_started", round: 1, max_rounds: 9, context_tokens: 1, context_window: 9 },
      { type: "text_delta", text: "It is " },
      { type: "text_delta", text: "4." },
      { type: "answer", text: "It is 4.", forced: false },
    ];
    const state = replay(kinds.map((k, seq) => ({ ...base, seq, ...k }) as TurnEvent));
    expect(state.planning).toEqual([]);
    expect(state.answer?.text).toBe("It is 4.");
  });
});

describe("replay is idempotent", () => {
  for (const [name, events] of Object.entries(FIXTURES)) {
    it(`${name}: duplicates and any split point give the same state`, () => {
      const once = replay(events);
      expect(replay([...events, ...events])).toEqual(once);
      for (let k = 0; k <= events.length; k++) {
        const head = reduceAll(initialTurnState(events[0].turn_id), events.slice(0, k));
        // The second connection resumes a little before where the first stopped.
        const resumed = reduceAll(head, events.slice(Math.max(0, k - 3)));
        expect(resumed).toEqual(once);
      }
    });
  }

  it("a missing seq sets gap and applies nothing", () => {
    const events = fixture("well-behaved-code");
    const head = reduceAll(initialTurnState(events[0].turn_id), events.slice(0, 10));
    const after = reduce(head, events[11]);
    expect(after.gap).toBe(true);
    expect({ ...after, gap: false }).toEqual(head);
    expect(reduce(after, events[12])).toBe(after);
    const healed = reduceAll(after, events.slice(10));
    expect(healed.gap).toBe(false);
    expect(healed).toEqual(replay(events));
  });

  it("an old seq returns the very same state", () => {
    const events = fixture("tags");
    const s = replay(events);
    expect(reduce(s, events[3])).toBe(s);
  });
});

describe("synthetic cases", () => {
  const base = { turn_id: "t", ts: 0 };
  const seqd = (kinds: Record<string, unknown>[]): TurnEvent[] => kinds.map((k, seq) => ({ ...base, seq, ...k }) as TurnEvent);
  const plan = (statuses: string[]) => ({
    type: "plan",
    analysis: "a",
    steps: statuses.map((status, i) => ({ id: `S${i + 1}`, goal: `g${i + 1}`, status })),
    replans_used: 0,
    replans_max: 2,
  });

  it("a round that streamed into the answer but called a tool is narration", () => {
    const state = replay(
      seqd([
        plan(["done"]),
        { type: "round_started", round: 3, max_rounds: 9, context_tokens: 1, context_window: 9 },
        { type: "text_delta", text: "let me check" },
        {
          type: "round_finished",
          round: 3,
          role: "narration",
          finish_reason: "tool_calls",
          usage: { prompt_tokens: 1, completion_tokens: 1, estimated: false },
        },
        { type: "tool_call", call_id: "c", name: "reason", args: {} },
      ]),
    );
    expect(state.answer).toBeNull();
    expect(state.plan?.steps[0].timeline.map((i) => i.kind)).toEqual(["narration", "tool"]);
  });

  it("an answer cut off before its round finished is work once the forced round starts", () => {
    const round = (n: number) => ({ type: "round_started", round: n, max_rounds: 9, context_tokens: 1, context_window: 9 });
    const state = replay(
      seqd([
        plan(["done"]),
        round(3),
        { type: "text_delta", text: "The answer is" },
        { type: "warning", kind: "stream_cut", message: "cut" },
        { type: "warning", kind: "forced_answer", message: "forced" },
        round(4),
        { type: "text_delta", text: "42." },
      ]),
    );
    expect(state.answer).toEqual({ text: "42.", streaming: true, forced: true });
    expect(texts(state.plan?.steps[0].timeline ?? [], "narration")).toEqual(["The answer is"]);
  });

  it("progress lands on its card; an unknown call id is ignored", () => {
    const state = replay(
      seqd([
        plan(["current"]),
        { type: "tool_call", call_id: "c1", name: "code_execution", args: { code: "1" } },
        { type: "tool_progress", call_id: "c1", message: "running" },
        { type: "tool_progress", call_id: "zz", message: "lost" },
        {
          type: "tool_result",
          call_id: "c1",
          name: "code_execution",
          ok: true,
          content: "1",
          duration_ms: 5,
          artifacts: [{ path: "plot.png", mime: "image/png", size: 10 }],
        },
      ]),
    );
    const [card] = cards(state.plan?.steps[0].timeline ?? []);
    expect(card).toEqual({
      callId: "c1",
      name: "code_execution",
      args: { code: "1" },
      status: "ok",
      content: "1",
      artifacts: [{ path: "plot.png", mime: "image/png", size: 10 }],
      durationMs: 5,
      progress: ["running"],
      sources: [],
    });
  });

  it("a plan update keeps each step's work by step id", () => {
    const state = replay(
      seqd([
        plan(["current", "pending"]),
        { type: "text_delta", text: "s1 work" },
        plan(["done", "current"]),
        { type: "text_delta", text: "s2 work" },
      ]),
    );
    expect(state.plan?.steps.map((s) => texts(s.timeline, "narration"))).toEqual([["s1 work"], ["s2 work"]]);
  });

  it("errors are notices, in the current step too; a resumed turn says so", () => {
    const state = replay(
      seqd([
        { type: "turn_started", model: "m", problem: "p", tools: [], language: "zh", resumed: true },
        plan(["current"]),
        { type: "error", kind: "transport", message: "connection refused" },
      ]),
    );
    expect(state.resumed).toBe(true);
    expect(state.language).toBe("zh");
    expect(state.notices).toEqual([{ level: "error", text: "connection refused" }]);
    expect(state.plan?.steps[0].timeline).toEqual([{ kind: "notice", level: "error", text: "connection refused" }]);
  });

  it("a long turn reduces without copying what it does not change", () => {
    const kinds: Record<string, unknown>[] = [plan(["current", "pending"])];
    for (let i = 0; i < 1000; i++) kinds.push({ type: "text_delta", text: "x" }, { type: "reasoning_delta", text: "y" });
    const events = seqd(kinds);
    const afterPlan = replay(events.slice(0, 1));
    const state = reduceAll(afterPlan, events.slice(1));
    expect(state.plan?.steps[0].timeline).toHaveLength(2000);
    // The untouched step is the same object as after the plan event.
    expect(state.plan?.steps[1]).toBe(afterPlan.plan?.steps[1]);
    expect(state.planning).toBe(afterPlan.planning);
  });
});
