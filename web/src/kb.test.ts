import { describe, expect, it } from "vitest";
import {
  anyInProgress,
  checkUpload,
  cleanKbName,
  ingestFraction,
  knowledgeInfo,
  MAX_FILES_PER_UPLOAD,
  mergeDocuments,
  pollDelayMs,
  sourcePlace,
  statusLine,
  type DocumentView,
} from "./kb";
import type { CapabilitiesView } from "./protocol";

function doc(over: Partial<DocumentView>): DocumentView {
  return { id: "doc_1", kb_id: "kb_1", name: "a.pdf", kind: "pdf", size: 10, status: "queued", pages_done: 0, created_at: 0, ...over };
}

describe("a document's status", () => {
  it("polls while any document is queued or being read, not once all are settled", () => {
    expect(anyInProgress([doc({ status: "ready" }), doc({ status: "queued" })])).toBe(true);
    expect(anyInProgress([doc({ status: "ingesting" })])).toBe(true);
    expect(anyInProgress([doc({ status: "ready" }), doc({ status: "failed" })])).toBe(false);
    expect(anyInProgress([])).toBe(false);
  });

  it("says which page is being read when the total is known", () => {
    expect(statusLine(doc({ status: "queued" }))).toEqual({ key: "kb.status.queued" });
    expect(statusLine(doc({ status: "ingesting", pages_done: 3, pages_total: 10 }))).toEqual({ key: "kb.status.ingestingPages", done: 3, total: 10 });
    expect(statusLine(doc({ status: "ingesting", pages_done: 0, pages_total: null }))).toEqual({ key: "kb.status.ingesting" });
    // Counters past the total (a late progress report) never read "11 of 10".
    expect(statusLine(doc({ status: "ingesting", pages_done: 11, pages_total: 10 }))).toMatchObject({ done: 10 });
    expect(statusLine(doc({ status: "ready", pages: 12 }))).toEqual({ key: "kb.status.readyPages", pages: 12 });
    expect(statusLine(doc({ status: "ready", pages: 1 }))).toEqual({ key: "kb.status.readyPage" });
    expect(statusLine(doc({ status: "ready", pages: null }))).toEqual({ key: "kb.status.ready" });
    // A Markdown file's one "page" is not worth saying.
    expect(statusLine(doc({ status: "ready", kind: "markdown", pages: 1 }))).toEqual({ key: "kb.status.ready" });
    expect(statusLine(doc({ status: "failed", error: "a.pdf: not a PDF" }))).toEqual({ key: "kb.status.failed" });
  });

  it("shows a fraction only when it can be told", () => {
    expect(ingestFraction(doc({ status: "queued" }))).toBeNull();
    expect(ingestFraction(doc({ status: "ingesting", pages_done: 1, pages_total: 4 }))).toBe(0.25);
    expect(ingestFraction(doc({ status: "ingesting", pages_done: 9, pages_total: 4 }))).toBe(1);
    expect(ingestFraction(doc({ status: "ingesting", pages_total: 0 }))).toBeNull();
    expect(ingestFraction(doc({ status: "ready", pages_done: 0 }))).toBe(1);
    expect(ingestFraction(doc({ status: "failed" }))).toBeNull();
  });

  it("polls quickly at first, then every few seconds", () => {
    expect(pollDelayMs(0)).toBe(500);
    expect(pollDelayMs(2)).toBeGreaterThan(pollDelayMs(1));
    expect(pollDelayMs(1000)).toBe(3000);
  });
});

describe("merging a fresh listing", () => {
  it("takes the listing, and keeps a just-uploaded document the listing raced", () => {
    const shown = [doc({ id: "a", status: "ingesting" }), doc({ id: "b", status: "queued" }), doc({ id: "gone", status: "ready" })];
    const fresh = [doc({ id: "a", status: "ready" })];
    expect(mergeDocuments(shown, fresh).map((d) => `${d.id}:${d.status}`)).toEqual(["a:ready", "b:queued"]);
  });
});

describe("before an upload", () => {
  it("refuses too many files at once and a file over the cap, naming it", () => {
    const files = Array.from({ length: MAX_FILES_PER_UPLOAD + 1 }, (_, i) => ({ name: `${i}.txt`, size: 1 }));
    expect(checkUpload(files, 50)).toEqual({ ok: false, reason: "too_many", max: MAX_FILES_PER_UPLOAD });
    expect(checkUpload([{ name: "big.pdf", size: 3 * 1024 * 1024 }], 2)).toEqual({ ok: false, reason: "too_big", name: "big.pdf", mb: 2 });
    expect(checkUpload([{ name: "ok.pdf", size: 1024 }], 2)).toEqual({ ok: true });
    // No cap known: the server decides.
    expect(checkUpload([{ name: "big.pdf", size: 3 * 1024 * 1024 }], null)).toEqual({ ok: true });
  });

  it("a name is trimmed, inner spaces squeezed", () => {
    expect(cleanKbName("  Calculus   notes ")).toBe("Calculus notes");
    expect(cleanKbName("   ")).toBe("");
  });
});

describe("the server's knowledge capabilities", () => {
  it("reads them when present, and nothing from an older server", () => {
    const caps = { knowledge: { available: true, max_upload_mb: 50 } } as unknown as CapabilitiesView;
    expect(knowledgeInfo(caps)).toEqual({ available: true, max_upload_mb: 50 });
    expect(knowledgeInfo({} as CapabilitiesView)).toBeNull();
    expect(knowledgeInfo(null)).toBeNull();
  });
});

describe("a source's place", () => {
  it("is page then section, whichever it has", () => {
    const label = (n: number) => `p. ${n}`;
    expect(sourcePlace({ n: 1, title: "a", page: 12, section: "3.2 Limits" }, label)).toBe("p. 12 · 3.2 Limits");
    expect(sourcePlace({ n: 1, title: "a", page: null, section: "Intro" }, label)).toBe("Intro");
    expect(sourcePlace({ n: 1, title: "a" }, label)).toBe("");
  });
});
