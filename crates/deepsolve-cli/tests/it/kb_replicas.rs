//! Two `deepsolve serve` processes on one PostgreSQL: a document uploaded through one is
//! searched, and cited by a solve, through the other (each replica keeps its own full-text
//! index, rebuilt from the store when it falls behind). Skipped without
//! `DEEPSOLVE_TEST_POSTGRES_URL` (`scripts/start-postgres`).

use std::time::Duration;

use deepsolve_testkit::policy::KbCite;
use deepsolve_testkit::{MockServer, documents};
use serde_json::{Value, json};

use crate::support::Server;

/// A `multipart/form-data` body with one part `file` (built by hand: the upload is the
/// server's to parse, the client only has to send the bytes).
pub(crate) fn multipart(name: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    let boundary = "deepsolve-test-boundary-7e3f";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn get(http: &reqwest::Client, url: &str) -> Value {
    let resp = http.get(url).send().await.expect("get");
    assert_eq!(resp.status().as_u16(), 200, "{url}");
    resp.json().await.expect("json")
}

async fn post(http: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let resp = http.post(url).json(&body).send().await.expect("post");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The `data:` JSON of every frame of a finished turn's event stream.
fn events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|block| {
            block
                .lines()
                .find_map(|l| l.strip_prefix("data:"))
                .and_then(|d| serde_json::from_str(d.trim()).ok())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_uploaded_through_one_replica_is_cited_through_the_other() {
    let Some(db) = deepsolve_store::testing::scratch_postgres_from_env()
        .await
        .expect("DEEPSOLVE_TEST_POSTGRES_URL is set but unusable")
    else {
        eprintln!("skipped: DEEPSOLVE_TEST_POSTGRES_URL is not set (scripts/start-postgres)");
        return;
    };
    let home_a = tempfile::tempdir().expect("home");
    let home_b = tempfile::tempdir().expect("home");
    let mock = MockServer::policy(KbCite);
    let a = Server::start(home_a.path(), &db, &mock.url(), "kb-a");
    let b = Server::start(home_b.path(), &db, &mock.url(), "kb-b");
    let http = reqwest::Client::new();

    let (status, kb) = post(
        &http,
        &a.url("/api/v1/knowledge-bases"),
        json!({"name": "notes"}),
    )
    .await;
    assert_eq!(status, 201, "{kb}");
    let (content_type, body) = multipart("lecture.pdf", &documents::text_pdf(5));
    let resp = http
        .post(a.url("/api/v1/knowledge-bases/notes/documents"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("upload through a");
    assert_eq!(resp.status().as_u16(), 202);
    let accepted: Value = resp.json().await.expect("json");
    let doc = accepted["documents"][0]["id"]
        .as_str()
        .expect("document id")
        .to_string();

    // B sees the ingest end (the state is in the shared store).
    let path = format!("/api/v1/knowledge-bases/notes/documents/{doc}");
    let mut view = Value::Null;
    for _ in 0..1200 {
        view = get(&http, &b.url(&path)).await;
        if view["status"] == "ready" || view["status"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(view["status"], "ready", "{view}");

    // B searches it with its own index, built from the store.
    let (status, found) = post(
        &http,
        &b.url("/api/v1/knowledge-bases/notes/search"),
        json!({"query": "Taylor series"}),
    )
    .await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["hits"][0]["document_id"], json!(doc), "{found}");
    assert_eq!(found["hits"][0]["page"], 4, "{found}");

    // A solve on B answers from it, citing the document and page.
    let (status, created) = post(
        &http,
        &b.url("/api/v1/turns"),
        json!({"problem": "State the rule of Taylor series", "knowledge_bases": ["notes"]}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let turn = created["turn_id"].as_str().expect("turn id");
    let stream = http
        .get(b.url(&format!("/api/v1/turns/{turn}/events")))
        .send()
        .await
        .expect("events");
    let body = tokio::time::timeout(Duration::from_secs(120), stream.text())
        .await
        .expect("the stream ends with the turn")
        .expect("body");
    let events = events(&body);
    let answer = events
        .iter()
        .find(|e| e["type"] == "answer")
        .expect("an answer");
    let first = &answer["sources"][0];
    assert_eq!(first["n"], 1, "{answer}");
    assert_eq!(first["document_id"], json!(doc), "{answer}");
    assert_eq!(first["page"], 4, "{answer}");
    let view = get(&http, &a.url(&format!("/api/v1/turns/{turn}"))).await;
    assert_eq!(view["stop_reason"], "answered", "{view}");
    assert_eq!(
        view["sources"], answer["sources"],
        "A tells the same sources"
    );
}
