// The answer as it streams, with real mathematics; Copy and Export once there is text.
import { useState } from "preact/hooks";
import { markdownOf } from "../exportMarkdown";
import { useI18n } from "../i18n";
import { Markdown } from "../render/Markdown";
import type { TurnState } from "../state/view";

async function copyText(text: string): Promise<void> {
  if (navigator.clipboard?.writeText) {
    await navigator.clipboard.writeText(text);
    return;
  }
  // Without the async clipboard (an insecure origin): a hidden textarea and the old command.
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  if (!ok) throw new Error("copy refused");
}

function download(name: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: "text/markdown;charset=utf-8" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function AnswerPanel(props: { state: TurnState }) {
  const { t } = useI18n();
  const { state } = props;
  const [copied, setCopied] = useState<"idle" | "done" | "failed">("idle");
  const answer = state.answer;
  const status = answer?.streaming
    ? t("turn.answerStreaming")
    : answer && state.phase === "finished"
      ? t("turn.answerReady")
      : "";

  async function copy() {
    if (!answer) return;
    try {
      await copyText(answer.text);
      setCopied("done");
    } catch {
      setCopied("failed");
    }
    setTimeout(() => setCopied("idle"), 2000);
  }

  // The live region stays the same element from the start, so the change to "ready" is heard.
  const live = (
    <p class="sr-only" aria-live="polite">
      {status}
    </p>
  );
  if (!answer && state.phase !== "finished") return <>{live}</>;

  return (
    <>
      {live}
      <section class={answer?.streaming ? "answer-section streaming" : "answer-section"} aria-labelledby={`answer-${state.turnId}`}>
        <div class="answer-head">
          <h3 id={`answer-${state.turnId}`} class="section-title">
            {t("turn.answer")}
          </h3>
          {answer && !answer.streaming && (
            <div class="answer-actions">
              <button type="button" class="button subtle small" data-testid="copy" onClick={() => void copy()}>
                {copied === "done" ? t("turn.copied") : copied === "failed" ? t("turn.copyFailed") : t("turn.copy")}
              </button>
              <button
                type="button"
                class="button subtle small"
                data-testid="export"
                onClick={() => download(`deepsolve-${state.turnId}.md`, markdownOf(state, t))}
              >
                {t("turn.export")}
              </button>
            </div>
          )}
        </div>
        {answer?.forced && <p class="message warning">{t("turn.answerForced")}</p>}
        {answer ? (
          <div data-testid="answer" class="answer" aria-busy={answer.streaming}>
            <Markdown text={answer.text} />
            </div>
        ) : (
          <p class="muted">{t("turn.noAnswer")}</p>
        )}
      </section>
    </>
  );
}
