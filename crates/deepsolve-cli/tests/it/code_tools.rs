//! The code tools through the real `deepsolve` binary against the mock model: a three-step
//! sympy solve whose names carry from step to step and whose plot comes back as a PNG
//! artifact the CLI lists; no secret of ours reaches the code and its `ptrace` is refused (the
//! seccomp filter); each turn's budgets from the settings file, each stop named in the result;
//! fail-closed when no sandbox backend works; and the loudly warned opt-outs
//! (`sandbox.backend: none`, `sandbox.seccomp: false`).

use std::path::{Path, PathBuf};

use crate::support::Isolated;
use assert_cmd::Command;
use deepsolve_testkit::*;
use serde_json::{Value, json};

/// An isolated environment (see `support`) whose runs solve against `server`.
struct Env(Isolated);

impl std::ops::Deref for Env {
    type Target = Isolated;

    fn deref(&self) -> &Isolated {
        &self.0
    }
}

impl Env {
    fn new() -> Self {
        Env(Isolated::new())
    }

    fn cmd(&self, server: &MockServer) -> Command {
        let mut cmd = self.command();
        cmd.args([
            "solve",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
        ]);
        cmd
    }

    /// The one turn workspace this environment's runs created.
    fn workspace(&self) -> PathBuf {
        let turns = self.data().join("deepsolve/turns");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&turns)
            .unwrap_or_else(|e| panic!("{}: {e}", turns.display()))
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs.remove(0)
    }
}

/// The code each step runs; a solver would write it from the step's goal.
fn step_code(id: &str) -> &'static str {
    match id {
        "S1" => "import sympy as sp\nx = sp.symbols('x')\nf = x**2 - 5*x + 6\nf",
        "S2" => "roots = sp.solve(f, x)\nroots",
        _ => {
            "import matplotlib.pyplot as plt\nimport numpy as np\nxs = np.linspace(0, 5, 101)\nplt.plot(xs, [float(f.subs(x, v)) for v in xs])\nplt.axhline(0, color='gray')\nplt.title('f(x) = x^2 - 5x + 6')"
        }
    }
}

/// The `[value]` section of a code_execution result.
fn value_of(content: &str) -> String {
    content
        .split("[value]\n")
        .nth(1)
        .map(|v| v.lines().next().unwrap_or_default().to_string())
        .unwrap_or_default()
}

/// A scripted solver that works each step with `code_execution` and answers from what the
/// tool returned (the roots come from the step-2 result, not from the script).
fn sympy_solver(req: &PolicyRequest) -> Reply {
    let Some(plan) = req.plan() else {
        return Reply::calls(vec![(
            "solve_plan",
            json!({"analysis": "Define f with sympy, solve f = 0, then plot f.", "steps": [
                {"goal": "define f(x) = x^2 - 5x + 6"},
                {"goal": "solve f(x) = 0 using f"},
                {"goal": "plot f"}
            ]}),
        )]);
    };
    let Some(step) = plan.current() else {
        let roots = plan
            .steps
            .get(1)
            .and_then(|s| s.summary.clone())
            .unwrap_or_default();
        let list = roots
            .trim_start_matches("roots = ")
            .trim_matches(['[', ']']);
        let roots: Vec<String> = list.split(", ").map(|r| format!("x = {r}")).collect();
        return Reply::text(format!(
            "**Answer:** {}.\n\nf(x) = x² − 5x + 6 factors as (x − 2)(x − 3); the plot is in the files.",
            roots.join(" and ")
        ));
    };
    let results = req.work_results_for(step);
    match results.first() {
        None => Reply::calls(vec![(
            "code_execution",
            json!({"code": format!("# {}\n{}", step.key(), step_code(&step.id))}),
        )]),
        Some(result) => {
            let summary = match step.id.as_str() {
                "S1" => format!("f = {}", value_of(&result.content)),
                "S2" => format!("roots = {}", value_of(&result.content)),
                _ => "plotted f".to_string(),
            };
            Reply::calls(vec![(
                "solve_finish_step",
                json!({"step_id": step.id, "summary": summary}),
            )])
        }
    }
}

