// Knowledge bases as the UI sees them: the views the server sends, and the pure rules the
// Knowledge page follows (what a document's status means to a student, when to poll again).
import type { CapabilitiesView, DocumentView, DocumentsAccepted, KnowledgeView, Source } from "./protocol";

export type { DocumentStatus, DocumentView, KbDetail, KbList, KbView, SearchHit } from "./protocol";
export type Uploaded = DocumentsAccepted;

/** A cited source: title, page, section and the passage (`excerpt`) a hover card shows. */
export type CitedSource = Source;

/** Still on its way to `ready` or `failed`: the page polls while any document is. */
export function inProgress(doc: Pick<DocumentView, "status">): boolean {
  return doc.status === "queued" || doc.status === "ingesting";
}

export function anyInProgress(docs: Pick<DocumentView, "status">[]): boolean {
  return docs.some(inProgress);
}

/** How long to wait before asking again: quick at first, slower for a long ingest. */
export function pollDelayMs(pollsSoFar: number): number {
  return Math.min(500 + pollsSoFar * 250, 3000);
}

/**
 * How far along an ingest is, 0–1, or null when it cannot be told (queued, or the page count
 * is not known yet). A ready document is complete whatever its counters say.
 */
export function ingestFraction(doc: Pick<DocumentView, "status" | "pages_done" | "pages_total">): number | null {
  if (doc.status === "ready") return 1;
  if (doc.status !== "ingesting") return null;
  const total = doc.pages_total ?? 0;
  if (total <= 0) return null;
  return Math.max(0, Math.min(1, doc.pages_done / total));
}

/** What the status line of a document says, as an i18n key and its parameters. */
export type StatusLine =
  | { key: "kb.status.queued" }
  | { key: "kb.status.ingesting" }
  | { key: "kb.status.ingestingPages"; done: number; total: number }
  | { key: "kb.status.ready" }
  | { key: "kb.status.readyPage" }
  | { key: "kb.status.readyPages"; pages: number }
  | { key: "kb.status.failed" };

/**
 * A document's page count worth showing: a PDF's. Other kinds report their text as one "page",
 * which would read as "1 pages" of a Markdown file.
 */
export function pagesOf(doc: Pick<DocumentView, "kind" | "pages">): number | null {
  return doc.kind === "pdf" && doc.pages ? doc.pages : null;
}

export function statusLine(doc: Pick<DocumentView, "status" | "kind" | "pages" | "pages_done" | "pages_total">): StatusLine {
  switch (doc.status) {
    case "queued":
      return { key: "kb.status.queued" };
    case "ingesting": {
      const total = doc.pages_total ?? 0;
      return total > 0
        ? { key: "kb.status.ingestingPages", done: Math.min(doc.pages_done, total), total }
        : { key: "kb.status.ingesting" };
    }
    case "ready": {
      const pages = pagesOf(doc);
      if (pages === null) return { key: "kb.status.ready" };
      return pages === 1 ? { key: "kb.status.readyPage" } : { key: "kb.status.readyPages", pages };
    }
    case "failed":
      return { key: "kb.status.failed" };
  }
}

/**
 * Merge a fresh listing into what the page shows: documents the page has just uploaded but the
 * listing does not have yet (a poll that raced the upload) stay, after the listed ones.
 */
export function mergeDocuments(shown: DocumentView[], fresh: DocumentView[]): DocumentView[] {
  const ids = new Set(fresh.map((d) => d.id));
  return [...fresh, ...shown.filter((d) => !ids.has(d.id) && inProgress(d))];
}

/** Names a KB may have: what the server accepts is its business; the page only refuses blanks. */
export function cleanKbName(name: string): string {
  return name.trim().replace(/\s+/g, " ");
}

/** The short place of a source: "p. 12 · 3.2 Limits" (the page label given by the caller). */
export function sourcePlace(source: CitedSource, pageLabel: (page: number) => string): string {
  const parts: string[] = [];
  const host = webHost(source.url);
  if (host) parts.push(host);
  if (source.page != null) parts.push(pageLabel(source.page));
  if (source.section) parts.push(source.section);
  return parts.join(" · ");
}

/** The host of a web source's http(s) URL (what a reader checks first); none otherwise. */
export function webHost(url: string | null | undefined): string {
  if (!url || !/^https?:\/\//i.test(url)) return "";
  try {
    return new URL(url).host;
  } catch {
    return "";
  }
}

/** What the server says about knowledge bases (`capabilities.knowledge`; an older server: nothing). */
export type KnowledgeInfo = KnowledgeView;

export function knowledgeInfo(caps: CapabilitiesView | null): KnowledgeInfo | null {
  const info = (caps as { knowledge?: KnowledgeView | null } | null)?.knowledge;
  return info && typeof info.available === "boolean" ? info : null;
}

/** Files the page can refuse before sending them: more than the server takes at once, or too big. */
export type UploadCheck = { ok: true } | { ok: false; reason: "too_many"; max: number } | { ok: false; reason: "too_big"; name: string; mb: number };

export const MAX_FILES_PER_UPLOAD = 20;

export function checkUpload(files: { name: string; size: number }[], maxUploadMb: number | null | undefined): UploadCheck {
  if (files.length > MAX_FILES_PER_UPLOAD) return { ok: false, reason: "too_many", max: MAX_FILES_PER_UPLOAD };
  if (maxUploadMb && maxUploadMb > 0) {
    const big = files.find((f) => f.size > maxUploadMb * 1024 * 1024);
    if (big) return { ok: false, reason: "too_big", name: big.name, mb: maxUploadMb };
  }
  return { ok: true };
}
