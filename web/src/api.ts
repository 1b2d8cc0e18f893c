// The typed API client: JSON in and out, same-origin cookies, the server's error message
// surfaced, and a 401 anywhere (an expired or revoked session) reported once to the app.
import type {
  AuthSessionView,
  CancelAccepted,
  CapabilitiesView,
  CreateTurn,
  ErrorBody,
  LoginRequest,
  SessionList,
  SessionView,
  SettingsView,
  TurnCreated,
  TurnView,
} from "./protocol";

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
  putSettings: (solve: Record<string, unknown>) =>
    request<SettingsView>("/api/v1/capabilities/settings", { method: "PUT", body: { solve } }),

  createTurn: (body: CreateTurn) => request<TurnCreated>("/api/v1/turns", { body }),
  turn: (turnId: string) => request<TurnView>(`/api/v1/turns/${id(turnId)}`),
  cancelTurn: (turnId: string) =>
    request<CancelAccepted>(`/api/v1/turns/${id(turnId)}/cancel`, { method: "POST" }),
  resumeTurn: (turnId: string) =>
    request<TurnCreated>(`/api/v1/turns/${id(turnId)}/resume`, { method: "POST" }),

  sessions: (limit = 100) => request<SessionList>(`/api/v1/sessions?limit=${limit}`),
  session: (sessionId: string) => request<SessionView>(`/api/v1/sessions/${id(sessionId)}`),
  deleteSession: (sessionId: string) =>
    request<void>(`/api/v1/sessions/${id(sessionId)}`, { method: "DELETE" }),
};

export function inlineImageUrl(artifactId: string): string {
  return `/api/v1/artifacts/${id(artifactId)}/inline`;
}
