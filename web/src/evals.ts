// Evaluation runs as the UI sees them (`/api/v1/evals`): the views the server sends, the
// requests the form makes, and the pure rules the Evaluations page follows.

export type EvalStatus = "running" | "finished" | "cancelled" | "interrupted" | "failed";

export type ModeTally = { mode: string; done: number; correct: number; errors: number };

export type EvalView = {
  id: string;
  set: string;
  source: "shipped" | "upload";
  modes: string[];
  problems: number;
  limit: number | null;
  sample: number | null;
  seed: number | null;
  concurrency: number;
  model: string;
  status: EvalStatus;
  error?: string;
  created_at: number;
  finished_at?: number;
  total: number;
  done: number;
  tallies: ModeTally[];
  url: string;
  events_url: string;
};

export type ModeSummary = {
  mode: string;
  problems: number;
  correct: number;
  accuracy: number;
  ci_low: number;
  ci_high: number;
  errors: number;
  unparsed: number;
  mean_rounds: number;
  mean_prompt_tokens: number;
  mean_completion_tokens: number;
  mean_wall_ms: number;
  median_wall_ms: number;
  stops: Record<string, number>;
  /** How often the spine held to the end; absent for a mode that runs none (plain). */
  engaged?: { turns: number; engaged: number; asked_again: number };
  /** The problems whose graded output carries engine text (a marker, a nudge, the playbook). */
  engine_text?: string[];
};

export type Paired = {
  a: string;
  b: string;
  problems: number;
  both_right: number;
  both_wrong: number;
  only_a: string[];
  only_b: string[];
  p_value: number;
};

export type Report = { title: string; problems: number; modes: ModeSummary[]; paired: Paired[] };

export type EvalRow = {
  id: string;
  mode: string;
  expected: string;
  answer: string | null;
  correct: boolean;
  judged: string;
  rounds: number;
  prompt_tokens: number;
  completion_tokens: number;
  wall_ms: number;
  stop: string | null;
  error?: { kind: string; message: string };
  turn_id?: string;
  question: string | null;
};

export type EvalDetail = EvalView & {
  report: Report | null;
  plots: Record<string, string>;
  results: EvalRow[];
};

export type CreateEval = {
  set?: string;
  data?: string;
  modes: string[];
  limit?: number;
  concurrency?: number;
};

export const SHIPPED_SETS = ["gsm-style-en", "zh-arith"] as const;
export const MODES = ["deepsolve", "plain"] as const;

export function isOver(status: EvalStatus): boolean {
  return status !== "running";
}

/** How many answers carry engine text, and which (an older report has no count: "—"). */
export function engineText(summary: Pick<ModeSummary, "engine_text">): { count: string; ids: string } {
  const ids = summary.engine_text;
  if (!ids) return { count: "—", ids: "" };
  return { count: String(ids.length), ids: ids.join(", ") };
}

/** `42.0 %`. */
export function percent(x: number): string {
  return `${(x * 100).toFixed(1)} %`;
}

/** A tally's accuracy so far (0 before any result). */
export function tallyAccuracy(tally: ModeTally): number {
  return tally.done === 0 ? 0 : tally.correct / tally.done;
}

/** How far the run is, 0–1. */
export function progressFraction(view: Pick<EvalView, "done" | "total">): number {
  return view.total <= 0 ? 0 : Math.max(0, Math.min(1, view.done / view.total));
}

/** An SVG document as an image URL (an `<img>` runs no script in it). */
export function svgDataUrl(svg: string): string {
  return `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
}

/** The request the form sends: a shipped set named, or the file's text uploaded. */
export function buildRequest(form: {
  source: "shipped" | "upload";
  shipped: string;
  file: { name: string; text: string } | null;
  modes: string[];
  limit: string;
}): { ok: true; body: CreateEval } | { ok: false; problem: "noModes" | "noFile" | "badLimit" } {
  if (form.modes.length === 0) return { ok: false, problem: "noModes" };
  const body: CreateEval = { modes: form.modes };
  const limit = form.limit.trim();
  if (limit) {
    const n = Number(limit);
    if (!Number.isInteger(n) || n < 1) return { ok: false, problem: "badLimit" };
    body.limit = n;
  }
  if (form.source === "shipped") body.set = form.shipped;
  else {
    if (!form.file) return { ok: false, problem: "noFile" };
    body.set = form.file.name;
    body.data = form.file.text;
  }
  return { ok: true, body };
}
