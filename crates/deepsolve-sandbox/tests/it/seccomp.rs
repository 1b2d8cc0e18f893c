//! The seccomp filter, for real: from Python inside the real sandbox (the persistent
//! interpreter, a forked child of it, and a one-shot command's child), the refused system
//! calls fail with EPERM (`clone3` with ENOSYS), ordinary work still runs, the probe notices a
//! bwrap that did not install the filter (fail closed), and the opt-out is loud.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;
use deepsolve_sandbox::*;
use serde_json::{Value, json};

const EPERM: i64 = libc::EPERM as i64;
const ENOSYS: i64 = libc::ENOSYS as i64;

/// Each attempt: a name, the syscall number and its arguments (chosen so that without the
/// filter most of them fail differently, or succeed: `ptrace(PTRACE_TRACEME)` does).
fn calls() -> Value {
    json!({
        "ptrace": [libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0],
        "bpf": [libc::SYS_bpf, 0, 0, 0],
        "userfaultfd": [libc::SYS_userfaultfd, 1],
        "perf_event_open": [libc::SYS_perf_event_open, 0, 0, -1, -1, 0],
        "keyctl": [libc::SYS_keyctl, 0, -3, 0],
        "add_key": [libc::SYS_add_key, 0, 0, 0, 0, -3],
        "mount": [libc::SYS_mount, 0, 0, 0, 0, 0],
        "umount2": [libc::SYS_umount2, 0, 0],
        "unshare_newuser": [libc::SYS_unshare, libc::CLONE_NEWUSER],
        "setns": [libc::SYS_setns, -1, 0],
        "clone3": [libc::SYS_clone3, 0, 0],
    })
}

/// Python that makes every call of [`calls`] and prints `{name: errno}` (0: it succeeded).
/// A raw `clone(CLONE_NEWUSER)` and a second `ptrace` are made in forked children, which
/// report by exit status (so that if the clone were allowed no second copy of the cell would
/// run on); the process's own `ptrace(PTRACE_TRACEME)` comes last, because once allowed, every
/// signal (a child's SIGCHLD) would stop it for a tracer that does not expect it.
fn attempt_script() -> String {
    let clone_flags = libc::CLONE_NEWUSER | libc::SIGCHLD;
    format!(
        r#"import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return 0 if r != -1 else ctypes.get_errno()
def in_child(nr, *args):
    pid = os.fork()
    if pid == 0:
        os._exit(errno_of(nr, *args))
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
specs = json.loads({calls:?})
result = {{}}
result['clone_newuser'] = in_child({clone}, {clone_flags}, 0, 0, 0, 0)
result['ptrace_in_fork'] = in_child(*specs['ptrace'])
for name, spec in specs.items():
    if name != 'ptrace':
        result[name] = errno_of(*spec)
result['ptrace'] = errno_of(*specs['ptrace'])
print(json.dumps(result))
"#,
        calls = calls().to_string(),
        clone = libc::SYS_clone,
    )
}

fn assert_refused(result: &Value) {
    let map = result.as_object().expect("an object");
    assert_eq!(
        map.len(),
        calls().as_object().unwrap().len() + 2,
        "{result}"
    );
    for (name, errno) in map {
        let expected = if name == "clone3" { ENOSYS } else { EPERM };
        assert_eq!(errno.as_i64(), Some(expected), "{name}: {result}");
    }
}

/// Write the attempt script into the workspace, for a one-shot command to run.
fn script_in(sb: &Sandbox, ws: &Path) -> PathBuf {
    let ws = sb.prepare_workspace(ws).unwrap();
    let path = ws.join("attempt.py");
    std::fs::write(&path, attempt_script()).unwrap();
    path
}

