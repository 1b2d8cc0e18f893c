// The deepsolve wire types: turn events, the HTTP API, the OpenAI facade.
// Generated from the JSON Schemas of the deepsolve-protocol crate; do not edit. Regenerate with
//   cargo run -q -p deepsolve-protocol --example typescript > web/src/protocol.ts

/** Where the final text came from. */
export type AnswerSource = "model" | "forced" | "step_summaries";

/** The machine-readable `code` of an API error. */
export type ApiErrorCode = "payload_too_large" | "unsupported_media_type" | "unknown_tool" | "unknown_config_key" | "invalid_config" | "settings_not_written" | "unauthorized" | "forbidden" | "not_found" | "bad_request" | "bad_json" | "request_timeout" | "invalid_request" | "invalid" | "unsupported" | "conflict" | "busy" | "unavailable" | "model_not_found" | "no_answer" | "invalid_image" | "cannot_see_images" | "internal";

/** A file a tool produced in the turn's workspace. */
export interface Artifact {
  /**
   * The stored copy's id, when the server stored the file as the call ended (the web UI
   * shows it while the turn runs); absent otherwise (the CLI, or a file not stored).
   */
  id?: string | null;
  mime: string;
  /** Relative to the turn's workspace. */
  path: string;
  /**
   * Set only for a file deepsolve drew itself (a `geogebra_analysis` figure), never for
   * a file found in the workspace: the SHA-256 (hex) of the bytes it wrote. The server
   * shows such an SVG in the page only when the bytes it stores still have this hash.
   */
  rendered_sha256?: string | null;
  size: number;
  /** Where the stored copy downloads (`/api/v1/artifacts/{id}`; `…/inline` shows an image). */
  url?: string | null;
}

/** A file a turn produced, downloadable from `url`. */
export interface ArtifactView {
  id: string;
  mime: string;
  name: string;
  size: number;
  url: string;
}

export interface AssistantMessage {
  /** The answer. */
  content: string;
  /** The solve's progress: the plan, finished steps, tool calls, replans. */
  reasoning_content: string;
  /** Always `assistant`. */
  role: string;
}

/** How a server authenticates its callers. */
export type AuthMode = "single_user" | "tokens";

/** `GET /api/v1/auth/session`: how this server authenticates, and who the caller is. */
export interface AuthSessionView {
  /**
   * When the browser session ends, milliseconds since the Unix epoch; `null` without one
   * (single-user mode, or a bearer token).
   */
  expires_at: number | null;
  mode: AuthMode;
  /** The signed-in user (in single-user mode, the local admin); `null` when not signed in. */
  user: UserView | null;
}

/** What a cancel request answers (202). */
export interface CancelAccepted {
  status: CancelState;
  turn_id: string;
}

/** The turn was asked to stop; it ends with `turn_finished: cancelled`. */
export type CancelState = "cancelling";

/** `GET /api/v1/capabilities`: what this server offers a turn. */
export interface CapabilitiesView {
  knowledge: KnowledgeView;
  limits: LimitsView;
  /** The main model's name. */
  model: string;
  /** What the main model costs (`llm.price`); `null` when not configured. */
  price: PriceView | null;
  sandbox: SandboxView;
  /** Every work tool the server knows, mounted or not. */
  tools: ToolView[];
}

export interface ChatChoice {
  finish_reason: string;
  index: number;
  message: AssistantMessage;
}

/** The non-streaming answer. */
export interface ChatCompletion {
  choices: ChatChoice[];
  /** Seconds since the Unix epoch. */
  created: number;
  id: string;
  model: string;
  /** Always `chat.completion`. */
  object: string;
  usage: ChatUsage;
}

/** One `data:` line of the streaming answer (the stream ends with `data: [DONE]`). */
export interface ChatCompletionChunk {
  /** Empty in the closing usage-only chunk. */
  choices: ChunkChoice[];
  created: number;
  id: string;
  model: string;
  /** Always `chat.completion.chunk`. */
  object: string;
  usage?: ChatUsage | null;
}

