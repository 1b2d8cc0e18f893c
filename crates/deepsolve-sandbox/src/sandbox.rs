//! `Sandbox`: the detected backend, shared by every sandboxed call. Detection runs a real
//! probe (the system Python started inside a real bwrap sandbox, as it will run, without `site`), once, so a
//! backend that cannot work is known at startup rather than at the model's first call.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::budget::{Budgets, Enforcement, Member};
use crate::config::{Limits, SandboxConfig, SandboxMode};
use crate::error::SandboxError;
use crate::exec::Teardown;
use crate::launch::{self, Backend, HostUser, Launch, NOBODY, RootLayout, Spawned};
use crate::seccomp::SeccompFilter;

const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// A working isolation backend (or the explicit `none` opt-out). Cheap to clone.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

struct Inner {
    config: SandboxConfig,
    backend: Backend,
    layout: RootLayout,
    version: String,
    budgets: Budgets,
    /// Interpreters this sandbox started (`start_python`), for diagnostics and tests.
    interpreters_started: AtomicU64,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("backend", &self.inner.backend)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// Find a backend that works, per `config.mode`. `Err(Unavailable)` says exactly why none
    /// does; the caller then does not mount the code tools (fail closed).
    pub async fn detect(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        if !is_executable(&config.python) {
            return Err(python_missing(&config.python));
        }
        let layout = RootLayout::of_host();
        if config.mode == SandboxMode::None {
            return Ok(Sandbox::assemble(
                config,
                Backend::Unsandboxed,
                layout,
                String::new(),
            ));
        }
        let bwrap = find_bwrap(&config.bwrap).ok_or_else(|| {
            SandboxError::Unavailable(
                "bubblewrap (bwrap) is not installed: install the Debian package `bubblewrap` (scripts/install-deps does), or set sandbox.backend: none to run model code without isolation".into(),
            )
        })?;
        let seccomp = seccomp_filter(&config)?;
        let version = bwrap_version(&bwrap).await;
        let mut first_failure = None;
        for host in host_candidates(config.drop_root) {
            for disable_userns in [true, false] {
                let backend = Backend::Bwrap {
                    bwrap: bwrap.clone(),
                    host: host.clone(),
                    disable_userns,
                    seccomp: seccomp.clone(),
                };
                let candidate =
                    Sandbox::assemble(config.clone(), backend, layout.clone(), version.clone());
                match candidate.probe().await {
                    Ok(()) => return Ok(candidate),
                    Err(reason) => {
                        let unknown_option = reason.contains("Unknown option");
                        first_failure.get_or_insert(reason);
                        if !unknown_option {
                            break;
                        }
                    }
                }
            }
        }
        Err(SandboxError::Unavailable(format!(
            "bubblewrap cannot create a sandbox here: {}",
            first_failure.unwrap_or_else(|| "no candidate worked".into())
        )))
    }

    /// The bwrap sandbox of `host` as a probe found it working (see `remember`): the same
    /// checks and launch as [`Sandbox::detect`], without the probe.
    pub(crate) fn with_backend(
        config: SandboxConfig,
        bwrap: PathBuf,
        host: HostUser,
        disable_userns: bool,
        version: String,
    ) -> Result<Sandbox, SandboxError> {
        if !is_executable(&config.python) {
            return Err(python_missing(&config.python));
        }
        let seccomp = seccomp_filter(&config)?;
        let backend = Backend::Bwrap {
            bwrap,
            host,
            disable_userns,
            seccomp,
        };
        Ok(Sandbox::assemble(
            config,
            backend,
            RootLayout::of_host(),
            version,
        ))
    }

    /// bwrap's `--version` line (empty when it did not say).
    pub(crate) fn version(&self) -> &str {
        &self.inner.version
    }

    fn assemble(
        config: SandboxConfig,
        backend: Backend,
        layout: RootLayout,
        version: String,
    ) -> Sandbox {
        let budgets = Budgets::new(&config.limits, backend != Backend::Unsandboxed);
        Sandbox {
            inner: Arc::new(Inner {
                config,
                backend,
                layout,
                version,
                budgets,
                interpreters_started: AtomicU64::new(0),
            }),
        }
    }

