// Stop a running turn; resume an interrupted one.
import { useState } from "preact/hooks";
import { api } from "../api";
import { useI18n } from "../i18n";
import type { TurnCreated } from "../protocol";
import { ErrorMessage } from "./ErrorMessage";

type Props = {
  turnId: string;
  running: boolean;
  interrupted: boolean;
  onResumed: (created: TurnCreated) => void;
};

export function TurnControls(props: Props) {
  const { t } = useI18n();
  const [busy, setBusy] = useState<"cancel" | "resume" | null>(null);
  const [error, setError] = useState<unknown>(null);

  async function act(kind: "cancel" | "resume") {
    setBusy(kind);
    setError(null);
    try {
      if (kind === "cancel") await api.cancelTurn(props.turnId);
      else props.onResumed(await api.resumeTurn(props.turnId));
    } catch (failure) {
      setError(failure);
      setBusy(null);
    }
  }

  if (!props.running && !props.interrupted) return null;
  return (
    <div class="turn-controls">
      {props.interrupted && <p class="message warning">{t("turn.interrupted")}</p>}
      {error !== null && <ErrorMessage error={error} />}
      {props.running && (
        <button
          type="button"
          class="button danger subtle"
          data-testid="cancel"
          disabled={busy === "cancel"}
          onClick={() => void act("cancel")}
        >
          {busy === "cancel" ? t("turn.cancelling") : t("turn.cancel")}
        </button>
      )}
      {props.interrupted && (
        <button
          type="button"
          class="button primary"
          data-testid="resume"
          disabled={busy === "resume"}
          onClick={() => void act("resume")}
        >
          {busy === "resume" ? t("turn.resuming") : t("turn.resume")}
        </button>
      )}
    </div>
  );
}