export interface ChatMessage {
  /**
   * A string, or an array of content parts: `text`, and in user messages `image_url` with
   * a `data:` URL (`data:image/png;base64,…`; the server fetches no URL). The images of the
   * user messages are the turn's.
   */
  content?: unknown;
  /** `user`, `assistant`; `system`, `developer` and `tool` messages are ignored. */
  role: string;
}

/**
 * The request. Sampling parameters of other models are accepted and ignored (the solve
 * knobs decide); unknown fields are tolerated, as OpenAI clients send many.
 */
export interface ChatRequest {
  /**
   * A deepsolve extension: the caller's knowledge bases the solve may search (ids or
   * names); the answer then ends with a `Sources` list of what it cites.
   */
  knowledge_bases?: string[];
  /** The last user message is the problem; earlier user → assistant pairs are the history. */
  messages: ChatMessage[];
  /** Must be `deepsolve`. */
  model: string;
  stream?: boolean;
  stream_options?: StreamOptions | null;
}

/** Token counts, as OpenAI reports them. */
export interface ChatUsage {
  completion_tokens: number;
  prompt_tokens: number;
  total_tokens: number;
}

/**
 * A step boundary, enough to resume an interrupted turn without re-running a finished step:
 * the context is rebuilt as right after the fold (prefix + progress block), and the budgets
 * continue from what was spent. Emitted after every successful `solve_finish_step`.
 */
export interface Checkpoint {
  /** Wall-clock time spent: it counts against `turn_timeout_s`. */
  elapsed_ms: number;
  /** Plan, finished steps with their summaries, replans used, plan history. */
  record: SolveRecord;
  /** Rounds spent: the budget and "round r of N" continue from here. */
  rounds: number;
  /**
   * Every citation source numbered so far: a resumed turn keeps their numbers. Absent in
   * checkpoints written before sources were kept.
   */
  sources: Source[];
  /** Tokens spent (tool sub-calls included): they count against `token_budget`. */
  usage: Usage;
}

export interface ChunkChoice {
  delta: ChunkDelta;
  /** `stop` in the closing chunk, `null` before. */
  finish_reason: string | null;
  index: number;
}

/** What a chunk adds: progress as `reasoning_content`, the answer as `content`. */
export interface ChunkDelta {
  content?: string | null;
  reasoning_content?: string | null;
  role?: string | null;
}

/**
 * A value a settings change asked for that was out of range (or not a finite number), and
 * what was written instead.
 */
export interface ClampedValue {
  /** The value in force now (and in the settings file). */
  applied: number;
  /** The value as the request wrote it (`99`, `1e9`, `.inf`). */
  asked: string;
  /** The full key, e.g. `solve.max_rounds`. */
  key: string;
  max: number;
  /** The key's range. */
  min: number;
}

/** One part of a message's content, tagged by `type`. */
export type ContentPart = {
  text: string;
  type: "text";
} | {
  /** The image bytes, base64 (standard alphabet, padded). */
  data?: string | null;
  /** e.g. `image/png`. */
  mime: string;
  type: "image";
  url?: string | null;
};

/** `POST /api/v1/knowledge-bases`. */
export interface CreateKb {
  /** 1–120 characters, no control characters; unique among the caller's knowledge bases. */
  name: string;
}

/** `POST /api/v1/turns`. Unknown fields are refused by name. */
export interface CreateTurn {
  /**
   * Files for this turn only, ingested before it starts (one that cannot be read refuses
   * the turn with 422 naming it). Larger files go as `multipart/form-data`: a part
   * `request` with this JSON and parts `file`.
   */
  attachments?: TurnAttachment[];
  /** Solve knob overrides; unknown keys are refused by name, values clamped. */
  config?: Record<string, unknown>;
  /**
   * Pictures of the problem or its figure (PNG, JPEG, WebP or GIF by their bytes, at most
   * 10 MiB each and 8 per turn), base64 with a name; larger ones go as `multipart/form-data`
   * parts `image`. One that is not a usable image refuses the turn naming it (422
   * `invalid_image`, 413 over the size cap); a turn whose images nothing can see is refused
   * with 422 `cannot_see_images`.
   */
  images?: TurnAttachment[];
  /**
   * The caller's knowledge bases the turn may search, by id or name (an unknown one is
   * refused with 422 listing the caller's).
   */
  knowledge_bases?: string[];
  /** `en` (the default) or `zh`; `english`, `chinese`, `zh-cn` and `中文` are understood. */
  language?: string | null;
  problem: string;
  /** Continue this session: the turn sees the earlier answers and solve records. */
  session_id?: string | null;
  /** Work tools to offer, by name (the server's automatic tools are added). */
  tools?: string[];
}

