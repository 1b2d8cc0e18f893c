//! Knowledge bases over the real API: CRUD, isolation between users, uploads through real
//! multipart bodies ingested by the real ingestor (the PDF child included), hostile files,
//! search, and solves that cite what was uploaded.

use std::time::Duration;

use deepsolve_store::Role;
use deepsolve_testkit::WellBehaved;
use serde_json::{Value, json};

use crate::support::{Options, Started, TestServer, start};

async fn two_users() -> Started {
    start(
        WellBehaved::new(1).with_work_tool(None),
        Options {
            users: vec![("ada", Role::User), ("bob", Role::User)],
            ..Options::default()
        },
    )
    .await
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn knowledge_bases_are_created_listed_named_and_deleted() {
    let started = two_users().await;
    let s = &started.server;
    let ada = Some(started.tokens[0].as_str());
    let (status, kb) = s
        .post("/api/v1/knowledge-bases", json!({"name": "notes"}), ada)
        .await;
    assert_eq!(status, 201, "{kb}");
    assert_eq!(kb["name"], "notes");
    assert_eq!(kb["documents"], 0);
    let id = kb["id"].as_str().expect("id").to_string();
    let (status, err) = s
        .post("/api/v1/knowledge-bases", json!({"name": "notes"}), ada)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("conflict"))
    );
    assert!(message(&err).contains("notes"), "{err}");
    for bad in [json!({"name": "  "}), json!({"name": "a\u{7}b"})] {
        let (status, err) = s.post("/api/v1/knowledge-bases", bad, ada).await;
        assert_eq!(status, 422, "{err}");
    }
    let (status, err) = s
        .post("/api/v1/knowledge-bases", json!({"nmae": "x"}), ada)
        .await;
    assert_eq!(status, 422, "{err}");
    assert!(message(&err).contains("nmae"), "{err}");
    s.post("/api/v1/knowledge-bases", json!({"name": "algebra"}), ada)
        .await;
    let (status, list) = s.get("/api/v1/knowledge-bases", ada).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = list["knowledge_bases"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|kb| kb["name"].as_str())
        .collect();
    assert_eq!(names, ["algebra", "notes"]);
    for key in [id.as_str(), "notes"] {
        let (status, detail) = s.get(&format!("/api/v1/knowledge-bases/{key}"), ada).await;
        assert_eq!(status, 200, "{detail}");
        assert_eq!(detail["kb"]["id"], json!(id));
        assert_eq!(detail["documents"], json!([]));
    }
    assert_eq!(s.delete("/api/v1/knowledge-bases/notes", ada).await, 204);
    assert_eq!(s.delete("/api/v1/knowledge-bases/notes", ada).await, 404);
    let (status, _) = s.get(&format!("/api/v1/knowledge-bases/{id}"), ada).await;
    assert_eq!(status, 404);
    started.server.shutdown().await;
}
