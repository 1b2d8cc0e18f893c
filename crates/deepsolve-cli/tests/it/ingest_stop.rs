//! An ingest that would keep a core busy is stopped through the real `deepsolve serve`:
//! deleting its document frees the CPU at once, and SIGTERM ends the process within
//! `server.shutdown_grace_s`, the interrupted document marked failed for the next start.
//! The document is tens of MiB of one character with no break point (a base64 image in
//! Markdown at its worst): the chunker's longest job.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use deepsolve_testkit::MockServer;
use deepsolve_testkit::policy::KbCite;
use serde_json::{Value, json};

use crate::kb_replicas::multipart;
use crate::support::{deepsolve, listening_url};

/// How long the server may take to stop burning CPU once its document is deleted. Measured
/// idle within the first 250 ms sample on a 2-core machine busy with builds (a debug build),
/// and the test prints what it measured; the bound leaves room for a machine whose cores the
/// other tests of this binary share (3 s was seen to fail at a load of 5), and is still far
/// below the chunker's own time for the 40 MiB run.
const CPU_FREED_WITHIN: Duration = Duration::from_secs(5);
const GRACE_S: u64 = 3;

/// The document: big enough that its ingest is still running when it is stopped, even in an
/// optimized build.
fn unbroken_run() -> Vec<u8> {
    vec![b'x'; 40 * 1024 * 1024]
}