/** Where a document's ingest stands; only `ready` documents are searched. */
export type DocumentStatus = "queued" | "ingesting" | "ready" | "failed";

/** An uploaded document. */
export interface DocumentView {
  /** Milliseconds since the Unix epoch. */
  created_at: number;
  /** Why the ingest failed, naming the document and the problem (with `failed`). */
  error?: string | null;
  id: string;
  kb_id: string;
  /** `pdf`, `docx`, `html`, `markdown` or `text`. */
  kind: string;
  /** The file's base name, as uploaded. */
  name: string;
  pages?: number | null;
  /** Ingest progress: pages extracted so far, of `pages_total` when known. */
  pages_done: number;
  pages_total?: number | null;
  /** Bytes. */
  size: number;
  status: DocumentStatus;
}

/**
 * `POST /api/v1/knowledge-bases/{kb}/documents` (202): the uploaded documents, queued; their
 * ingest runs in the background (poll each document for its status).
 */
export interface DocumentsAccepted {
  documents: DocumentView[];
}

/** Every error answer: `{"error": {"code", "message"}}`. */
export interface ErrorBody {
  error: ErrorDetail;
}

export interface ErrorDetail {
  code: ApiErrorCode;
  /** For people: what was wrong with the request (never the server's internals). */
  message: string;
}

/**
 * What an `error` event is about: why the model failed, or why the turn could not run.
 * Kinds a newer server adds read back as `unknown`.
 */
export type ErrorKind = "context_length" | "tools_unsupported" | "rate_limited" | "bad_request" | "transport" | "idle_timeout" | "stream_cut" | "auth" | "server" | "protocol" | "reply_too_large" | "turn_not_started" | "internal" | "unknown";

/** What happened, tagged by `type`. */
export type EventKind = {
  language: string;
  model: string;
  problem: string;
  /**
   * How tools are offered this turn (what `auto` chose; never `auto`). A switch to
   * tags later in the turn is a `protocol` warning. Absent in older logs.
   */
  protocol?: Protocol | null;
  /** The turn continues from a checkpoint after an interruption. */
  resumed?: boolean;
  tools: string[];
  type: "turn_started";
} | {
  context_tokens: number;
  context_window: number;
  /**
   * The round asks for the model's first working of a new problem the way the model
   * is asked plainly: a short step-by-step system prompt, no tools (`solve.draft`). Its
   * reply is kept as the reasoning the plan starts from.
   */
  draft?: boolean;
  /**
   * The budget's last round, before the settlement rounds. Held at decoding time, it
   * moves on by one for each call asked for after the model's reasoning: that call is
   * the second half of the round that reasoned.
   */
  max_rounds: number;
  round: number;
  /**
   * What the round's reply is held to when the solve spine is enforced at decoding
   * time (`solve.enforce`): `auto` (free text or a call), `required` (a call), `none`
   * (text only), or the name of the one tool it must call. Absent when the prompt alone
   * holds the spine.
   */
  tool_choice?: string | null;
  type: "round_started";
} | {
  text: string;
  type: "reasoning_delta";
} | {
  text: string;
  type: "text_delta";
} | {
  finish_reason: string;
  role: RoundRole;
  round: number;
  type: "round_finished";
  usage: Usage;
} | {
  args: unknown;
  call_id: string;
  name: string;
  /**
   * The argument a front end shows first, as the tool's catalog entry says; absent:
   * the arguments are shown as they are.
   */
  shown?: ShownArgument | null;
  type: "tool_call";
} | {
  call_id: string;
  message: string;
  type: "tool_progress";
} | {
  artifacts?: Artifact[];
  call_id: string;
  content: string;
  duration_ms: number;
  name: string;
  ok: boolean;
  /** The citation sources the result numbered (`[n]` in its content). */
  sources?: Source[];
  type: "tool_result";
} | {
  analysis: string;
  replans_max: number;
  replans_used: number;
  steps: PlanStepView[];
  type: "plan";
} | {
  step_id: string;
  summary: string;
  type: "step_finished";
} | {
  checkpoint: Checkpoint;
  type: "checkpoint";
} | {
  reason: string;
  type: "replanned";
} | {
  tokens_after: number;
  tokens_before: number;
  type: "context_folded";
} | {
  attempt: number;
  delay_ms: number;
  max: number;
  reason: string;
  type: "retrying";
} | {
  kind: WarningKind;
  message: string;
  type: "warning";
} | {
  /** True when the answer came from the forced-answer path or from step summaries. */
  forced: boolean;
  /** The sources the answer cites (`[n]` in its text), ordered by `n`. */
  sources?: Source[];
  text: string;
  type: "answer";
} | {
  elapsed_ms: number;
  rounds: number;
  stop_reason: StopReason;
  type: "turn_finished";
  usage: Usage;
} | {
  kind: ErrorKind;
  message: string;
  type: "error";
};

