import { ProblemForm } from "../components/ProblemForm";
import { Markdown } from "../render/Markdown";
import { useI18n } from "../i18n";
import { navigate } from "../router";
import { rememberNewTurn } from "../newTurns";
import { useTitle } from "../title";

export function SolvePage() {
  const { t } = useI18n();
  useTitle(null);
  return (
    <section class="solve" aria-labelledby="solve-title">
      <h1 id="solve-title" class="page-title">
        {t("solve.title")}
      </h1>
      <Markdown class="intro muted" text={t("solve.intro")} />
      <ProblemForm
        onCreated={(created) => {
          rememberNewTurn(created);
          navigate(`/sessions/${encodeURIComponent(created.session_id)}`);
        }}
      />
    </section>
  );
}