    /// Start the system Python in the sandbox with a scratch workspace and check it ran there
    /// (and, with the seccomp filter, that the filter refuses what it must).
    async fn probe(&self) -> Result<(), String> {
        let scratch = std::env::temp_dir().join(format!(
            "deepsolve-probe-{}-{}",
            std::process::id(),
            unique()
        ));
        let filtered = matches!(
            self.backend(),
            Backend::Bwrap {
                seccomp: Some(_),
                ..
            }
        );
        // `-S`: no `site` — the probe asks whether Python runs isolated here, not what is
        // installed (`doctor` checks the modules); `site` and the `.pth` hooks of the system's
        // packages were most of the probe's time, and it runs before every turn's first
        // request.
        let argv: Vec<OsString> = vec![
            self.config().python.as_os_str().to_owned(),
            "-I".into(),
            "-S".into(),
            "-c".into(),
            PROBE.into(),
            if filtered {
                libc::SYS_ptrace.to_string().into()
            } else {
                "".into()
            },
        ];
        let cancel = CancellationToken::new();
        let result = tokio::time::timeout(
            PROBE_TIMEOUT,
            self.run_once(argv, Some(&scratch), PROBE_TIMEOUT, &cancel, Teardown::Skip),
        )
        .await;
        let written = std::fs::read_to_string(scratch.join("probe")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&scratch);
        let expected = if filtered {
            format!("{NOBODY} ptrace:{}", libc::EPERM)
        } else {
            format!("{NOBODY} ptrace:unchecked")
        };
        match result {
            Err(_) => Err("the probe timed out".into()),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(out)) if out.success() && written == expected => Ok(()),
            Ok(Ok(out))
                if out.success() && filtered && written.starts_with(&format!("{NOBODY} ")) =>
            {
                Err(format!(
                    "the seccomp filter is not in force in the sandbox (ptrace gave {}, not EPERM); set sandbox.seccomp: false to run without it (not recommended)",
                    written.split_once(':').map(|(_, e)| e).unwrap_or("?")
                ))
            }
            Ok(Ok(out)) => {
                let said = out.stderr.text.trim();
                Err(if said.is_empty() {
                    format!("the probe failed ({})", out.detail)
                } else {
                    said.lines().take(3).collect::<Vec<_>>().join(" ")
                })
            }
        }
    }

    /// How many interpreters this sandbox (and its clones) started so far.
    pub fn interpreters_started(&self) -> u64 {
        self.inner.interpreters_started.load(Ordering::Relaxed)
    }

    pub(crate) fn count_interpreter_start(&self) {
        self.inner
            .interpreters_started
            .fetch_add(1, Ordering::Relaxed);
    }

    pub fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.config.limits
    }

    pub fn is_isolated(&self) -> bool {
        self.inner.backend != Backend::Unsandboxed
    }

    /// The backend's name as `sandbox.backend` spells it: `bwrap`, or `none` (no isolation).
    pub fn backend_name(&self) -> &'static str {
        match &self.inner.backend {
            Backend::Bwrap { .. } => "bwrap",
            Backend::Unsandboxed => "none",
        }
    }

    /// One line for `doctor` and logs: what isolates the code.
    pub fn describe(&self) -> String {
        match &self.inner.backend {
            Backend::Unsandboxed => {
                "no isolation: model code runs unsandboxed on this machine".into()
            }
            Backend::Bwrap {
                host,
                disable_userns,
                seccomp,
                ..
            } => {
                let who = match host {
                    HostUser::Current => "as the current user",
                    HostUser::Nobody { .. } => "as nobody (root dropped before bwrap)",
                    HostUser::Root => "as root (could not drop to nobody)",
                };
                let userns = if *disable_userns {
                    ", nested user namespaces off"
                } else {
                    ""
                };
                let filter = match seccomp {
                    Some(_) => ", seccomp filter on",
                    None => ", NO seccomp filter",
                };
                format!(
                    "{} {who}: no network, clean environment, read-only system, private /tmp, workspace the only writable place{userns}{filter}",
                    if self.inner.version.is_empty() {
                        "bwrap"
                    } else {
                        &self.inner.version
                    },
                )
            }
        }
    }

    /// A warning to print on every start, when the setup is weaker than it should be.
    pub fn warning(&self) -> Option<String> {
        let Backend::Bwrap { host, seccomp, .. } = &self.inner.backend else {
            return Some(
                "sandbox.backend is `none`: model-written code runs WITHOUT isolation, with your user's access to files and network. Use it only on a throwaway machine.".into(),
            );
        };
        let mut warnings = Vec::new();
        if *host == HostUser::Root {
            warnings.push("the sandbox runs as root on the host (dropping to nobody failed): the kernel does not enforce the per-sandbox process limit; the watchdog's per-turn budget, the pid namespace and the group kill still contain runaway processes");
        }
        if seccomp.is_none() {
            warnings.push("sandbox.seccomp is false: model-written code may call ptrace, bpf, userfaultfd, perf_event_open, the kernel keyring, mount and namespace system calls — the kernel's attack surface is wide open. Turn it back on unless this host cannot install seccomp filters");
        }
        (!warnings.is_empty()).then(|| warnings.join("; "))
    }

    /// Create the workspace if needed, make it writable for the sandbox, and return its
    /// canonical path.
    pub fn prepare_workspace(&self, dir: &Path) -> Result<PathBuf, SandboxError> {
        let owner = match &self.inner.backend {
            Backend::Bwrap {
                host: HostUser::Nobody { .. },
                ..
            } => Some(NOBODY),
            _ => None,
        };
        crate::workspace::prepare(dir, owner)
    }

    /// How the per-turn memory and process budgets are enforced here.
    pub fn enforcement(&self) -> &Enforcement {
        self.inner.budgets.enforcement()
    }

    /// Lines for `doctor`: every budget, its size and what enforces it.
    pub fn describe_budgets(&self) -> Vec<String> {
        self.enforcement().describe(self.limits())
    }

    /// Start a sandboxed process in its turn's budget (the turn is its workspace) and watch it;
    /// `busy`: it runs a call from the start (see `budget::Member::set_busy`).
    pub(crate) fn spawn(
        &self,
        mut launch: Launch<'_>,
        busy: bool,
    ) -> std::io::Result<(Spawned, Member)> {
        let turn = self.inner.budgets.turn(launch.workspace)?;
        launch.cgroup = turn.cgroup_procs();
        let spawned = launch::spawn(&self.inner.backend, &self.inner.layout, launch)?;
        let root = spawned
            .child
            .pid()
            .ok_or_else(|| std::io::Error::other("the sandbox exited at once"));
        match root.and_then(|pid| turn.join(pid, busy)) {
            Ok(member) => Ok((spawned, member)),
            Err(e) => {
                // Unwatched code must not run: fail closed.
                spawned.child.kill_now();
                Err(e)
            }
        }
    }

    /// The workspace as the sandboxed code sees it.
    pub fn inner_workdir(&self, workspace: &Path) -> String {
        match self.inner.backend {
            Backend::Unsandboxed => workspace.to_string_lossy().into_owned(),
            Backend::Bwrap { .. } => launch::WORKDIR.to_string(),
        }
    }

    /// `doctor`: import each module in the sandbox's Python and report its version or error.
    pub async fn check_modules(
        &self,
        modules: &[&str],
    ) -> Result<Vec<(String, Result<String, String>)>, SandboxError> {
        let script = "import importlib, json, sys\nout = {}\nfor m in sys.argv[1:]:\n    try:\n        out[m] = [True, str(getattr(importlib.import_module(m), '__version__', 'ok'))]\n    except Exception as e:\n        out[m] = [False, f'{type(e).__name__}: {e}']\nprint(json.dumps(out))\n";
        let mut argv: Vec<OsString> = vec![
            self.config().python.as_os_str().to_owned(),
            "-I".into(),
            "-c".into(),
            script.into(),
        ];
        argv.extend(modules.iter().map(OsString::from));
        let cancel = CancellationToken::new();
        let out = self
            .run_argv(argv, None, Duration::from_secs(60), &cancel)
            .await?;
        let parsed: serde_json::Value =
            serde_json::from_str(out.stdout.text.trim()).map_err(|_| {
                SandboxError::Start(format!(
                    "the module check failed: {}",
                    out.stderr.text.trim()
                ))
            })?;
        Ok(modules
            .iter()
            .map(|m| {
                let entry = &parsed[*m];
                let text = entry[1].as_str().unwrap_or_default().to_string();
                let result = if entry[0].as_bool() == Some(true) {
                    Ok(text)
                } else {
                    Err(text)
                };
                (m.to_string(), result)
            })
            .collect())
    }
}

