// The processes a browser test runs against: the scripted mock model (`deepsolve-mock`) and
// the real `deepsolve serve`, each in a private temporary home with its own SQLite database;
// a TCP proxy that can cut the browser off; and a reader of the server's own event log.
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { mkdtempSync, rmSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import net from "node:net";

/** Where the debug binaries are: `DEEPSOLVE_BIN_DIR`, else the workspace's target/debug. */
export const BIN_DIR = resolve(process.env.DEEPSOLVE_BIN_DIR ?? fileURLToPath(new URL("../../target/debug", import.meta.url)));

/** A line of a child's output, or an error naming the child and its stderr tail. */
function firstLine(child: ChildProcess, what: string, stderr: () => string): Promise<string> {
  return new Promise((resolveLine, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error(`${what} printed nothing in 20 s; stderr:\n${stderr()}`)), 20_000);
    lines.once("line", (line) => {
      clearTimeout(timer);
      resolveLine(line.trim());
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code ?? signal}) before starting; stderr:\n${stderr()}`));
    });
  });
}

/** Spawn `binary args` with `env`, keeping its stderr for error messages. */
function start(binary: string, args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(join(BIN_DIR, binary), args, { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8000);
  });
  return { child, stderr: () => stderr };
}

/** An environment without the caller's deepsolve settings, homed in `home`. */
function privateEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("DEEPSOLVE_") && key !== "OPENAI_API_KEY") env[key] = value;
  }
  return {
    ...env,
    HOME: home,
    XDG_DATA_HOME: join(home, "data"),
    XDG_CONFIG_HOME: join(home, "config"),
    XDG_CACHE_HOME: join(home, "cache"),
    DEEPSOLVE_CONFIG: join(home, "settings.yaml"),
    // The mock model is scripted, not a model to probe on first use (`llm.probe`).
    DEEPSOLVE_LLM__PROBE: "never",
  };
}

export type MockOptions = {
  policy?: string;
  /** Milliseconds before each reply's first delta. */
  ttftMs?: number;
  /** Deltas per second after the first; 0 streams at once. */
  tokensPerS?: number;
};

/** Paced enough that a turn takes several seconds: for cancelling, cutting and killing it. */
export const SLOW: MockOptions = { ttftMs: 300, tokensPerS: 20 };

export class Mock {
  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
  ) {}

  static async start(options: MockOptions = {}): Promise<Mock> {
    const args = ["--port", "0", "--quiet", "--no-capture", "--policy", options.policy ?? "showcase"];
    if (options.ttftMs) args.push("--ttft-ms", String(options.ttftMs));
    if (options.tokensPerS) args.push("--tokens-per-s", String(options.tokensPerS));
    const { child, stderr } = start("deepsolve-mock", args, process.env);
    const url = await firstLine(child, "deepsolve-mock", stderr);
    return new Mock(url, child);
  }

  stop() {
    this.child.kill("SIGKILL");
  }
}

/**
 * `deepsolve-webfixture` on loopback: a Brave-shaped search API whose results point back to
 * it (a page that redirects to the cloud metadata address, a page that redirects to an
 * article on a second port). Loopback is what the server's `web_fetch` refuses; the search,
 * whose address the operator configures, is allowed.
 */
export class WebFixture {
  private constructor(
    /** The search site, e.g. http://127.0.0.1:41234. */
    readonly searchBase: string,
    readonly articleBase: string,
    readonly key: string,
    private readonly child: ChildProcess,
  ) {}

  static async start(): Promise<WebFixture> {
    const key = `e2e-brave-key-${process.pid}`;
    const log = join(mkdtempSync(join(tmpdir(), "deepsolve-web-")), "requests.jsonl");
    const args = ["--addr", "127.0.0.1:0", "--addr", "127.0.0.1:0", "--key", key, "--log", log];
    const { child, stderr } = start("deepsolve-webfixture", args, process.env);
    const line = await firstLine(child, "deepsolve-webfixture", stderr);
    const match = /^serving on (\S+) (\S+)$/.exec(line);
    if (!match) throw new Error(`deepsolve-webfixture said ${JSON.stringify(line)}`);
    return new WebFixture(match[1], match[2], key, child);
  }

  /** What a server needs to search it with Brave's provider. */
  serverOptions(): ServerOptions {
    return {
      set: ["tools.web_search.provider=brave", `tools.web_search.brave.base_url=${this.searchBase}`, "tools.web_search.brave.api_key_env=E2E_BRAVE_KEY"],
      env: { E2E_BRAVE_KEY: this.key },
    };
  }

  stop() {
    this.child.kill("SIGKILL");
  }
}

export type ServerOptions = {
  /** Settings file contents (YAML). */
  settings?: string;
  /** Extra `--set KEY=VALUE` overrides; `{mock}` in one stands for the mock model's URL. */
  set?: string[];
  /** Extra environment variables (e.g. the one a search provider's key is read from). */
  env?: Record<string, string>;
};

/** `deepsolve serve` in a private home; restartable on the same port, id and database. */
export class Server {
  readonly home: string;
  readonly database: string;
  private child: ChildProcess | null = null;
  private stderr: () => string = () => "";
  private port = 0;
  base = "";

  constructor(
    private readonly mock: Mock,
    private readonly options: ServerOptions = {},
  ) {
    this.home = mkdtempSync(join(tmpdir(), "deepsolve-e2e-"));
    mkdirSync(join(this.home, "data"), { recursive: true });
    writeFileSync(join(this.home, "settings.yaml"), options.settings ?? "");
    this.database = `sqlite://${join(this.home, "deepsolve.db")}`;
  }

  private commonArgs(): string[] {
    const args = ["--database", this.database, "--base-url", this.mock.url, "--model", "mock-model"];
    for (const s of this.options.set ?? []) args.push("--set", s.replaceAll("{mock}", this.mock.url));
    return args;
  }

  /** Start (or restart, on the same port) the server. */
  async start(): Promise<string> {
    const args = ["serve", "--addr", `127.0.0.1:${this.port}`, "--instance-id", "e2e", ...this.commonArgs()];
    const { child, stderr } = start("deepsolve", args, { ...privateEnv(this.home), ...this.options.env });
    this.child = child;
    this.stderr = stderr;
    const line = await firstLine(child, "deepsolve serve", stderr);
    const match = /^listening on (http:\/\/[^\s]+)/.exec(line);
    if (!match) throw new Error(`deepsolve serve said ${JSON.stringify(line)}; stderr:\n${stderr()}`);
    this.base = match[1].replace(/\/$/, "");
    this.port = Number(new URL(this.base).port);
    return this.base;
  }

  /** SIGKILL: no shutdown of any kind, like a crash. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((done) => child.once("exit", done));
    child.kill("SIGKILL");
    await exited;
  }

  logTail(): string {
    return this.stderr();
  }

  /** Run a `deepsolve` subcommand on this server's database; its stdout. */
  cli(args: string[]): Promise<string> {
    return new Promise((done, fail) => {
      execFile(
        join(BIN_DIR, "deepsolve"),
        [...args, ...this.commonArgs()],
        { env: privateEnv(this.home), timeout: 30_000 },
        (error, stdout, stderr) => (error ? fail(new Error(`deepsolve ${args.join(" ")}: ${error.message}\n${stderr}`)) : done(stdout)),
      );
    });
  }

  /** `deepsolve users add NAME [--admin]`: the token it prints. */
  async addUser(name: string, admin = false): Promise<string> {
    const out = await this.cli(["users", "add", name, ...(admin ? ["--admin"] : [])]);
    const token = /\bdst_[0-9A-Za-z]+/.exec(out)?.[0];
    if (!token) throw new Error(`no token in the output of users add ${name}: ${out}`);
    return token;
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.home, { recursive: true, force: true });
  }
}

