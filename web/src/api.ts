// The typed API client: JSON in and out, same-origin cookies, the server's error message
// surfaced, and a 401 anywhere (an expired or revoked session) reported once to the app.
import type {
  AuthSessionView,
  CancelAccepted,
  CapabilitiesView,
  CreateTurn,
  ErrorBody,
  LoginRequest,
  PutSettings,
  SessionList,
  SessionView,
  SettingsView,
  TurnCreated,
  TurnView,
} from "./protocol";
import type { DocumentView, KbDetail, KbList, KbView, SearchHit, Uploaded } from "./kb";
import type { CreateEval, EvalDetail, EvalView } from "./evals";

/** A failed request: `code` is the server's `ApiErrorCode`, or `network` when there was no answer. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

let onUnauthorized: (() => void) | null = null;

/** Who to tell when the server answers 401 (the session is gone): the app shows the login page. */
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

type Options = { body?: unknown; method?: string; authFailureIsExpected?: boolean };

async function errorFrom(response: Response): Promise<ApiError> {
  let code = "http";
  let message = `${response.status} ${response.statusText}`.trim();
  try {
    const body = (await response.json()) as Partial<ErrorBody>;
    if (body.error?.message) {
      code = body.error.code ?? code;
      message = body.error.message;
    }
  } catch {
    // Not JSON (a proxy's page): the status line says enough.
  }
  return new ApiError(response.status, code, message);
}

async function request<T>(path: string, options: Options = {}): Promise<T> {
  const init: RequestInit = {
    method: options.method ?? (options.body === undefined ? "GET" : "POST"),
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  };
  if (options.body !== undefined) {
    init.headers = { Accept: "application/json", "Content-Type": "application/json" };
    init.body = JSON.stringify(options.body);
  }
  let response: Response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, "network", "the server cannot be reached");
  }
  if (!response.ok) {
    const error = await errorFrom(response);
    if (response.status === 401 && !options.authFailureIsExpected) onUnauthorized?.();
    throw error;
  }
  if (response.status === 204 || response.status === 202) {
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }
  return (await response.json()) as T;
}

const id = encodeURIComponent;

export const api = {
  authSession: () => request<AuthSessionView>("/api/v1/auth/session", { authFailureIsExpected: true }),
  login: (token: string) =>
    request<AuthSessionView>("/api/v1/auth/login", {
      body: { token } satisfies LoginRequest,
      authFailureIsExpected: true,
    }),
  logout: () => request<void>("/api/v1/auth/logout", { method: "POST", authFailureIsExpected: true }),

  capabilities: () => request<CapabilitiesView>("/api/v1/capabilities"),
  settings: () => request<SettingsView>("/api/v1/capabilities/settings"),
  putSettings: (body: PutSettings) =>
    request<SettingsView>("/api/v1/capabilities/settings", { method: "PUT", body }),

  createTurn: (body: CreateTurn) => request<TurnCreated>("/api/v1/turns", { body }),
  turn: (turnId: string) => request<TurnView>(`/api/v1/turns/${id(turnId)}`),
  cancelTurn: (turnId: string) =>
    request<CancelAccepted>(`/api/v1/turns/${id(turnId)}/cancel`, { method: "POST" }),
  resumeTurn: (turnId: string) =>
    request<TurnCreated>(`/api/v1/turns/${id(turnId)}/resume`, { method: "POST" }),

  knowledgeBases: () => request<KbList>("/api/v1/knowledge-bases"),
  createKnowledgeBase: (name: string) => request<KbView>("/api/v1/knowledge-bases", { body: { name } }),
  knowledgeBase: (kb: string) => request<KbDetail>(`/api/v1/knowledge-bases/${id(kb)}`),
  deleteKnowledgeBase: (kb: string) => request<void>(`/api/v1/knowledge-bases/${id(kb)}`, { method: "DELETE" }),
  document: (kb: string, doc: string) => request<DocumentView>(`/api/v1/knowledge-bases/${id(kb)}/documents/${id(doc)}`),
  deleteDocument: (kb: string, doc: string) =>
    request<void>(`/api/v1/knowledge-bases/${id(kb)}/documents/${id(doc)}`, { method: "DELETE" }),
  searchKnowledgeBase: (kb: string, query: string, topK?: number) =>
    request<{ hits: SearchHit[] }>(`/api/v1/knowledge-bases/${id(kb)}/search`, {
      body: topK === undefined ? { query } : { query, top_k: topK },
    }),
  uploadDocuments: (kb: string, files: File[], onProgress?: (sent: number, total: number) => void) => {
    const form = new FormData();
    for (const file of files) form.append("file", file, file.name);
    return upload<Uploaded>(`/api/v1/knowledge-bases/${id(kb)}/documents`, form, onProgress);
  },
  /** A turn with files or images of its own: multipart, the JSON request in a part of its own. */
  createTurnWithFiles: (
    body: CreateTurn,
    uploads: { files: File[]; images: File[] },
    onProgress?: (sent: number, total: number) => void,
  ) => {
    const form = new FormData();
    form.append("request", new Blob([JSON.stringify(body)], { type: "application/json" }));
    for (const file of uploads.files) form.append("file", file, file.name);
    for (const image of uploads.images) form.append("image", image, image.name);
    return upload<TurnCreated>("/api/v1/turns", form, onProgress);
  },

  evals: () => request<{ evals: EvalView[] }>("/api/v1/evals"),
  evalRun: (evalId: string) => request<EvalDetail>(`/api/v1/evals/${id(evalId)}`),
  createEval: (body: CreateEval) => request<EvalView>("/api/v1/evals", { body }),
  /** A running run is cancelled (202); one that is over is deleted (204). */
  deleteEval: (evalId: string) => request<unknown>(`/api/v1/evals/${id(evalId)}`, { method: "DELETE" }),

  sessions: (limit = 100) => request<SessionList>(`/api/v1/sessions?limit=${limit}`),
  session: (sessionId: string) => request<SessionView>(`/api/v1/sessions/${id(sessionId)}`),
  deleteSession: (sessionId: string) =>
    request<void>(`/api/v1/sessions/${id(sessionId)}`, { method: "DELETE" }),
};

/**
 * A multipart POST through XHR, the one browser API that reports upload progress; errors and
 * a 401 as `request` reports them.
 */
function upload<T>(path: string, form: FormData, onProgress?: (sent: number, total: number) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    xhr.withCredentials = true;
    xhr.setRequestHeader("Accept", "application/json");
    if (onProgress) {
      xhr.upload.addEventListener("progress", (event) => {
        if (event.lengthComputable) onProgress(event.loaded, event.total);
      });
    }
    xhr.addEventListener("error", () => reject(new ApiError(0, "network", "the server cannot be reached")));
    xhr.addEventListener("abort", () => reject(new ApiError(0, "network", "the upload was stopped")));
    xhr.addEventListener("load", () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        try {
          resolve((xhr.responseText ? JSON.parse(xhr.responseText) : undefined) as T);
        } catch {
          reject(new ApiError(xhr.status, "bad_json", "the server's answer is not JSON"));
        }
        return;
      }
      const response = new Response(xhr.responseText, { status: xhr.status, statusText: xhr.statusText });
      void errorFrom(response).then((error) => {
        if (response.status === 401) onUnauthorized?.();
        reject(error);
      });
    });
    xhr.send(form);
  });
}

export function inlineImageUrl(artifactId: string): string {
  return `/api/v1/artifacts/${id(artifactId)}/inline`;
}
