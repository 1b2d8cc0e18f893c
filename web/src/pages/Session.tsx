// A session: its turns in order (finished ones replayed from their logs), then a follow-up box.
import { useCallback, useEffect, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { ErrorMessage } from "../components/ErrorMessage";
import { Link } from "../components/Link";
import { ProblemForm } from "../components/ProblemForm";
import { TurnView } from "../components/TurnView";
import { firstLine } from "../format";
import { useI18n } from "../i18n";
import { newTurnsOf, rememberNewTurn } from "../newTurns";
import type { SessionView, TurnCreated, TurnView as TurnRecord } from "../protocol";
import { useTitle } from "../title";

type Loaded = { status: "loading" } | { status: "ready"; session: SessionView } | { status: "missing" } | { status: "error"; error: unknown };

/** The session's turn ids in order, with turns started here that its record does not list yet. */
function turnIds(session: SessionView): string[] {
  const ids = (session.turns ?? []).map((turn) => turn.id);
  for (const id of newTurnsOf(session.id)) if (!ids.includes(id)) ids.push(id);
  return ids;
}

export function SessionPage(props: { id: string }) {
  const { t } = useI18n();
  const [loaded, setLoaded] = useState<Loaded>({ status: "loading" });
  // Bumped when a turn is resumed under the same id, so its view follows the stream again.
  const [generation, setGeneration] = useState<Record<string, number>>({});
  const [revealed, setRevealed] = useState<string | null>(null);
  // The server runs one turn per session at a time: no follow-up until the running one ends.
  const [running, setRunning] = useState<Record<string, boolean>>({});
  const onRunning = useCallback(
    (turnId: string, isRunning: boolean) =>
      setRunning((now) => (now[turnId] === isRunning ? now : { ...now, [turnId]: isRunning })),
    [],
  );

  async function load() {
    try {
      setLoaded({ status: "ready", session: await api.session(props.id) });
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) setLoaded({ status: "missing" });
      else setLoaded({ status: "error", error });
    }
  }

  useEffect(() => {
    void load();
  }, [props.id]);

  const session = loaded.status === "ready" ? loaded.session : null;
  const firstProblem = session?.turns?.[0]?.problem ?? session?.title ?? "";
  useTitle(loaded.status === "missing" ? t("session.notFound") : firstLine(firstProblem) || null);

  function started(created: TurnCreated) {
    rememberNewTurn(created);
    setRevealed(created.turn_id);
    setGeneration((g) => ({ ...g, [created.turn_id]: (g[created.turn_id] ?? 0) + 1 }));
    void load();
  }

  if (loaded.status === "loading") return <p class="muted">{t("common.loading")}</p>;
  if (loaded.status === "missing") {
    return (
      <section class="card narrow" data-testid="not-found">
        <h1>{t("session.notFound")}</h1>
        <p class="muted">{t("session.notFoundText")}</p>
        <Link href="/" class="button">
          {t("session.back")}
        </Link>
      </section>
    );
  }
  if (loaded.status === "error") return <ErrorMessage error={loaded.error} onRetry={() => void load()} />;

  const records = new Map<string, TurnRecord>((loaded.session.turns ?? []).map((turn) => [turn.id, turn]));
  const ids = turnIds(loaded.session);
  return (
    <div class="session">
      <h1 class="sr-only">{firstLine(firstProblem)}</h1>
      {ids.map((id, index) => (
        <TurnView
          key={`${id}:${generation[id] ?? 0}`}
          turnId={id}
          index={index}
          initial={records.get(id)}
          reveal={revealed === id}
          onResumed={started}
          onRunning={onRunning}
        />
      ))}
      <section class="followup" aria-labelledby="followup-title">
        <h2 id="followup-title" class="section-title">
          {t("followup.title")}
        </h2>
        <p class="muted small">{t("followup.intro")}</p>
        <ProblemForm
          sessionId={loaded.session.id}
          onCreated={started}
          waitFor={Object.values(running).some(Boolean) ? t("followup.wait") : undefined}
        />
      </section>
    </div>
  );
}
