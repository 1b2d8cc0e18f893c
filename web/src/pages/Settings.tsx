// What the server runs with: the model, the sandbox, the tools, and the solve knobs (editable
// by an admin of a server with a settings file, read-only otherwise).
import { useEffect, useState } from "preact/hooks";
import { api } from "../api";
import { settings as settingsStore, useCapabilities, valueOf } from "../capabilities";
import { ErrorMessage, FormError } from "../components/ErrorMessage";
import { KnobFields } from "../components/KnobFields";
import { Playbooks } from "../components/Playbooks";
import { formatNumber } from "../format";
import { knobHelp, useI18n } from "../i18n";
import { checkKnob, describeClamp } from "../knobs";
import type { CapabilitiesView, ClampedValue, SettingsView } from "../protocol";
import { useTitle } from "../title";

export function SettingsPage() {
  const { t } = useI18n();
  const { caps, settings } = useCapabilities();
  useTitle(t("settings.title"));
  const capabilities = valueOf(caps);
  const solve = valueOf(settings);
  return (
    <section class="settings" aria-labelledby="settings-title">
      <h1 id="settings-title" class="page-title">
        {t("settings.title")}
      </h1>
      {caps.status === "error" && <p class="muted">{t("settings.capsMissing")}</p>}
      {capabilities && <ServerFacts caps={capabilities} />}
      {settings.status === "error" && <ErrorMessage error={settings.error} />}
      {(settings.status === "loading" || settings.status === "idle") && <p class="muted">{t("common.loading")}</p>}
      {solve && <SolveSettings view={solve} />}
      {solve && <Playbooks view={solve} />}
    </section>
  );
}

function ServerFacts(props: { caps: CapabilitiesView }) {
  const { t, lang } = useI18n();
  const { caps } = props;
  return (
    <div class="card facts">
      <dl class="fact-list">
        <dt>{t("settings.model")}</dt>
        <dd>
          <code>{caps.model}</code>
        </dd>
        <dt>{t("settings.sandbox")}</dt>
        <dd>
          <span class={caps.sandbox.available ? "ok-text" : "warn-text"}>
            {caps.sandbox.available
              ? t("settings.sandboxOk", { backend: caps.sandbox.backend ?? "—" })
              : t("settings.sandboxMissing")}
          </span>
          {caps.sandbox.detail && <span class="muted small block">{caps.sandbox.detail}</span>}
        </dd>
        {caps.price && (
          <>
            <dt>{t("settings.price")}</dt>
            <dd>
              {t("settings.pricePer", {
                input: formatNumber(lang, caps.price.input_per_mtok),
                output: formatNumber(lang, caps.price.output_per_mtok),
                currency: caps.price.currency,
              })}
            </dd>
          </>
        )}
      </dl>
      <h2 class="section-title">{t("settings.tools")}</h2>
      <ul class="tool-facts">
        {caps.tools.map((tool) => (
          <li key={tool.name} class={tool.available ? "tool-fact" : "tool-fact unavailable"}>
            <code>{tool.name}</code>
            <span class={tool.available ? "ok-text small" : "warn-text small"}>
              {tool.available ? t("settings.toolAvailable") : t("editor.unavailable", { reason: tool.reason ?? "" })}
            </span>
            {tool.default && tool.available && <span class="pill">{t("settings.toolDefault")}</span>}
            <span class="muted small block">{tool.description}</span>
          </li>
        ))}
      </ul>
    </div>
  );
}

function asText(value: unknown): string {
  return value === undefined || value === null ? "" : String(value);
}

function SolveSettings(props: { view: SettingsView }) {
  const { t, lang } = useI18n();
  const { view } = props;
  const initialValues = () => Object.fromEntries(view.knobs.map((k) => [k.key, asText(view.solve[k.key])]));
  const initialFlags = () => Object.fromEntries(view.flags.map((f) => [f.key, view.solve[f.key] === true]));
  const [values, setValues] = useState<Record<string, string>>(initialValues);
  const [flags, setFlags] = useState<Record<string, boolean>>(initialFlags);
  const [invalid, setInvalid] = useState<{ key: string; message: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [outcome, setOutcome] = useState<{ text: string; clamped: ClampedValue[] } | null>(null);

  useEffect(() => {
    setValues(initialValues());
    setFlags(initialFlags());
  }, [view]);

  function changes(): Record<string, unknown> | null {
    const solve: Record<string, unknown> = {};
    for (const knob of view.knobs) {
      const raw = values[knob.key] ?? "";
      if (raw.trim() === asText(view.solve[knob.key])) continue;
      const check = checkKnob(knob, raw, t);
      if (!check.ok) {
        setInvalid({ key: knob.key, message: check.message });
        return null;
      }
      if (check.value !== null) solve[knob.key] = check.value;
    }
    for (const flag of view.flags) if (flags[flag.key] !== (view.solve[flag.key] === true)) solve[flag.key] = flags[flag.key];
    return solve;
  }

  async function save(event: Event) {
    event.preventDefault();
    setInvalid(null);
    setError(null);
    setOutcome(null);
    const solve = changes();
    if (!solve) return;
    if (Object.keys(solve).length === 0) {
      setOutcome({ text: t("settings.unchanged"), clamped: [] });
      return;
    }
    setBusy(true);
    try {
      const saved = await api.putSettings({ solve });
      settingsStore.set({ status: "ready", value: saved });
      setOutcome({ text: t("settings.saved"), clamped: saved.clamped ?? [] });
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form class="card solve-settings" onSubmit={save} noValidate>
      {!view.writable && <p class="message info">{t("settings.readOnly")}</p>}
      <KnobFields
        idPrefix="settings"
        legend={t("settings.knobs")}
        knobs={view.knobs}
        inForce={view.solve}
        values={values}
        invalidKey={invalid?.key ?? null}
        readOnly={!view.writable}
        onChange={(key, value) => setValues({ ...values, [key]: value })}
      />
      {view.flags.length > 0 && (
        <fieldset class="fieldset">
          <legend>{t("settings.flags")}</legend>
          <ul class="toggle-list">
            {view.flags.map((flag) => (
              <li key={flag.key} class="toggle">
                <input
                  id={`settings-flag-${flag.key}`}
                  type="checkbox"
                  checked={flags[flag.key] ?? false}
                  disabled={!view.writable}
                  onChange={(event) => setFlags({ ...flags, [flag.key]: (event.currentTarget as HTMLInputElement).checked })}
                />
                <label for={`settings-flag-${flag.key}`}>
                  <code>{flag.key}</code>
                  <span class="muted small">{knobHelp(lang, flag)}</span>
                </label>
              </li>
            ))}
          </ul>
        </fieldset>
      )}
      {invalid && <FormError text={invalid.message} />}
      {error !== null && <ErrorMessage error={error} />}
      {outcome && (
        <div class={outcome.clamped.length > 0 ? "message warning" : "message ok"} role="status">
          <p>{outcome.text}</p>
          {outcome.clamped.length > 0 && (
            <>
              <p>{t("settings.warnings")}</p>
              <ul class="clamped-list">
                {outcome.clamped.map((c) => (
                  <li key={c.key}>
                    <code>{c.key}</code>{" "}
                    {describeClamp(c, t, lang)}
                  </li>
                ))}
              </ul>
            </>
          )}
        </div>
      )}
      {view.writable && (
        <div class="form-actions">
          <button type="submit" class="button primary" disabled={busy}>
            {busy ? t("settings.saving") : t("settings.save")}
          </button>
        </div>
      )}
    </form>
  );
}
