// Checking a knob's value before it is sent: the server clamps, but a student should learn
// about a mistake from the form, not from a silently changed limit.
import { formatNumber } from "./format";
import type { Lang, Translate } from "./i18n";
import type { ClampedValue, KnobView } from "./protocol";

export type KnobCheck = { ok: true; value: number | null } | { ok: false; message: string };

/** An empty field means "the value in force" (`null`). */
export function checkKnob(knob: KnobView, raw: string, t: Translate): KnobCheck {
  const text = raw.trim();
  if (text === "") return { ok: true, value: null };
  const value = Number(text);
  if (!Number.isFinite(value)) return { ok: false, message: t("knob.notNumber", { key: knob.key }) };
  if (knob.integer && !Number.isInteger(value)) return { ok: false, message: t("knob.notInteger", { key: knob.key }) };
  if (value < knob.min || value > knob.max) {
    return { ok: false, message: t("knob.outOfRange", { key: knob.key, min: knob.min, max: knob.max }) };
  }
  return { ok: true, value };
}

/** Every filled-in knob as a config object, or the first problem found. */
export function collectKnobs(
  knobs: KnobView[],
  values: Record<string, string>,
  t: Translate,
): { ok: true; config: Record<string, number> } | { ok: false; key: string; message: string } {
  const config: Record<string, number> = {};
  for (const knob of knobs) {
    const check = checkKnob(knob, values[knob.key] ?? "", t);
    if (!check.ok) return { ok: false, key: knob.key, message: check.message };
    if (check.value !== null) config[knob.key] = check.value;
  }
  return { ok: true, config };
}

/** A value the server clamped on a settings change, in words: asked, applied, the range. */
export function describeClamp(clamp: ClampedValue, t: Translate, lang: Lang): string {
  const number = Number(clamp.asked);
  return t("settings.clamped", {
    asked: Number.isFinite(number) ? formatNumber(lang, number) : clamp.asked,
    applied: formatNumber(lang, clamp.applied),
    min: formatNumber(lang, clamp.min),
    max: formatNumber(lang, clamp.max),
  });
}
