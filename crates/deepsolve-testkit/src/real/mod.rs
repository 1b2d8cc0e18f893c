//! Real models for tests: the project's small local model (a GGUF file that
//! `scripts/fetch-model` caches outside the checkout, named to the tests by
//! `DEEPSOLVE_TEST_MODEL`) and [`LlamaServer`], llama.cpp's own OpenAI-compatible server
//! (the pinned `xllamacpp` Python package, from `DEEPSOLVE_TEST_PYTHON`) serving it, so the
//! HTTP path meets a real server's quirks too.
//!
//! A real-model test asserts what a real model guarantees — well-formed events, the spine's
//! rules, a named stop, no engine text in the answer — never its exact words.
//!
//! Without the model or the Python package a test is skipped with a line saying why; under CI
//! (`CI` set, as `.ci/run` runs) a missing piece is a failure, because `scripts/test` installs
//! both.

use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The launcher: starts the server, prints `listening <url>`, serves until stdin closes.
const LAUNCHER: &str = include_str!("llama_server.py");

/// How long loading the model and starting the server may take on a loaded 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum RealModelError {
    #[error("cannot start llama.cpp's server ({python}): {source}")]
    Spawn {
        python: String,
        source: std::io::Error,
    },
    #[error("llama.cpp's server did not come up within {}s; its log ends:\n{log}", .after.as_secs())]
    NotReady { after: Duration, log: String },
    #[error("llama.cpp's server exited before it was ready; its log ends:\n{log}")]
    Exited { log: String },
    #[error("cannot set up llama.cpp's server: {0}")]
    Io(#[from] std::io::Error),
}

/// The small real model the tests run, or `None` (with the reason printed) when this machine
/// lacks it outside CI. Panics under CI: `scripts/test` fetches it, so its absence is a bug.
pub fn test_model() -> Option<PathBuf> {
    let path = std::env::var_os("DEEPSOLVE_TEST_MODEL").map(PathBuf::from);
    match path {
        Some(path) if path.is_file() => Some(path),
        other => skip_or_fail(&format!(
            "no real model: DEEPSOLVE_TEST_MODEL is {} (scripts/test fetches the model and sets it)",
            match other {
                Some(p) => format!("{} (no such file)", p.display()),
                None => "unset".to_string(),
            }
        )),
    }
}

/// The Python that has `xllamacpp`, or `None` (reason printed) outside CI.
pub fn server_python() -> Option<PathBuf> {
    let python = std::env::var_os("DEEPSOLVE_TEST_PYTHON").map(PathBuf::from);
    let works = python.as_deref().is_some_and(|p| {
        Command::new(p)
            .args(["-c", "import xllamacpp"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if works {
        return python;
    }
    skip_or_fail(
        "no llama.cpp server: DEEPSOLVE_TEST_PYTHON is unset or cannot `import xllamacpp` \
         (scripts/install-deps installs it)",
    )
}

fn skip_or_fail<T>(why: &str) -> Option<T> {
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIP (real model): {why}");
    None
}

/// llama.cpp's server on a free loopback port, serving one model; stopped on drop (its stdin
/// closes, and it is killed if it lingers).
pub struct LlamaServer {
    child: Child,
    stdin: Option<ChildStdin>,
    addr: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl LlamaServer {
    /// Starts the server with `context` tokens of context and two threads, and waits until it
    /// answers `/health`.
    pub fn start(python: &Path, model: &Path, context: u32) -> Result<Self, RealModelError> {
        let dir = tempfile::tempdir()?;
        let launcher = dir.path().join("llama_server.py");
        std::fs::write(&launcher, LAUNCHER)?;
        let log = dir.path().join("server.log");
        let port = free_port()?;
        let mut child = Command::new(python)
            .arg(&launcher)
            .arg(model)
            .arg(port.to_string())
            .arg(context.to_string())
            .arg("2")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .map_err(|source| RealModelError::Spawn {
                python: python.display().to_string(),
                source,
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let mut server = LlamaServer {
            child,
            stdin,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            log,
            _dir: dir,
        };
        server.wait_ready(stdout)?;
        Ok(server)
    }

    /// The OpenAI-compatible base URL (ends in `/v1`).
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The server's own root (for `/props`, `/health`).
    pub fn root(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn wait_ready(
        &mut self,
        stdout: Option<std::process::ChildStdout>,
    ) -> Result<(), RealModelError> {
        let (tx, rx) = mpsc::channel();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if line.starts_with("listening") {
                        let _ = tx.send(());
                    }
                }
            });
        }
        let started = Instant::now();
        loop {
            if let Some(_status) = self.child.try_wait()? {
                return Err(RealModelError::Exited {
                    log: self.log_tail(),
                });
            }
            if rx.try_recv().is_ok() && self.healthy() {
                return Ok(());
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(RealModelError::NotReady {
                    after: START_TIMEOUT,
                    log: self.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `GET /health` answers 200.
    fn healthy(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let request = format!(
            "GET /health HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        if std::io::Write::write_all(&mut stream, request.as_bytes()).is_err() {
            return false;
        }
        let mut reply = String::new();
        let _ = stream.read_to_string(&mut reply);
        reply.starts_with("HTTP/1.1 200")
    }

    /// The last lines of the server's log, for an error.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        // Closing stdin ends the launcher; a server that lingers is killed.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port free at the moment of asking (the server binds it a moment later).
fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}
