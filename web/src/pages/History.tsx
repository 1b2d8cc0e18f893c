// Past sessions, newest first: open one, or delete it after a confirmation.
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../api";
import { ErrorMessage } from "../components/ErrorMessage";
import { Link } from "../components/Link";
import { firstLine, formatDate } from "../format";
import { stopReasonText, useI18n } from "../i18n";
import { Markdown } from "../render/Markdown";
import type { SessionView, StopReason } from "../protocol";
import { useTitle } from "../title";

/** The list may carry the last turn's stop reason (newer servers); show it when it does. */
function stopReasonOf(session: SessionView): StopReason | null {
  const extra = session as SessionView & { stop_reason?: StopReason | null; last_stop_reason?: StopReason | null };
  return extra.stop_reason ?? extra.last_stop_reason ?? session.turns?.[session.turns.length - 1]?.stop_reason ?? null;
}

export function HistoryPage() {
  const { t } = useI18n();
  const [sessions, setSessions] = useState<SessionView[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [confirming, setConfirming] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  useTitle(t("history.title"));

  async function load() {
    setError(null);
    try {
      setSessions((await api.sessions()).sessions);
    } catch (failure) {
      setError(failure);
    }
  }

  useEffect(() => {
    void load();
  }, []);

  async function remove(id: string) {
    setError(null);
    try {
      await api.deleteSession(id);
      setSessions((list) => (list ?? []).filter((s) => s.id !== id));
      setNotice(t("history.deleted"));
    } catch (failure) {
      setError(failure);
    } finally {
      setConfirming(null);
    }
  }

  return (
    <section class="history" aria-labelledby="history-title">
      <h1 id="history-title" class="page-title">
        {t("history.title")}
      </h1>
      {error !== null && <ErrorMessage error={error} onRetry={() => void load()} />}
      <p class="sr-only" role="status">
        {notice ?? ""}
      </p>
      {sessions === null && error === null && <p class="muted">{t("common.loading")}</p>}
      {sessions !== null && (
        <ul class="history-list" data-testid="history">
          {sessions.length === 0 && <li class="history-empty muted">{t("history.empty")}</li>}
          {sessions.map((session) => (
            <HistoryItem
              key={session.id}
              session={session}
              confirming={confirming === session.id}
              onAskDelete={() => setConfirming(session.id)}
              onCancelDelete={() => setConfirming(null)}
              onDelete={() => void remove(session.id)}
            />
          ))}
        </ul>
      )}
    </section>
  );
}

function HistoryItem(props: {
  session: SessionView;
  confirming: boolean;
  onAskDelete: () => void;
  onCancelDelete: () => void;
  onDelete: () => void;
}) {
  const { t, lang } = useI18n();
  const { session } = props;
  const title = firstLine(session.title) || t("history.untitled");
  const reason = stopReasonOf(session);
  const href = `/sessions/${encodeURIComponent(session.id)}`;
  const keep = useRef<HTMLButtonElement>(null);
  // The question takes the focus, on its safe answer: Enter by mistake deletes nothing.
  useEffect(() => {
    if (props.confirming) keep.current?.focus();
  }, [props.confirming]);
  return (
    <li class="history-item" data-session-id={session.id}>
      <div class="history-main">
        <Link href={href} class="history-title">
          <Markdown class="inline" text={title} />
        </Link>
        <p class="history-meta muted small">
          <time dateTime={new Date(session.updated_at).toISOString()}>{formatDate(lang, session.updated_at)}</time>
          {reason && <span class="stop-reason-text">{stopReasonText(t, reason)}</span>}
        </p>
      </div>
      {props.confirming ? (
        <div class="confirm" role="group" aria-label={`${t("history.delete")}: ${title}`}>
          <span class="confirm-text">{t("history.confirm")}</span>
          <button type="button" class="button danger small" data-testid="confirm-delete" onClick={props.onDelete}>
            {t("history.confirmYes")}
          </button>
          <button ref={keep} type="button" class="button subtle small" onClick={props.onCancelDelete}>
            {t("history.confirmNo")}
          </button>
        </div>
      ) : (
        <div class="history-actions">
          <Link href={href} class="button subtle small">
            {t("history.open")}
          </Link>
          <button
            type="button"
            class="button subtle small danger-text"
            data-testid="delete"
            aria-label={`${t("history.delete")}: ${title}`}
            onClick={props.onAskDelete}
          >
            {t("history.delete")}
          </button>
        </div>
      )}
    </li>
  );
}