/// The probe: write the uid it runs as and, given the ptrace syscall number, the errno of
/// `ptrace(PTRACE_TRACEME)` (which succeeds without the filter).
const PROBE: &str = "import os, sys\nresult = 'unchecked'\nif sys.argv[1]:\n    import ctypes\n    libc = ctypes.CDLL(None, use_errno=True)\n    r = libc.syscall(int(sys.argv[1]), 0, 0, 0, 0)\n    result = str(ctypes.get_errno()) if r == -1 else 'allowed'\nopen('probe', 'w').write(f'{os.getuid()} ptrace:{result}')\n";

/// The filter `config` asks for, or why the sandbox cannot have it (then there is none).
fn seccomp_filter(config: &SandboxConfig) -> Result<Option<SeccompFilter>, SandboxError> {
    if !config.seccomp {
        return Ok(None);
    }
    SeccompFilter::build().map(Some).map_err(|e| {
        SandboxError::Unavailable(format!(
            "{e}: the sandbox needs its seccomp filter; set sandbox.seccomp: false to run without it (not recommended)"
        ))
    })
}

fn python_missing(python: &Path) -> SandboxError {
    SandboxError::Unavailable(format!(
        "{} was not found: install python3 with python3-numpy python3-sympy python3-scipy python3-matplotlib (scripts/install-deps does)",
        python.display()
    ))
}