/** A TCP proxy in front of the server that can drop every connection and refuse new ones. */
export class CuttableProxy {
  private server: net.Server;
  private sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly upstream: URL) {
    this.server = net.createServer((client) => this.accept(client));
  }

  get base(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private accept(client: net.Socket) {
    const server = net.connect(Number(this.upstream.port), this.upstream.hostname);
    for (const socket of [client, server]) {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
      socket.on("error", () => {
        client.destroy();
        server.destroy();
      });
    }
    client.pipe(server);
    server.pipe(client);
  }

  private listen(port: number): Promise<void> {
    return new Promise((done, fail) => {
      this.server.once("error", fail);
      this.server.listen(port, "127.0.0.1", () => {
        this.server.off("error", fail);
        this.port = (this.server.address() as net.AddressInfo).port;
        done();
      });
    });
  }

  start(): Promise<void> {
    return this.listen(0);
  }

  /** Drop every connection, refuse new ones for `ms`, then accept again on the same port. */
  async cut(ms: number): Promise<void> {
    const closed = new Promise((done) => this.server.close(done));
    for (const socket of this.sockets) socket.destroy();
    await closed;
    await new Promise((done) => setTimeout(done, ms));
    this.server = net.createServer((client) => this.accept(client));
    await this.listen(this.port);
  }

  stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    return new Promise((done) => this.server.close(() => done(undefined)));
  }
}

/** One event of the server's log, as the SSE stream gives it. */
export type LoggedEvent = { seq: number; type: string; [key: string]: unknown };

/** Every event of a (finished) turn, read from the server's SSE endpoint to its end. */
export async function eventLog(base: string, turnId: string, headers: Record<string, string> = {}): Promise<LoggedEvent[]> {
  const response = await fetch(`${base}/api/v1/turns/${turnId}/events`, {
    headers,
    signal: AbortSignal.timeout(30_000),
  });
  if (!response.ok) throw new Error(`GET events of ${turnId}: ${response.status}`);
  const text = await response.text();
  const events: LoggedEvent[] = [];
  for (const block of text.split("\n\n")) {
    const data = block
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).trim())
      .join("\n");
    if (data) events.push(JSON.parse(data) as LoggedEvent);
  }
  return events;
}

/** The narration each round streamed: its text deltas, joined, for rounds that narrated. */
export function narrations(events: LoggedEvent[]): string[] {
  const texts: string[] = [];
  let current = "";
  for (const event of events) {
    if (event.type === "round_started") current = "";
    if (event.type === "text_delta") current += String(event.text ?? "");
    if (event.type === "round_finished" && event.role === "narration" && current.trim()) texts.push(current);
  }
  return texts;
}

/** The plain words of a Markdown text with maths: the pieces between `$…$` spans, trimmed,
 * the ones long enough to be telling. */
export function plainPieces(markdown: string): string[] {
  return markdown
    .split(/\$\$[^$]*\$\$|\$[^$]*\$|\\\([^)]*\\\)/)
    .map((piece) => piece.replace(/[*_`]/g, "").trim())
    .filter((piece) => piece.length >= 12);
}

/** How many times `needle` occurs in `haystack`. */
export function occurrences(haystack: string, needle: string): number {
  let count = 0;
  for (let at = haystack.indexOf(needle); at >= 0; at = haystack.indexOf(needle, at + needle.length)) count++;
  return count;
}
