// A turn as a Markdown file a student can keep: the problem, the plan with what each step
// found, and the answer.
import type { Translate } from "./i18n";
import { sourcePlace } from "./kb";
import type { TurnState } from "./state/view";

export function markdownOf(state: TurnState, t: Translate): string {
  const parts: string[] = [`# ${t("turn.problem")}`, "", state.problem.trim(), ""];
  if (state.plan && state.plan.steps.length > 0) {
    parts.push(`## ${t("turn.plan")}`, "");
    if (state.plan.analysis.trim()) parts.push(state.plan.analysis.trim(), "");
    for (const [i, step] of state.plan.steps.entries()) {
      const mark = step.status === "done" ? "✓ " : "";
      parts.push(`${i + 1}. ${mark}**${step.id}** ${step.goal}`);
      if (step.summary) parts.push(`   ${step.summary.trim().replace(/\n/g, "\n   ")}`);
    }
    parts.push("");
  }
  parts.push(`## ${t("turn.answer")}`, "", state.answer?.text.trim() || t("turn.noAnswer"), "");
  if (state.sources.length > 0) {
    parts.push(`## ${t("sources.title")}`, "");
    for (const source of state.sources) {
      const place = sourcePlace(source, (n) => t("sources.page", { n }));
      parts.push(`- [${source.n}] ${source.title}${place ? `, ${place}` : ""}${source.url ? ` <${source.url}>` : ""}`);
    }
    parts.push("");
  }
  return parts.join("\n");
}
