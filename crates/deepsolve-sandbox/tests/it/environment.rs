//! No secret of ours reaches sandboxed code. The secrets must be in the test process's own
//! environment, and setting variables while other test threads run is unsound, so the test
//! re-runs this test binary as a child with the secrets in its environment and only the
//! inner check selected.

use std::time::Duration;

use crate::common::*;

const SECRETS: [(&str, &str); 4] = [
    ("DEEPSOLVE_API_KEY", "sk-deepsolve-test-secret-1"),
    ("OPENAI_API_KEY", "sk-openai-test-secret-2"),
    ("AWS_SECRET_ACCESS_KEY", "aws-test-secret-3"),
    ("PYTHONSTARTUP", "/tmp/not-a-real-startup-file.py"),
];

/// Set in the child's environment: the inner check runs only there.
const CHILD: &str = "DEEPSOLVE_TEST_SECRETS_CHILD";

#[test]
fn no_api_key_or_other_secret_reaches_the_sandbox() {
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(exe)
        .args([
            "--exact",
            "environment::secrets_stay_out_of_the_sandbox",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(SECRETS)
        .env(CHILD, "1")
        .output()
        .expect("run the child test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child check failed: {stdout}\n{stderr}"
    );
}

#[test]
#[ignore = "run by no_api_key_or_other_secret_reaches_the_sandbox in a child process"]
fn secrets_stay_out_of_the_sandbox() {
    assert_eq!(
        std::env::var(CHILD).as_deref(),
        Ok("1"),
        "run only as the child of no_api_key_or_other_secret_reaches_the_sandbox"
    );
    for (key, value) in SECRETS {
        assert_eq!(
            std::env::var(key).as_deref(),
            Ok(value),
            "{key} is in the child's env"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let sb = sandbox().await;
        let (_d, ws) = workspace();
        let mut py = python(&sb, &ws).await;
        let seen = cell(
            &mut py,
            "import os\nprint(repr(dict(os.environ)))\nprint(open('/proc/self/environ', 'rb').read())\nprint(open('/proc/1/environ', 'rb').read() if os.access('/proc/1/environ', os.R_OK) else '')",
        )
        .await;
        let shell = sh(&sb, &ws, "env; cat /proc/*/environ 2>/dev/null", Duration::from_secs(10)).await;
        for (key, value) in SECRETS {
            for text in [&seen.stdout.text, &shell.stdout.text] {
                assert!(!text.contains(value), "{key}'s value leaked: {text}");
                assert!(!text.contains(key), "{key} leaked: {text}");
            }
        }
        assert!(seen.stdout.text.contains("MPLBACKEND"), "{seen:?}");
    });
}