#[test]
fn a_three_step_sympy_solve_keeps_its_names_and_lists_its_plot() {
    let server = MockServer::policy(FnPolicy(sympy_solver));
    let env = Env::new();
    let out = env
        .cmd(&server)
        .arg("Solve x^2 - 5x + 6 = 0 and plot it.")
        .output()
        .expect("run deepsolve");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    server.assert_clean();
    // `cargo test -p deepsolve-cli --test it -- --nocapture three_step` shows the run.
    println!("{stderr}{stdout}");

    // Step 2 used `f` from step 1: its result reached the model.
    let results: Vec<String> = server
        .policy_requests()
        .iter()
        .flat_map(|r| r.tool_results())
        .filter(|r| r.name.as_deref() == Some("code_execution"))
        .map(|r| r.content)
        .collect();
    assert!(
        results.iter().any(|c| c == "[value]\nx**2 - 5*x + 6"),
        "{results:?}"
    );
    assert!(
        results.iter().any(|c| c == "[value]\n[2, 3]"),
        "{results:?}"
    );

    assert!(
        stdout.contains("**Answer:** x = 2 and x = 3")
            || stdout.contains("Answer: x = 2 and x = 3"),
        "{stdout}"
    );
    let workspace = env.workspace();
    let png = workspace.join("figure_1.png");
    let bytes = std::fs::read(&png).expect("the plot is in the turn's workspace");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // The CLI lists it on stderr: under the tool line and in the closing file list.
    let listed = format!("{} (image/png,", png.display());
    assert!(stderr.contains(&format!("▸ {listed}")), "{stderr}");
    assert!(stderr.contains("Files:"), "{stderr}");
    assert_eq!(stderr.matches(&listed).count(), 2, "{stderr}");
    assert!(!stdout.contains(&listed), "{stdout}");
}

#[test]
fn json_events_carry_the_artifacts_and_no_secret_reaches_the_code() {
    let server = MockServer::policy(FnPolicy(|req: &PolicyRequest| {
        let Some(plan) = req.plan() else {
            return Reply::calls(vec![(
                "solve_plan",
                json!({"analysis": "look around", "steps": [{"goal": "inspect the environment"}]}),
            )]);
        };
        let Some(step) = plan.current() else {
            return Reply::text("done");
        };
        if req.work_results_for(step).is_empty() {
            // Also what the seccomp filter says to ptrace(PTRACE_TRACEME): EPERM (errno 1).
            let code = format!(
                "# {}\nimport os\nopen('env.txt', 'w').write(repr(dict(os.environ)))\nprint(sorted(os.environ))\nimport ctypes, platform\nlibc = ctypes.CDLL(None, use_errno=True)\nnr = {{'x86_64': 101, 'aarch64': 117}}[platform.machine()]\nprint('ptrace', libc.syscall(nr, 0, 0, 0, 0), ctypes.get_errno())",
                step.key()
            );
            return Reply::calls(vec![("code_execution", json!({"code": code}))]);
        }
        Reply::calls(vec![(
            "solve_finish_step",
            json!({"step_id": step.id, "summary": "looked"}),
        )])
    }));
    let env = Env::new();
    let secret = "sk-test-do-not-leak-1234567890";
    let out = env
        .cmd(&server)
        .env("DEEPSOLVE_API_KEY", secret)
        .env("OPENAI_API_KEY", secret)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .arg("--json")
        .arg("What does the sandbox see?")
        .output()
        .expect("run deepsolve");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("NDJSON"))
        .collect();
    let started = &events[0];
    let tools: Vec<&str> = started["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"code_execution") && tools.contains(&"exec"),
        "{tools:?}"
    );
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["name"] == "code_execution")
        .expect("a code result");
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["artifacts"][0]["path"], "env.txt");
    assert_eq!(result["artifacts"][0]["mime"], "text/plain");
    let seen = std::fs::read_to_string(env.workspace().join("env.txt")).unwrap();
    for text in [seen.as_str(), result["content"].as_str().unwrap()] {
        assert!(
            !text.contains(secret),
            "the API key reached the sandbox: {text}"
        );
        assert!(
            !text.contains("API_KEY") && !text.contains("AWS_"),
            "{text}"
        );
    }
    assert!(seen.contains("MPLBACKEND"));
    let content = result["content"].as_str().unwrap();
    assert!(content.contains("ptrace -1 1\n"), "{content}");
}

