// Who is signed in, and what to do when the server says the session is gone.
import { api, ApiError, setUnauthorizedHandler } from "./api";
import type { AuthSessionView } from "./protocol";
import { navigate } from "./router";
import { createStore } from "./store";

export type AuthState =
  | { status: "loading" }
  | { status: "ready"; session: AuthSessionView }
  | { status: "error"; error: ApiError };

export const auth = createStore<AuthState>({ status: "loading" });

/** Why the login page is shown, when it is not the first visit: the session expired. */
export const sessionExpired = createStore(false);

/** Where to go back to after signing in. */
let returnTo = "/";

const SINGLE_USER: AuthSessionView = { mode: "single_user", user: null, expires_at: null };

export async function loadAuth(): Promise<void> {
  try {
    auth.set({ status: "ready", session: await api.authSession() });
  } catch (error) {
    // A server without the endpoint predates accounts in the browser: it is single-user.
    if (error instanceof ApiError && error.status === 404) auth.set({ status: "ready", session: SINGLE_USER });
    else auth.set({ status: "error", error: error instanceof ApiError ? error : new ApiError(0, "network", String(error)) });
  }
}

export function needsLogin(state: AuthState): boolean {
  return state.status === "ready" && state.session.mode === "tokens" && state.session.user === null;
}

export function goToLogin(): void {
  if (location.pathname !== "/login") returnTo = location.pathname;
  navigate("/login", { replace: true });
}

export function signedIn(session: AuthSessionView): void {
  sessionExpired.set(false);
  auth.set({ status: "ready", session });
  const target = returnTo;
  returnTo = "/";
  navigate(target, { replace: true });
}

export async function signOut(): Promise<void> {
  try {
    await api.logout();
  } finally {
    returnTo = "/";
    auth.set({ status: "ready", session: { mode: "tokens", user: null, expires_at: null } });
    navigate("/login", { replace: true });
  }
}

setUnauthorizedHandler(() => {
  const state = auth.get();
  if (state.status === "ready" && state.session.user === null && state.session.mode === "tokens") return;
  sessionExpired.set(true);
  auth.set({ status: "ready", session: { mode: "tokens", user: null, expires_at: null } });
  goToLogin();
});