/** The query of `GET /api/v1/turns/{id}/events`. */
export interface EventsQuery {
  /** Resume after this `seq` (for clients that cannot set `Last-Event-ID`). */
  after?: number | null;
}

/** A boolean solve knob. */
export interface FlagView {
  default: boolean;
  help: string;
  /** The help in Chinese. */
  help_zh: string;
  key: string;
}

/** `GET /healthz` when the database answers. */
export interface Health {
  /** This server instance (replica). */
  instance: string;
  running_turns: number;
  status: HealthStatus;
}

export type HealthStatus = "ok";

/** `GET /api/v1/knowledge-bases/{kb}`: the knowledge base and its documents, oldest first. */
export interface KbDetail {
  documents: DocumentView[];
  kb: KbView;
}

/** `GET /api/v1/knowledge-bases`: by name. */
export interface KbList {
  knowledge_bases: KbView[];
}

/** A knowledge base with counts of its documents. */
export interface KbView {
  /** Milliseconds since the Unix epoch. */
  created_at: number;
  /** Every document, whatever its status. */
  documents: number;
  /** The model its passages were embedded with; absent: full-text search only. */
  embedding_model?: string | null;
  /** Documents whose ingest failed (their `error` says why). */
  failed: number;
  id: string;
  name: string;
  /** Documents that are searched (ingested). */
  ready: number;
  updated_at: number;
}

/** A numeric solve knob and its range. */
export interface KnobView {
  default: number;
  help: string;
  /** The help in Chinese. */
  help_zh: string;
  /** Values are rounded to whole numbers. */
  integer: boolean;
  key: string;
  max: number;
  min: number;
}

/** Knowledge bases on this server (`knowledge` of `GET /api/v1/capabilities`). */
export interface KnowledgeView {
  /** Knowledge bases and attachments can be used. */
  available: boolean;
  /** The model passages are embedded with; absent: full-text search only. */
  embedding_model?: string | null;
  /** The largest file accepted, in MiB. */
  max_upload_mb: number;
}

/** The language of a turn: its prompts, notices and the answer. */
export type Language = "en" | "zh";

/** The request limits a client should check before sending. */
export interface LimitsView {
  /** The largest request body, in bytes. */
  max_body_bytes: number;
  /** The largest image a turn may be given, in bytes. */
  max_image_bytes: number;
  /** The most images one turn may have. */
  max_images: number;
  /** The longest problem, in characters. */
  max_problem_chars: number;
}

/** The query of `GET /api/v1/sessions`. */
export interface ListQuery {
  /** 1 to 200; 50 when absent. */
  limit?: number | null;
}

/**
 * `POST /api/v1/auth/login`: trade a bearer token for a browser session (an `HttpOnly`
 * cookie); the token itself is not kept by the browser.
 */
export interface LoginRequest {
  token: string;
}

/** The knowledge bases and documents a turn may read. */
export interface Material {
  /** The documents of those knowledge bases (each names its `kb`). */
  documents: MaterialDocument[];
  knowledge_bases: MaterialKb[];
}

