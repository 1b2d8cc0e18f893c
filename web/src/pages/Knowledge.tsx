// Knowledge bases: the list (create, open, delete) and one KB's page (upload with progress,
// each document's status polled while any is still being read, its error, remove).
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { useCapabilities, valueOf } from "../capabilities";
import { ErrorMessage, errorText, FormError } from "../components/ErrorMessage";
import { Link } from "../components/Link";
import { formatBytes, formatDate } from "../format";
import { useI18n, type Translate } from "../i18n";
import {
  anyInProgress,
  checkUpload,
  cleanKbName,
  ingestFraction,
  knowledgeInfo,
  mergeDocuments,
  pagesOf,
  pollDelayMs,
  statusLine,
  type DocumentView,
  type KbView,
  type SearchHit,
  type UploadCheck,
} from "../kb";
import { navigate } from "../router";
import { useTitle } from "../title";

function kbHref(kb: KbView): string {
  return `/knowledge/${encodeURIComponent(kb.id)}`;
}

export function kbCounts(t: Translate, kb: KbView): string {
  if (kb.documents === 0) return t("kb.countsNone");
  const parts = [kb.documents === 1 ? t("kb.countsOne") : t("kb.counts", { n: kb.documents })];
  if (kb.ready !== kb.documents) parts.push(t("kb.countReady", { n: kb.ready }));
  if (kb.failed > 0) parts.push(t("kb.countFailed", { n: kb.failed }));
  return parts.join(" · ");
}

function Unavailable() {
  const { t } = useI18n();
  const { caps } = useCapabilities();
  const info = knowledgeInfo(valueOf(caps));
  if (!info || info.available) return null;
  return <p class="message warning">{t("kb.unavailable")}</p>;
}

// --- the list ----------------------------------------------------------------------------------

