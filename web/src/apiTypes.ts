// The shapes of the endpoints the server gains in this release (auth, capabilities). They move
// to the generated protocol module once the server's types are there; until then, as the HTTP
// contract describes them.

export type AuthMode = "single_user" | "tokens";

export interface UserView {
  id: string;
  name: string;
  role: "admin" | "user";
}

export interface AuthSessionView {
  mode: AuthMode;
  user: UserView | null;
  /** Milliseconds since the Unix epoch. */
  expires_at: number | null;
}

export interface LoginRequest {
  token: string;
}

export interface ToolView {
  name: string;
  description: string;
  available: boolean;
  /** Why it cannot be mounted, when it is not available. */
  reason: string | null;
  /** Offered when a turn names no tools. */
  default: boolean;
}

export interface PriceView {
  input_per_mtok: number;
  output_per_mtok: number;
  currency: string;
}

export interface SandboxView {
  available: boolean;
  backend: string | null;
  detail: string;
}

export interface CapabilitiesView {
  model: string;
  tools: ToolView[];
  limits: { max_problem_chars: number; max_body_bytes: number };
  price: PriceView | null;
  sandbox: SandboxView;
}
