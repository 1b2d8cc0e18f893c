// Evaluations: the list of runs with a form to start one (a shipped set or an uploaded file,
// modes, a limit), and one run's page (live progress over SSE, the report's tables and plots,
// every problem's result, each deepsolve problem opening its turn).
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { ErrorMessage, errorText, FormError } from "../components/ErrorMessage";
import { Link } from "../components/Link";
import { formatDate } from "../format";
import { useI18n, type Key, type Translate } from "../i18n";
import {
  buildRequest,
  engineText,
  isOver,
  MODES,
  percent,
  progressFraction,
  SHIPPED_SETS,
  svgDataUrl,
  tallyAccuracy,
  type EvalDetail,
  type EvalRow,
  type EvalStatus,
  type EvalView,
  type ModeSummary,
} from "../evals";
import { navigate } from "../router";
import { useTitle } from "../title";

function evalHref(id: string): string {
  return `/evals/${encodeURIComponent(id)}`;
}

function statusKey(status: EvalStatus): Key {
  return `evals.status.${status}` as Key;
}

function StatusBadge(props: { status: EvalStatus }) {
  const { t } = useI18n();
  return (
    <span class={`eval-status eval-status-${props.status}`} data-testid="eval-status">
      {t(statusKey(props.status))}
    </span>
  );
}

function Tallies(props: { view: EvalView }) {
  const { t } = useI18n();
  return (
    <ul class="eval-tallies" data-testid="eval-tallies">
      {props.view.tallies.map((tally) => (
        <li key={tally.mode}>
          <strong>{tally.mode}</strong>{" "}
          {t("evals.tally", { correct: tally.correct, done: tally.done, accuracy: percent(tallyAccuracy(tally)) })}
          {tally.errors > 0 && <span class="muted"> · {t("evals.tallyErrors", { n: tally.errors })}</span>}
        </li>
      ))}
    </ul>
  );
}

function ProgressBar(props: { view: EvalView }) {
  const { t } = useI18n();
  const { view } = props;
  return (
    <div class="eval-progress">
      <progress
        max={view.total}
        value={view.done}
        aria-label={t("evals.progress", { done: view.done, total: view.total })}
      />
      <span class="small muted" data-testid="eval-progress">
        {t("evals.progress", { done: view.done, total: view.total })} ({percent(progressFraction(view))})
      </span>
    </div>
  );
}

// --- the list ----------------------------------------------------------------------------------