export function KnowledgePage() {
  const { t } = useI18n();
  const [kbs, setKbs] = useState<KbView[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [confirming, setConfirming] = useState<string | null>(null);
  const [notice, setNotice] = useState("");
  useTitle(t("kb.title"));

  async function load() {
    setError(null);
    try {
      setKbs((await api.knowledgeBases()).knowledge_bases);
    } catch (failure) {
      setError(failure);
    }
  }

  useEffect(() => {
    void load();
  }, []);

  async function remove(kb: KbView) {
    setError(null);
    try {
      await api.deleteKnowledgeBase(kb.id);
      setKbs((list) => (list ?? []).filter((k) => k.id !== kb.id));
      setNotice(t("kb.deleted"));
    } catch (failure) {
      setError(failure);
    } finally {
      setConfirming(null);
    }
  }

  return (
    <section class="knowledge" aria-labelledby="kb-title">
      <h1 id="kb-title" class="page-title">
        {t("kb.title")}
      </h1>
      <p class="intro muted">{t("kb.intro")}</p>
      <Unavailable />
      <CreateForm onCreated={(kb) => navigate(kbHref(kb))} />
      {error !== null && <ErrorMessage error={error} onRetry={() => void load()} />}
      <p class="sr-only" role="status">
        {notice}
      </p>
      {kbs === null && error === null && <p class="muted">{t("common.loading")}</p>}
      {kbs !== null && (
        <ul class="kb-list" data-testid="kb-list">
          {kbs.length === 0 && <li class="kb-empty muted">{t("kb.empty")}</li>}
          {kbs.map((kb) => (
            <KbItem
              key={kb.id}
              kb={kb}
              confirming={confirming === kb.id}
              onAskDelete={() => setConfirming(kb.id)}
              onCancelDelete={() => setConfirming(null)}
              onDelete={() => void remove(kb)}
            />
          ))}
        </ul>
      )}
    </section>
  );
}

function CreateForm(props: { onCreated: (kb: KbView) => void }) {
  const { t } = useI18n();
  const [name, setName] = useState("");
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(event: Event) {
    event.preventDefault();
    if (busy) return;
    const clean = cleanKbName(name);
    if (!clean) {
      setProblem(t("kb.nameEmpty"));
      document.getElementById("kb-new-name")?.focus();
      return;
    }
    setProblem(null);
    setBusy(true);
    try {
      const kb = await api.createKnowledgeBase(clean);
      setName("");
      props.onCreated(kb);
    } catch (failure) {
      setProblem(errorText(failure, t));
    } finally {
      setBusy(false);
    }
  }

  return (
    <form class="kb-create card" onSubmit={submit} noValidate>
      <label class="field-label" for="kb-new-name">
        {t("kb.newLabel")}
      </label>
      <div class="kb-create-row">
        <input
          id="kb-new-name"
          class="input"
          data-testid="kb-create-name"
          value={name}
          maxLength={120}
          placeholder={t("kb.newPlaceholder")}
          aria-invalid={problem ? true : undefined}
          aria-describedby={problem ? "kb-new-error" : undefined}
          onInput={(event) => {
            setName((event.currentTarget as HTMLInputElement).value);
            if (problem) setProblem(null);
          }}
        />
        <button class="button primary" type="submit" data-testid="kb-create" disabled={busy}>
          {busy ? t("kb.creating") : t("kb.create")}
        </button>
      </div>
      {problem && <FormError id="kb-new-error" text={problem} />}
    </form>
  );
}

function KbItem(props: {
  kb: KbView;
  confirming: boolean;
  onAskDelete: () => void;
  onCancelDelete: () => void;
  onDelete: () => void;
}) {
  const { t, lang } = useI18n();
  const { kb } = props;
  const keep = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (props.confirming) keep.current?.focus();
  }, [props.confirming]);
  return (
    <li class="kb-item" data-testid="kb-item" data-kb-id={kb.id} data-kb-name={kb.name}>
      <div class="kb-item-main">
        <Link href={kbHref(kb)} class="kb-item-name">
          {kb.name}
        </Link>
        <p class="kb-item-meta muted small">
          <span>{kbCounts(t, kb)}</span>
          <time dateTime={new Date(kb.updated_at).toISOString()}>{formatDate(lang, kb.updated_at)}</time>
        </p>
      </div>
      {props.confirming ? (
        <div class="confirm" role="group" aria-label={`${t("kb.delete")}: ${kb.name}`}>
          <span class="confirm-text">{t("kb.confirmDelete")}</span>
          <button type="button" class="button danger small" data-testid="kb-confirm-delete" onClick={props.onDelete}>
            {t("kb.confirmYes")}
          </button>
          <button ref={keep} type="button" class="button subtle small" onClick={props.onCancelDelete}>
            {t("kb.confirmNo")}
          </button>
        </div>
      ) : (
        <div class="kb-item-actions">
          <Link href={kbHref(kb)} class="button subtle small">
            {t("kb.open")}
          </Link>
          <button
            type="button"
            class="button subtle small danger-text"
            data-testid="kb-delete"
            aria-label={`${t("kb.delete")}: ${kb.name}`}
            onClick={props.onAskDelete}
          >
            {t("kb.delete")}
          </button>
        </div>
      )}
    </li>
  );
}

// --- one knowledge base ------------------------------------------------------------------------

type Loaded = { status: "loading" } | { status: "ready"; kb: KbView; documents: DocumentView[] } | { status: "missing" } | { status: "error"; error: unknown };

type Upload = { names: string[]; sent: number; total: number };

/** The KB and its documents, read again while any document is still being read. */
function useKnowledgeBase(id: string) {
  const [loaded, setLoaded] = useState<Loaded>({ status: "loading" });
  const polls = useRef(0);

  async function load() {
    try {
      const detail = await api.knowledgeBase(id);
      setLoaded((now) => ({
        status: "ready",
        kb: detail.kb,
        documents: mergeDocuments(now.status === "ready" ? now.documents : [], detail.documents),
      }));
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) setLoaded({ status: "missing" });
      else setLoaded((now) => (now.status === "ready" ? now : { status: "error", error }));
    }
  }

  useEffect(() => {
    void load();
  }, [id]);

  // Each finished poll bumps `tick`, so the next one is scheduled even when nothing changed.
  const [tick, setTick] = useState(0);
  const busy = loaded.status === "ready" && anyInProgress(loaded.documents);
  useEffect(() => {
    if (!busy) {
      polls.current = 0;
      return;
    }
    let live = true;
    const timer = setTimeout(() => {
      polls.current += 1;
      void load().then(() => live && setTick((n) => n + 1));
    }, pollDelayMs(polls.current));
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [busy, tick]);

  return { loaded, setLoaded, reload: load };
}

