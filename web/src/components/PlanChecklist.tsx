// The plan as a live checklist: S1, S2, … with a marker on the current step, ✓ and the
// summary when done; each step's work folds open (the current one is open by default).
import { useContext, useState } from "preact/hooks";
import { useI18n } from "../i18n";
import { Markdown } from "../render/Markdown";
import type { PlanView, StepView } from "../state/view";
import { CitationsContext } from "./citations";
import { Timeline } from "./Timeline";

export function PlanChecklist(props: { plan: PlanView; finished: boolean }) {
  // What the student opened or closed; other steps follow "the current one is open".
  const [chosen, setChosen] = useState<Record<string, boolean>>({});
  return (
    <ol class="plan" data-testid="plan">
      {props.plan.steps.map((step) => (
        <PlanStep
          key={step.id}
          step={step}
          open={chosen[step.id] ?? step.status === "current"}
          onToggle={(open) => setChosen({ ...chosen, [step.id]: open })}
        />
      ))}
    </ol>
  );
}

function statusKey(step: StepView) {
  if (step.status === "done") return "turn.stepDone" as const;
  if (step.status === "current") return "turn.stepCurrent" as const;
  return "turn.stepPending" as const;
}

function PlanStep(props: { step: StepView; open: boolean; onToggle: (open: boolean) => void }) {
  const { t } = useI18n();
  const { step } = props;
  const citations = useContext(CitationsContext);
  const workId = `work-${step.id}-${Math.abs(hash(step.goal))}`;
  const hasWork = step.timeline.length > 0;
  return (
    <li
      class={`step ${step.status}`}
      data-testid="step"
      data-status={step.status}
      aria-current={step.status === "current" ? "step" : undefined}
    >
      <span class="step-marker" aria-hidden="true">
        {step.status === "done" ? "✓" : ""}
      </span>
      <div class="step-body">
        <div class="step-head">
          <span class="step-id">{step.id}</span>
          <Markdown class="step-goal inline" text={step.goal} />
          <span class="sr-only">({t(statusKey(step))})</span>
        </div>
        {step.summary && <Markdown class="step-summary" text={step.summary} citations={citations} />}
        {(hasWork || step.status === "current") && (
          <button
            type="button"
            class="link-button step-toggle"
            aria-expanded={props.open}
            aria-controls={workId}
            onClick={() => props.onToggle(!props.open)}
          >
            {props.open ? t("turn.hideWork") : t("turn.showWork")}
            {hasWork && <span class="count-pill">{step.timeline.length}</span>}
          </button>
        )}
        <div id={workId} class="step-work" hidden={!props.open}>
          {props.open && (hasWork ? <Timeline items={step.timeline} /> : <p class="muted small">{t("turn.noWork")}</p>)}
        </div>
      </div>
    </li>
  );
}

/** Plans replaced by a replan: struck through, with the reason, their work still reachable. */
export function SupersededPlans(props: { superseded: { plan: PlanView; reason: string }[] }) {
  const { t } = useI18n();
  const citations = useContext(CitationsContext);
  if (props.superseded.length === 0) return null;
  return (
    <div class="superseded">
      {props.superseded.map((old, i) => (
        <section key={i} class="old-plan" aria-label={t("turn.oldPlan")}>
          <p class="replan-reason">{t("turn.replanned", { reason: old.reason })}</p>
          <ol class="plan old" data-testid="old-plan">
            {old.plan.steps.map((step) => (
              <li key={step.id} class={`step old ${step.status}`}>
                <span class="step-marker" aria-hidden="true">
                  {step.status === "done" ? "✓" : ""}
                </span>
                <div class="step-body">
                  <div class="step-head">
                    <span class="step-id">{step.id}</span>
                    <s>
                      <Markdown class="step-goal inline" text={step.goal} />
                    </s>
                  </div>
                  {step.summary && <Markdown class="step-summary" text={step.summary} citations={citations} />}
                  {step.timeline.length > 0 && (
                    <details class="old-work">
                      <summary>
                        {t("turn.showWork")} <span class="count-pill">{step.timeline.length}</span>
                      </summary>
                      <Timeline items={step.timeline} />
                    </details>
                  )}
                </div>
              </li>
            ))}
          </ol>
        </section>
      ))}
    </div>
  );
}

function hash(text: string): number {
  let h = 0;
  for (let i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) | 0;
  return h;
}