/** A document a turn may read. */
export interface MaterialDocument {
  /** True when it was attached to the turn itself. */
  attached: boolean;
  id: string;
  /** The id of its knowledge base. */
  kb: string;
  /** The format (`pdf`, `docx`, `html`, `markdown`, `text`). */
  kind: string;
  name: string;
  pages?: number | null;
  /** In bytes. */
  size: number;
}

/** A knowledge base a turn may search. */
export interface MaterialKb {
  /** True for the turn's own attachments (a hidden knowledge base of the turn). */
  attachments: boolean;
  /** How many documents it holds (more than `Material::documents` may list). */
  documents: number;
  id: string;
  name: string;
}

export interface ModelCard {
  created: number;
  id: string;
  /** Always `model`. */
  object: string;
  owned_by: string;
}

/** `GET /v1/models`. */
export interface ModelList {
  data: ModelCard[];
  /** Always `list`. */
  object: string;
}

/** A plan step as the checklist shows it. */
export interface PlanStepView {
  goal: string;
  id: string;
  status: StepStatus;
  summary?: string | null;
}

/** A plan that was replaced by `solve_replan`, kept for the record and the UI. */
export interface PlanVersion {
  analysis: string;
  /** Why it was replaced. */
  replaced_because: string;
  steps: SolveStep[];
}

/** A change of the playbook in `PUT /api/v1/capabilities/settings`. */
export interface PlaybookChange {
  /** The language whose playbook changes; `null`: the one for every language. */
  language: Language | null;
  /** The new playbook; `null`: back to the default (the setting and its `_file` removed). */
  system: string | null;
}

/** The playbook (the solve system prompt) in force for one language. */
export interface PlaybookView {
  /** Where it comes from (a settings key or a file); `null`: built in. */
  from: string | null;
  language: Language;
  /**
   * The settings key a reset removes (with its `_file`): the language's own
   * (`prompts.solve.zh.system`) or the one for every language (`prompts.solve.system`);
   * `null` when built in or from a file of the `prompts/` directory.
   */
  setting: string | null;
  /**
   * Its text. The mounted tools' lines go where it writes `{tools}` (the built-in one:
   * `{tool_lines}`), else after it.
   */
  text: string;
}

/** The main model's price per million tokens. */
export interface PriceView {
  /** As configured, e.g. `USD`. */
  currency: string;
  input_per_mtok: number;
  output_per_mtok: number;
}

/** A text that is not the built-in one. */
export interface PromptOverrideView {
  /** Its length, in characters. */
  chars: number;
  /** A settings key or a file. */
  from: string;
  language: Language;
  /** The text's name (`playbook`, `nudge_act_now`, …). */
  name: string;
}

/**
 * The texts the model reads as an operator shaped them: the playbook in force per language,
 * and every text that is not the built-in one.
 */
export interface PromptsView {
  /** The largest override accepted, in bytes. */
  max_bytes: number;
  /** Every text in force that is not the built-in one. */
  overridden: PromptOverrideView[];
  /** One per language (`en`, `zh`). */
  playbooks: PlaybookView[];
}

/** How tools are offered to the model. */
export type Protocol = "native" | "tags" | "auto" | "fence" | "code" | "structured" | "tongyi" | "deepanalyze";

/** `PUT /api/v1/capabilities/settings`: knob values to change (admin only). */
export interface PutSettings {
  /** Playbook changes, applied in order, in the same atomic write. */
  playbooks?: PlaybookChange[];
  solve: Record<string, unknown>;
}

/** Which kind of reply a round produced. */
export type RoundRole = "narration" | "answer";

/** The code tools' sandbox, as `deepsolve doctor` reports it. */
export interface SandboxView {
  /** Model code can run (isolated, or with the explicit `sandbox.backend: none`). */
  available: boolean;
  /** `bwrap` or `none`; `null` without a sandbox. */
  backend: string | null;
  /** What isolates model code, or why nothing can run it. */
  detail: string;
}

/** One passage that matched, best first. */
export interface SearchHit {
  chunk_id: string;
  document_id: string;
  /** The page the passage starts on, when the format has pages. */
  page?: number | null;
  /** Higher is closer (fused ranks: comparable within one search only). */
  score: number;
  /** The headings it sits under, joined with " › ". */
  section?: string | null;
  text: string;
  /** The document's name. */
  title: string;
}