export function KnowledgeBasePage(props: { id: string }) {
  const { t } = useI18n();
  const { loaded, setLoaded, reload } = useKnowledgeBase(props.id);
  const [notice, setNotice] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [confirmingKb, setConfirmingKb] = useState(false);
  useTitle(loaded.status === "ready" ? loaded.kb.name : t("kb.title"));

  if (loaded.status === "loading") return <p class="muted">{t("common.loading")}</p>;
  if (loaded.status === "missing") {
    return (
      <section class="card narrow" data-testid="not-found">
        <h1>{t("session.notFound")}</h1>
        <p class="muted">{t("kb.notFound")}</p>
        <Link href="/knowledge" class="button">
          {t("kb.back")}
        </Link>
      </section>
    );
  }
  if (loaded.status === "error") return <ErrorMessage error={loaded.error} onRetry={() => void reload()} />;

  const { kb, documents } = loaded;

  function added(docs: DocumentView[]) {
    const ids = new Set(docs.map((d) => d.id));
    setLoaded((now) => (now.status === "ready" ? { ...now, documents: [...now.documents.filter((d) => !ids.has(d.id)), ...docs] } : now));
    void reload();
  }

  async function removeDocument(doc: DocumentView) {
    setError(null);
    try {
      await api.deleteDocument(kb.id, doc.id);
      setLoaded((now) => (now.status === "ready" ? { ...now, documents: now.documents.filter((d) => d.id !== doc.id) } : now));
      setNotice(t("kb.docDeleted", { name: doc.name }));
      void reload();
    } catch (failure) {
      setError(failure);
    }
  }

  async function removeKb() {
    setError(null);
    try {
      await api.deleteKnowledgeBase(kb.id);
      navigate("/knowledge");
    } catch (failure) {
      setError(failure);
      setConfirmingKb(false);
    }
  }

  return (
    <section class="knowledge kb-page" aria-labelledby="kb-name" data-testid="kb-page">
      <Link href="/knowledge" class="back-link small">
        ← {t("kb.back")}
      </Link>
      <h1 id="kb-name" class="page-title">
        {kb.name}
      </h1>
      <p class="muted small kb-page-meta">{kbCounts(t, { ...kb, ...countsOf(documents) })}</p>
      <Unavailable />
      <UploadBox kbId={kb.id} onAdded={added} />
      {error !== null && <ErrorMessage error={error} />}
      <p class="sr-only" role="status">
        {notice}
      </p>
      <h2 class="section-title">{t("kb.documents")}</h2>
      <ul class="kb-documents" data-testid="kb-documents">
        {documents.length === 0 && <li class="kb-empty muted">{t("kb.noDocuments")}</li>}
        {documents.map((doc) => (
          <DocumentItem key={doc.id} doc={doc} onRemove={() => void removeDocument(doc)} />
        ))}
      </ul>
      {countsOf(documents).ready > 0 && <SearchBox kbId={kb.id} />}
      <div class="kb-danger">
        {confirmingKb ? (
          <div class="confirm" role="group" aria-label={`${t("kb.delete")}: ${kb.name}`}>
            <span class="confirm-text">{t("kb.confirmDelete")}</span>
            <button type="button" class="button danger small" data-testid="kb-confirm-delete" onClick={() => void removeKb()}>
              {t("kb.confirmYes")}
            </button>
            <button type="button" class="button subtle small" onClick={() => setConfirmingKb(false)}>
              {t("kb.confirmNo")}
            </button>
          </div>
        ) : (
          <button type="button" class="button subtle small danger-text" data-testid="kb-delete" onClick={() => setConfirmingKb(true)}>
            {t("kb.deleteThis")}
          </button>
        )}
      </div>
    </section>
  );
}

