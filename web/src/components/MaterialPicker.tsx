// What a turn may read: the user's knowledge bases (checkboxes) and files attached to this
// problem only. Hidden on a server without knowledge bases.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { useCapabilities, valueOf } from "../capabilities";
import { formatBytes } from "../format";
import { useI18n } from "../i18n";
import { knowledgeInfo, type KbView } from "../kb";
import { Link } from "./Link";

const PICKED_KEY = "deepsolve.kbs";

/** The KBs picked last time (a student solving a course's problems keeps its notes on). */
export function readPicked(): string[] {
  try {
    const value: unknown = JSON.parse(localStorage.getItem(PICKED_KEY) ?? "[]");
    return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
  } catch {
    return [];
  }
}

export function writePicked(ids: string[]): void {
  try {
    localStorage.setItem(PICKED_KEY, JSON.stringify(ids));
  } catch {
    // No storage: the pick lasts as long as the page.
  }
}

type Props = {
  idPrefix: string;
  picked: Set<string>;
  onPick: (ids: Set<string>) => void;
  files: File[];
  onFiles: (files: File[]) => void;
  disabled?: boolean;
};

export function MaterialPicker(props: Props) {
  const { t } = useI18n();
  const { caps } = useCapabilities();
  const info = knowledgeInfo(valueOf(caps));
  const [kbs, setKbs] = useState<KbView[] | null>(null);
  const [missing, setMissing] = useState(false);
  const input = useRef<HTMLInputElement>(null);

  useEffect(() => {
    let live = true;
    api.knowledgeBases().then(
      (list) => {
        if (!live) return;
        setKbs(list.knowledge_bases);
        // Picks remembered from before that no longer exist are dropped.
        const ids = new Set(list.knowledge_bases.map((kb) => kb.id));
        const kept = [...props.picked].filter((id) => ids.has(id));
        if (kept.length !== props.picked.size) props.onPick(new Set(kept));
      },
      (error) => live && setMissing(error instanceof ApiError && (error.status === 404 || error.status === 503)),
    );
    return () => {
      live = false;
    };
  }, []);

  if ((info && !info.available) || missing) return null;

  function toggle(id: string, on: boolean) {
    const next = new Set(props.picked);
    if (on) next.add(id);
    else next.delete(id);
    props.onPick(next);
  }

  function addFiles(list: FileList | null) {
    const chosen = Array.from(list ?? []);
    const names = new Set(props.files.map((f) => f.name));
    props.onFiles([...props.files, ...chosen.filter((f) => !names.has(f.name))]);
    if (input.current) input.current.value = "";
  }

  const fileInput = `${props.idPrefix}-attach`;
  return (
    <fieldset class="material" data-testid="kb-picker" disabled={props.disabled}>
      <legend class="field-label">{t("material.title")}</legend>
      <div class="material-body">
        <div class="material-kbs">
          <p class="muted small material-label">{t("material.kbs")}</p>
          {kbs === null ? (
            <p class="muted small">{t("common.loading")}</p>
          ) : kbs.length === 0 ? (
            <p class="muted small">
              {t("material.noKbs")} <Link href="/knowledge">{t("material.manage")}</Link>
            </p>
          ) : (
            <ul class="material-list">
              {kbs.map((kb) => {
                const id = `${props.idPrefix}-kb-${kb.id}`;
                return (
                  <li key={kb.id} class="toggle">
                    <input
                      id={id}
                      type="checkbox"
                      data-testid="kb-pick"
                      data-kb-name={kb.name}
                      checked={props.picked.has(kb.id)}
                      onChange={(event) => toggle(kb.id, (event.currentTarget as HTMLInputElement).checked)}
                    />
                    <label for={id}>
                      <span class="material-kb-name">{kb.name}</span>{" "}
                      <span class="muted small">{kb.ready === 0 ? t("kb.countsNone") : kb.ready === 1 ? t("material.kbDocsOne") : t("material.kbDocs", { n: kb.ready })}</span>
                    </label>
                  </li>
                );
              })}
            </ul>
          )}
        </div>
        <div class="material-files">
          <label class="button subtle small" for={fileInput}>
            {t("material.attach")}
          </label>
          <input
            ref={input}
            id={fileInput}
            class="visually-hidden-input"
            type="file"
            multiple
            data-testid="kb-attach-input"
            accept=".pdf,.docx,.html,.htm,.md,.markdown,.txt,application/pdf,text/*"
            onChange={(event) => addFiles((event.currentTarget as HTMLInputElement).files)}
          />
          <span class="muted small">{t("material.attachHint")}</span>
          {props.files.length > 0 && (
            <ul class="chips" data-testid="kb-attachments">
              {props.files.map((file) => (
                <li key={file.name} class="chip">
                  <span>
                    {file.name} <span class="muted">{formatBytes(file.size)}</span>
                  </span>
                  <button
                    type="button"
                    class="chip-remove"
                    aria-label={t("material.remove", { name: file.name })}
                    title={t("material.remove", { name: file.name })}
                    onClick={() => props.onFiles(props.files.filter((f) => f !== file))}
                  >
                    ×
                  </button>
                </li>
              ))}
            </ul>
          )}
        </div>
      </div>
    </fieldset>
  );
}
