// The view of one turn, folded from its event log. `reduce` is pure and copies only the path
// it changes (a long turn streams thousands of deltas), so the same function serves the live
// stream, a replay of a stored log, and the tests.
import type { TurnEvent, StepStatus, StopReason, Usage, Artifact, PlanStepView, ShownArgument } from "../protocol";
import type { CitedSource } from "../kb";

export type ToolCardView = {
  callId: string;
  name: string;
  args: unknown;
  /** The argument to show first, as the call's event says (absent: the arguments as JSON). */
  shown?: ShownArgument | null;
  status: "running" | "ok" | "error";
  content: string | null;
  artifacts: Artifact[];
  durationMs: number | null;
  progress: string[];
  /** The passages the call numbered for citing (a `rag` or `read_source` result). */
  sources: CitedSource[];
};

export type TimelineItem =
  | { kind: "narration"; text: string }
  | { kind: "reasoning"; text: string }
  | { kind: "tool"; card: ToolCardView }
  | { kind: "notice"; level: "info" | "warning" | "error"; text: string };

export type StepView = {
  id: string;
  goal: string;
  status: StepStatus;
  summary: string | null;
  timeline: TimelineItem[];
};

export type PlanView = { analysis: string; steps: StepView[] };

export type NoticeLevel = "info" | "warning" | "error";

export type TurnState = {
  turnId: string;
  /** -1 before any event. */
  lastSeq: number;
  /** An event arrived past a missing seq; it was not applied (reconnect from `lastSeq`). */
  gap: boolean;
  phase: "waiting" | "running" | "finished";
  problem: string;
  model: string;
  tools: string[];
  language: string;
  resumed: boolean;
  round: number;
  maxRounds: number;
  contextTokens: number;
  contextWindow: number;
  replansUsed: number;
  replansMax: number;
  /** Work before the first plan. */
  planning: TimelineItem[];
  plan: PlanView | null;
  /** Old plans, struck through, with why they were replaced. */
  superseded: { plan: PlanView; reason: string }[];
  answer: { text: string; streaming: boolean; forced: boolean } | null;
  /** The sources the answer cites, by `n` (from the `answer` event). */
  sources: CitedSource[];
  /** Every source numbered so far (tool results, then the answer), by `n`: step summaries cite them too. */
  numbered: CitedSource[];
  finished: { stopReason: StopReason; usage: Usage; rounds: number; elapsedMs: number } | null;
  /** Turn-wide notices (warnings, errors, retries). */
  notices: { level: NoticeLevel; text: string }[];
  /** Reducer bookkeeping: a `replanned` reason waiting for the plan that follows it. */
  pendingReplan?: string | null;
  /** Reducer bookkeeping: a forced answer was announced, so text streams into `answer`. */
  forcing?: boolean;
  /** Reducer bookkeeping: a round started; its first text is a new item, not merged. */
  newRound?: boolean;
};

export function initialTurnState(turnId: string): TurnState {
  return {
    turnId,
    lastSeq: -1,
    gap: false,
    phase: "waiting",
    problem: "",
    model: "",
    tools: [],
    language: "",
    resumed: false,
    round: 0,
    maxRounds: 0,
    contextTokens: 0,
    contextWindow: 0,
    replansUsed: 0,
    replansMax: 0,
    planning: [],
    plan: null,
    superseded: [],
    answer: null,
    sources: [],
    numbered: [],
    finished: null,
    notices: [],
    pendingReplan: null,
    forcing: false,
    newRound: false,
  };
}

/** Apply one event. Seen seqs are ignored; a seq past the next one sets `gap` and applies nothing. */
export function reduce(state: TurnState, event: TurnEvent): TurnState {
  if (event.seq <= state.lastSeq) return state;
  if (event.seq > state.lastSeq + 1) return state.gap ? state : { ...state, gap: true };
  const next = apply(state, event);
  return { ...next, lastSeq: event.seq, gap: false };
}

/** Apply events in order (duplicates and a gap behave as in `reduce`). */
export function reduceAll(state: TurnState, events: TurnEvent[]): TurnState {
  let s = state;
  for (const e of events) s = reduce(s, e);
  return s;
}

