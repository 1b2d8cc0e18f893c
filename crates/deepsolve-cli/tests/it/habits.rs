//! The command-line habits, through the real binary against the mock model: pipes that close
//! early, the problem from stdin, `-` or a file, `-o`, stdout holding only the answer, an exit
//! code per failure class with one line saying why, the context-window refusal, completions,
//! the man page, the version, `settings set` keeping comments, `settings path`, `doctor`.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use deepsolve_testkit::*;

use crate::support::Isolated as Env;

/// The answer a two-step well-behaved solve gives (its last step's summary).
const ANSWER: &str = "**Answer:** work out part 2 of the problem → done by inspection";

#[test]
fn stdout_holds_only_the_answer_and_progress_goes_to_stderr() {
    let server = MockServer::policy(WellBehaved::new(2));
    let env = Env::new();
    let out = env
        .solve(&server)
        .args(["--tool", "reason", "Solve x + 1 = 2."])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.starts_with("**Answer:** work out part 2 of the problem"),
        "{stdout}"
    );
    for progress in ["Plan:", "✓ S1", "↳ reason", "— answered"] {
        assert!(
            !stdout.contains(progress),
            "{progress} in stdout:\n{stdout}"
        );
        assert!(
            stderr.contains(progress),
            "{progress} not in stderr:\n{stderr}"
        );
    }
    // Off a terminal: plain lines, no cursor movement; tool lines nested under their step,
    // with the first lines of what they were asked and answered.
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    let lines: Vec<&str> = stderr.lines().collect();
    let s1 = lines.iter().position(|l| l.starts_with("  ▸ S1")).unwrap();
    let call = lines
        .iter()
        .position(|l| l.starts_with("      ↳ reason"))
        .unwrap();
    let done = lines.iter().position(|l| l.starts_with("  ✓ S1")).unwrap();
    assert!(s1 < call && call < done, "{stderr}");
    assert!(lines[call + 1].starts_with("        │ "), "{stderr}");
    assert!(
        lines.iter().any(|l| l.starts_with("        → ")),
        "{stderr}"
    );
    server.assert_clean();
}

/// `solve` with `flags`, its stdout and stderr piped for the test to read or close.
fn spawn_solve(env: &Env, server: &MockServer, flags: &[&str]) -> std::process::Child {
    env.std_command()
        .args([
            "solve",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
        ])
        .args(flags)
        .arg("Solve x + 1 = 2.")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Read one line of `child`'s stdout, then close it, like `| head -1`.
fn first_line_then_close(child: &mut std::process::Child) -> String {
    let mut stdout = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8];
    while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    drop(stdout);
    String::from_utf8(line).unwrap()
}

#[test]
fn a_reader_that_leaves_early_is_no_failure_and_nothing_panics() {
    // The reader is gone before the answer is written.
    let server = MockServer::policy(WellBehaved::new(2));
    let env = Env::new();
    let mut child = spawn_solve(&env, &server, &[]);
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // `--json | head -1`: the turn is stopped (nobody reads on), and the exit is still 0.
    let server = MockServer::policy(WellBehaved::new(3));
    let mut child = spawn_solve(&env, &server, &["--json"]);
    let first: serde_json::Value =
        serde_json::from_str(&first_line_then_close(&mut child)).unwrap();
    assert_eq!(first["type"], "turn_started");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // A closed stderr (`2>&-` or a dead log reader) does not panic either.
    let server = MockServer::policy(WellBehaved::new(1));
    let mut child = spawn_solve(&env, &server, &[]);
    drop(child.stderr.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("**Answer:**"));
}

