//! Collecting turn workspaces on a real directory tree: what goes, what stays and why, and
//! that nothing outside a workspace is touched.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

use deepsolve_app::gc::{Expired, KeptBecause};
use deepsolve_app::{GcOptions, GcReport, collect_workspaces, hold_workspace, new_turn_id};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// A workspace with one file of `bytes` bytes, everything in it last changed `age` ago.
fn workspace(root: &Path, bytes: usize, age: Duration) -> String {
    let id = new_turn_id();
    let dir = root.join(&id);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/data.bin"), vec![b'x'; bytes]).unwrap();
    age_tree(&dir, age);
    id
}

fn set_mtime(path: &Path, age: Duration) {
    let file = std::fs::File::open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

fn age_tree(dir: &Path, age: Duration) {
    set_mtime(&dir.join("sub/data.bin"), age);
    set_mtime(&dir.join("sub"), age);
    set_mtime(dir, age);
}

fn removed(report: &GcReport) -> Vec<&str> {
    report.removed.iter().map(|r| r.turn_id.as_str()).collect()
}

fn kept_why<'a>(report: &'a GcReport, id: &str) -> Option<&'a KeptBecause> {
    report.kept.iter().find(|k| k.turn_id == id).map(|k| &k.why)
}

#[test]
fn empty_and_old_go_recent_stays() {
    let root = tempfile::tempdir().unwrap();
    let empty = new_turn_id();
    std::fs::create_dir(root.path().join(&empty)).unwrap();
    let old = workspace(root.path(), 1000, 8 * DAY);
    let recent = workspace(root.path(), 10, DAY);
    let report = collect_workspaces(root.path(), &GcOptions::new(7)).unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let mut gone = removed(&report);
    gone.sort();
    let mut expected = vec![empty.as_str(), old.as_str()];
    expected.sort();
    assert_eq!(gone, expected);
    assert_eq!(report.removed_bytes(), 1000);
    let why_empty = report.removed.iter().find(|r| r.turn_id == empty).unwrap();
    assert_eq!(why_empty.why, Expired::Empty);
    assert!(matches!(
        kept_why(&report, &recent),
        Some(KeptBecause::WithinRetention { .. })
    ));
    assert!(!root.path().join(&empty).exists());
    assert!(!root.path().join(&old).exists());
    assert!(root.path().join(&recent).join("sub/data.bin").exists());
}

#[test]
fn a_held_workspace_stays_until_its_turn_lets_go() {
    let root = tempfile::tempdir().unwrap();
    let id = new_turn_id();
    let held = hold_workspace(root.path(), &id).unwrap();
    assert_eq!(held.path(), root.path().join(&id));
    // Empty and with a zero retention: only the hold keeps it.
    let report = collect_workspaces(root.path(), &GcOptions::new(0)).unwrap();
    assert_eq!(kept_why(&report, &id), Some(&KeptBecause::InUse));
    assert!(held.path().is_dir());
    drop(held);
    let report = collect_workspaces(root.path(), &GcOptions::new(0)).unwrap();
    assert_eq!(removed(&report), vec![id.as_str()]);
    // Held again (a resume): made again, and held.
    let again = hold_workspace(root.path(), &id).unwrap();
    assert!(again.path().is_dir());
    let report = collect_workspaces(root.path(), &GcOptions::new(0)).unwrap();
    assert_eq!(kept_why(&report, &id), Some(&KeptBecause::InUse));
}

#[test]
fn a_resumable_turn_keeps_its_workspace_whatever_its_age() {
    let root = tempfile::tempdir().unwrap();
    let old = workspace(root.path(), 10, 400 * DAY);
    let options = GcOptions {
        resumable: HashSet::from([old.clone()]),
        ..GcOptions::new(0)
    };
    let report = collect_workspaces(root.path(), &options).unwrap();
    assert_eq!(kept_why(&report, &old), Some(&KeptBecause::Resumable));
    assert!(root.path().join(&old).join("sub/data.bin").exists());
}

#[test]
fn a_dry_run_removes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let old = workspace(root.path(), 123, 30 * DAY);
    let options = GcOptions {
        dry_run: true,
        ..GcOptions::new(7)
    };
    let report = collect_workspaces(root.path(), &options).unwrap();
    assert_eq!(removed(&report), vec![old.as_str()]);
    assert_eq!(report.removed_bytes(), 123);
    assert!(root.path().join(&old).join("sub/data.bin").exists());
}

#[test]
fn symlinks_in_a_workspace_are_neither_followed_nor_their_targets_removed() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(outside.path().join("dir")).unwrap();
    std::fs::write(outside.path().join("dir/keep.txt"), vec![b'k'; 5000]).unwrap();
    std::fs::write(outside.path().join("keep.txt"), "precious").unwrap();
    let id = workspace(root.path(), 7, DAY);
    let dir = root.path().join(&id);
    std::os::unix::fs::symlink(outside.path().join("dir"), dir.join("sub/to_dir")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("keep.txt"), dir.join("to_file")).unwrap();
    // A link named like a turn, directly under the root: not a workspace.
    let decoy = new_turn_id();
    std::os::unix::fs::symlink(outside.path().join("dir"), root.path().join(&decoy)).unwrap();
    // Something else under the root: not a workspace either.
    std::fs::create_dir(root.path().join("notes")).unwrap();

    let report = collect_workspaces(root.path(), &GcOptions::new(0)).unwrap();
    assert_eq!(removed(&report), vec![id.as_str()]);
    // Only the workspace's own file is counted: the walk did not follow the links.
    assert_eq!(report.removed_bytes(), 7);
    assert!(!dir.exists());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("keep.txt")).unwrap(),
        "precious"
    );
    assert!(outside.path().join("dir/keep.txt").exists());
    assert!(root.path().join(&decoy).is_symlink());
    assert!(root.path().join("notes").is_dir());
}

#[test]
fn a_missing_root_is_nothing_to_do() {
    let root = tempfile::tempdir().unwrap();
    let report = collect_workspaces(&root.path().join("turns"), &GcOptions::new(7)).unwrap();
    assert!(report.removed.is_empty() && report.kept.is_empty() && report.failed.is_empty());
}
