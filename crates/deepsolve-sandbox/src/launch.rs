//! Building and spawning one sandboxed process: the bwrap command line, the clean
//! environment, and what runs between `fork` and `exec` (fd hygiene, rlimits, and — when we
//! are root — the drop to `nobody`).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

use crate::config::Limits;
use crate::process::SandboxChild;
use crate::seccomp::SeccompFilter;

/// Where the workspace appears inside the sandbox.
pub const WORKDIR: &str = "/workspace";
/// The uid and gid the sandboxed code runs as (inside, and on the host when we drop root).
pub(crate) const NOBODY: u32 = 65534;

/// How the sandbox's processes run on the host; decided once by `Sandbox::detect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    Bwrap {
        bwrap: PathBuf,
        host: HostUser,
        /// bwrap ≥ 0.8 can forbid nested user namespaces inside the sandbox.
        disable_userns: bool,
        /// Installed by bwrap in every sandbox; `None` only by the explicit opt-out.
        seccomp: Option<SeccompFilter>,
    },
    /// `sandbox: none`: no isolation, only a clean environment, rlimits and the group kill.
    Unsandboxed,
}

/// Who the sandbox runs as on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostUser {
    /// We are not root: bwrap runs as us, in a user namespace.
    Current,
    /// We are root: the child drops to uid/gid 65534 before bwrap starts, so the kernel
    /// enforces the process limit (it exempts root) and an escape would land as `nobody`.
    /// `stage` is a root-owned empty directory where the workspace is bind-mounted in a
    /// private mount namespace, because `nobody` may not traverse the path to the real one
    /// (e.g. under `/root`).
    Nobody { stage: PathBuf },
    /// We are root and dropping privileges did not work here: bwrap runs as root. The
    /// process limit is then not enforced; the pid namespace and the group kill contain a
    /// fork bomb.
    Root,
}

/// Top-level host entries a sandbox needs to run the system's programs, computed once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RootLayout {
    /// `(name, target)` for merged-/usr symlinks such as `/bin -> usr/bin`.
    symlinks: Vec<(String, PathBuf)>,
    /// Real directories to bind read-only (older, non-merged layouts).
    dirs: Vec<String>,
}

/// Read-only pieces of `/etc` programs commonly need; nothing with secrets (no `shadow`, no
/// `passwd`, no `ssl` keys, no `resolv.conf` — there is no network anyway).
const ETC_ALLOW: &[&str] = &[
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/matplotlibrc",
    "/etc/fonts",
    "/etc/mime.types",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/python3.12",
    "/etc/python3.13",
];

impl RootLayout {
    pub(crate) fn of_host() -> Self {
        let mut layout = RootLayout::default();
        for name in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
            let path = Path::new("/").join(name);
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(&path) {
                        layout.symlinks.push((name.to_string(), target));
                    }
                }
                Ok(meta) if meta.is_dir() => layout.dirs.push(name.to_string()),
                _ => {}
            }
        }
        layout
    }
}

/// The environment every sandboxed process gets: nothing inherited, so no API key or other
/// secret of ours can reach it. Threads count against the process limit, hence one BLAS thread.
pub(crate) fn sandbox_env(home: &str) -> Vec<(&'static str, String)> {
    vec![
        ("PATH", "/usr/bin:/bin".into()),
        ("HOME", home.into()),
        ("TMPDIR", "/tmp".into()),
        ("LANG", "C.UTF-8".into()),
        ("MPLBACKEND", "Agg".into()),
        ("MPLCONFIGDIR", "/tmp/matplotlib".into()),
        ("OPENBLAS_NUM_THREADS", "1".into()),
        ("OMP_NUM_THREADS", "1".into()),
        ("MKL_NUM_THREADS", "1".into()),
    ]
}

