//! Turn workspaces collected through the real binary: `deepsolve gc` (dry or not) removes
//! empty and old workspaces and keeps recent ones, ones a running turn holds (in another
//! process), ones whose turn the store can resume, and what a planted symlink points to;
//! `deepsolve solve` collects on its own at most once a day; `deepsolve serve` at start.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use deepsolve_protocol::{Language, StoredTurnSpec};
use deepsolve_store::{NewTurn, Store, StoreOptions};
use deepsolve_testkit::{FnPolicy, MockServer, Policy, PolicyRequest, Reply, WellBehaved};

use crate::support::Isolated;

fn turns(env: &Isolated) -> PathBuf {
    env.data().join("deepsolve/turns")
}

fn new_id() -> String {
    deepsolve_app::new_turn_id()
}

fn empty_workspace(env: &Isolated) -> PathBuf {
    let dir = turns(env).join(new_id());
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A workspace with a file in a subdirectory.
fn workspace_with_file(env: &Isolated) -> PathBuf {
    let dir = turns(env).join(new_id());
    std::fs::create_dir_all(dir.join("out")).unwrap();
    std::fs::write(dir.join("out/result.txt"), "0123456789").unwrap();
    dir
}

/// Everything in `dir` (symlinks themselves included) last changed `when`, as `touch -d`
/// reads it.
fn age(dir: &Path, when: &str) {
    let status = Command::new("find")
        .arg(dir)
        .args(["-exec", "touch", "-h", "-d", when, "{}", "+"])
        .status()
        .unwrap();
    assert!(status.success());
}

fn gc(env: &Isolated, args: &[&str]) -> (String, Output) {
    let out = env.command().arg("gc").args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, out)
}

fn id_of(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// The report line of a workspace.
fn line_of<'a>(stdout: &'a str, dir: &Path) -> &'a str {
    let id = id_of(dir);
    stdout
        .lines()
        .find(|l| l.trim_start().starts_with(&id))
        .unwrap_or_else(|| panic!("no line for {id} in:\n{stdout}"))
}

#[test]
fn gc_removes_empty_and_old_workspaces_keeps_recent_ones_and_a_dry_run_removes_nothing() {
    let env = Isolated::new();
    let empty = empty_workspace(&env);
    let old = workspace_with_file(&env);
    age(&old, "30 days ago");
    let recent = workspace_with_file(&env);
    age(&recent, "2 days ago");
    // Not a turn's workspace: never touched.
    std::fs::create_dir_all(turns(&env).join("notes")).unwrap();

    let (dry, _) = gc(&env, &["--dry-run"]);
    assert!(
        dry.contains("would remove 2 workspaces (10 bytes)"),
        "{dry}"
    );
    assert!(line_of(&dry, &empty).contains("empty"), "{dry}");
    assert!(
        line_of(&dry, &old).contains("unchanged for 30 days"),
        "{dry}"
    );
    assert!(line_of(&dry, &recent).contains("within retention"), "{dry}");
    assert!(dry.contains("no database"), "{dry}");
    assert!(empty.is_dir() && old.join("out/result.txt").is_file());

    let (done, _) = gc(&env, &[]);
    assert!(done.contains("removed 2 workspaces (10 bytes)"), "{done}");
    assert!(done.contains("kept 1 workspace"), "{done}");
    assert!(!empty.exists() && !old.exists());
    assert!(recent.join("out/result.txt").is_file());
    assert!(turns(&env).join("notes").is_dir());
    // `gc` reads a database only where one exists: it creates none.
    assert!(!env.data().join("deepsolve/deepsolve.db").exists());

    // A shorter retention for this run takes the recent one too.
    let (done, _) = gc(&env, &["--retention-days", "1"]);
    assert!(done.contains("removed 1 workspace (10 bytes)"), "{done}");
    assert!(!recent.exists());
}

