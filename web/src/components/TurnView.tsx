// One turn of a session, live or replayed from its log: the problem, the plan as a checklist
// with each step's work, the answer, and the footer. The same component serves both.
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { api } from "../api";
import { formatDate } from "../format";
import { useI18n } from "../i18n";
import type { TurnCreated, TurnView as TurnRecord } from "../protocol";
import { Markdown } from "../render/Markdown";
import type { TurnState } from "../state/view";
import { useTurn, type Connection } from "../state/useTurn";
import { AnswerPanel } from "./AnswerPanel";
import { ErrorMessage } from "./ErrorMessage";
import { TurnImages } from "./ImagePicker";
import { PlanChecklist, SupersededPlans } from "./PlanChecklist";
import { Timeline } from "./Timeline";
import { TurnControls } from "./TurnControls";
import { TurnFooter } from "./TurnFooter";
import { ArtifactsContext } from "./artifacts";
import { CitationsContext } from "./citations";
import type { Citations } from "../render/markdown";

type Props = {
  turnId: string;
  index: number;
  initial?: TurnRecord;
  /** Just started from this page: bring it into view. */
  reveal?: boolean;
  onResumed: (created: TurnCreated) => void;
  /** Told whether the turn is still running (the session takes no follow-up meanwhile). */
  onRunning?: (turnId: string, running: boolean) => void;
};

function artifactCount(state: TurnState): number {
  let n = 0;
  const count = (items: { kind: string; card?: { artifacts: unknown[] } }[]) => {
    for (const item of items) if (item.kind === "tool" && item.card) n += item.card.artifacts.length;
  };
  count(state.planning);
  for (const step of state.plan?.steps ?? []) count(step.timeline);
  for (const old of state.superseded) for (const step of old.plan.steps) count(step.timeline);
  return n;
}