function apply(s: TurnState, e: TurnEvent): TurnState {
  switch (e.type) {
    case "turn_started":
      return {
        ...s,
        phase: s.phase === "finished" ? s.phase : "running",
        problem: e.problem,
        model: e.model,
        tools: e.tools,
        language: e.language,
        resumed: e.resumed ?? false,
      };
    case "round_started":
      // An answer still streaming when the next round starts was not taken (a cut stream, a
      // refusal): it was work.
      return {
        ...unstreamAnswer(running(s)),
        round: e.round,
        maxRounds: e.max_rounds,
        contextTokens: e.context_tokens,
        contextWindow: e.context_window,
        newRound: true,
      };
    case "reasoning_delta":
      return appendText(running(s), "reasoning", e.text);
    case "text_delta":
      return textDelta(running(s), e.text);
    case "round_finished":
      return e.role === "narration" ? unstreamAnswer(s) : s;
    case "tool_call":
      return pushItem(running(s), {
        kind: "tool",
        card: {
          callId: e.call_id,
          name: e.name,
          args: e.args,
          shown: e.shown,
          status: "running",
          content: null,
          artifacts: [],
          durationMs: null,
          progress: [],
          sources: [],
        },
      });
    case "tool_progress":
      return updateCard(s, e.call_id, (c) => ({ ...c, progress: [...c.progress, e.message] }));
    case "tool_result":
      return updateCard(withNumbered(s, sourcesOf(e)), e.call_id, (c) => ({
        ...c,
        status: e.ok ? "ok" : "error",
        content: e.content,
        artifacts: e.artifacts ?? [],
        durationMs: e.duration_ms,
        sources: sourcesOf(e),
      }));
    case "plan":
      return planEvent(s, e.analysis, e.steps, e.replans_used, e.replans_max);
    case "step_finished":
      return updateStep(s, e.step_id, (st) => ({ ...st, status: "done", summary: e.summary }));
    case "replanned":
      return { ...s, pendingReplan: e.reason };
    case "checkpoint":
    case "context_folded":
      return s;
    case "retrying":
      return notice(s, "info", `${e.reason}: retry ${e.attempt}/${e.max} in ${Math.round(e.delay_ms / 100) / 10} s`);
    case "warning": {
      const w = notice(s, "warning", e.message);
      return e.kind === "forced_answer" ? { ...w, forcing: true } : w;
    }
    case "error":
      return notice(s, "error", e.message);
    case "answer":
      return {
        ...withNumbered(dropEchoedAnswer(s, e.text), sourcesOf(e)),
        answer: { text: e.text, streaming: false, forced: e.forced },
        sources: sourcesOf(e),
      };
    case "turn_finished":
      return {
        ...s,
        phase: "finished",
        answer: s.answer && s.answer.streaming ? { ...s.answer, streaming: false } : s.answer,
        finished: { stopReason: e.stop_reason, usage: e.usage, rounds: e.rounds, elapsedMs: e.elapsed_ms },
      };
    default:
      return s;
  }
}

/** An event's `sources` (absent when there are none, and in logs written before there were any). */
function sourcesOf(e: TurnEvent): CitedSource[] {
  const sources = (e as { sources?: CitedSource[] | null }).sources;
  if (!Array.isArray(sources)) return [];
  return sources.filter((x) => typeof x?.n === "number" && typeof x.title === "string").sort((a, b) => a.n - b.n);
}

/** Sources added to those numbered so far (a number given again is the same passage: the newer wins). */
function withNumbered(s: TurnState, sources: CitedSource[]): TurnState {
  if (sources.length === 0) return s;
  const byN = new Map(s.numbered.map((x) => [x.n, x]));
  for (const x of sources) byN.set(x.n, x);
  return { ...s, numbered: [...byN.values()].sort((a, b) => a.n - b.n) };
}

function running(s: TurnState): TurnState {
  return s.phase === "waiting" ? { ...s, phase: "running" } : s;
}

/** Text goes into the answer once every step is done or a forced answer was announced. */
function answering(s: TurnState): boolean {
  if (s.forcing) return true;
  if (s.answer && s.answer.streaming) return true;
  const steps = s.plan?.steps;
  return !!steps && steps.length > 0 && steps.every((st) => st.status === "done");
}

function textDelta(s: TurnState, text: string): TurnState {
  if (s.answer && !s.answer.streaming) return appendText(s, "narration", text);
  if (!answering(s)) return appendText(s, "narration", text);
  const prev = s.answer;
  return { ...s, answer: { text: (prev?.text ?? "") + text, streaming: true, forced: prev?.forced ?? !!s.forcing } };
}

/** Text that streamed into the answer but turned out to be work: it is narration. */
function unstreamAnswer(s: TurnState): TurnState {
  if (!s.answer || !s.answer.streaming) return s;
  const text = s.answer.text;
  const cleared = { ...s, answer: null };
  return text ? appendText(cleared, "narration", text) : cleared;
}

// --- timelines -------------------------------------------------------------------------------

/** Where work goes now: the current step, else the last finished one, else `planning`. */
function targetStepIndex(s: TurnState): number {
  const steps = s.plan?.steps;
  if (!steps) return -1;
  const current = steps.findIndex((st) => st.status === "current");
  if (current >= 0) return current;
  for (let i = steps.length - 1; i >= 0; i--) if (steps[i].status === "done") return i;
  return steps.length > 0 ? 0 : -1;
}

