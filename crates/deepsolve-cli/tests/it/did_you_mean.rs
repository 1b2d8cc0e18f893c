//! The real `deepsolve` binary names a mistyped setting with the nearest known key, whether
//! the typo is in the settings file, a `DEEPSOLVE_<SECTION>__<KEY>` variable or `--set` — one
//! line on stderr, exit code 2, no model contacted.

use crate::support::Isolated;

/// `deepsolve solve` with `envs` set and `sets` as `--set` arguments: its exit code and stderr.
fn solve_with(env: &Isolated, envs: &[(&str, &str)], sets: &[&str]) -> (i32, String) {
    let mut cmd = env.command();
    cmd.envs(envs.iter().copied()).args([
        "solve",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9",
    ]);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.arg("x").output().expect("run deepsolve");
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    (out.status.code().unwrap_or(-1), stderr)
}

#[test]
fn a_typo_in_the_settings_file_gets_the_nearest_key() {
    let env = Isolated::new();
    std::fs::write(&env.config, "solve:\n  max_round: 3\n").expect("settings file");
    let (code, stderr) = solve_with(&env, &[], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let expected = format!(
        "unknown setting 'solve.max_round' in {} (known in solve: ",
        env.config.display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(
        stderr.ends_with(" — did you mean 'solve.max_rounds'?"),
        "{stderr}"
    );
}

#[test]
fn a_typo_in_an_environment_variable_gets_the_nearest_key() {
    let env = Isolated::new();
    let (code, stderr) = solve_with(&env, &[("DEEPSOLVE_SOLVE__TOKEN_BUDGT", "100")], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            "unknown setting 'solve.token_budgt' from environment variable \
             DEEPSOLVE_SOLVE__TOKEN_BUDGT (known in solve: "
        ),
        "{stderr}"
    );
    assert!(
        stderr.ends_with(" — did you mean 'solve.token_budget'?"),
        "{stderr}"
    );
}

#[test]
fn a_typo_in_set_gets_the_nearest_key_and_a_far_miss_gets_none() {
    let env = Isolated::new();
    let (code, stderr) = solve_with(&env, &[], &["solve.max_round=3"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            "unknown setting 'solve.max_round' in --set solve.max_round=… (known in solve: "
        ),
        "{stderr}"
    );
    assert!(
        stderr.ends_with(" — did you mean 'solve.max_rounds'?"),
        "{stderr}"
    );

    let (code, stderr) = solve_with(&env, &[], &["solve.warp_speed=9"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("'solve.warp_speed'"), "{stderr}");
    assert!(!stderr.contains("did you mean"), "{stderr}");
}