/** The turn's record (status, artifact ids), read again when files appear and at the end. */
function useTurnRecord(turnId: string, initial: TurnRecord | undefined, state: TurnState, connection: Connection) {
  const [record, setRecord] = useState<TurnRecord | null>(initial ?? null);
  const files = artifactCount(state);
  const finished = state.phase === "finished";
  // A lost stream may mean the turn was interrupted, or that the session expired (a 401 here
  // takes the app to the login page): the record says which.
  const lost = connection === "reconnecting" || connection === "closed";
  useEffect(() => {
    let live = true;
    api.turn(turnId).then(
      (view) => live && setRecord(view),
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [turnId, files, finished, lost]);
  return record;
}

export function TurnView(props: Props) {
  const { t, lang } = useI18n();
  const feed = useTurn(props.turnId);
  const { state, connection } = feed;
  const record = useTurnRecord(props.turnId, props.initial, state, connection);
  const marked = useRef(false);
  const article = useRef<HTMLElement>(null);

  useEffect(() => {
    if (!props.reveal) return;
    const still = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
    article.current?.scrollIntoView({ block: "start", behavior: still ? "auto" : "smooth" });
  }, []);

  useLayoutEffect(() => {
    if (state.phase === "finished" && !marked.current) {
      marked.current = true;
      performance.mark(`deepsolve:rendered:${props.turnId}`);
    }
  }, [state.phase, props.turnId]);

  const problem = state.problem || record?.problem || "";
  const interrupted = state.phase !== "finished" && record?.status === "interrupted";
  const running = state.phase !== "finished" && !interrupted;
  // A turn that failed without a `turn_finished` is not running either: its record says so.
  const stillRunning = running && (record?.status ?? "running") === "running";
  const { onRunning } = props;
  useEffect(() => onRunning?.(props.turnId, stillRunning), [onRunning, props.turnId, stillRunning]);
  const headingId = `turn-${props.turnId}`;
  const citations = useMemo<Citations | undefined>(
    () =>
      state.numbered.length > 0
        ? { sources: state.numbered, scope: props.turnId, cardScope: `${props.turnId}-work`, pageLabel: (n) => t("sources.page", { n }) }
        : undefined,
    [state.numbered, props.turnId, t],
  );

  return (
    <CitationsContext.Provider value={citations}>
    <ArtifactsContext.Provider value={record?.artifacts ?? []}>
      <article ref={article} class="turn" aria-labelledby={headingId} data-phase={interrupted ? "interrupted" : state.phase}>
        <header class="turn-head">
          <h2 id={headingId} class="turn-title">
            {t("session.turn", { n: props.index + 1 })}
          </h2>
          {record && (
            <time class="turn-time muted small" dateTime={new Date(record.created_at).toISOString()}>
              {formatDate(lang, record.created_at)}
            </time>
          )}
          {running ? <TurnProgress state={state} /> : <ReplansUsed state={state} />}
          {running && <ConnectionBadge connection={connection} waiting={state.phase === "waiting"} />}
        </header>

        <section class="turn-problem" aria-label={t("turn.problem")}>
          {record && <TurnImages images={record.images ?? []} />}
          <Markdown class="problem-text" text={problem} />
        </section>

        {feed.error && connection !== "reconnecting" && <ErrorMessage error={new Error(feed.error)} />}

        <PlanSection state={state} />
        <AnswerPanel state={state} />
        {(state.phase === "finished" || !state.plan) && <TurnErrors state={state} />}
        {state.finished && <TurnFooter state={state} />}
        <TurnControls
          turnId={props.turnId}
          running={running}
          interrupted={interrupted}
          onResumed={props.onResumed}
        />
      </article>
    </ArtifactsContext.Provider>
    </CitationsContext.Provider>
  );
}

function TurnProgress(props: { state: TurnState }) {
  const { t } = useI18n();
  const { state } = props;
  if (state.phase === "finished" || state.round === 0) return null;
  return (
    <p class="turn-progress muted small">
      <span>{t("turn.round", { r: state.round, n: state.maxRounds })}</span>
      {state.replansMax > 0 && <span>{t("turn.replans", { k: state.replansUsed, m: state.replansMax })}</span>}
    </p>
  );
}

/** After the turn: how many replans it took, when it took any. */
function ReplansUsed(props: { state: TurnState }) {
  const { t } = useI18n();
  const { replansUsed, replansMax } = props.state;
  if (replansUsed === 0) return null;
  return <p class="turn-progress muted small">{t("turn.replans", { k: replansUsed, m: replansMax })}</p>;
}

function ConnectionBadge(props: { connection: string; waiting: boolean }) {
  const { t } = useI18n();
  if (props.connection === "reconnecting") {
    return (
      <p class="badge warning" role="status">
        {t("turn.reconnecting")}
      </p>
    );
  }
  if (props.connection === "connecting" && props.waiting) {
    return (
      <p class="badge" role="status">
        {t("turn.connecting")}
      </p>
    );
  }
  return null;
}

/** What went wrong in the turn, where it cannot hide in a folded step: before a plan, or at the end. */
function TurnErrors(props: { state: TurnState }) {
  const errors = props.state.notices.filter((notice) => notice.level === "error");
  if (errors.length === 0) return null;
  return (
    <ul class="notices" data-testid="error">
      {errors.map((notice, i) => (
        <li key={i} class="notice error">
          {notice.text}
        </li>
      ))}
    </ul>
  );
}

function PlanSection(props: { state: TurnState }) {
  const { t } = useI18n();
  const { state } = props;
  const planningOpen = !state.plan;
  return (
    <section class="plan-section" aria-labelledby={`plan-${state.turnId}`}>
      <h3 id={`plan-${state.turnId}`} class="section-title">
        {t("turn.plan")}
      </h3>
      {state.planning.length > 0 && (
        <details class="planning" open={planningOpen}>
          <summary>{t("turn.planning")}</summary>
          <Timeline items={state.planning} />
        </details>
      )}
      {!state.plan && state.phase !== "finished" && (
        <p class="muted thinking">
          <span class="pulse" aria-hidden="true" />
          {state.phase === "waiting" ? t("turn.waiting") : t("turn.thinking")}
        </p>
      )}
      <SupersededPlans superseded={state.superseded} />
      {state.plan && (
        <>
          {state.plan.analysis && (
            <div class="analysis">
              <span class="analysis-label">{t("turn.analysis")}</span>
              <Markdown text={state.plan.analysis} />
            </div>
          )}
          <PlanChecklist plan={state.plan} finished={state.phase === "finished"} />
        </>
      )}
    </section>
  );
}