/// One work call per step, in order; then the answer.
fn budget_breaker(req: &PolicyRequest) -> Reply {
    const STEPS: [(&str, &str, &str); 4] = [
        (
            "hold more memory than the turn may",
            "code_execution",
            "import os, time\nkids = []\nfor _ in range(3):\n    pid = os.fork()\n    if pid == 0:\n        b = bytearray(200 << 20)\n        for i in range(0, len(b), 4096):\n            b[i] = 1\n        time.sleep(60)\n        os._exit(0)\n    kids.append(pid)\nfor pid in kids:\n    os.waitpid(pid, 0)",
        ),
        (
            "start more processes than the turn may",
            "exec",
            "for i in $(seq 30); do sleep 60 & sleep 0.05; done; wait",
        ),
        (
            "write more than the workspace may hold",
            "exec",
            "for i in $(seq 30); do head -c 10M /dev/zero > fill_$i; done",
        ),
        (
            "compute within the limits",
            "code_execution",
            "import numpy as np\nint(np.arange(10).sum())",
        ),
    ];
    let Some(plan) = req.plan() else {
        let steps: Vec<Value> = STEPS
            .iter()
            .map(|(goal, ..)| json!({"goal": goal}))
            .collect();
        return Reply::calls(vec![(
            "solve_plan",
            json!({"analysis": "try every limit, then work within them", "steps": steps}),
        )]);
    };
    let Some(step) = plan.current() else {
        return Reply::text("Every limit held.");
    };
    let index = plan.steps.iter().position(|s| s.id == step.id).unwrap_or(0);
    let (_, tool, code) = STEPS[index.min(STEPS.len() - 1)];
    if req.work_results_for(step).is_empty() {
        // The step's key in a comment tells the policy which step a result belongs to.
        let tagged = format!("# {}\n{code}", step.key());
        let args = match tool {
            "exec" => json!({"command": tagged}),
            _ => json!({"code": tagged}),
        };
        return Reply::calls(vec![(tool, args)]);
    }
    Reply::calls(vec![(
        "solve_finish_step",
        json!({"step_id": step.id, "summary": "tried"}),
    )])
}

#[test]
fn the_settings_files_budgets_stop_each_call_that_exceeds_them_and_say_which() {
    let server = MockServer::policy(FnPolicy(budget_breaker));
    let env = Env::new();
    std::fs::write(
        &env.config,
        "sandbox:\n  memory_mb: 256\n  max_processes: 16\n  workspace_mb: 64\n  workspace_files: 1000\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = env
        .cmd(&server)
        .arg("Find the sandbox's limits.")
        .output()
        .expect("run deepsolve");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    server.assert_clean();
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    // Each work result once, in call order (finished steps are folded out of later requests).
    let mut results: Vec<(String, String)> = Vec::new();
    for result in server
        .policy_requests()
        .iter()
        .flat_map(|r| r.tool_results())
    {
        let work = matches!(result.name.as_deref(), Some("code_execution" | "exec"));
        if work && !results.iter().any(|(id, _)| *id == result.call_id) {
            results.push((result.call_id, result.content));
        }
    }
    let content = |i: usize| results.get(i).map(|r| r.1.as_str()).unwrap_or_default();
    assert!(
        content(0)
            .starts_with("[status] stopped: the turn's code used more memory than its budget (")
            && content(0).contains("the budget is 256 MiB")
            && content(0).contains("The interpreter was killed"),
        "{results:?}"
    );
    assert!(
        content(1).starts_with("[status] stopped: the turn's code reached its limit of 16 processes and threads at once. The command and everything it started were killed."),
        "{results:?}"
    );
    assert!(
        content(2).starts_with("[status] stopped: the workspace grew past its quota of 64 MiB ("),
        "{results:?}"
    );
    assert!(
        content(3).starts_with("[note] The Python interpreter was restarted (the previous call was stopped: the turn's memory budget of 256 MiB was exceeded")
            && content(3).ends_with("[value]\n45"),
        "{results:?}"
    );
    let on_disk: u64 = std::fs::read_dir(env.workspace())
        .unwrap()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    // Stopped while it ran: far from the 300 MiB the command meant to write.
    assert!(on_disk < 200 << 20, "{on_disk} bytes in the workspace");

    // The doctor says what holds each budget, and why no cgroup does it here.
    let doctor = env
        .command()
        .args(["doctor", "--base-url", &server.url(), "--model", "m"])
        .output()
        .expect("run doctor");
    let doctor = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        doctor.contains("memory budget: 256 MiB per turn, watchdog (")
            || doctor.contains("memory budget: 256 MiB per turn, cgroup v2 memory.max"),
        "{doctor}"
    );
    assert!(
        doctor.contains("process budget: 16 processes and threads per turn"),
        "{doctor}"
    );
    assert!(
        doctor.contains("workspace quota: 64 MiB and 1000 files per turn"),
        "{doctor}"
    );
}