/// The bwrap arguments that build the sandbox, up to and including `--`.
pub(crate) fn bwrap_args(
    layout: &RootLayout,
    limits: &Limits,
    workspace: Option<&Path>,
    disable_userns: bool,
) -> Vec<OsString> {
    let mut a = Args::default();
    a.flags(&[
        "--unshare-user",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
    ]);
    a.flags(&["--unshare-uts", "--unshare-cgroup-try"]);
    if disable_userns {
        a.flags(&["--disable-userns"]);
    }
    a.flags(&["--die-with-parent", "--new-session", "--cap-drop", "ALL"]);
    a.flags(&["--uid", "65534", "--gid", "65534", "--hostname", "sandbox"]);
    a.flags(&["--ro-bind", "/usr", "/usr"]);
    for (name, target) in &layout.symlinks {
        a.push("--symlink");
        a.push(target.as_os_str());
        a.push(format!("/{name}"));
    }
    for name in &layout.dirs {
        a.flags(&["--ro-bind-try"]);
        a.push(format!("/{name}"));
        a.push(format!("/{name}"));
    }
    for path in ETC_ALLOW {
        a.flags(&["--ro-bind-try", path, path]);
    }
    a.flags(&["--proc", "/proc", "--dev", "/dev"]);
    // /dev is bwrap's own tmpfs (sized at half the RAM): a bounded /dev/shm for POSIX
    // semaphores, and the rest read-only (device nodes still work).
    a.push("--size");
    a.push((limits.tmp_bytes / 4).max(1 << 20).to_string());
    a.flags(&["--tmpfs", "/dev/shm"]);
    a.flags(&["--remount-ro", "/dev"]);
    a.push("--size");
    a.push(limits.tmp_bytes.to_string());
    a.flags(&["--tmpfs", "/tmp"]);
    if let Some(source) = workspace {
        a.push("--bind");
        a.push(source.as_os_str());
        a.push(WORKDIR);
    }
    // Everything but /tmp and the workspace is read-only, the root directory included.
    a.flags(&["--remount-ro", "/"]);
    a.flags(&[
        "--chdir",
        if workspace.is_some() { WORKDIR } else { "/tmp" },
    ]);
    a.flags(&["--clearenv"]);
    for (key, value) in sandbox_env("/tmp") {
        a.push("--setenv");
        a.push(key);
        a.push(value);
    }
    a.push("--");
    a.0
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }

    fn push(&mut self, arg: impl Into<OsString>) {
        self.0.push(arg.into());
    }
}

/// One process to start in the sandbox.
pub(crate) struct Launch<'a> {
    /// Program and arguments as seen inside the sandbox.
    pub argv: Vec<OsString>,
    /// The turn's workspace on the host (already prepared).
    pub workspace: Option<&'a Path>,
    pub limits: &'a Limits,
    /// The RLIMIT_CPU hard limit, seconds.
    pub cpu_s: u64,
    /// Pipes the child gets as fds 3 and 4 (the interpreter's control channel).
    pub control: Option<(OwnedFd, OwnedFd)>,
    /// The turn's cgroup (its `cgroup.procs`), joined between fork and exec.
    pub cgroup: Option<PathBuf>,
}

/// A started process: its handle and the read ends of its stdout and stderr.
pub(crate) struct Spawned {
    pub child: SandboxChild,
    pub stdout: std::io::PipeReader,
    pub stderr: std::io::PipeReader,
}

pub(crate) fn spawn(
    backend: &Backend,
    layout: &RootLayout,
    launch: Launch<'_>,
) -> Result<Spawned, io::Error> {
    let (program, args, drop_root) = command_line(backend, layout, &launch)?;
    let mut cmd = Command::new(&program);
    cmd.args(&args).env_clear().stdin(Stdio::null());
    if *backend == Backend::Unsandboxed {
        unsandboxed_env(&mut cmd, launch.workspace);
    }
    let (out_r, out_w) = std::io::pipe()?;
    let (err_r, err_w) = std::io::pipe()?;
    cmd.stdout(Stdio::from(out_w)).stderr(Stdio::from(err_w));
    cmd.process_group(0).kill_on_drop(true);

    let control = match launch.control {
        Some((a, b)) => Some((high_fd(&a)?, high_fd(&b)?)),
        None => None,
    };
    let seccomp = match backend {
        Backend::Bwrap {
            seccomp: Some(filter),
            ..
        } => Some(high_fd(&filter.to_memfd()?)?),
        _ => None,
    };
    let cgroup = match &launch.cgroup {
        Some(procs) => Some(open_cgroup_procs(procs)?),
        None => None,
    };
    let child_setup = ChildSetup {
        cgroup: cgroup.as_ref().map(AsRawFd::as_raw_fd),
        rlimits: rlimits(launch.limits, launch.cpu_s),
        control: control
            .as_ref()
            .map(|(a, b)| (a.as_raw_fd(), b.as_raw_fd())),
        seccomp: seccomp.as_ref().map(AsRawFd::as_raw_fd),
        drop: drop_root,
    };
    // SAFETY: `apply` only makes async-signal-safe system calls (dup2, close_range, setrlimit,
    // unshare, mount, setgroups, setgid, setuid) on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || child_setup.apply());
    }
    let child = cmd.spawn()?;
    // The child has its copies; ours of the control and filter fds close here.
    drop(control);
    drop(seccomp);
    drop(cgroup);
    Ok(Spawned {
        child: SandboxChild::new(child),
        stdout: out_r,
        stderr: err_r,
    })
}

