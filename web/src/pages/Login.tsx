import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { sessionExpired, signedIn } from "../auth";
import { forgetCapabilities } from "../capabilities";
import { errorText, FormError } from "../components/ErrorMessage";
import { useI18n } from "../i18n";
import { useStore } from "../store";
import { useTitle } from "../title";

export function LoginPage() {
  const { t } = useI18n();
  const expired = useStore(sessionExpired);
  const [token, setToken] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useTitle(t("login.title"));

  const field = useRef<HTMLInputElement>(null);

  useEffect(() => {
    forgetCapabilities();
    field.current?.focus();
  }, []);

  async function submit(event: Event) {
    event.preventDefault();
    const value = token.trim();
    if (!value) {
      setError(t("login.empty"));
      return;
    }
    setBusy(true);
    setError(null);
    try {
      signedIn(await api.login(value));
    } catch (failure) {
      setError(failure instanceof ApiError && failure.status === 401 ? t("login.invalid") : errorText(failure, t));
    } finally {
      setBusy(false);
    }
  }

  return (
    <section class="login card narrow" aria-labelledby="login-title">
      <h1 id="login-title">{t("login.title")}</h1>
      {expired && !error && (
        <p class="message warning" role="status">
          {t("login.expired")}
        </p>
      )}
      <p class="muted">{t("login.intro")}</p>
      <form data-testid="login" onSubmit={submit} noValidate>
        <label class="field">
          <span class="field-label">{t("login.token")}</span>
          <input
            ref={field}
            class="input"
            type="password"
            name="token"
            autoComplete="current-password"
            spellcheck={false}
            value={token}
            aria-invalid={error ? true : undefined}
            aria-describedby={error ? "login-error" : undefined}
            onInput={(event) => setToken((event.currentTarget as HTMLInputElement).value)}
          />
        </label>
        {error && <FormError text={error} id="login-error" />}
        <button class="button primary" type="submit" disabled={busy}>
          {busy ? t("login.busy") : t("login.submit")}
        </button>
      </form>
    </section>
  );
}
