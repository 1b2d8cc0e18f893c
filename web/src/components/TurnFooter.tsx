// How the turn ended, in words, with what it cost: rounds, tokens, time, money if priced.
import { useCapabilities, valueOf } from "../capabilities";
import { costOf, formatDuration, formatMoney, formatNumber } from "../format";
import { stopReasonText, useI18n } from "../i18n";
import type { TurnState } from "../state/view";

export function TurnFooter(props: { state: TurnState }) {
  const { t, lang } = useI18n();
  const { caps } = useCapabilities();
  const finished = props.state.finished;
  if (!finished) return null;
  const price = valueOf(caps)?.price ?? null;
  const good = finished.stopReason.startsWith("answered");
  return (
    <footer class="turn-footer" data-testid="footer">
      <span class={good ? "stop-reason good" : "stop-reason"} data-stop-reason={finished.stopReason}>
        {stopReasonText(t, finished.stopReason)}
      </span>
      <span>{t("footer.rounds", { n: finished.rounds })}</span>
      <span>
        {t("footer.tokens", {
          in: formatNumber(lang, finished.usage.prompt_tokens),
          out: formatNumber(lang, finished.usage.completion_tokens),
        })}
        {finished.usage.estimated && ` ${t("footer.estimated")}`}
      </span>
      <span>{formatDuration(lang, finished.elapsedMs)}</span>
      {price && (
        <span>{t("footer.cost", { cost: formatMoney(lang, costOf(finished.usage, price), price.currency) })}</span>
      )}
    </footer>
  );
}