/// The program to exec, its arguments, and (root only) the drop to `nobody`.
fn command_line(
    backend: &Backend,
    layout: &RootLayout,
    launch: &Launch<'_>,
) -> io::Result<(OsString, Vec<OsString>, Option<DropRoot>)> {
    match backend {
        Backend::Bwrap {
            bwrap,
            host,
            disable_userns,
            seccomp,
        } => {
            // As nobody, bwrap binds the workspace from the stage it is mounted on.
            let (source, drop_root) = match (host, launch.workspace) {
                (HostUser::Nobody { stage }, Some(ws)) => (
                    Some(stage.clone()),
                    Some(DropRoot::new(Some((ws, stage.as_path())))?),
                ),
                (HostUser::Nobody { .. }, None) => (None, Some(DropRoot::new(None)?)),
                (_, ws) => (ws.map(Path::to_path_buf), None),
            };
            let mut args = bwrap_args(layout, launch.limits, source.as_deref(), *disable_userns);
            if seccomp.is_some() {
                let fd = seccomp_fd(launch.control.is_some());
                args.splice(0..0, ["--seccomp".into(), fd.to_string().into()]);
            }
            args.extend(launch.argv.iter().cloned());
            Ok((bwrap.as_os_str().to_owned(), args, drop_root))
        }
        Backend::Unsandboxed => {
            let mut argv = launch.argv.iter().cloned();
            let program = argv
                .next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty argv"))?;
            Ok((program, argv.collect(), None))
        }
    }
}

