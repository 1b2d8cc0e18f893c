import { ApiError } from "../api";
import { useI18n, type Translate } from "../i18n";

/** What to tell a person about a failed request: the server's own message, or no connection. */
export function errorText(error: unknown, t: Translate): string {
  if (error instanceof ApiError) return error.code === "network" ? t("error.network") : error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

export function ErrorMessage(props: { error: unknown; onRetry?: () => void }) {
  const { t } = useI18n();
  return (
    <div class="message error" role="alert" data-testid="error">
      <span>{errorText(props.error, t)}</span>
      {props.onRetry && (
        <button type="button" class="button subtle small" onClick={props.onRetry}>
          {t("common.retry")}
        </button>
      )}
    </div>
  );
}

/** A message from the page itself (a form check), with the same hook as server errors. */
export function FormError(props: { text: string; id?: string }) {
  return (
    <p class="message error" role="alert" data-testid="error" id={props.id}>
      {props.text}
    </p>
  );
}