function mapTimeline(s: TurnState, f: (t: TimelineItem[]) => TimelineItem[]): TurnState {
  const i = targetStepIndex(s);
  if (i < 0 || !s.plan) return { ...s, planning: f(s.planning) };
  const steps = s.plan.steps.slice();
  steps[i] = { ...steps[i], timeline: f(steps[i].timeline) };
  return { ...s, plan: { ...s.plan, steps } };
}

function pushItem(s: TurnState, item: TimelineItem): TurnState {
  return mapTimeline(s, (t) => [...t, item]);
}

function appendText(s: TurnState, kind: "narration" | "reasoning", text: string): TurnState {
  if (!text) return s;
  const merge = !s.newRound;
  return mapTimeline(s.newRound ? { ...s, newRound: false } : s, (t) => {
    const last = t[t.length - 1];
    if (merge && last && last.kind === kind) {
      const copy = t.slice();
      copy[copy.length - 1] = { kind, text: last.text + text };
      return copy;
    }
    return [...t, { kind, text }];
  });
}

/**
 * The answer's text streamed as narration (no plan, or steps still open when it was written):
 * the answer shows it, so the work does not repeat it.
 */
function dropEchoedAnswer(s: TurnState, answer: string): TurnState {
  const wanted = answer.trim();
  return mapTimeline(s, (t) => {
    const last = t[t.length - 1];
    return last && last.kind === "narration" && last.text.trim() === wanted ? t.slice(0, -1) : t;
  });
}

/** A turn-wide notice, also shown in the current step's work when a step is current. */
function notice(s: TurnState, level: NoticeLevel, text: string): TurnState {
  const withNotice = { ...s, notices: [...s.notices, { level, text }] };
  const current = s.plan?.steps.some((st) => st.status === "current") ?? false;
  return current ? pushItem(withNotice, { kind: "notice", level, text }) : withNotice;
}

/** Replace the card with `callId` wherever it is (searching the newest work first). */
function updateCard(s: TurnState, callId: string, f: (c: ToolCardView) => ToolCardView): TurnState {
  const inTimeline = (t: TimelineItem[]): TimelineItem[] | null => {
    for (let i = t.length - 1; i >= 0; i--) {
      const item = t[i];
      if (item.kind === "tool" && item.card.callId === callId) {
        const copy = t.slice();
        copy[i] = { kind: "tool", card: f(item.card) };
        return copy;
      }
    }
    return null;
  };
  if (s.plan) {
    const order = stepSearchOrder(s.plan.steps.length, targetStepIndex(s));
    for (const i of order) {
      const t = inTimeline(s.plan.steps[i].timeline);
      if (t) {
        const steps = s.plan.steps.slice();
        steps[i] = { ...steps[i], timeline: t };
        return { ...s, plan: { ...s.plan, steps } };
      }
    }
  }
  const p = inTimeline(s.planning);
  if (p) return { ...s, planning: p };
  for (let k = s.superseded.length - 1; k >= 0; k--) {
    const old = s.superseded[k];
    for (let i = old.plan.steps.length - 1; i >= 0; i--) {
      const t = inTimeline(old.plan.steps[i].timeline);
      if (t) {
        const steps = old.plan.steps.slice();
        steps[i] = { ...steps[i], timeline: t };
        const superseded = s.superseded.slice();
        superseded[k] = { ...old, plan: { ...old.plan, steps } };
        return { ...s, superseded };
      }
    }
  }
  return s;
}

function stepSearchOrder(n: number, first: number): number[] {
  const order: number[] = [];
  if (first >= 0) order.push(first);
  for (let i = n - 1; i >= 0; i--) if (i !== first) order.push(i);
  return order;
}

// --- plans -----------------------------------------------------------------------------------

function updateStep(s: TurnState, stepId: string, f: (st: StepView) => StepView): TurnState {
  if (!s.plan) return s;
  const i = s.plan.steps.findIndex((st) => st.id === stepId);
  if (i < 0) return s;
  const steps = s.plan.steps.slice();
  steps[i] = f(steps[i]);
  return { ...s, plan: { ...s.plan, steps } };
}

function planEvent(s: TurnState, analysis: string, views: PlanStepView[], used: number, max: number): TurnState {
  const replacing = s.pendingReplan != null && s.plan !== null;
  const superseded = replacing && s.plan ? [...s.superseded, { plan: s.plan, reason: s.pendingReplan ?? "" }] : s.superseded;
  const kept = new Map<string, StepView>();
  if (s.plan && !replacing) for (const st of s.plan.steps) kept.set(st.id, st);
  const steps = views.map((v): StepView => {
    const old = kept.get(v.id);
    const summary = v.summary ?? old?.summary ?? null;
    if (old && old.goal === v.goal && old.status === v.status && old.summary === summary) return old;
    return { id: v.id, goal: v.goal, status: v.status, summary, timeline: old?.timeline ?? [] };
  });
  return {
    ...running(s),
    plan: { analysis, steps },
    superseded,
    pendingReplan: null,
    replansUsed: used,
    replansMax: max,
  };
}
