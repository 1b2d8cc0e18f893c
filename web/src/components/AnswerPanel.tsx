// The answer as it streams, with real mathematics; Copy and Export once there is text.
import { useMemo, useState } from "preact/hooks";
import { markdownOf } from "../exportMarkdown";
import { useI18n } from "../i18n";
import { sourcePlace, type CitedSource } from "../kb";
import { Markdown } from "../render/Markdown";
import { sourceAnchor, type Citations } from "../render/markdown";
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
  const citations = useMemo<Citations | undefined>(
    () =>
      state.sources.length > 0
        ? { sources: state.sources, scope: state.turnId, pageLabel: (n) => t("sources.page", { n }) }
        : undefined,
    [state.sources, state.turnId, t],
  );
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
            <Markdown text={answer.text} citations={citations} />
          </div>
        ) : (
          <p class="muted">{t("turn.noAnswer")}</p>
        )}
        {answer && !answer.streaming && state.sources.length > 0 && <SourceList turnId={state.turnId} sources={state.sources} />}
      </section>
    </>
  );
}

/** Under the answer: every source it cites, the target of its `[n]` links. */
function SourceList(props: { turnId: string; sources: CitedSource[] }) {
  const { t } = useI18n();
  const headingId = `sources-${props.turnId}`;
  return (
    <section class="sources" aria-labelledby={headingId} data-testid="sources">
      <h4 id={headingId} class="sources-title">
        {t("sources.title")}
      </h4>
      <ol class="source-list">
        {props.sources.map((source) => {
          const place = sourcePlace(source, (n) => t("sources.page", { n }));
          return (
            <li key={source.n} id={sourceAnchor(props.turnId, source.n)} class="source" data-testid="source" tabIndex={-1}>
              <span class="source-n">[{source.n}]</span>
              <div class="source-body">
                <p class="source-head">
                  {source.url && /^https?:\/\//i.test(source.url) ? (
                    <a href={source.url} target="_blank" rel="noopener noreferrer" class="source-title">
                      {source.title}
                    </a>
                  ) : (
                    <span class="source-title">{source.title}</span>
                  )}
                  {place && <span class="source-place muted">{place}</span>}
                </p>
                {source.excerpt && <p class="source-excerpt muted small">{source.excerpt}</p>}
              </div>
            </li>
          );
        })}
      </ol>
    </section>
  );
}