/** The counts as the page shows them now (the KB's own counts lag behind a poll). */
function countsOf(documents: DocumentView[]): Pick<KbView, "documents" | "ready" | "failed"> {
  return {
    documents: documents.length,
    ready: documents.filter((d) => d.status === "ready").length,
    failed: documents.filter((d) => d.status === "failed").length,
  };
}

function checkText(t: Translate, check: Exclude<UploadCheck, { ok: true }>): string {
  return check.reason === "too_many" ? t("kb.tooMany", { max: check.max }) : t("kb.tooBig", { name: check.name, mb: check.mb });
}

function UploadBox(props: { kbId: string; onAdded: (docs: DocumentView[]) => void }) {
  const { t, lang } = useI18n();
  const { caps } = useCapabilities();
  const maxMb = knowledgeInfo(valueOf(caps))?.max_upload_mb ?? null;
  const [upload, setUpload] = useState<Upload | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [over, setOver] = useState(false);
  const input = useRef<HTMLInputElement>(null);

  async function send(files: File[]) {
    if (files.length === 0 || upload) return;
    setProblem(null);
    const check = checkUpload(files, maxMb);
    if (!check.ok) {
      setProblem(checkText(t, check));
      return;
    }
    const names = files.map((f) => f.name);
    setUpload({ names, sent: 0, total: files.reduce((n, f) => n + f.size, 0) });
    try {
      const result = await api.uploadDocuments(props.kbId, files, (sent, total) => setUpload({ names, sent, total }));
      props.onAdded(result?.documents ?? []);
    } catch (failure) {
      setProblem(t("kb.uploadFailed", { reason: errorText(failure, t) }));
    } finally {
      setUpload(null);
      if (input.current) input.current.value = "";
    }
  }

  const pct = upload && upload.total > 0 ? Math.min(100, Math.round((upload.sent / upload.total) * 100)) : 0;
  return (
    <div
      class={over ? "kb-upload card over" : "kb-upload card"}
      data-testid="kb-upload"
      onDragOver={(event) => {
        event.preventDefault();
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(event) => {
        event.preventDefault();
        setOver(false);
        void send(Array.from(event.dataTransfer?.files ?? []));
      }}
    >
      <div class="kb-upload-row">
        <label class={upload ? "button primary disabled" : "button primary"} for="kb-file">
          {t("kb.addFiles")}
        </label>
        <input
          ref={input}
          id="kb-file"
          class="visually-hidden-input"
          type="file"
          multiple
          disabled={!!upload}
          data-testid="kb-file-input"
          accept=".pdf,.docx,.html,.htm,.md,.markdown,.txt,application/pdf,text/*"
          onChange={(event) => void send(Array.from((event.currentTarget as HTMLInputElement).files ?? []))}
        />
        <span class="muted small">
          {/* Chinese sentences follow each other without a space. */}
          <span class="drop-only">
            {t("kb.drop")}
            {lang === "zh" ? "" : " "}
          </span>
          {maxMb ? t("kb.dropHint", { mb: maxMb }) : t("kb.dropHintNoMax")}
        </span>
      </div>
      {upload && (
        <div class="kb-upload-progress" data-testid="kb-upload-progress" role="status">
          <span class="small">{t("kb.uploading", { files: upload.names.join(", "), pct })}</span>
          <progress class="bar" max={100} value={pct} />
        </div>
      )}
      {problem && (
        <p class="message error" role="alert" data-testid="kb-upload-error">
          {problem}
        </p>
      )}
    </div>
  );
}

function DocumentItem(props: { doc: DocumentView; onRemove: () => void }) {
  const { t, lang } = useI18n();
  const { doc } = props;
  const [confirming, setConfirming] = useState(false);
  const line = statusLine(doc);
  const { key, ...params } = line;
  const fraction = ingestFraction(doc);
  const meta = [doc.kind.toUpperCase(), formatBytes(doc.size)];
  const pages = pagesOf(doc);
  if (pages !== null) meta.push(pages === 1 ? t("kb.page") : t("kb.pages", { n: pages }));
  return (
    <li class={`kb-doc ${doc.status}`} data-testid="kb-document" data-status={doc.status} data-name={doc.name}>
      <div class="kb-doc-main">
        <span class="kb-doc-name">{doc.name}</span>
        <span class="kb-doc-meta muted small" title={formatDate(lang, doc.created_at)}>
          {meta.join(" · ")}
        </span>
      </div>
      <div class="kb-doc-state">
        <span class={`kb-status ${doc.status}`} data-testid="kb-doc-status">
          {t(key, params)}
        </span>
        {doc.status === "ingesting" && (
          <progress class="bar" max={1} value={fraction ?? undefined} aria-label={`${doc.name}: ${t(key, params)}`} />
        )}
      </div>
      <div class="kb-doc-actions">
        {confirming ? (
          <div class="confirm" role="group" aria-label={`${t("kb.docDelete")}: ${doc.name}`}>
            <span class="confirm-text">{t("kb.docConfirm")}</span>
            <button type="button" class="button danger small" data-testid="kb-doc-confirm-delete" onClick={props.onRemove}>
              {t("kb.docDelete")}
            </button>
            <button type="button" class="button subtle small" onClick={() => setConfirming(false)}>
              {t("kb.confirmNo")}
            </button>
          </div>
        ) : (
          <button
            type="button"
            class="button subtle small"
            data-testid="kb-doc-delete"
            aria-label={`${t("kb.docDelete")}: ${doc.name}`}
            onClick={() => setConfirming(true)}
          >
            {t("kb.docDelete")}
          </button>
        )}
      </div>
      {doc.error && (
        <p class="kb-doc-error message error" data-testid="kb-doc-error">
          {doc.error}
        </p>
      )}
    </li>
  );
}

/** A search over the KB, as `rag` would run it: a student checks that the notes were read. */
function SearchBox(props: { kbId: string }) {
  const { t } = useI18n();
  const [query, setQuery] = useState("");
  const [hits, setHits] = useState<SearchHit[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  async function submit(event: Event) {
    event.preventDefault();
    if (busy || !query.trim()) return;
    setBusy(true);
    setProblem(null);
    try {
      setHits((await api.searchKnowledgeBase(props.kbId, query.trim(), 5)).hits);
    } catch (failure) {
      setProblem(failure);
    } finally {
      setBusy(false);
    }
  }

  return (
    <section class="kb-search" aria-labelledby="kb-search-title">
      <h2 id="kb-search-title" class="section-title">
        {t("kb.search")}
      </h2>
      <form class="kb-create-row" onSubmit={submit} role="search">
        <input
          class="input"
          type="search"
          data-testid="kb-search-query"
          aria-label={t("kb.search")}
          placeholder={t("kb.searchPlaceholder")}
          value={query}
          onInput={(event) => setQuery((event.currentTarget as HTMLInputElement).value)}
        />
        <button class="button" type="submit" data-testid="kb-search" disabled={busy}>
          {t("kb.searchGo")}
        </button>
      </form>
      {problem !== null && <ErrorMessage error={problem} />}
      {hits !== null && hits.length === 0 && <p class="muted">{t("kb.searchNone")}</p>}
      {hits !== null && hits.length > 0 && (
        <ol class="source-list kb-hits">
          {hits.map((hit, i) => {
            const place = [hit.page != null ? t("sources.page", { n: hit.page }) : "", hit.section ?? ""].filter(Boolean).join(" · ");
            return (
              <li key={hit.chunk_id} class="source" data-testid="kb-search-hit">
                <span class="source-n">{i + 1}.</span>
                <div class="source-body">
                  <p class="source-head">
                    <span class="source-title">{hit.title}</span>
                    {place && <span class="source-place muted">{place}</span>}
                  </p>
                  <p class="source-excerpt muted small">{hit.text}</p>
                </div>
              </li>
            );
          })}
        </ol>
      )}
    </section>
  );
}