/** `POST /api/v1/knowledge-bases/{kb}/search`. */
export interface SearchKb {
  query: string;
  /** How many passages (1–20; 5 when absent). */
  top_k?: number | null;
}

/** What a search found. */
export interface SearchResults {
  hits: SearchHit[];
}

/** `GET /api/v1/sessions`: most recent first. */
export interface SessionList {
  sessions: SessionView[];
}

/** A session (`GET /api/v1/sessions/{id}` has its turns; the list has none). */
export interface SessionView {
  created_at: number;
  id: string;
  title: string;
  turns?: TurnView[] | null;
  updated_at: number;
}

/** `GET|PUT /api/v1/capabilities/settings`: the solve knobs in force, with their ranges. */
export interface SettingsView {
  /**
   * After a change: each value that was clamped (which key, asked, applied, the range);
   * empty when every value was taken as asked.
   */
  clamped?: ClampedValue[] | null;
  flags: FlagView[];
  knobs: KnobView[];
  /** The playbook in force per language, and the texts an operator replaced. */
  prompts: PromptsView;
  /** Every knob's value in force, by key. */
  solve: Record<string, unknown>;
  /** After a change: the values that were clamped, and to what, in words. */
  warnings?: string[] | null;
  /** The caller may change them (an admin, and the server has a settings file). */
  writable: boolean;
}

/**
 * The argument of a tool's calls a front end shows first (the code it runs, the query, the
 * URL), and how: the CLI's and the web UI's tool cards read it here, never from a tool name.
 */
export interface ShownArgument {
  /** The language to highlight it as (`python`, `bash`); absent: plain text. */
  language?: string | null;
  /** The argument's name in the call's `args` (`code`, `command`, `query`, …). */
  name: string;
}

/** The solve state kept with the turn record. */
export interface SolveRecord {
  analysis: string;
  plan_history?: PlanVersion[];
  replans_max: number;
  replans_used: number;
  steps: SolveStep[];
}

/** One step of a plan (`S1`, `S2`, …). */
export interface SolveStep {
  done: boolean;
  goal: string;
  id: string;
  /** What the step established, given by `solve_finish_step`. */
  summary?: string | null;
}

/**
 * A citation source a tool result refers to (a retrieved chunk, a web page): the model cites
 * it as `[n]`. Numbers are the turn's: the same passage keeps its number across calls.
 */
export interface Source {
  chunk_id?: string | null;
  document_id?: string | null;
  /** The passage itself (at most 800 characters), for a hover card. */
  excerpt?: string | null;
  /** The knowledge base it came from. */
  kb?: string | null;
  /** Its number in the turn, as cited (`[n]`). */
  n: number;
  page?: number | null;
  /** Retrieval score (higher is closer). */
  score?: number | null;
  /** Where in the document: its heading path, joined with " › ". */
  section?: string | null;
  title: string;
  url?: string | null;
}

export type StepStatus = "pending" | "current" | "done";

/** Every way a turn can end. Recorded on every turn. */
export type StopReason = "max_rounds" | "context_limit" | "turn_timeout" | "cancelled" | "answered" | "answered_with_open_steps" | "answered_without_plan" | "budget" | "repetition" | "empty_rounds" | "format_errors" | "model_error";

/** How a streaming answer reports a failed turn (OpenAI's error shape, as a `data:` line). */
export interface StreamError {
  error: StreamErrorDetail;
}

export interface StreamErrorDetail {
  /** Always `turn_failed`. */
  code: string;
  message: string;
  /** Always `server_error`. */
  type: string;
}

export interface StreamOptions {
  /** Send a last chunk with the usage and no choices. */
  include_usage?: boolean;
}

/** A work tool and whether a turn can have it. */
export interface ToolView {
  /** Mounted: a turn may ask for it. */
  available: boolean;
  /** Offered when a turn names no tools (automatic, or in `tools.enabled`). */
  default: boolean;
  description: string;
  name: string;
  /** Why it cannot be mounted (e.g. "no sandbox: bubblewrap is missing"); `null` when it is. */
  reason: string | null;
}