#[test]
fn the_problem_comes_from_a_pipe_a_dash_or_a_file() {
    let env = Env::new();
    let problem_of = |server: &MockServer| server.policy_requests()[0].problem();
    // A pipe on stdin, no argument.
    let server = MockServer::policy(WellBehaved::new(1));
    env.solve(&server)
        .write_stdin("Solve 2x = 4 (from a pipe).")
        .assert()
        .code(0);
    assert!(problem_of(&server).contains("from a pipe"));
    // `-`.
    let server = MockServer::policy(WellBehaved::new(1));
    env.solve(&server)
        .arg("-")
        .write_stdin("Solve 3x = 9 (from a dash).")
        .assert()
        .code(0);
    assert!(problem_of(&server).contains("from a dash"));
    // `--file`, with a problem far past the kernel's limit for one argument (1 MB).
    let big: String = (0..20_000)
        .map(|i| format!("Fact {i}: the value is {i}.\n"))
        .collect::<String>();
    assert!(big.len() > 500_000);
    let file = env.path().join("problem.md");
    let mut text = String::from("Solve the big one.\n");
    while text.len() < 1 << 20 {
        text.push_str(&big);
    }
    std::fs::write(&file, &text).unwrap();
    let server = MockServer::policy(WellBehaved::new(1));
    env.solve(&server)
        .args(["--set", "llm.context_window=2000000"])
        .arg("--file")
        .arg(&file)
        .assert()
        .code(0);
    let sent = problem_of(&server);
    assert!(
        sent.len() >= 1 << 20 && sent.contains("Fact 19999"),
        "{}",
        sent.len()
    );
}

#[test]
fn no_problem_or_two_problems_are_usage_errors() {
    let env = Env::new();
    let server = MockServer::policy(WellBehaved::new(1));
    // An empty pipe.
    let out = env.solve(&server).write_stdin("  \n").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "deepsolve: the problem is empty (read from stdin)"
    );
    // An argument and a file.
    let out = env
        .solve(&server)
        .args(["x", "--file", "p.md"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--file"));
    // A file that is not there.
    let out = env
        .solve(&server)
        .args(["--file", "missing.md"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.md"));
    assert_eq!(server.call_count(), 0);
}

#[test]
fn dash_o_writes_the_answer_to_a_file_and_nothing_to_stdout() {
    let server = MockServer::policy(WellBehaved::new(2));
    let env = Env::new();
    let file = env.path().join("out").join("answer.md");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "an older answer").unwrap();
    let out = env
        .solve(&server)
        .arg("-o")
        .arg(&file)
        .arg("Solve x + 1 = 2.")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.starts_with(ANSWER), "{written}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("answer written to"));
    // Written through a temporary file and a rename: nothing else is left beside it.
    let names: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["answer.md"]);
}

/// A solve against `server` (all its calls fail the same way): its exit code and stderr.
fn failing(env: &Env, base_url: &str) -> (i32, String) {
    let out = env
        .command()
        .args([
            "solve",
            "--base-url",
            base_url,
            "--model",
            "mock-model",
            "x",
        ])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A 503 that asks to be retried at once (the client's own backoff would take seconds).
fn unavailable() -> Reply {
    let mut reply = Reply::status(503, "overloaded");
    if let Reply::Status { headers, .. } = &mut reply {
        headers.push(("retry-after".into(), "0".into()));
    }
    reply
}

#[test]
fn each_failure_class_has_its_exit_code_and_one_line_with_a_hint() {
    let env = Env::new();
    let cases = [
        (Reply::status(401, "invalid api key"), 3, "API key"),
        (Reply::rate_limited(Some(0)), 5, "rate-limiting"),
        (unavailable(), 4, ""),
    ];
    for (reply, code, hint) in cases {
        let server = MockServer::policy(FnPolicy(move |_: &PolicyRequest| reply.clone()));
        let (got, stderr) = failing(&env, &server.url());
        assert_eq!(got, code, "{stderr}");
        // The error is said once.
        assert_eq!(stderr.matches("model error").count(), 1, "{stderr}");
        assert!(stderr.contains(hint), "{stderr}");
    }
    // Nothing listening: network unavailable.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let (got, stderr) = failing(&env, &url);
    assert_eq!(got, 4, "{stderr}");
    assert!(stderr.contains("deepsolve doctor"), "{stderr}");
    // A base URL without /v1 (the mock answers 404 off its API path).
    let server = MockServer::policy(WellBehaved::new(1));
    let base = server.url().trim_end_matches("/v1").to_string();
    let (got, stderr) = failing(&env, &base);
    assert_eq!(got, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("did you mean {base}/v1?")),
        "{stderr}"
    );
    // A wrong setting: usage.
    let out = env
        .command()
        .args(["solve", "--set", "solve.max_round=3", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_problem_past_the_context_window_is_refused_before_any_call() {
    let server = MockServer::policy(WellBehaved::new(1));
    let env = Env::new();
    let problem = "word ".repeat(20_000);
    let out = env
        .solve(&server)
        .args(["--set", "llm.context_window=8000", "--file", "-"])
        .write_stdin(problem)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tokens (estimated)"), "{stderr}");
    assert!(stderr.contains("context window of 8000 tokens"), "{stderr}");
    assert_eq!(server.call_count(), 0);
}

#[test]
fn completions_man_page_and_version_are_generated() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = env.command().args(["completions", shell]).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains("deepsolve") && script.contains("resume"),
            "{shell}"
        );
        if shell == "bash" {
            // The bash script parses, and loads: `complete -p` shows it registered.
            let path = env.path().join("deepsolve.bash");
            std::fs::write(&path, &script).unwrap();
            let check = Command::new("bash").arg("-n").arg(&path).status().unwrap();
            assert!(check.success());
            let loaded = Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "source {} && complete -p deepsolve",
                    path.display()
                ))
                .output()
                .unwrap();
            assert!(String::from_utf8_lossy(&loaded.stdout).contains("deepsolve"));
        }
    }
    let out = env.command().arg("man").output().unwrap();
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH deepsolve"),
        "{page}"
    );
    assert!(page.contains("completions"));
    let dir = env.path().join("man");
    env.command()
        .args(["man", "--dir"])
        .arg(&dir)
        .assert()
        .code(0);
    assert!(dir.join("deepsolve-solve.1").is_file());
    let out = env.command().arg("--version").output().unwrap();
    let version = String::from_utf8(out.stdout).unwrap();
    assert!(version.starts_with("deepsolve 0."), "{version}");
    assert!(
        version.contains("(git ") || version.contains("(revision unknown)"),
        "{version}"
    );
    // `--help` documents the exit codes.
    let help = env.command().args(["solve", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("130  cancelled"));
}

