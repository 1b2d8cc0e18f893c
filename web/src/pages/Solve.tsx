import { useState } from "preact/hooks";
import { ProblemForm } from "../components/ProblemForm";
import { Markdown } from "../render/Markdown";
import { useI18n, type Key } from "../i18n";
import { navigate } from "../router";
import { rememberNewTurn } from "../newTurns";
import { useTitle } from "../title";

const EXAMPLES: Key[] = ["examples.1", "examples.2", "examples.3"];

export function SolvePage() {
  const { t } = useI18n();
  const [suggestion, setSuggestion] = useState<{ text: string; n: number } | null>(null);
  useTitle(null);
  return (
    <section class="solve" aria-labelledby="solve-title">
      <h1 id="solve-title" class="page-title">
        {t("solve.title")}
      </h1>
      <Markdown class="intro muted" text={t("solve.intro")} />
      <ProblemForm
        suggestion={suggestion}
        onCreated={(created) => {
          rememberNewTurn(created);
          navigate(`/sessions/${encodeURIComponent(created.session_id)}`);
        }}
      />
      <div class="examples">
        <p class="muted small">{t("examples.label")}</p>
        <ul class="example-list">
          {EXAMPLES.map((key) => (
            <li key={key}>
              <button
                type="button"
                class="example"
                onClick={() => setSuggestion({ text: t(key), n: (suggestion?.n ?? 0) + 1 })}
              >
                <Markdown class="inline" text={t(key)} />
              </button>
            </li>
          ))}
        </ul>
      </div>
    </section>
  );
}
