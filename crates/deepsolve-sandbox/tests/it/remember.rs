//! A probe's verdict kept between processes: used while its key holds, rechecked for real.

use std::path::{Path, PathBuf};

use deepsolve_sandbox::*;

use crate::common::test_limits;

/// A bwrap that works until `broken` exists (a change the verdict's key cannot see, like a
/// sysctl turned within the boot).
fn switchable_bwrap(dir: &Path, broken: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("bwrap");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nif [ -e '{}' ]; then echo 'bwrap: no user namespaces' >&2; exit 1; fi\nexec /usr/bin/bwrap \"$@\"\n",
            broken.display()
        ),
    )
    .unwrap();
    // Executable by `nobody` too: as root, bwrap is started after the drop.
    for p in [dir, path.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path
}

#[tokio::test]
async fn a_kept_verdict_is_used_rechecked_and_corrected() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken");
    let config = SandboxConfig {
        mode: SandboxMode::Auto,
        bwrap: switchable_bwrap(dir.path(), &broken),
        limits: test_limits(),
        ..SandboxConfig::default()
    };
    let file = dir.path().join("cache").join("sandbox-probe.json");

    // First: probed now, and kept.
    let (first, recheck) = Sandbox::detect_remembered(config.clone(), &file).await;
    let first = first.expect("the sandbox works");
    assert!(recheck.is_none(), "a fresh probe needs no recheck");
    assert!(file.is_file(), "the verdict is kept");

    // Next: the same sandbox from the kept verdict, and it runs code.
    let (second, recheck) = Sandbox::detect_remembered(config.clone(), &file).await;
    let second = second.expect("the kept verdict");
    assert_eq!(second.backend(), first.backend());
    assert_eq!(second.describe(), first.describe());
    let (_ws_dir, ws) = crate::common::workspace();
    let out = crate::common::sh(&second, &ws, "id -u", std::time::Duration::from_secs(20)).await;
    assert!(out.success(), "{out:?}");
    let recheck = recheck.expect("a kept verdict comes with its recheck");
    assert_eq!(recheck.run().await, None, "it still works");

    // It breaks within the boot: the kept verdict still says it works, its recheck says it
    // does not, and the next process knows.
    std::fs::write(&broken, "").unwrap();
    let (third, recheck) = Sandbox::detect_remembered(config.clone(), &file).await;
    assert!(third.is_ok(), "kept: {third:?}");
    let said = recheck.expect("recheck").run().await.expect("a warning");
    assert!(said.contains("no user namespaces"), "{said}");
    assert!(!file.exists(), "a failure is not kept");
    let (fourth, recheck) = Sandbox::detect_remembered(config.clone(), &file).await;
    let e = fourth.expect_err("probed afresh");
    assert!(e.to_string().contains("no user namespaces"), "{e}");
    assert!(recheck.is_none() && !file.exists());
    // Fixed again: the very next process probes, finds it working and keeps that.
    std::fs::remove_file(&broken).unwrap();
    let (fifth, recheck) = Sandbox::detect_remembered(config.clone(), &file).await;
    assert_eq!(fifth.expect("works again").backend(), first.backend());
    assert!(recheck.is_none() && file.is_file());

    // Other settings are another key: probed afresh, not taken from the file.
    let no_filter = SandboxConfig {
        seccomp: false,
        ..config
    };
    let (other, recheck) = Sandbox::detect_remembered(no_filter, &file).await;
    assert!(recheck.is_none(), "another key: probed");
    assert!(
        matches!(
            other.expect("works").backend(),
            Backend::Bwrap { seccomp: None, .. }
        ),
        "the filter comes from the settings"
    );
}