fn parse(out: &ExecOutcome) -> Value {
    assert!(out.success(), "{out:?}");
    serde_json::from_str(out.stdout.text.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"))
}

#[tokio::test]
async fn the_refused_calls_fail_with_eperm_in_the_interpreter_its_forks_and_commands() {
    let sb = sandbox().await;
    assert!(
        matches!(
            sb.backend(),
            Backend::Bwrap {
                seccomp: Some(_),
                ..
            }
        ),
        "{sb:?}"
    );
    assert!(
        sb.describe().contains("seccomp filter on"),
        "{}",
        sb.describe()
    );
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let out = cell(&mut py, &attempt_script()).await;
    assert_eq!(out.status, CellStatus::Ok, "{out:?}");
    let result: Value = serde_json::from_str(out.stdout.text.trim()).unwrap();
    assert_refused(&result);
    // The interpreter is fine after its refused calls.
    let after = cell(&mut py, "6 * 7").await;
    assert_eq!(after.value.as_deref(), Some("42"));

    // A one-shot command, and Python as the shell's child.
    script_in(&sb, &ws);
    let shell = sh(&sb, &ws, "python3 attempt.py", Duration::from_secs(20)).await;
    assert_refused(&parse(&shell));
    // bwrap closed the fd it read the filter from: only stdio and the listing itself.
    let fds = sh(
        &sb,
        &ws,
        "python3 -c \"import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))\"",
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(fds.stdout.text.trim(), "[0, 1, 2, 3]", "{fds:?}");
}

#[tokio::test]
async fn ordinary_work_runs_under_the_filter() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let code = r#"import json, os, subprocess, threading, multiprocessing
import numpy, sympy
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
inverse = numpy.linalg.inv(numpy.eye(3) * 2)[0][0]
x = sympy.symbols('x')
roots = sorted(int(r) for r in sympy.solve(x**2 - 4, x))
plt.plot([1, 2, 3])
plt.savefig('plot.png')
plt.close('all')
child = subprocess.run(['sh', '-c', 'echo from-child; python3 -c "print(2 + 2)"'], capture_output=True, text=True).stdout.split()
pid = os.fork()
if pid == 0:
    os._exit(7)
forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
squares = []
threads = [threading.Thread(target=lambda i=i: squares.append(i * i)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
with multiprocessing.Pool(2) as pool:
    pooled = pool.map(abs, [-1, -2, -3])
mode = [l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')][0]
print(json.dumps({'inverse': inverse, 'roots': roots, 'child': child, 'forked': forked,
                  'squares': sorted(squares), 'pooled': pooled, 'seccomp': mode,
                  'png': os.path.getsize('plot.png') > 1000}))
"#;
    let out = cell_with(&mut py, code, Duration::from_secs(60)).await;
    assert_eq!(out.status, CellStatus::Ok, "{out:?}");
    let got: Value = serde_json::from_str(out.stdout.text.trim()).unwrap();
    assert_eq!(
        got,
        json!({"inverse": 0.5, "roots": [-2, 2], "child": ["from-child", "4"], "forked": 7,
               "squares": [0, 1, 4, 9], "pooled": [1, 2, 3], "seccomp": "2", "png": true}),
    );
    // A one-shot command: threads (clone3 falls back to clone) and a pipeline of children.
    let shell = sh(
        &sb,
        &ws,
        "python3 -c \"import threading; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\" | tr a-z A-Z; grep Seccomp: /proc/self/status | head -1",
        Duration::from_secs(20),
    )
    .await;
    assert!(shell.success(), "{shell:?}");
    assert_eq!(shell.stdout.text, "THREAD\nSeccomp:\t2\n", "{shell:?}");
}

/// A bwrap that silently drops `--seccomp FD` (and so installs no filter) but otherwise works.
fn bwrap_without_the_filter(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("bwrap");
    std::fs::write(
        &path,
        "#!/usr/bin/python3 -I\nimport os, sys\nargs = sys.argv[1:]\nif args[:1] == ['--seccomp']:\n    args = args[2:]\nos.execv('/usr/bin/bwrap', ['bwrap'] + args)\n",
    )
    .unwrap();
    // Executable by `nobody` too: as root, bwrap is started after the drop.
    for p in [dir, path.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path
}

#[tokio::test]
async fn a_sandbox_whose_filter_is_not_in_force_fails_the_probe() {
    let dir = tempfile::tempdir().unwrap();
    let config = SandboxConfig {
        mode: SandboxMode::Bwrap,
        bwrap: bwrap_without_the_filter(dir.path()),
        limits: test_limits(),
        ..SandboxConfig::default()
    };
    let err = Sandbox::detect(config.clone()).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("the seccomp filter is not in force in the sandbox (ptrace gave allowed"),
        "{text}"
    );
    assert!(text.contains("sandbox.seccomp: false"), "{text}");
    // The same bwrap with the filter explicitly off: a working (warned) sandbox.
    let opted_out = SandboxConfig {
        seccomp: false,
        ..config
    };
    Sandbox::detect(opted_out)
        .await
        .expect("works without the filter");
}

#[tokio::test]
async fn the_opt_out_runs_without_the_filter_and_says_so_loudly() {
    let config = SandboxConfig {
        mode: SandboxMode::Bwrap,
        limits: test_limits(),
        seccomp: false,
        ..SandboxConfig::default()
    };
    let sb = Sandbox::detect(config).await.expect("bwrap works");
    assert!(
        matches!(sb.backend(), Backend::Bwrap { seccomp: None, .. }),
        "{sb:?}"
    );
    let warning = sb.warning().unwrap_or_default();
    assert!(warning.contains("sandbox.seccomp is false"), "{warning}");
    assert!(
        sb.describe().contains("NO seccomp filter"),
        "{}",
        sb.describe()
    );
    // What the filter refuses goes through to the kernel here: the attempts above can tell
    // the difference.
    let (_d, ws) = workspace();
    script_in(&sb, &ws);
    let result = parse(&sh(&sb, &ws, "python3 attempt.py", Duration::from_secs(20)).await);
    assert_eq!(result["ptrace"], 0, "{result}");
    assert_eq!(result["ptrace_in_fork"], 0, "{result}");
    assert_eq!(result["setns"], libc::EBADF as i64, "{result}");
    assert_ne!(result["clone3"], ENOSYS, "{result}");
}