/**
 * A file given with a turn (`attachments` of `POST /api/v1/turns`): ingested before the turn
 * starts, readable by that turn only.
 */
export interface TurnAttachment {
  /** The file's bytes, base64 (standard alphabet, padded). */
  data_base64: string;
  /** The file's name (its base name is kept; the kind is told by it and the bytes). */
  name: string;
}

/** A started (or resumed) turn: follow `events_url`. */
export interface TurnCreated {
  /** The turn's events over SSE. */
  events_url: string;
  session_id: string;
  status: TurnStatus;
  turn_id: string;
}

/** One event of a turn: its id, its place in the turn's log, when, and what happened. */
export type TurnEvent = {
  /** The event's place in the turn's log: 0, 1, 2, … with no gaps (the SSE `id`). */
  seq: number;
  /** Milliseconds since the Unix epoch. */
  ts: number;
  turn_id: string;
} & EventKind;

/**
 * An image of a turn as clients see it (`TurnView::images`): shown from `url`, a raster image
 * served with its verified type.
 */
export interface TurnImageView {
  height: number;
  id: string;
  mime: string;
  name: string;
  size: number;
  url: string;
  width: number;
}

/** What a turn produced, once it ended. */
export interface TurnOutcome {
  answer: string | null;
  answer_source: AnswerSource | null;
  artifacts: Artifact[];
  elapsed_ms: number;
  /** Set for `model_error`: what went wrong, for the one-line exit message. */
  error?: string | null;
  rounds: number;
  /** The solve record: plan, steps with summaries, replans, plan history. */
  solve: SolveRecord;
  /** The sources the answer cites, ordered by `n`. */
  sources?: Source[];
  stop_reason: StopReason;
  turn_id: string;
  usage: Usage;
}

/** Where a turn stands. `Running` is the only non-terminal state. */
export type TurnStatus = "running" | "cancelled" | "finished" | "failed" | "interrupted";

/** A turn as clients see it (`GET /api/v1/turns/{id}`). */
export interface TurnView {
  answer: string | null;
  artifacts: ArtifactView[];
  /** Milliseconds since the Unix epoch. */
  created_at: number;
  elapsed_ms: number;
  error: string | null;
  events_url: string;
  finished_at: number | null;
  id: string;
  /** The images the turn was given, in order (shown above its problem). */
  images: TurnImageView[];
  language: Language | null;
  problem: string;
  rounds: number;
  session_id: string;
  /** The plan with its steps and summaries (the solve record). */
  solve: SolveRecord | null;
  /** The sources the answer cites (`[n]`), by `n`. */
  sources: Source[];
  status: TurnStatus;
  stop_reason: StopReason | null;
  tools: string[];
  usage: Usage | null;
}

/** Tokens spent, by a model call or summed over a turn. */
export interface Usage {
  /**
   * Prompt tokens the model served from its prompt (KV) cache instead of reading them
   * again, when it says (the in-process model always does; an endpoint when it reports
   * them). Absent from the JSON when unknown, so older records read the same.
   */
  cached_tokens?: number | null;
  completion_tokens: number;
  /** True when any part of this was estimated locally instead of reported by the provider. */
  estimated: boolean;
  prompt_tokens: number;
}

export type UserRole = "user" | "admin";

/** A user, as the user sees themself. */
export interface UserView {
  id: string;
  name: string;
  role: UserRole;
}

/** What a `warning` event is about. Kinds a newer server adds read back as `unknown`. */
export type WarningKind = "length" | "forced_answer" | "invented_tool_response" | "context_length" | "protocol" | "stream_cut" | "unknown";

/** Every event's `type`, in declaration order: the SSE event names (`event: <type>`). */
export const EVENT_TYPES: readonly EventKind["type"][] = [
  "turn_started",
  "round_started",
  "reasoning_delta",
  "text_delta",
  "round_finished",
  "tool_call",
  "tool_progress",
  "tool_result",
  "plan",
  "step_finished",
  "checkpoint",
  "replanned",
  "context_folded",
  "retrying",
  "warning",
  "answer",
  "turn_finished",
  "error",
];