export function EvalsPage() {
  const { t } = useI18n();
  const [runs, setRuns] = useState<EvalView[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useTitle(t("evals.title"));

  async function load() {
    setError(null);
    try {
      setRuns((await api.evals()).evals);
    } catch (failure) {
      setError(failure);
    }
  }

  useEffect(() => {
    void load();
  }, []);

  // While a run is going, the list refreshes now and then.
  const anyRunning = (runs ?? []).some((run) => !isOver(run.status));
  useEffect(() => {
    if (!anyRunning) return;
    const timer = setInterval(() => void load(), 2000);
    return () => clearInterval(timer);
  }, [anyRunning]);

  return (
    <section class="evals" aria-labelledby="evals-title">
      <h1 id="evals-title" class="page-title">
        {t("evals.title")}
      </h1>
      <p class="intro muted">{t("evals.intro")}</p>
      <StartForm onStarted={(run) => navigate(evalHref(run.id))} />
      {error !== null && <ErrorMessage error={error} onRetry={() => void load()} />}
      {runs === null && error === null && <p class="muted">{t("common.loading")}</p>}
      {runs !== null && (
        <>
          <h2 class="section-title">{t("evals.runs")}</h2>
          <ul class="kb-list eval-list" data-testid="eval-list">
            {runs.length === 0 && <li class="kb-empty muted">{t("evals.empty")}</li>}
            {runs.map((run) => (
              <RunItem key={run.id} run={run} />
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

function RunItem(props: { run: EvalView }) {
  const { t, lang } = useI18n();
  const { run } = props;
  return (
    <li class="kb-item eval-item" data-testid="eval-item" data-eval-id={run.id}>
      <div class="kb-item-main">
        <Link href={evalHref(run.id)} class="kb-item-name">
          {run.set}
        </Link>{" "}
        <StatusBadge status={run.status} />
        <p class="kb-item-meta muted small">
          <span>{t("evals.progress", { done: run.done, total: run.total })}</span>
          <span>{run.modes.join(", ")}</span>
          <time dateTime={new Date(run.created_at).toISOString()}>{formatDate(lang, run.created_at)}</time>
        </p>
        <Tallies view={run} />
      </div>
      <div class="kb-item-actions">
        <Link href={evalHref(run.id)} class="button subtle small">
          {t("evals.open")}
        </Link>
      </div>
    </li>
  );
}

function readFile(file: File): Promise<string> {
  return file.text();
}

function StartForm(props: { onStarted: (run: EvalView) => void }) {
  const { t } = useI18n();
  const [source, setSource] = useState<"shipped" | "upload">("shipped");
  const [shipped, setShipped] = useState<string>(SHIPPED_SETS[0]);
  const [file, setFile] = useState<File | null>(null);
  const [modes, setModes] = useState<string[]>([...MODES]);
  const [limit, setLimit] = useState("5");
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  function toggleMode(mode: string, on: boolean) {
    setModes((now) => (on ? MODES.filter((m) => m === mode || now.includes(m)) : now.filter((m) => m !== mode)));
  }

  async function submit(event: Event) {
    event.preventDefault();
    if (busy) return;
    setProblem(null);
    setBusy(true);
    try {
      const text = source === "upload" && file ? await readFile(file) : null;
      const built = buildRequest({
        source,
        shipped,
        file: file && text !== null ? { name: file.name, text } : null,
        modes,
        limit,
      });
      if (!built.ok) {
        setProblem(t(`evals.form.${built.problem}` as Key));
        return;
      }
      props.onStarted(await api.createEval(built.body));
    } catch (failure) {
      setProblem(errorText(failure, t));
    } finally {
      setBusy(false);
    }
  }

  return (
    <form class="card eval-form" onSubmit={submit} noValidate data-testid="eval-form">
      <h2 class="section-title">{t("evals.form.title")}</h2>
      <fieldset class="fieldset">
        <legend>{t("evals.form.set")}</legend>
        <label class="eval-choice">
          <input
            type="radio"
            name="eval-source"
            checked={source === "shipped"}
            data-testid="eval-source-shipped"
            onChange={() => setSource("shipped")}
          />
          <span>{t("evals.form.shipped")}</span>
          <select
            class="select"
            data-testid="eval-shipped"
            aria-label={t("evals.form.shipped")}
            value={shipped}
            disabled={source !== "shipped"}
            onChange={(event) => setShipped((event.currentTarget as HTMLSelectElement).value)}
          >
            {SHIPPED_SETS.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
        <label class="eval-choice">
          <input
            type="radio"
            name="eval-source"
            checked={source === "upload"}
            data-testid="eval-source-upload"
            onChange={() => setSource("upload")}
          />
          <span>{t("evals.form.upload")}</span>
          <input
            type="file"
            accept=".jsonl,.json,.txt,application/jsonl,application/x-ndjson"
            data-testid="eval-file"
            aria-label={t("evals.form.upload")}
            onChange={(event) => {
              const chosen = (event.currentTarget as HTMLInputElement).files?.[0] ?? null;
              setFile(chosen);
              if (chosen) setSource("upload");
            }}
          />
        </label>
        <p class="small muted">{t("evals.form.layouts")}</p>
      </fieldset>
      <fieldset class="fieldset">
        <legend>{t("evals.form.modes")}</legend>
        {MODES.map((mode) => (
          <label key={mode} class="eval-choice">
            <input
              type="checkbox"
              data-testid={`eval-mode-${mode}`}
              checked={modes.includes(mode)}
              onChange={(event) => toggleMode(mode, (event.currentTarget as HTMLInputElement).checked)}
            />
            <span>
              <strong>{mode}</strong> — {t(`evals.mode.${mode}` as Key)}
            </span>
          </label>
        ))}
      </fieldset>
      <div class="field">
        <label class="field-label" for="eval-limit">
          {t("evals.form.limit")}
        </label>
        <input
          id="eval-limit"
          class="input eval-limit"
          data-testid="eval-limit"
          inputMode="numeric"
          value={limit}
          placeholder={t("evals.form.limitAll")}
          onInput={(event) => setLimit((event.currentTarget as HTMLInputElement).value)}
        />
      </div>
      {problem && <FormError text={problem} />}
      <button class="button primary" type="submit" data-testid="eval-start" disabled={busy}>
        {busy ? t("evals.form.starting") : t("evals.form.start")}
      </button>
    </form>
  );
}

// --- one run -----------------------------------------------------------------------------------

type Loaded = { status: "loading" } | { status: "ready"; run: EvalDetail } | { status: "missing" } | { status: "error"; error: unknown };

export function EvalRunPage(props: { id: string }) {
  const { t } = useI18n();
  const [loaded, setLoaded] = useState<Loaded>({ status: "loading" });
  const [live, setLive] = useState<EvalView | null>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  const fetching = useRef(false);
  const again = useRef(false);

  async function load() {
    // One request at a time; a progress frame during one asks for one more after it.
    if (fetching.current) {
      again.current = true;
      return;
    }
    fetching.current = true;
    try {
      setLoaded({ status: "ready", run: await api.evalRun(props.id) });
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) setLoaded({ status: "missing" });
      else setLoaded({ status: "error", error });
    } finally {
      fetching.current = false;
      if (again.current) {
        again.current = false;
        void load();
      }
    }
  }

  useEffect(() => {
    void load();
  }, [props.id]);

  const run = loaded.status === "ready" ? loaded.run : null;
  const running = run !== null && !isOver(run.status);

  // Live progress: each frame updates the bar at once and the tables after a fetch.
  useEffect(() => {
    if (!running || !run) return;
    const source = new EventSource(run.events_url);
    const onFrame = (event: MessageEvent) => {
      try {
        setLive(JSON.parse(event.data as string) as EvalView);
      } catch {
        return;
      }
      void load();
    };
    source.addEventListener("progress", onFrame as EventListener);
    source.addEventListener("finished", (event) => {
      onFrame(event as MessageEvent);
      source.close();
    });
    return () => source.close();
  }, [running, run?.events_url]);

  useTitle(run ? t("evals.runTitle", { set: run.set }) : t("evals.title"));

  if (loaded.status === "loading") return <p class="muted">{t("common.loading")}</p>;
  if (loaded.status === "missing")
    return (
      <section class="evals">
        <h1 class="page-title">{t("evals.notFound")}</h1>
        <Link href="/evals">{t("evals.back")}</Link>
      </section>
    );
  if (loaded.status === "error") return <ErrorMessage error={loaded.error} onRetry={() => void load()} />;
  const detail = loaded.run;
  // The stream may be ahead of the last fetch.
  const view: EvalView = live && live.done >= detail.done ? { ...detail, ...live } : detail;

  async function cancelOrDelete() {
    setActionError(null);
    try {
      await api.deleteEval(detail.id);
      if (isOver(view.status)) navigate("/evals");
      else void load();
    } catch (failure) {
      setActionError(failure);
    }
  }

  return (
    <section class="evals eval-run" aria-labelledby="eval-title" data-testid="eval-run" data-status={view.status}>
      <p class="small">
        <Link href="/evals">← {t("evals.back")}</Link>
      </p>
      <h1 id="eval-title" class="page-title">
        {detail.set} <StatusBadge status={view.status} />
      </h1>
      <p class="muted small">
        {t("evals.meta", { model: detail.model, modes: detail.modes.join(", "), problems: detail.problems })}
      </p>
      {detail.error && <p class="message error">{detail.error}</p>}
      <ProgressBar view={view} />
      <Tallies view={view} />
      <div class="eval-actions">
        <button type="button" class="button subtle small danger-text" data-testid="eval-delete" onClick={() => void cancelOrDelete()}>
          {isOver(view.status) ? t("evals.delete") : t("evals.cancel")}
        </button>
      </div>
      {actionError !== null && <ErrorMessage error={actionError} />}
      {detail.report && <ReportTables detail={detail} />}
      {Object.keys(detail.plots).length > 0 && (
        <div class="eval-plots" data-testid="eval-plots">
          {["accuracy", "tokens"]
            .filter((name) => detail.plots[name])
            .map((name) => (
              <figure key={name} class="eval-plot">
                <img src={svgDataUrl(detail.plots[name])} alt={t(`evals.plot.${name}` as Key)} />
                <figcaption class="small muted">{t(`evals.plot.${name}` as Key)}</figcaption>
              </figure>
            ))}
        </div>
      )}
      <Results rows={detail.results} />
    </section>
  );
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function stops(summary: ModeSummary): string {
  return Object.entries(summary.stops)
    .map(([stop, n]) => `${stop} ${n}`)
    .join(", ");
}

function ReportTables(props: { detail: EvalDetail }) {
  const { t } = useI18n();
  const report = props.detail.report;
  if (!report) return null;
  return (
    <>
      <h2 class="section-title">{t("evals.report")}</h2>
      <div class="table-scroll">
        <table class="eval-table" data-testid="eval-report">
          <thead>
            <tr>
              <th scope="col">{t("evals.col.mode")}</th>
              <th scope="col">{t("evals.col.correct")}</th>
              <th scope="col">{t("evals.col.accuracy")}</th>
              <th scope="col">{t("evals.col.errors")}</th>
              <th scope="col">{t("evals.col.rounds")}</th>
              <th scope="col">{t("evals.col.tokens")}</th>
              <th scope="col">{t("evals.col.time")}</th>
              <th scope="col">{t("evals.col.stops")}</th>
              <th scope="col" title={t("evals.col.engaged.title")}>
                {t("evals.col.engaged")}
              </th>
              <th scope="col" title={t("evals.col.engineText.title")}>
                {t("evals.col.engineText")}
              </th>
            </tr>
          </thead>
          <tbody>
            {report.modes.map((m) => (
              <tr key={m.mode}>
                <th scope="row">{m.mode}</th>
                <td>
                  {m.correct}/{m.problems}
                </td>
                <td>
                  {percent(m.accuracy)}
                  <br />
                  <span class="muted small">
                    {percent(m.ci_low)}–{percent(m.ci_high)}
                  </span>
                </td>
                <td>{m.errors}</td>
                <td>{m.mean_rounds.toFixed(2)}</td>
                <td>
                  {Math.round(m.mean_prompt_tokens)} + {Math.round(m.mean_completion_tokens)}
                </td>
                <td>{seconds(m.mean_wall_ms)}</td>
                <td class="eval-stops">{stops(m)}</td>
                <td data-testid="eval-engaged">
                  {m.engaged ? `${m.engaged.engaged}/${m.engaged.turns}` : "—"}
                </td>
                <td data-testid="eval-engine-text" title={engineText(m).ids}>
                  {engineText(m).count}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {report.paired.map((p) => (
        <p key={`${p.a}-${p.b}`} class="small" data-testid="eval-paired">
          {t("evals.paired", {
            a: p.a,
            b: p.b,
            both: p.both_right,
            onlyA: p.only_a.length,
            onlyB: p.only_b.length,
            neither: p.both_wrong,
            p: p.p_value.toFixed(3),
          })}
        </p>
      ))}
    </>
  );
}

function verdict(t: Translate, row: EvalRow): string {
  if (row.error) return t("evals.verdict.error", { kind: row.error.kind });
  return row.correct ? t("evals.verdict.correct") : t("evals.verdict.wrong");
}

function Results(props: { rows: EvalRow[] }) {
  const { t } = useI18n();
  if (props.rows.length === 0) return <p class="muted">{t("evals.noResults")}</p>;
  return (
    <>
      <h2 class="section-title">{t("evals.results")}</h2>
      <div class="table-scroll">
        <table class="eval-table eval-results" data-testid="eval-results">
          <thead>
            <tr>
              <th scope="col">{t("evals.col.problem")}</th>
              <th scope="col">{t("evals.col.mode")}</th>
              <th scope="col">{t("evals.col.verdict")}</th>
              <th scope="col">{t("evals.col.turn")}</th>
              <th scope="col">{t("evals.col.expected")}</th>
              <th scope="col">{t("evals.col.answer")}</th>
              <th scope="col">{t("evals.col.rounds")}</th>
              <th scope="col">{t("evals.col.time")}</th>
            </tr>
          </thead>
          <tbody>
            {props.rows.map((row) => (
              <tr key={`${row.id}/${row.mode}`} data-testid="eval-row" data-mode={row.mode} data-correct={String(row.correct)}>
                <th scope="row" class="eval-question" title={row.question ?? ""}>
                  <span class="eval-id">{row.id}</span>
                  {row.question && <span class="eval-question-text">{row.question}</span>}
                </th>
                <td>{row.mode}</td>
                <td class={row.correct ? "eval-right" : "eval-wrong"} title={row.error?.message ?? ""}>
                  {verdict(t, row)}
                </td>
                <td>
                  {row.turn_id ? (
                    <Link href={`/turns/${encodeURIComponent(row.turn_id)}`} class="eval-turn-link">
                      {t("evals.openTurn")}
                    </Link>
                  ) : (
                    "—"
                  )}
                </td>
                <td class="eval-answer" title={row.expected}>
                  {row.expected}
                </td>
                <td class="eval-answer" title={row.answer ?? ""}>
                  {row.answer ?? "—"}
                </td>
                <td>{row.rounds}</td>
                <td>{seconds(row.wall_ms)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

/** `/turns/{id}`: a turn's page is its session's; go there. */
export function TurnRedirectPage(props: { id: string }) {
  const { t } = useI18n();
  const [error, setError] = useState<unknown>(null);
  useTitle(t("common.loading"));
  useEffect(() => {
    let live = true;
    api
      .turn(props.id)
      .then((turn) => {
        if (live) navigate(`/sessions/${encodeURIComponent(turn.session_id)}`, { replace: true });
      })
      .catch((failure: unknown) => {
        if (live) setError(failure);
      });
    return () => {
      live = false;
    };
  }, [props.id]);
  if (error !== null) return <ErrorMessage error={error} />;
  return <p class="muted">{t("common.loading")}</p>;
}