/// `deepsolve serve` with `settings` (YAML) on an SQLite file in `home`.
fn serve(home: &std::path::Path, model_url: &str, settings: &str) -> (Child, String) {
    let mut cmd = deepsolve(home);
    std::fs::write(home.join("settings.yaml"), settings).expect("settings");
    let log_path = home.join("serve.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let db = format!("sqlite://{}", home.join("kb.db").display());
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--database", &db])
        .args(["--base-url", model_url, "--model", "mock-model"])
        .stdout(Stdio::piped())
        .stderr(log);
    let mut child = cmd.spawn().expect("spawn deepsolve serve");
    let base = listening_url(&mut child, &log_path);
    (child, base)
}

/// CPU time (user + system) the process has used, from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) close with ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

/// The share of one core the process used over `window`.
fn cpu_share(pid: u32, window: Duration) -> f64 {
    let before = cpu_time(pid);
    std::thread::sleep(window);
    (cpu_time(pid).saturating_sub(before)).as_secs_f64() / window.as_secs_f64()
}

/// Create the KB `notes` and upload the unbroken run as `image.md`; its document id.
async fn upload_run(http: &reqwest::Client, base: &str) -> String {
    let resp = http
        .post(format!("{base}/api/v1/knowledge-bases"))
        .json(&json!({"name": "notes"}))
        .send()
        .await
        .expect("create");
    assert_eq!(resp.status().as_u16(), 201);
    let (content_type, body) = multipart("image.md", &unbroken_run());
    let resp = http
        .post(format!("{base}/api/v1/knowledge-bases/notes/documents"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("upload");
    assert_eq!(resp.status().as_u16(), 202);
    let accepted: Value = resp.json().await.expect("json");
    accepted["documents"][0]["id"]
        .as_str()
        .expect("document id")
        .to_string()
}

async fn document(http: &reqwest::Client, base: &str, doc: &str) -> (u16, Value) {
    let resp = http
        .get(format!(
            "{base}/api/v1/knowledge-bases/notes/documents/{doc}"
        ))
        .send()
        .await
        .expect("get document");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Wait until the document is being chunked (it is extracted: its page count is known) and
/// the server is busy on it. On a machine whose cores other tests share, the server may never
/// get half a core: a second of chunking observed counts as busy too.
async fn wait_busy(http: &reqwest::Client, base: &str, doc: &str, pid: u32) {
    let started = Instant::now();
    let mut chunking_since = None;
    loop {
        let (_, view) = document(http, base, doc).await;
        assert!(
            matches!(view["status"].as_str(), Some("queued" | "ingesting")),
            "the ingest ended before it could be stopped: {view}"
        );
        let chunking = view["status"] == "ingesting" && view["pages_total"].is_u64();
        if chunking {
            let since = *chunking_since.get_or_insert_with(Instant::now);
            if cpu_share(pid, Duration::from_millis(200)) > 0.25
                || since.elapsed() > Duration::from_secs(1)
            {
                return;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(120), "never busy");
    }
}

/// Upload the run, delete what `target` names (given the document id) mid-chunking, and
/// check the server is idle at once and goes on reading other documents.
async fn deleting_mid_ingest_frees_the_cpu(target: fn(&str) -> String) {
    let home = tempfile::tempdir().expect("home");
    let mock = MockServer::policy(KbCite);
    let (mut child, base) = serve(home.path(), &mock.url(), "");
    let pid = child.id();
    let http = reqwest::Client::new();
    let doc = upload_run(&http, &base).await;
    wait_busy(&http, &base, &doc, pid).await;

    let resp = http
        .delete(format!("{base}{}", target(&doc)))
        .send()
        .await
        .expect("delete");
    assert_eq!(resp.status().as_u16(), 204);
    let deleted = Instant::now();
    // Idle again: under a fifth of a core over a quarter second.
    while cpu_share(pid, Duration::from_millis(250)) > 0.2 {
        assert!(
            deleted.elapsed() < CPU_FREED_WITHIN,
            "still busy {:?} after the delete",
            deleted.elapsed()
        );
    }
    eprintln!("CPU freed {:?} after the delete", deleted.elapsed());
    assert_eq!(document(&http, &base, &doc).await.0, 404);
    // Made again when the whole knowledge base went.
    let resp = http
        .post(format!("{base}/api/v1/knowledge-bases"))
        .json(&json!({"name": "notes"}))
        .send()
        .await
        .expect("create");
    assert!(matches!(resp.status().as_u16(), 201 | 409), "{resp:?}");
    // The server goes on: another document is read to the end.
    let (content_type, body) = multipart("small.md", b"# Small\n\nA short note.");
    let resp = http
        .post(format!("{base}/api/v1/knowledge-bases/notes/documents"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("upload");
    assert_eq!(resp.status().as_u16(), 202);
    let small: Value = resp.json().await.expect("json");
    let small = small["documents"][0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let waited = Instant::now();
    loop {
        let (_, view) = document(&http, &base, &small).await;
        if view["status"] == "ready" {
            break;
        }
        assert!(waited.elapsed() < Duration::from_secs(30), "{view}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default();
    assert!(
        !log.contains("cannot record ingest progress"),
        "the stopped ingest went on: {log}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_document_mid_ingest_frees_the_cpu_at_once() {
    deleting_mid_ingest_frees_the_cpu(|doc| {
        format!("/api/v1/knowledge-bases/notes/documents/{doc}")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_its_knowledge_base_mid_ingest_frees_the_cpu_at_once() {
    deleting_mid_ingest_frees_the_cpu(|_| "/api/v1/knowledge-bases/notes".to_string()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_ingest_exits_within_the_grace_and_the_document_reads_failed() {
    let home = tempfile::tempdir().expect("home");
    let mock = MockServer::policy(KbCite);
    let settings = format!("server:\n  shutdown_grace_s: {GRACE_S}\n");
    let (mut child, base) = serve(home.path(), &mock.url(), &settings);
    let pid = child.id();
    let http = reqwest::Client::new();
    let doc = upload_run(&http, &base).await;
    wait_busy(&http, &base, &doc, pid).await;

    let signalled = Instant::now();
    // SAFETY: kill on our own child's pid, which it still holds (not yet waited for).
    let sent = unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let limit = Duration::from_secs(GRACE_S + 2);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            signalled.elapsed() < limit,
            "still running {:?} after SIGTERM",
            signalled.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("exited {:?} after SIGTERM", signalled.elapsed());
    assert!(status.success(), "{status:?}");

    // The next start shows the document failed, saying why.
    let (mut again, base) = serve(home.path(), &mock.url(), &settings);
    let (status, view) = document(&http, &base, &doc).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "failed", "{view}");
    let error = view["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("image.md: ") && error.contains("upload it again"),
        "{error}"
    );
    let _ = again.kill();
    let _ = again.wait();
}
