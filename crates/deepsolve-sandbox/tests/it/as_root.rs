//! When deepsolve runs as root and bwrap runs as root too (`drop_root: false`, or dropping
//! failed), the kernel does not enforce the process limit. The isolation must not depend on
//! it: the same walls hold, the watchdog holds the turn to its process budget, and runaway
//! processes are contained by the pid namespace and the group kill. (As a non-root user this binary has nothing to check.)

use std::time::Duration;

use crate::common::*;
use deepsolve_sandbox::*;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

async fn root_sandbox() -> Sandbox {
    let config = SandboxConfig {
        mode: SandboxMode::Bwrap,
        limits: test_limits(),
        drop_root: false,
        ..SandboxConfig::default()
    };
    let sandbox = Sandbox::detect(config).await.expect("bwrap as root works");
    assert!(matches!(
        sandbox.backend(),
        Backend::Bwrap {
            host: HostUser::Root,
            ..
        }
    ));
    assert!(
        sandbox.warning().is_some(),
        "running as root is warned about"
    );
    sandbox
}

#[tokio::test]
async fn bwrap_as_root_keeps_the_walls_and_the_kill() {
    if !is_root() {
        eprintln!("not root: nothing to check");
        return;
    }
    let sb = root_sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let token = py.token().to_string();
    let out = cell(
        &mut py,
        "import os, socket\nr = []\nfor f in (lambda: open('/etc/shadow').read(), lambda: os.listdir('/root'), lambda: open('/usr/x', 'w'), lambda: socket.create_connection(('1.1.1.1', 53), timeout=1)):\n    try:\n        f(); r.append('ALLOWED')\n    except Exception as e:\n        r.append(type(e).__name__)\nprint(os.getuid(), r)",
    )
    .await;
    assert!(out.stdout.text.starts_with("65534 "), "{out:?}");
    assert!(!out.stdout.text.contains("ALLOWED"), "{out:?}");
    // No kernel limit here: the forks are not refused, but the watchdog still holds the turn
    // to its process budget, and everything dies with the sandbox.
    let out = cell_with(
        &mut py,
        "import os, signal, time\nfor _ in range(300):\n    if os.fork() == 0:\n        time.sleep(1000)\n        os._exit(0)\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('forked')\nwhile True:\n    pass",
        Duration::from_secs(20),
    )
    .await;
    let limit = test_limits().processes;
    assert_eq!(
        out.status,
        CellStatus::Stopped(Stopped::ProcessBudget { limit }),
        "{out:?}"
    );
    assert_no_process_left(&token).await;
}
