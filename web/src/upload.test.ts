// @vitest-environment jsdom
// Uploads go through XHR (the one browser API with upload progress): progress reaches the
// caller, the server's error message (a 413 naming the file) is what the page shows.
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, ApiError } from "./api";

type Listener = (event: ProgressEvent) => void;

/** A stand-in XHR that answers with `status` and `body` after reporting two progress events. */
function fakeXhr(status: number, body: string) {
  const sent: { method: string; url: string; body: unknown }[] = [];
  class FakeXhr {
    status = 0;
    statusText = "";
    responseText = "";
    withCredentials = false;
    private listeners: Record<string, (() => void)[]> = {};
    private method = "";
    private url = "";
    upload = {
      progress: [] as Listener[],
      addEventListener: (type: string, f: Listener) => {
        if (type === "progress") this.upload.progress.push(f);
      },
    };
    open(method: string, url: string) {
      this.method = method;
      this.url = url;
    }
    setRequestHeader() {}
    addEventListener(type: string, f: () => void) {
      (this.listeners[type] ??= []).push(f);
    }
    send(form: unknown) {
      sent.push({ method: this.method, url: this.url, body: form });
      for (const loaded of [50, 100]) {
        for (const f of this.upload.progress) f({ lengthComputable: true, loaded, total: 100 } as ProgressEvent);
      }
      this.status = status;
      this.responseText = body;
      for (const f of this.listeners.load ?? []) f();
    }
  }
  vi.stubGlobal("XMLHttpRequest", FakeXhr);
  return sent;
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("uploads", () => {
  it("sends the files as multipart parts named file, reports progress, returns the documents", async () => {
    const sent = fakeXhr(202, JSON.stringify({ documents: [{ id: "d1", name: "a.md", status: "queued" }] }));
    const progress: number[] = [];
    const result = await api.uploadDocuments("Calculus notes", [new File(["# a"], "a.md")], (done, total) => progress.push(done / total));
    expect(result.documents.map((d) => d.id)).toEqual(["d1"]);
    expect(progress).toEqual([0.5, 1]);
    expect(sent[0].method).toBe("POST");
    expect(sent[0].url).toBe("/api/v1/knowledge-bases/Calculus%20notes/documents");
    const form = sent[0].body as FormData;
    expect((form.getAll("file") as File[]).map((f) => f.name)).toEqual(["a.md"]);
  });

  it("a refusal carries the server's message and code", async () => {
    fakeXhr(413, JSON.stringify({ error: { code: "payload_too_large", message: "big.pdf is over the 50 MiB upload cap" } }));
    const failure = await api.uploadDocuments("kb", [new File(["x"], "big.pdf")]).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ApiError);
    expect(failure).toMatchObject({ status: 413, code: "payload_too_large", message: "big.pdf is over the 50 MiB upload cap" });
  });

  it("a turn with files and images sends its request as a JSON part before them", async () => {
    const sent = fakeXhr(201, JSON.stringify({ turn_id: "t", session_id: "s", status: "running", events_url: "/x" }));
    const uploads = { files: [new File(["x"], "h.pdf")], images: [new File(["y"], "triangle.png")] };
    const created = await api.createTurnWithFiles({ problem: "p", knowledge_bases: ["notes"] }, uploads);
    expect(created.turn_id).toBe("t");
    const form = sent[0].body as FormData;
    expect(sent[0].url).toBe("/api/v1/turns");
    const request = form.get("request") as Blob;
    expect(JSON.parse(await request.text())).toEqual({ problem: "p", knowledge_bases: ["notes"] });
    expect((form.getAll("file") as File[]).map((f) => f.name)).toEqual(["h.pdf"]);
    expect((form.getAll("image") as File[]).map((f) => f.name)).toEqual(["triangle.png"]);
  });
});