/// Our effective uid.
pub(crate) fn geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

pub(crate) fn find_bwrap(configured: &Path) -> Option<PathBuf> {
    if is_executable(configured) {
        return Some(configured.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .find(|p| is_executable(p))
}

async fn bwrap_version(bwrap: &Path) -> String {
    let out = tokio::process::Command::new(bwrap)
        .arg("--version")
        .env_clear()
        .output()
        .await;
    out.ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// As root, first try dropping to nobody (the kernel then enforces the process limit), then
/// root itself; otherwise run as ourselves.
fn host_candidates(drop_root: bool) -> Vec<HostUser> {
    if geteuid() != 0 {
        return vec![HostUser::Current];
    }
    if !drop_root {
        return vec![HostUser::Root];
    }
    match stage_dir() {
        Some(stage) => vec![HostUser::Nobody { stage }, HostUser::Root],
        None => vec![HostUser::Root],
    }
}

/// A root-owned, empty, not group/world-writable directory that `nobody` can traverse, to
/// bind each workspace onto inside a private mount namespace.
pub(crate) fn stage_dir() -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let candidates = [
        PathBuf::from("/run/deepsolve-sandbox"),
        std::env::temp_dir().join(".deepsolve-sandbox-root"),
    ];
    candidates.into_iter().find(|dir| {
        let _ = std::fs::DirBuilder::new().mode(0o755).create(dir);
        match std::fs::symlink_metadata(dir) {
            Ok(m) => m.is_dir() && m.uid() == 0 && m.mode() & 0o022 == 0 && m.mode() & 0o001 != 0,
            Err(_) => false,
        }
    })
}

/// A process-unique suffix for scratch names and interpreter tokens.
pub(crate) fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{:x}{:08x}", NEXT.fetch_add(1, Ordering::Relaxed), nanos)
}