fn broken_bwrap(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("bwrap");
    std::fs::write(
        &path,
        "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn without_a_working_sandbox_the_code_tools_are_not_mounted() {
    let server = MockServer::policy(WellBehaved::new(1));
    let env = Env::new();
    let bwrap = broken_bwrap(env.path());
    let out = env
        .cmd(&server)
        .env("DEEPSOLVE_BWRAP", &bwrap)
        .env("PATH", "/nonexistent")
        .args(["--json", "Solve x + 1 = 3."])
        .output()
        .expect("run deepsolve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "code tools are off: bubblewrap cannot create a sandbox here: bwrap: No permissions"
        ),
        "{stderr}"
    );
    let first: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(
        first["tools"].as_array().map(Vec::len),
        Some(3),
        "only the solve tools: {first}"
    );
    assert!(
        server
            .policy_requests()
            .iter()
            .all(|r| !r.offers("code_execution"))
    );
    assert!(
        !env.data().join("deepsolve/turns").exists(),
        "no workspace without code tools"
    );

    // Required but missing: a clear error, no turn.
    let server = MockServer::sequence(vec![]);
    let out = env
        .cmd(&server)
        .env("DEEPSOLVE_BWRAP", &bwrap)
        .env("PATH", "/nonexistent")
        .args(["--set", "sandbox.backend=bwrap", "Solve x + 1 = 3."])
        .output()
        .expect("run deepsolve");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("sandbox.backend is `bwrap`, but bubblewrap cannot create a sandbox here")
    );

    // The doctor says exactly why.
    let out = env
        .command()
        .env("DEEPSOLVE_BWRAP", &bwrap)
        .env("PATH", "/nonexistent")
        .args(["doctor", "--base-url", &server.url(), "--model", "m"])
        .output()
        .expect("run doctor");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("code tools are off (not mounted): bubblewrap cannot create a sandbox here: bwrap: No permissions"), "{stdout}");
}

/// Also through the deprecated spelling `tools.sandbox`, which still counts, with a warning.
#[test]
fn sandbox_none_runs_with_a_loud_warning() {
    let server = MockServer::policy(WellBehaved::new(1).with_work_tool(Some("exec")));
    let env = Env::new();
    let out = env
        .cmd(&server)
        .args(["--set", "tools.sandbox=none", "--json", "Solve x + 1 = 3."])
        .output()
        .expect("run deepsolve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "WARNING: sandbox.backend is `none`: model-written code runs WITHOUT isolation"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("tools.sandbox is deprecated; write sandbox.backend instead (in --set"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"name\":\"exec\""), "{stdout}");
}

#[test]
fn seccomp_off_runs_without_the_filter_with_a_loud_warning() {
    let server = MockServer::policy(WellBehaved::new(1).with_work_tool(Some("exec")));
    let env = Env::new();
    let out = env
        .cmd(&server)
        .args([
            "--set",
            "sandbox.seccomp=false",
            "--json",
            "Solve x + 1 = 3.",
        ])
        .output()
        .expect("run deepsolve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("WARNING: sandbox.seccomp is false: model-written code may call ptrace"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"name\":\"exec\""),
        "still sandboxed: {stdout}"
    );

    // The doctor shows the filter's state either way.
    let doctor = |seccomp: &str| {
        let out = env
            .command()
            .args(["doctor", "--base-url", &server.url(), "--model", "m"])
            .args(["--set", &format!("sandbox.seccomp={seccomp}")])
            .output()
            .expect("run doctor");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let off = doctor("false");
    assert!(off.contains("NO seccomp filter"), "{off}");
    assert!(off.contains("sandbox.seccomp is false"), "{off}");
    let on = doctor("true");
    assert!(on.contains("seccomp filter on"), "{on}");
    assert!(!on.contains("sandbox.seccomp is false"), "{on}");
}