#[test]
fn settings_set_keeps_the_files_comments_and_path_names_a_file_to_come() {
    let env = Env::new();
    let file = env.path().join("mine.yaml");
    let text = "# my model\nllm:\n  model: qwen3   # local\n\n# knobs\nsolve:\n  max_rounds: 20\n";
    std::fs::write(&file, text).unwrap();
    env.command()
        .args(["settings", "set", "--config"])
        .arg(&file)
        .arg("solve.max_rounds=30")
        .assert()
        .code(0);
    env.command()
        .args(["settings", "set", "--config"])
        .arg(&file)
        .arg("llm.base_url=http://127.0.0.1:11434/v1")
        .assert()
        .code(0);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "# my model\nllm:\n  model: qwen3   # local\n  base_url: http://127.0.0.1:11434/v1\n\n# knobs\nsolve:\n  max_rounds: 30\n"
    );
    // A named file that does not exist yet: its path, and a note that `set` makes it.
    let later = env.path().join("later.yaml");
    let out = env
        .command()
        .args(["settings", "path", "--config"])
        .arg(&later)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        later.display().to_string()
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not created yet"));
    // An unknown key names the nearest one.
    let out = env
        .command()
        .args(["settings", "set", "--config"])
        .arg(&file)
        .arg("solve.max_round=3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean 'solve.max_rounds'"));
}

#[test]
fn doctor_fails_when_the_model_is_not_listed() {
    let server = MockServer::policy(WellBehaved::new(1));
    let env = Env::new();
    let out = env
        .command()
        .args([
            "doctor",
            "--base-url",
            &server.url(),
            "--model",
            "mock-modle",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("did you mean 'mock-model'"), "{stdout}");
}

#[test]
fn stdin_is_not_read_when_the_problem_is_an_argument() {
    // A pipe that never closes must not hang a solve whose problem is its argument.
    let server = MockServer::policy(WellBehaved::new(1));
    let env = Env::new();
    let mut child = env
        .std_command()
        .args([
            "solve",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
            "x + 1 = 2",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"not the problem").unwrap();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !server.policy_requests()[0]
            .problem()
            .contains("not the problem")
    );
}
