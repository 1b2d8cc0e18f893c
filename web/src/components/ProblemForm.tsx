// The problem editor with its live preview, tool choice, per-turn limits and answer language.
// Used for a new problem and for a follow-up in a session.
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../api";
import { useCapabilities, valueOf } from "../capabilities";
import { formatNumber } from "../format";
import { useI18n } from "../i18n";
import { collectKnobs } from "../knobs";
import type { CreateTurn, ToolView, TurnCreated } from "../protocol";
import { Markdown } from "../render/Markdown";
import { errorText, FormError } from "./ErrorMessage";
import { ImagePicker, useProblemImages } from "./ImagePicker";
import { KnobFields } from "./KnobFields";
import { MaterialPicker, readPicked, writePicked } from "./MaterialPicker";
import { ToolToggles } from "./ToolToggles";

type Props = {
  sessionId?: string;
  onCreated: (created: TurnCreated) => void;
  /** Why the form cannot be sent yet (e.g. a turn of the session is still running). */
  waitFor?: string;
  /** Text put into the editor from outside (an example), with a counter so the same text twice still lands. */
  suggestion?: { text: string; n: number } | null;
};

const MAC = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);

function useDebounced<T>(value: T, ms: number): T {
  const [debounced, setDebounced] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setDebounced(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return debounced;
}

/** The editor's text survives a reload or a detour through the sign-in page (this tab only). */
function draftKey(sessionId: string | undefined): string {
  return sessionId ? `deepsolve.draft.${sessionId}` : "deepsolve.draft";
}

function readDraft(key: string): string {
  try {
    return sessionStorage.getItem(key) ?? "";
  } catch {
    return "";
  }
}

function writeDraft(key: string, text: string): void {
  try {
    if (text) sessionStorage.setItem(key, text);
    else sessionStorage.removeItem(key);
  } catch {
    // No storage: the draft lives as long as the page.
  }
}

function focus(id: string): void {
  document.getElementById(id)?.focus();
}

function defaultTools(tools: ToolView[]): Set<string> {
  return new Set(tools.filter((tool) => tool.available && tool.default).map((tool) => tool.name));
}

export function ProblemForm(props: Props) {
  const { t, lang } = useI18n();
  const { caps, settings } = useCapabilities();
  const capabilities = valueOf(caps);
  const knobs = valueOf(settings)?.knobs ?? [];
  const maxChars = capabilities?.limits.max_problem_chars ?? null;

  const draft = draftKey(props.sessionId);
  const [problem, setProblem] = useState(() => readDraft(draft));
  const [language, setLanguage] = useState<string>(lang);
  const [tools, setTools] = useState<Set<string> | null>(null);
  const [knobValues, setKnobValues] = useState<Record<string, string>>({});
  const [problemError, setProblemError] = useState<string | null>(null);
  const [knobError, setKnobError] = useState<{ key: string; message: string } | null>(null);
  const [serverError, setServerError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [picked, setPicked] = useState<Set<string>>(() => new Set(readPicked()));
  const [files, setFiles] = useState<File[]>([]);
  const images = useProblemImages();
  const [sent, setSent] = useState<number | null>(null);
  const form = useRef<HTMLFormElement>(null);
  const preview = useDebounced(problem, 120);
  const followUp = props.sessionId !== undefined;
  const idPrefix = followUp ? "followup" : "problem";

  useEffect(() => setLanguage(lang), [lang]);
  useEffect(() => writeDraft(draft, problem), [draft, problem]);
  useEffect(() => {
    if (!props.suggestion) return;
    setProblem(props.suggestion.text);
    setProblemError(null);
    focus(`${idPrefix}-text`);
  }, [props.suggestion]);
  const chosenTools = tools ?? (capabilities ? defaultTools(capabilities.tools) : null);

  function check(): CreateTurn | null {
    setProblemError(null);
    setKnobError(null);
    const text = problem.trim();
    if (!text) {
      setProblemError(t("editor.empty"));
      focus(`${idPrefix}-text`);
      return null;
    }
    if (maxChars !== null && [...problem].length > maxChars) {
      setProblemError(
        t("editor.tooLong", { n: formatNumber(lang, [...problem].length), max: formatNumber(lang, maxChars) }),
      );
      focus(`${idPrefix}-text`);
      return null;
    }
    const knobCheck = collectKnobs(knobs, knobValues, t);
    if (!knobCheck.ok) {
      setKnobError({ key: knobCheck.key, message: knobCheck.message });
      const options = form.current?.querySelector<HTMLDetailsElement>("details.options");
      if (options) options.open = true;
      focus(`${idPrefix}-knob-${knobCheck.key}`);
      return null;
    }
    const body: CreateTurn = { problem, language };
    if (props.sessionId) body.session_id = props.sessionId;
    // Untouched toggles send nothing: the server's defaults apply, as they do for any client.
    if (tools !== null && capabilities) body.tools = [...tools];
    if (Object.keys(knobCheck.config).length > 0) body.config = knobCheck.config;
    if (picked.size > 0) body.knowledge_bases = [...picked];
    return body;
  }

  async function submit(event?: Event) {
    event?.preventDefault();
    if (busy || props.waitFor) return;
    setServerError(null);
    const body = check();
    if (!body) return;
    setBusy(true);
    try {
      const uploads = { files, images: images.images };
      const created =
        files.length + images.images.length > 0
          ? await api.createTurnWithFiles(body, uploads, (done, total) => setSent(total > 0 ? Math.round((done / total) * 100) : 0))
          : await api.createTurn(body);
      setProblem("");
      setFiles([]);
      images.clear();
      props.onCreated(created);
    } catch (failure) {
      setServerError(failure);
    } finally {
      setBusy(false);
      setSent(null);
    }
  }

  function pick(ids: Set<string>) {
    setPicked(ids);
    writePicked([...ids]);
  }

  function onKeyDown(event: KeyboardEvent) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      void submit();
    }
  }

  const count = [...problem].length;
  const tooLong = maxChars !== null && count > maxChars;

  return (
    <form ref={form} class="problem-form card" onSubmit={submit} noValidate>
      <div class="editor-grid">
        <div
          class={images.editor.dragging ? "editor dragging" : "editor"}
          onDragOver={images.editor.onDragOver}
          onDragLeave={images.editor.onDragLeave}
          onDrop={images.editor.onDrop}
          data-drop-hint={t("images.drop")}
        >
          <label class="field-label" for={`${idPrefix}-text`}>
            {t("editor.label")}
          </label>
          <textarea
            id={`${idPrefix}-text`}
            class="input textarea"
            data-testid="problem"
            rows={followUp ? 4 : 7}
            placeholder={t("editor.placeholder")}
            value={problem}
            aria-invalid={problemError ? true : undefined}
            aria-describedby={`${idPrefix}-count${problemError ? ` ${idPrefix}-problem-error` : ""}`}
            onInput={(event) => {
              setProblem((event.currentTarget as HTMLTextAreaElement).value);
              if (problemError) setProblemError(null);
            }}
            onKeyDown={onKeyDown}
            onPaste={images.editor.onPaste}
          />
          <div class="editor-meta">
            <span id={`${idPrefix}-count`} class={tooLong ? "count over" : "count"}>
              {maxChars !== null
                ? t("editor.count", { n: formatNumber(lang, count), max: formatNumber(lang, maxChars) })
                : t("editor.countNoMax", { n: formatNumber(lang, count) })}
            </span>
            <kbd class="shortcut">{t("editor.shortcut", { key: MAC ? "⌘" : "Ctrl" })}</kbd>
          </div>
          {problemError && <FormError text={problemError} id={`${idPrefix}-problem-error`} />}
          <ImagePicker idPrefix={idPrefix} state={images} disabled={busy} />
        </div>
        <section class="preview" aria-label={t("editor.preview")}>
          <h2 class="field-label">{t("editor.preview")}</h2>
          {preview.trim() ? (
            <Markdown class="preview-body" text={preview} />
          ) : (
            <p class="muted preview-body">{t("editor.previewEmpty")}</p>
          )}
        </section>
      </div>

      <MaterialPicker idPrefix={idPrefix} picked={picked} onPick={pick} files={files} onFiles={setFiles} disabled={busy} />

      <details class="options">
        <summary>{t("editor.options")}</summary>
        <div class="options-body">
          {caps.status === "error" ? (
            <p class="muted">{t("editor.toolsUnavailable")}</p>
          ) : (
            capabilities && (
              <ToolToggles
                idPrefix={idPrefix}
                tools={capabilities.tools}
                chosen={chosenTools ?? new Set()}
                onChange={setTools}
              />
            )
          )}
          {knobs.length > 0 && (
            <KnobFields
              idPrefix={idPrefix}
              knobs={knobs}
              inForce={valueOf(settings)?.solve ?? {}}
              values={knobValues}
              invalidKey={knobError?.key ?? null}
              onChange={(key, value) => {
                setKnobValues({ ...knobValues, [key]: value });
                if (knobError?.key === key) setKnobError(null);
              }}
            />
          )}
        </div>
      </details>
      {knobError && <FormError text={knobError.message} />}
      {serverError !== null && (
        <p class="message error" role="alert" data-testid="error">
          {errorText(serverError, t)}
        </p>
      )}

      <div class="form-actions">
        <label class="inline-field">
          <span>{t("editor.language")}</span>
          <select
            class="select"
            value={language}
            onChange={(event) => setLanguage((event.currentTarget as HTMLSelectElement).value)}
          >
            <option value="en">{t("language.en")}</option>
            <option value="zh">{t("language.zh")}</option>
          </select>
        </label>
        {props.waitFor && (
          <p class="muted small" data-testid="followup-wait" role="status">
            {props.waitFor}
          </p>
        )}
        <button class="button primary" type="submit" data-testid="submit" disabled={busy || !!props.waitFor}>
          {busy && sent !== null ? t("material.sending", { pct: sent }) : busy ? t("editor.sending") : followUp ? t("editor.submitFollowup") : t("editor.submit")}
        </button>
      </div>
    </form>
  );
}
