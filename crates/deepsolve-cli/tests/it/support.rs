//! What every CLI test needs: the real `deepsolve` binary, isolated from the developer's
//! settings, environment and home (an empty settings file, a scratch data dir for turn
//! workspaces and a scratch cache for the sandbox probe's verdict, no inherited `DEEPSOLVE_*`
//! or `OPENAI_API_KEY`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The setting that keeps the binary from probing the endpoint on first use (`llm.probe`): a
/// scripted mock is not a model to probe, and the probe's requests would take its replies.
/// The tests of the first-use probe itself set it back.
pub(crate) const NO_PROBE: (&str, &str) = ("DEEPSOLVE_LLM__PROBE", "never");

pub(crate) struct Isolated {
    dir: tempfile::TempDir,
    pub config: PathBuf,
}

impl Isolated {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("settings.yaml");
        std::fs::write(&config, "").expect("settings file");
        Isolated { dir, config }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The model cache (`DEEPSOLVE_MODELS`, empty unless a test fills it): the developer's
    /// own cache must not make the in-process model the embedded default here.
    pub(crate) fn models(&self) -> PathBuf {
        self.dir.path().join("models")
    }

    /// Where turn workspaces go (`XDG_DATA_HOME`).
    pub(crate) fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The binary as a plain process (for tests that signal it while it runs).
    pub(crate) fn std_command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin!("deepsolve"));
        for (key, _) in std::env::vars() {
            if key.starts_with("DEEPSOLVE_") || key == "OPENAI_API_KEY" {
                cmd.env_remove(key);
            }
        }
        cmd.env("DEEPSOLVE_CONFIG", &self.config)
            .env(NO_PROBE.0, NO_PROBE.1)
            .env("DEEPSOLVE_MODELS", self.models())
            .env("XDG_DATA_HOME", self.data())
            .env("XDG_CACHE_HOME", self.dir.path().join("cache"));
        cmd
    }

    /// `deepsolve solve` against the mock at `server`, as a plain process.
    pub(crate) fn std_solve(&self, server: &deepsolve_testkit::MockServer) -> Command {
        let mut cmd = self.std_command();
        cmd.args([
            "solve",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
        ]);
        cmd
    }

    /// `deepsolve solve` against the mock at `server`.
    pub(crate) fn solve(&self, server: &deepsolve_testkit::MockServer) -> assert_cmd::Command {
        let mut cmd = assert_cmd::Command::from_std(self.std_solve(server));
        cmd.timeout(Duration::from_secs(120));
        cmd
    }

    /// The binary with a generous timeout, so a hung run fails instead of stalling CI.
    pub(crate) fn command(&self) -> assert_cmd::Command {
        let mut cmd = assert_cmd::Command::from_std(self.std_command());
        cmd.timeout(Duration::from_secs(120));
        cmd
    }

    /// `deepsolve doctor` against a model endpoint.
    pub(crate) fn doctor(&self, base_url: &str) -> std::process::Output {
        self.command()
            .args(["doctor", "--base-url", base_url, "--model", "mock-model"])
            .output()
            .expect("run doctor")
    }
}

/// The URL a `deepsolve serve` child announces on its first line (`listening on URL`); its
/// stdout must be piped. Panics with the server's log (the file its stderr goes to) when the
/// line is anything else.
pub(crate) fn listening_url(child: &mut Child, log: &Path) -> String {
    let stdout = child.stdout.take().expect("serve's stdout is piped");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("first line");
    match first.trim().strip_prefix("listening on ") {
        Some(url) => url.to_string(),
        None => {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("unexpected first line {first:?}; stderr:\n{log}")
        }
    }
}

/// A `deepsolve` command with a clean environment: no settings, no keys, data under `home`.
pub(crate) fn deepsolve(home: &Path) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("deepsolve"));
    for (key, _) in std::env::vars() {
        if key.starts_with("DEEPSOLVE_") || key == "OPENAI_API_KEY" {
            cmd.env_remove(key);
        }
    }
    let settings = home.join("settings.yaml");
    std::fs::write(&settings, "").expect("settings");
    cmd.env("DEEPSOLVE_CONFIG", settings)
        .env(NO_PROBE.0, NO_PROBE.1)
        .env("DEEPSOLVE_MODELS", home.join("models"))
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CACHE_HOME", home.join("cache"));
    cmd
}

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) base: String,
}

impl Server {
    /// Start `deepsolve serve` on a free loopback port and wait until it listens.
    pub(crate) fn start(home: &Path, db: &str, model_url: &str, instance: &str) -> Server {
        let mut cmd = deepsolve(home);
        let log_path = home.join(format!("{instance}.log"));
        let log = std::fs::File::create(&log_path).expect("log file");
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--database", db])
            .args(["--instance-id", instance, "--base-url", model_url])
            .args(["--model", "mock-model"])
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = cmd.spawn().expect("spawn deepsolve serve");
        let base = listening_url(&mut child, &log_path);
        Server { child, base }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn kill9(&mut self) {
        // std's kill() is SIGKILL: no shutdown hook runs.
        self.child.kill().expect("kill");
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
