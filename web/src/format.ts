// Numbers, durations, dates and money in the interface's language.
import type { Lang } from "./i18n";
import type { PriceView, Usage } from "./protocol";

function locale(lang: Lang): string {
  return lang === "zh" ? "zh-CN" : "en";
}

export function formatNumber(lang: Lang, n: number): string {
  return new Intl.NumberFormat(locale(lang)).format(n);
}

export function formatDuration(lang: Lang, ms: number): string {
  const zh = lang === "zh";
  if (ms < 1000) return zh ? `${Math.max(0, Math.round(ms))} 毫秒` : `${Math.max(0, Math.round(ms))} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) {
    const s = seconds < 10 ? seconds.toFixed(1) : Math.round(seconds).toString();
    return zh ? `${s} 秒` : `${s} s`;
  }
  const minutes = Math.floor(seconds / 60);
  const rest = Math.round(seconds - minutes * 60);
  return zh ? `${minutes} 分 ${rest} 秒` : `${minutes} min ${rest} s`;
}

export function formatDate(lang: Lang, ms: number): string {
  return new Intl.DateTimeFormat(locale(lang), { dateStyle: "medium", timeStyle: "short" }).format(new Date(ms));
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function costOf(usage: Usage, price: PriceView): number {
  return (usage.prompt_tokens * price.input_per_mtok + usage.completion_tokens * price.output_per_mtok) / 1_000_000;
}

export function formatMoney(lang: Lang, amount: number, currency: string): string {
  const digits = amount < 0.01 ? 4 : 2;
  try {
    return new Intl.NumberFormat(locale(lang), {
      style: "currency",
      currency,
      minimumFractionDigits: digits,
      maximumFractionDigits: digits,
    }).format(amount);
  } catch {
    // Not an ISO currency code: the number and the name as the settings give it.
    return `${amount.toFixed(digits)} ${currency}`;
  }
}

/** The first non-empty line, for titles. */
export function firstLine(text: string): string {
  return text.split("\n").map((line) => line.trim()).find((line) => line.length > 0) ?? "";
}