/// Without a sandbox there is no `/workspace` or private `/tmp`: the process runs in the
/// workspace itself, still with nothing of our environment.
fn unsandboxed_env(cmd: &mut Command, workspace: Option<&Path>) {
    let home = workspace
        .map(|w| w.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/tmp".into());
    cmd.envs(sandbox_env(&home));
    cmd.env(
        "MPLCONFIGDIR",
        std::env::temp_dir().join("deepsolve-matplotlib"),
    );
    if let Some(ws) = workspace {
        cmd.current_dir(ws);
    }
}

fn open_cgroup_procs(procs: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(procs)?;
    Ok(file.into())
}

/// A close-on-exec duplicate numbered 10 or above, so `dup2` onto 3 and 4 in the child can
/// never clobber its own source.
fn high_fd(fd: &OwnedFd) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a valid fd returns a new fd we then own.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` is a fresh, valid fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

fn rlimits(limits: &Limits, cpu_s: u64) -> Vec<(Resource, u64)> {
    vec![
        (libc::RLIMIT_AS, limits.address_space_bytes),
        (libc::RLIMIT_CPU, cpu_s.max(1)),
        (libc::RLIMIT_FSIZE, limits.effective_file_size()),
        (libc::RLIMIT_NOFILE, limits.open_files.max(32)),
        (libc::RLIMIT_CORE, 0),
    ]
}

/// Root only: what the child does before it becomes `nobody`.
struct DropRoot {
    /// `(workspace, stage)`: bind the workspace onto the stage in a private mount namespace.
    bind: Option<(CString, CString)>,
}

impl DropRoot {
    fn new(bind: Option<(&Path, &Path)>) -> io::Result<Self> {
        let bind = match bind {
            Some((ws, stage)) => Some((c_path(ws.as_os_str())?, c_path(stage.as_os_str())?)),
            None => None,
        };
        Ok(DropRoot { bind })
    }
}

fn c_path(path: &OsStr) -> io::Result<CString> {
    CString::new(path.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

/// The fd bwrap reads the seccomp program from: the first after stdio and the control pipes
/// (bwrap closes it once read, so the sandboxed code never sees it).
fn seccomp_fd(has_control: bool) -> RawFd {
    if has_control { 5 } else { 3 }
}

/// Everything the child does between fork and exec, prepared before the fork.
struct ChildSetup {
    /// `cgroup.procs` of the turn's cgroup, joined first (before the fds are closed).
    cgroup: Option<RawFd>,
    rlimits: Vec<(Resource, u64)>,
    control: Option<(RawFd, RawFd)>,
    /// The seccomp program's memfd (numbered 10 or above), for bwrap.
    seccomp: Option<RawFd>,
    drop: Option<DropRoot>,
}

impl ChildSetup {
    fn apply(&self) -> io::Result<()> {
        if let Some(procs) = self.cgroup {
            // SAFETY: write(2) of a static buffer to an fd opened before the fork.
            if unsafe { libc::write(procs, c"0".as_ptr().cast(), 1) } != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        let mut first_free = match self.control {
            Some((req, rep)) => {
                // SAFETY: dup2 onto 3 of a pipe end opened before the fork; the source is
                // numbered 10 or above (`high_fd`), so the target never clobbers it.
                check(unsafe { libc::dup2(req, 3) })?;
                // SAFETY: as above, onto 4, from the reply pipe's high-numbered copy.
                check(unsafe { libc::dup2(rep, 4) })?;
                5
            }
            None => 3,
        };
        if let Some(program) = self.seccomp {
            let target = seccomp_fd(self.control.is_some());
            // SAFETY: dup2 of the seccomp memfd (numbered 10 or above, opened before the fork)
            // onto the first fd after the control pipes; nothing we still need lives there.
            check(unsafe { libc::dup2(program, target) })?;
            first_free = target + 1;
        }
        close_from(first_free as u32);
        for &(resource, value) in &self.rlimits {
            let lim = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: setrlimit reads the `rlimit` on our stack and changes only this child.
            check(unsafe { libc::setrlimit(resource, &lim) })?;
        }
        if let Some(drop) = &self.drop {
            drop_root(drop)?;
        }
        Ok(())
    }
}

/// Close every fd from `first` on, whatever our own parent left open without close-on-exec:
/// bwrap passes inherited fds through to the sandbox.
fn close_from(first: u32) {
    // SAFETY: close_range only closes fds of this (child) process.
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) };
    if r != 0 {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes only into the `rlimit` on our stack.
        let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            lim.rlim_cur.min(65_536) as i32
        } else {
            4096
        };
        for fd in first as i32..max {
            // SAFETY: closing fds of this (child) process; no Rust owner here uses them again
            // before exec, and EBADF on an unused number is harmless.
            unsafe { libc::close(fd) };
        }
    }
}

fn drop_root(plan: &DropRoot) -> io::Result<()> {
    // SAFETY: plain system calls on C strings prepared before the fork.
    unsafe {
        if let Some((workspace, stage)) = &plan.bind {
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            check(libc::mount(
                workspace.as_ptr(),
                stage.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ))?;
        }
        check(libc::setgroups(0, std::ptr::null()))?;
        check(libc::setgid(NOBODY))?;
        check(libc::setuid(NOBODY))?;
        if libc::getuid() != NOBODY || libc::geteuid() != NOBODY {
            return Err(io::Error::other("could not drop to nobody"));
        }
    }
    Ok(())
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(ws: Option<&Path>) -> Vec<String> {
        let layout = RootLayout {
            symlinks: vec![("bin".into(), PathBuf::from("usr/bin"))],
            dirs: vec![],
        };
        bwrap_args(&layout, &Limits::default(), ws, true)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn has_seq(args: &[String], seq: &[&str]) -> bool {
        args.windows(seq.len()).any(|w| w == seq)
    }

    #[test]
    fn the_sandbox_is_closed_by_default() {
        let a = args(Some(Path::new("/data/turns/t1")));
        for flag in [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--disable-userns",
        ] {
            assert!(a.iter().any(|x| x == flag), "missing {flag}");
        }
        assert!(has_seq(&a, &["--cap-drop", "ALL"]));
        assert!(has_seq(&a, &["--uid", "65534", "--gid", "65534"]));
        assert!(has_seq(&a, &["--ro-bind", "/usr", "/usr"]));
        assert!(has_seq(&a, &["--symlink", "usr/bin", "/bin"]));
        assert!(has_seq(&a, &["--bind", "/data/turns/t1", WORKDIR]));
        assert!(has_seq(&a, &["--remount-ro", "/"]));
        assert!(has_seq(&a, &["--chdir", WORKDIR]));
        assert_eq!(a.last().map(String::as_str), Some("--"));
        // The workspace is the only writable bind, and no secret-bearing /etc file is there.
        assert_eq!(a.iter().filter(|x| *x == "--bind").count(), 1);
        assert!(
            !a.iter()
                .any(|x| x.contains("shadow") || x.contains("passwd"))
        );
        // The remount comes after every mount, so it covers them.
        let remount = a.windows(2).position(|w| w == ["--remount-ro", "/"]);
        let bind = a.iter().position(|x| x == "--bind");
        assert!(remount > bind);
    }

    #[test]
    fn the_environment_is_minimal() {
        let a = args(None);
        let keys: Vec<&str> = a
            .windows(2)
            .filter(|w| w[0] == "--setenv")
            .map(|w| w[1].as_str())
            .collect();
        assert!(keys.contains(&"PATH") && keys.contains(&"MPLBACKEND"));
        assert!(
            !keys
                .iter()
                .any(|k| k.contains("KEY") || k.contains("TOKEN"))
        );
        assert!(has_seq(&a, &["--chdir", "/tmp"]));
    }
}
