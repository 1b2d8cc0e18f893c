// The playbook (the solve system prompt) in force per language: shown to everyone, edited and
// reset to the built-in one by an admin. The server checks and caps it; the next turn in that
// language uses it.
import { useEffect, useState } from "preact/hooks";
import { api } from "../api";
import { settings as settingsStore } from "../capabilities";
import { ErrorMessage } from "./ErrorMessage";
import { useI18n, type Key } from "../i18n";
import type { Language, PlaybookChange, PlaybookView, SettingsView } from "../protocol";

/** The setting that applies to every language (a reset of it resets both). */
const SHARED_SETTING = "prompts.solve.system";

export function Playbooks(props: { view: SettingsView }) {
  const { t } = useI18n();
  const { prompts, writable } = props.view;
  return (
    <section class="card playbooks" aria-labelledby="playbooks-title">
      <h2 id="playbooks-title" class="section-title">
        {t("playbook.heading")}
      </h2>
      <p class="muted small">{t("playbook.hint")}</p>
      {prompts.playbooks.map((playbook) => (
        <PlaybookField key={playbook.language} playbook={playbook} writable={writable} maxBytes={prompts.max_bytes} />
      ))}
      {prompts.overridden.some((o) => o.name !== "playbook") && (
        <>
          <h3 class="field-label">{t("playbook.overridden")}</h3>
          <ul class="overridden-texts">
            {prompts.overridden
              .filter((o) => o.name !== "playbook")
              .map((o) => (
                <li key={`${o.language}-${o.name}`}>
                  <code>{o.name}</code> <span class="pill">{o.language}</span>{" "}
                  <span class="muted small">{o.from}</span>
                </li>
              ))}
          </ul>
        </>
      )}
    </section>
  );
}

function languageName(language: Language): Key {
  return language === "zh" ? "playbook.zh" : "playbook.en";
}

function PlaybookField(props: { playbook: PlaybookView; writable: boolean; maxBytes: number }) {
  const { t } = useI18n();
  const { playbook, writable, maxBytes } = props;
  const [draft, setDraft] = useState(playbook.text);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [outcome, setOutcome] = useState<{ text: string; warnings: string[] } | null>(null);
  useEffect(() => setDraft(playbook.text), [playbook.text]);
  const id = `playbook-${playbook.language}`;
  const tooLarge = new TextEncoder().encode(draft).length > maxBytes;

  async function send(change: PlaybookChange, done: string) {
    setBusy(true);
    setError(null);
    setOutcome(null);
    try {
      const saved = await api.putSettings({ solve: {}, playbooks: [change] });
      settingsStore.set({ status: "ready", value: saved });
      setOutcome({ text: done, warnings: saved.warnings ?? [] });
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  const resetsEvery = playbook.setting === SHARED_SETTING;
  return (
    <div class="field playbook" data-testid={id}>
      <label class="field-label" for={id}>
        {t(languageName(playbook.language))}
      </label>
      <p class="muted small">{playbook.from ? t("playbook.from", { from: playbook.from }) : t("playbook.builtin")}</p>
      <textarea
        id={id}
        class="input textarea"
        rows={12}
        readOnly={!writable}
        value={draft}
        onInput={(event) => setDraft((event.currentTarget as HTMLTextAreaElement).value)}
      />
      {tooLarge && <p class="warn-text small">{t("playbook.tooLarge", { max: maxBytes })}</p>}
      {playbook.from && !playbook.setting && <p class="muted small">{t("playbook.fromFile")}</p>}
      {error !== null && <ErrorMessage error={error} />}
      {outcome && (
        <div class={outcome.warnings.length > 0 ? "message warning" : "message ok"} role="status">
          <p>{outcome.text}</p>
          {outcome.warnings.map((w, i) => (
            <p key={i}>{w}</p>
          ))}
        </div>
      )}
      {writable && (
        <div class="form-actions">
          <button
            type="button"
            class="button primary"
            disabled={busy || tooLarge || draft === playbook.text}
            onClick={() => send({ language: playbook.language, system: draft }, t("playbook.saved"))}
          >
            {t("playbook.save")}
          </button>
          <button
            type="button"
            class="button"
            disabled={busy || !playbook.setting}
            onClick={() =>
              send({ language: resetsEvery ? null : playbook.language, system: null }, t("playbook.resetDone"))
            }
          >
            {resetsEvery ? t("playbook.resetEvery") : t("playbook.reset")}
          </button>
        </div>
      )}
    </div>
  );
}
