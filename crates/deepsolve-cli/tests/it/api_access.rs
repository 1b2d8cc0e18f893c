//! Who reads `/metrics` on the real `deepsolve serve`: anyone in single-user mode; once users
//! exist, the scrape token named by `server.metrics_token_env` or an admin, nobody else.

use std::path::Path;
use std::process::Stdio;

use deepsolve_testkit::{MockServer, WellBehaved};

use crate::support::{Server, deepsolve, listening_url};

/// `deepsolve users add NAME [--admin]`: the new user's token.
fn add_user(home: &Path, db: &str, name: &str, admin: bool) -> String {
    let mut cmd = deepsolve(home);
    cmd.args(["users", "add", name, "--database", db]);
    if admin {
        cmd.arg("--admin");
    }
    let out = cmd.output().expect("users add");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `deepsolve serve` with `settings` as its settings file and `env` set.
fn serve_with(home: &Path, db: &str, model: &str, settings: &str, env: &[(&str, &str)]) -> Server {
    let file = home.join("metrics-settings.yaml");
    std::fs::write(&file, settings).expect("settings");
    let log_path = home.join("metrics-serve.log");
    let mut cmd = deepsolve(home);
    cmd.env("DEEPSOLVE_CONFIG", &file)
        .args(["serve", "--addr", "127.0.0.1:0", "--database", db])
        .args(["--base-url", model, "--model", "mock-model"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).expect("log"));
    for (key, value) in env {
        cmd.env(key, value);
    }
    let mut child = cmd.spawn().expect("spawn serve");
    let base = listening_url(&mut child, &log_path);
    Server { child, base }
}

/// The status of `GET /metrics` with `token` as the bearer (none: no header), and the body.
async fn scrape(server: &Server, token: Option<&str>) -> (u16, String, String) {
    let mut req = reqwest::Client::new().get(server.url("/metrics"));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let resp = req.send().await.expect("scrape");
    let status = resp.status().as_u16();
    let kind = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, kind, resp.text().await.expect("body"))
}

const SCRAPE: &str = "scrape-token-for-prometheus-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_take_the_scrape_token_or_an_admin_once_users_exist() {
    let home = tempfile::tempdir().expect("home");
    let db = format!("sqlite://{}", home.path().join("m.db").display());
    let mock = MockServer::policy(WellBehaved::new(1).with_work_tool(None));

    // Single-user mode (loopback only): open, as before.
    let server = serve_with(home.path(), &db, &mock.url(), "", &[]);
    let (status, kind, body) = scrape(&server, None).await;
    assert_eq!(status, 200);
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    assert!(
        body.contains("# TYPE deepsolve_events_total counter"),
        "{body}"
    );
    drop(server);

    let admin = add_user(home.path(), &db, "root", true);
    let user = add_user(home.path(), &db, "eve", false);

    // With users and no scrape token: an admin only.
    let server = serve_with(home.path(), &db, &mock.url(), "", &[]);
    assert_eq!(scrape(&server, None).await.0, 401);
    assert_eq!(scrape(&server, Some(&user)).await.0, 403);
    assert_eq!(scrape(&server, Some(SCRAPE)).await.0, 401);
    let (status, _, body) = scrape(&server, Some(&admin)).await;
    assert_eq!(status, 200);
    assert!(body.contains("deepsolve_running_turns 0"), "{body}");
    drop(server);

    // With the scrape token configured: that token too, and still nobody else.
    let settings = "server:\n  metrics_token_env: DS_TEST_SCRAPE\n";
    let server = serve_with(
        home.path(),
        &db,
        &mock.url(),
        settings,
        &[("DS_TEST_SCRAPE", SCRAPE)],
    );
    let (status, _, body) = scrape(&server, Some(SCRAPE)).await;
    assert_eq!(status, 200);
    assert!(
        body.contains("# TYPE deepsolve_running_turns gauge"),
        "{body}"
    );
    assert_eq!(scrape(&server, Some(&admin)).await.0, 200);
    assert_eq!(scrape(&server, Some(&user)).await.0, 403);
    assert_eq!(scrape(&server, Some("scrape-token-wrong")).await.0, 401);
    assert_eq!(scrape(&server, None).await.0, 401);
    drop(server);

    // A setting that names an unset variable is a start-up error naming it.
    let file = home.path().join("metrics-settings.yaml");
    std::fs::write(&file, settings).expect("settings");
    let out = deepsolve(home.path())
        .env("DEEPSOLVE_CONFIG", &file)
        .args(["serve", "--addr", "127.0.0.1:0", "--database", &db])
        .args(["--base-url", &mock.url(), "--model", "mock-model"])
        .output()
        .expect("serve");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("DS_TEST_SCRAPE") && stderr.contains("metrics_token_env"),
        "{stderr}"
    );
}
