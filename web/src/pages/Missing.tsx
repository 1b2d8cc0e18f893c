import { Link } from "../components/Link";
import { useI18n } from "../i18n";
import { useTitle } from "../title";

export function MissingPage() {
  const { t } = useI18n();
  useTitle(t("missing.title"));
  return (
    <section class="card narrow" data-testid="not-found">
      <h1>{t("missing.title")}</h1>
      <p class="muted">{t("missing.text")}</p>
      <Link href="/" class="button">
        {t("session.back")}
      </Link>
    </section>
  );
}
