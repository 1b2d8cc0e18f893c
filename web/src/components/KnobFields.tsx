// Numeric solve knobs as number fields that show their range. Empty means "the value in force".
import { formatNumber } from "../format";
import { knobHelp, useI18n } from "../i18n";
import type { KnobView } from "../protocol";

type Props = {
  idPrefix: string;
  knobs: KnobView[];
  /** The values in force, by key (shown as the placeholder). */
  inForce: Record<string, unknown>;
  values: Record<string, string>;
  invalidKey: string | null;
  onChange: (key: string, value: string) => void;
  legend?: string;
  readOnly?: boolean;
};

export function KnobFields(props: Props) {
  const { t, lang } = useI18n();
  return (
    <fieldset class="fieldset knobs">
      <legend>{props.legend ?? t("editor.knobs")}</legend>
      {!props.readOnly && props.legend === undefined && <p class="muted small">{t("editor.knobsHint")}</p>}
      <div class="knob-grid">
        {props.knobs.map((knob) => {
          const id = `${props.idPrefix}-knob-${knob.key}`;
          const inForce = props.inForce[knob.key];
          const range = t("knob.range", { min: formatNumber(lang, knob.min), max: formatNumber(lang, knob.max) });
          return (
            <div class="knob" key={knob.key}>
              <label for={id}>
                <code>{knob.key}</code>
              </label>
              <input
                id={id}
                name={knob.key}
                class="input number"
                type="number"
                inputMode={knob.integer ? "numeric" : "decimal"}
                step={knob.integer ? 1 : "any"}
                min={knob.min}
                max={knob.max}
                readOnly={props.readOnly}
                placeholder={inForce === undefined ? String(knob.default) : String(inForce)}
                value={props.values[knob.key] ?? ""}
                aria-invalid={props.invalidKey === knob.key ? true : undefined}
                aria-describedby={`${id}-help`}
                onInput={(event) => props.onChange(knob.key, (event.currentTarget as HTMLInputElement).value)}
              />
              <span id={`${id}-help`} class="muted small">
                {knobHelp(lang, knob)} · {range}
              </span>
            </div>
          );
        })}
      </div>
    </fieldset>
  );
}