#[test]
fn gc_keeps_a_workspace_another_process_holds_locked() {
    let env = Isolated::new();
    let held = empty_workspace(&env);
    // A child holding the shared lock a running turn holds (one process: killing it lets go).
    let mut child = Command::new("flock")
        .args(["--shared", "--no-fork"])
        .arg(&held)
        .args(["-c", "echo locked; exec sleep 60"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");

    let (out, _) = gc(&env, &["--retention-days", "0"]);
    assert!(line_of(&out, &held).contains("in use"), "{out}");
    assert!(held.is_dir());

    child.kill().unwrap();
    child.wait().unwrap();
    let (out, _) = gc(&env, &["--retention-days", "0"]);
    assert!(out.contains("removed 1 workspace"), "{out}");
    assert!(!held.exists());
}

/// Every reply of a well-behaved solver, late: a turn still running when we look.
fn slow_solver(delay: Duration) -> impl Policy {
    let inner = WellBehaved::new(2);
    FnPolicy(move |req: &PolicyRequest| Reply::delayed(delay, inner.reply(req)))
}

#[test]
fn gc_keeps_the_workspace_of_a_turn_running_in_another_deepsolve() {
    let server = MockServer::policy(slow_solver(Duration::from_millis(1500)));
    let env = Isolated::new();
    let mut solve = env
        .std_command()
        .args([
            "solve",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
        ])
        .args(["--tool", "code_execution", "a slow problem"])
        // Recorded in a store gc does not read: only the workspace's lock can tell it apart.
        .arg("--database")
        .arg(format!(
            "sqlite://{}",
            env.path().join("elsewhere.db").display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let workspace = wait_for_one_workspace(&env);
    let (out, _) = gc(&env, &["--retention-days", "0"]);
    let running = solve.try_wait().unwrap().is_none();
    assert!(
        running,
        "the turn ended before gc looked; make the solver slower"
    );
    assert!(line_of(&out, &workspace).contains("in use"), "{out}");
    assert!(workspace.is_dir());

    let status = solve.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut solve.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{stderr}");
    assert!(!stderr.contains("warning: automatic"), "{stderr}");
    let (out, _) = gc(&env, &["--retention-days", "0"]);
    assert!(out.contains("removed 1 workspace"), "{out}");
    assert!(!workspace.exists());
}

fn wait_for_one_workspace(env: &Isolated) -> PathBuf {
    for _ in 0..600 {
        if let Ok(entries) = std::fs::read_dir(turns(env)) {
            let dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            if let [one] = dirs.as_slice() {
                return one.clone();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the turn made no workspace");
}

/// A turn in the default database that a dead server left running: `interrupted`.
fn interrupted_turn_in_the_default_store(env: &Isolated) -> String {
    let id = new_id();
    let db = env.data().join("deepsolve/deepsolve.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = Store::open_sqlite(&db, StoreOptions::default())
            .await
            .unwrap();
        let session = store.create_session("local", "p").await.unwrap();
        let spec = StoredTurnSpec {
            language: Language::En,
            tools: Vec::new(),
            config: serde_json::Map::new(),
            context_window: 32_000,
            history: Vec::new(),
            material: None,
            images: Vec::new(),
        };
        store
            .create_turn(&NewTurn {
                id: id.clone(),
                session_id: session.id,
                user_id: "local".into(),
                problem: "p".into(),
                spec,
                owner: "127.0.0.1:8080".into(),
            })
            .await
            .unwrap();
        store.mark_interrupted("127.0.0.1:8080").await.unwrap();
        store.close().await;
    });
    id
}

#[test]
fn gc_keeps_the_workspace_of_an_interrupted_turn_the_store_knows() {
    let env = Isolated::new();
    let id = interrupted_turn_in_the_default_store(&env);
    let resumable = turns(&env).join(&id);
    std::fs::create_dir_all(resumable.join("out")).unwrap();
    std::fs::write(resumable.join("out/partial.txt"), "half done").unwrap();
    age(&resumable, "400 days ago");
    let finished = workspace_with_file(&env);
    age(&finished, "400 days ago");

    let (out, _) = gc(&env, &["--retention-days", "0"]);
    assert!(out.contains("resumable turns from: sqlite://"), "{out}");
    assert!(line_of(&out, &resumable).contains("resumable"), "{out}");
    assert!(resumable.join("out/partial.txt").is_file());
    assert!(!finished.exists(), "{out}");

    // Named explicitly, the same database says the same.
    let db = env.data().join("deepsolve/deepsolve.db");
    let url = format!("sqlite://{}", db.display());
    let (out, _) = gc(&env, &["--retention-days", "0", "--database", &url]);
    assert!(line_of(&out, &resumable).contains("resumable"), "{out}");
}

#[test]
fn gc_does_not_follow_a_symlink_planted_in_a_workspace() {
    let env = Isolated::new();
    let outside = env.path().join("outside");
    std::fs::create_dir_all(outside.join("dir")).unwrap();
    std::fs::write(outside.join("secret.txt"), "keep me").unwrap();
    std::fs::write(outside.join("dir/inner.txt"), "keep me too").unwrap();
    let planted = workspace_with_file(&env);
    std::os::unix::fs::symlink(outside.join("secret.txt"), planted.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("dir"), planted.join("out/dirlink")).unwrap();
    std::os::unix::fs::symlink("/", planted.join("root")).unwrap();
    age(&planted, "30 days ago");

    let (out, _) = gc(&env, &[]);
    // Only the workspace's own file is counted: no link was followed.
    assert!(out.contains("removed 1 workspace (10 bytes)"), "{out}");
    assert!(!planted.exists());
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "keep me"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("dir/inner.txt")).unwrap(),
        "keep me too"
    );
}

#[test]
fn gc_refuses_clearly_when_the_database_cannot_be_read() {
    let env = Isolated::new();
    let empty = empty_workspace(&env);
    let bad = env.path().join("not-a-db.sqlite");
    std::fs::write(&bad, "this is not sqlite").unwrap();
    let out = env
        .command()
        .args(["gc", "--database", &format!("sqlite://{}", bad.display())])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot read the database") && stderr.contains("nothing was removed"),
        "{stderr}"
    );
    assert!(empty.is_dir());
}

#[test]
fn solve_collects_on_its_own_at_most_once_a_day() {
    let server = MockServer::policy(WellBehaved::new(1));
    let env = Isolated::new();
    let solve = |env: &Isolated| {
        let out = env
            .command()
            .args(["solve", "--json", "--base-url", &server.url()])
            .args(["--model", "mock-model", "a problem"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let first = empty_workspace(&env);
    solve(&env);
    assert!(!first.exists(), "the first run collects");
    let stamp = env.data().join("deepsolve/gc-stamp");
    assert!(stamp.is_file());
    let second = empty_workspace(&env);
    solve(&env);
    assert!(second.is_dir(), "not again the same day");
    // A day later (the stamp says), it collects again.
    age(&stamp, "25 hours ago");
    solve(&env);
    assert!(!second.exists());
}

#[test]
fn serve_collects_at_start() {
    let env = Isolated::new();
    let empty = empty_workspace(&env);
    let db = format!("sqlite://{}", env.path().join("serve.db").display());
    let mut server = env
        .std_command()
        .args(["serve", "--addr", "127.0.0.1:0", "--database", &db])
        .args([
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "mock-model",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("listening on "), "{first:?}");
    let mut gone = false;
    for _ in 0..600 {
        if !empty.exists() {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(
        gone,
        "the server's first collection did not remove the empty workspace"
    );
}
