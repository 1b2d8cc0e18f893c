//! Turn ids and turn workspaces, made in one place for the CLI and the server.

use std::os::unix::fs::PermissionsExt;

use deepsolve_app::{WorkspaceError, create_workspace, new_turn_id};

#[test]
fn turn_ids_are_fresh_and_ordered() {
    let a = new_turn_id();
    let b = new_turn_id();
    assert!(
        a.starts_with("turn_") && a.len() == "turn_".len() + 32,
        "{a}"
    );
    assert_ne!(a, b);
    assert!(a < b, "time-ordered: {a} then {b}");
}

#[test]
fn a_workspace_is_private_and_kept() {
    let root = tempfile::tempdir().expect("tempdir");
    let nested = root.path().join("deepsolve/turns");
    let id = new_turn_id();
    let dir = create_workspace(&nested, &id).expect("workspace");
    assert_eq!(dir, nested.join(&id));
    let mode = std::fs::metadata(&dir).expect("made").permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    std::fs::write(dir.join("kept.txt"), "x").expect("write");
    // Again for the same turn (a resume): the same directory, its files still there.
    assert_eq!(create_workspace(&nested, &id).expect("again"), dir);
    assert!(dir.join("kept.txt").exists());
}

#[test]
fn a_turn_id_cannot_name_a_directory_outside_the_root() {
    let root = tempfile::tempdir().expect("tempdir");
    for bad in ["../escape", "a/b", "", ".", "/abs"] {
        assert!(
            matches!(
                create_workspace(root.path(), bad),
                Err(WorkspaceError::BadTurnId(_))
            ),
            "{bad:?}"
        );
    }
}
