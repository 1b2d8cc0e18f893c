//! Knowledge bases over the real API: CRUD, isolation between users, uploads through real
//! multipart bodies ingested by the real ingestor (the PDF child included), hostile files,
//! search, and solves that cite what was uploaded.

use std::time::Duration;

use deepsolve_store::Role;
use deepsolve_testkit::{WellBehaved, documents};
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
    let (_, caps) = s.get("/api/v1/capabilities", ada).await;
    assert_eq!(
        caps["knowledge"],
        json!({"available": true, "max_upload_mb": 50}),
        "{caps}"
    );
    assert_eq!(s.delete("/api/v1/knowledge-bases/notes", ada).await, 204);
    assert_eq!(s.delete("/api/v1/knowledge-bases/notes", ada).await, 404);
    let (status, _) = s.get(&format!("/api/v1/knowledge-bases/{id}"), ada).await;
    assert_eq!(status, 404);
    started.server.shutdown().await;
}

const DONE: &[&str] = &["ready", "failed"];

/// Upload `files` (name, bytes) to `kb` as one multipart request.
pub(crate) async fn upload(
    s: &TestServer,
    token: Option<&str>,
    kb: &str,
    files: Vec<(&str, Vec<u8>)>,
) -> (u16, Value) {
    let mut form = reqwest::multipart::Form::new();
    for (name, bytes) in files {
        let part = reqwest::multipart::Part::bytes(bytes).file_name(name.to_string());
        form = form.part("file", part);
    }
    let mut req = s
        .http
        .post(s.url(&format!("/api/v1/knowledge-bases/{kb}/documents")))
        .multipart(form);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.expect("upload");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Poll a document until its ingest ends; returns its view.
pub(crate) async fn settled(s: &TestServer, token: Option<&str>, kb: &str, doc: &str) -> Value {
    let path = format!("/api/v1/knowledge-bases/{kb}/documents/{doc}");
    for _ in 0..1200 {
        let (status, view) = s.get(&path, token).await;
        assert_eq!(status, 200, "{view}");
        if view["status"].as_str().is_some_and(|st| DONE.contains(&st)) {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("document {doc} never finished ingesting");
}

/// Create `name` for `token` and upload `files` into it; every document must become ready.
pub(crate) async fn ready_kb(
    s: &TestServer,
    token: Option<&str>,
    name: &str,
    files: Vec<(&str, Vec<u8>)>,
) -> Vec<Value> {
    let (status, kb) = s
        .post("/api/v1/knowledge-bases", json!({"name": name}), token)
        .await;
    assert_eq!(status, 201, "{kb}");
    let (status, accepted) = upload(s, token, name, files).await;
    assert_eq!(status, 202, "{accepted}");
    let mut docs = Vec::new();
    for doc in accepted["documents"].as_array().expect("documents") {
        assert_eq!(doc["status"], "queued", "{doc}");
        let id = doc["id"].as_str().expect("id");
        let done = settled(s, token, name, id).await;
        assert_eq!(done["status"], "ready", "{done}");
        docs.push(done);
    }
    docs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_knowledge_base_and_documents_are_404_everywhere() {
    let started = two_users().await;
    let s = &started.server;
    let ada = Some(started.tokens[0].as_str());
    let bob = Some(started.tokens[1].as_str());
    let docs = ready_kb(
        s,
        ada,
        "notes",
        vec![("notes.md", documents::notes_markdown().into_bytes())],
    )
    .await;
    let doc = docs[0]["id"].as_str().expect("id").to_string();
    let kb = docs[0]["kb_id"].as_str().expect("kb").to_string();
    s.post("/api/v1/knowledge-bases", json!({"name": "mine"}), bob)
        .await;
    for key in [kb.as_str(), "notes"] {
        let base = format!("/api/v1/knowledge-bases/{key}");
        assert_eq!(s.get(&base, bob).await.0, 404);
        let (status, err) = s
            .post(
                &format!("{base}/search"),
                json!({"query": "eigenvalue"}),
                bob,
            )
            .await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (404, Some("not_found"))
        );
        assert_eq!(s.get(&format!("{base}/documents/{doc}"), bob).await.0, 404);
        assert_eq!(s.delete(&format!("{base}/documents/{doc}"), bob).await, 404);
        let (status, _) = upload(s, bob, key, vec![("x.md", b"# x".to_vec())]).await;
        assert_eq!(status, 404);
        assert_eq!(s.delete(&base, bob).await, 404);
    }
    // Bob's own knowledge base does not reach Ada's document either.
    let path = format!("/api/v1/knowledge-bases/mine/documents/{doc}");
    assert_eq!(s.get(&path, bob).await.0, 404);
    assert_eq!(s.delete(&path, bob).await, 404);
    // Nor does a turn of Bob's: her knowledge base is unknown to him, and he is told his.
    let (status, err) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "p", "knowledge_bases": [kb]}),
            bob,
        )
        .await;
    assert_eq!(status, 422, "{err}");
    assert!(message(&err).contains("mine"), "{err}");
    let (_, list) = s.get("/api/v1/knowledge-bases", bob).await;
    assert_eq!(list["knowledge_bases"].as_array().map(Vec::len), Some(1));
    // Ada's is untouched.
    let (status, detail) = s.get("/api/v1/knowledge-bases/notes", ada).await;
    assert_eq!(status, 200);
    assert_eq!(detail["kb"]["ready"], 1, "{detail}");
    assert_eq!(detail["documents"][0]["id"], json!(doc));
    started.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_is_ingested_to_ready_and_found_by_page() {
    let s = start(WellBehaved::new(1), Options::default()).await.server;
    let docs = ready_kb(
        &s,
        None,
        "calculus",
        vec![
            ("lecture.pdf", documents::text_pdf(5)),
            ("notes.md", documents::notes_markdown().into_bytes()),
        ],
    )
    .await;
    assert_eq!(docs[0]["name"], "lecture.pdf");
    assert_eq!(docs[0]["kind"], "pdf");
    assert_eq!(docs[0]["pages_total"], 5, "{}", docs[0]);
    assert_eq!(docs[0]["pages_done"], 5, "{}", docs[0]);
    assert_eq!(docs[1]["kind"], "markdown");
    let (status, found) = s
        .post(
            "/api/v1/knowledge-bases/calculus/search",
            json!({"query": "Taylor series", "top_k": 3}),
            None,
        )
        .await;
    assert_eq!(status, 200, "{found}");
    let first = &found["hits"][0];
    assert_eq!(first["title"], "lecture.pdf", "{found}");
    assert_eq!(first["page"], 4, "{found}");
    assert!(first["text"].as_str().is_some_and(|t| t.contains("Taylor")));
    let (status, found) = s
        .post(
            "/api/v1/knowledge-bases/calculus/search",
            json!({"query": "eigenvalue stretched"}),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(found["hits"][0]["title"], "notes.md", "{found}");
    assert_eq!(found["hits"][0]["section"], "Linear algebra › Eigenvalues");
    let (_, detail) = s.get("/api/v1/knowledge-bases/calculus", None).await;
    assert_eq!(
        (
            detail["kb"]["documents"].as_u64(),
            detail["kb"]["ready"].as_u64()
        ),
        (Some(2), Some(2))
    );
    // Deleting a document takes its passages out of search.
    let doc = docs[1]["id"].as_str().expect("id");
    let path = format!("/api/v1/knowledge-bases/calculus/documents/{doc}");
    assert_eq!(s.delete(&path, None).await, 204);
    assert_eq!(s.get(&path, None).await.0, 404);
    let (_, found) = s
        .post(
            "/api/v1/knowledge-bases/calculus/search",
            json!({"query": "eigenvalue stretched"}),
            None,
        )
        .await;
    assert!(
        found["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .all(|h| h["title"] != "notes.md"),
        "{found}"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_uploads_fail_one_by_one_with_named_errors_and_the_server_serves_on() {
    let config = deepsolve_server::ServerConfig {
        kb: deepsolve_server::KbConfig {
            max_file_bytes: 4 * 1024 * 1024,
            ..deepsolve_server::KbConfig::default()
        },
        ..deepsolve_server::ServerConfig::default()
    };
    let s = start(
        WellBehaved::new(1),
        Options {
            config: Some(config),
            ..Options::default()
        },
    )
    .await
    .server;
    s.post("/api/v1/knowledge-bases", json!({"name": "hostile"}), None)
        .await;
    let (status, accepted) = upload(
        &s,
        None,
        "hostile",
        vec![
            // It says it inflates to 1 000 bytes, and inflates to 8 MiB (the test servers
            // allow 4).
            (
                "bomb.docx",
                documents::lie_about_sizes(documents::bomb_docx(8 << 20), 1_000),
            ),
            ("huge.pdf", documents::many_pages_pdf(10_000)),
            ("broken.pdf", documents::malformed_pdf()),
            ("../../x.pdf", documents::text_pdf(1)),
        ],
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    let docs = accepted["documents"].as_array().expect("documents");
    let names: Vec<&str> = docs.iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(names, ["bomb.docx", "huge.pdf", "broken.pdf", "x.pdf"]);
    let mut ended = Vec::new();
    for doc in docs {
        let id = doc["id"].as_str().expect("id");
        ended.push(settled(&s, None, "hostile", id).await);
    }
    for (view, about) in ended[..3].iter().zip(["zip bomb", "pages", "PDF"]) {
        assert_eq!(view["status"], "failed", "{view}");
        let error = view["error"].as_str().unwrap_or("");
        let name = view["name"].as_str().unwrap_or("?");
        assert!(error.contains(name), "the error names the document: {view}");
        assert!(error.contains(about), "the error says why: {view}");
    }
    assert_eq!(ended[3]["status"], "ready", "{}", ended[3]);
    // Over the cap: 413 naming the file and the cap, and nothing is recorded.
    let (status, err) = upload(
        &s,
        None,
        "hostile",
        vec![
            ("ok.md", b"# fine".to_vec()),
            ("big.txt", vec![b'a'; 5 * 1024 * 1024]),
        ],
    )
    .await;
    assert_eq!(status, 413, "{err}");
    assert!(
        message(&err).contains("big.txt") && message(&err).contains("4 MiB"),
        "{err}"
    );
    let (_, detail) = s.get("/api/v1/knowledge-bases/hostile", None).await;
    assert_eq!(detail["kb"]["documents"], 4, "{detail}");
    assert_eq!(detail["kb"]["failed"], 3, "{detail}");
    // Not multipart, no file, an unknown part: clear refusals.
    let (status, err) = s
        .post(
            "/api/v1/knowledge-bases/hostile/documents",
            json!({"file": "x"}),
            None,
        )
        .await;
    assert_eq!(status, 415, "{err}");
    let (status, err) = upload(&s, None, "hostile", Vec::new()).await;
    assert!(status == 422 || status == 400, "{status} {err}");
    let many: Vec<(&str, Vec<u8>)> = (0..21).map(|_| ("n.md", b"# n".to_vec())).collect();
    let (status, err) = upload(&s, None, "hostile", many).await;
    assert_eq!(status, 422, "{err}");
    assert!(message(&err).contains("at most 20"), "{err}");
    // The server still serves: health, and a solve.
    assert_eq!(s.get("/healthz", None).await.0, 200);
    let (turn, _) = s.start_turn(json!({"problem": "1+1?"}), None).await;
    assert_eq!(s.wait_done(&turn, None).await["status"], "finished");
    s.shutdown().await;
}

/// The sources of the turn's `answer` event, and of its `rag` result.
fn cited(events: &[crate::support::SseEvent]) -> (Vec<Value>, Vec<Value>) {
    let answer = events
        .iter()
        .find(|e| e.kind() == "answer")
        .expect("an answer");
    let rag = events
        .iter()
        .find(|e| e.kind() == "tool_result" && e.data["name"] == "rag")
        .expect("a rag result");
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    (list(&answer.data["sources"]), list(&rag.data["sources"]))
}

fn kb_cite() -> deepsolve_testkit::policy::KbCite {
    deepsolve_testkit::policy::KbCite
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_solve_over_a_knowledge_base_cites_the_document_and_page() {
    let s = start(kb_cite(), Options::default()).await.server;
    let docs = ready_kb(
        &s,
        None,
        "calculus",
        vec![("lecture.pdf", documents::text_pdf(5))],
    )
    .await;
    let doc = docs[0]["id"].clone();
    let (turn, _) = s
        .start_turn(
            json!({"problem": "State the rule of Taylor series", "knowledge_bases": ["calculus"]}),
            None,
        )
        .await;
    let events = s.events(&turn, None, None).await;
    let (answer_sources, rag_sources) = cited(&events);
    assert!(!rag_sources.is_empty());
    let first = &answer_sources[0];
    assert_eq!(first["n"], 1, "{answer_sources:?}");
    assert_eq!(first["document_id"], doc);
    assert_eq!(first["title"], "lecture.pdf");
    assert_eq!(first["page"], 4, "Taylor series is page 4: {first}");
    assert!(
        answer_sources.iter().all(|src| src["document_id"] == doc),
        "{answer_sources:?}"
    );
    let view = s.wait_done(&turn, None).await;
    assert_eq!(view["stop_reason"], "answered", "{view}");
    assert!(view["answer"].as_str().is_some_and(|a| a.contains("[1]")));
    assert_eq!(view["sources"], json!(answer_sources));
    assert!(
        view["tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("rag")))
    );
    // The material is in the stored spec: a resume reads the same.
    let stored = s
        .state
        .store
        .turn(&turn, deepsolve_server::LOCAL_USER)
        .await
        .expect("read")
        .expect("the turn");
    let material = stored.spec.material.expect("material stored with the turn");
    assert_eq!(material.knowledge_bases[0].name, "calculus");
    assert_eq!(material.documents[0].id, doc.as_str().expect("id"));
    // Without material the knowledge tools are not offered, and nothing is cited.
    let (plain, _) = s.start_turn(json!({"problem": "1+1?"}), None).await;
    let view = s.wait_done(&plain, None).await;
    assert_eq!(view["sources"], json!([]));
    assert!(
        !view["tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("rag")))
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_inline_or_multipart_are_cited_and_a_bad_one_refuses_the_turn() {
    use base64::Engine as _;
    let s = start(kb_cite(), Options::default()).await.server;
    let notes = base64::engine::general_purpose::STANDARD.encode(documents::notes_markdown());
    let (turn, _) = s
        .start_turn(
            json!({"problem": "What is an eigenvalue stretched by",
                   "attachments": [{"name": "notes.md", "data_base64": notes}]}),
            None,
        )
        .await;
    let events = s.events(&turn, None, None).await;
    let (answer_sources, _) = cited(&events);
    assert_eq!(answer_sources[0]["title"], "notes.md", "{answer_sources:?}");
    assert_eq!(
        answer_sources[0]["section"], "Linear algebra › Eigenvalues",
        "{answer_sources:?}"
    );
    let view = s.wait_done(&turn, None).await;
    assert_eq!(view["sources"], json!(answer_sources));
    // The turn's attachments are its own: no knowledge base of the user shows them, and the
    // knowledge-base routes do not reach them.
    let (_, list) = s.get("/api/v1/knowledge-bases", None).await;
    assert_eq!(list["knowledge_bases"], json!([]), "{list}");
    let stored = s
        .state
        .store
        .turn(&turn, deepsolve_server::LOCAL_USER)
        .await
        .expect("read")
        .expect("the turn");
    let material = stored.spec.material.expect("material");
    assert!(material.knowledge_bases[0].attachments, "{material:?}");
    let hidden = format!("/api/v1/knowledge-bases/{}", material.knowledge_bases[0].id);
    assert_eq!(s.get(&hidden, None).await.0, 404);
    assert_eq!(s.delete(&hidden, None).await, 404);

    // Multipart: the turn's JSON in `request`, the files in `file`.
    let request = json!({"problem": "State the rule of Taylor series"}).to_string();
    let form = reqwest::multipart::Form::new()
        .text("request", request)
        .part(
            "file",
            reqwest::multipart::Part::bytes(documents::text_pdf(5)).file_name("lecture.pdf"),
        );
    let resp = s
        .http
        .post(s.url("/api/v1/turns"))
        .multipart(form)
        .send()
        .await
        .expect("post");
    assert_eq!(resp.status().as_u16(), 201);
    let created: Value = resp.json().await.expect("json");
    let turn = created["turn_id"].as_str().expect("turn").to_string();
    let events = s.events(&turn, None, None).await;
    let (answer_sources, _) = cited(&events);
    assert_eq!(
        (
            answer_sources[0]["title"].as_str(),
            answer_sources[0]["page"].as_u64()
        ),
        (Some("lecture.pdf"), Some(4)),
        "{answer_sources:?}"
    );

    // One attachment that cannot be read: 422 naming it and why; no turn is recorded.
    let (_, before) = s.get("/api/v1/sessions", None).await;
    let broken = base64::engine::general_purpose::STANDARD.encode(documents::malformed_pdf());
    let (status, err) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "p", "attachments": [
                {"name": "notes.md", "data_base64": notes},
                {"name": "broken.pdf", "data_base64": broken},
            ]}),
            None,
        )
        .await;
    assert_eq!(status, 422, "{err}");
    assert!(message(&err).contains("broken.pdf"), "{err}");
    let (status, err) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "p", "attachments": [{"name": "a.md", "data_base64": "%%"}]}),
            None,
        )
        .await;
    assert_eq!(status, 422, "{err}");
    assert!(message(&err).contains("a.md"), "{err}");
    let (_, after) = s.get("/api/v1/sessions", None).await;
    assert_eq!(before, after);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_facade_ends_a_cited_answer_with_its_sources() {
    let s = start(kb_cite(), Options::default()).await.server;
    ready_kb(
        &s,
        None,
        "calculus",
        vec![("lecture.pdf", documents::text_pdf(5))],
    )
    .await;
    let (status, completion) = s
        .post(
            "/v1/chat/completions",
            json!({"model": "deepsolve", "knowledge_bases": ["calculus"],
                   "messages": [{"role": "user", "content": "State the rule of Taylor series"}]}),
            None,
        )
        .await;
    assert_eq!(status, 200, "{completion}");
    let content = completion["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    let (_, list) = content.split_once("\n\nSources\n").expect("a Sources list");
    assert!(list.starts_with("[1] lecture.pdf, p. 4"), "{content}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_a_dead_process_left_unfinished_are_failed_at_start_and_live_ones_kept() {
    use deepsolve_store::NewKbDocument;
    let s = start(WellBehaved::new(1), Options::default()).await.server;
    let docs = ready_kb(&s, None, "kept", vec![("a.md", b"# a\n\ntext".to_vec())]).await;
    let store = &s.state.store;
    let kb = docs[0]["kb_id"].as_str().expect("kb");
    let new = |name: &str| NewKbDocument {
        name: name.into(),
        kind: "markdown".into(),
        size: 10,
        pages: None,
    };
    let queued = store
        .add_kb_document(kb, deepsolve_server::LOCAL_USER, new("queued.md"))
        .await
        .expect("queued");
    let ingesting = store
        .add_kb_document(kb, deepsolve_server::LOCAL_USER, new("half.md"))
        .await
        .expect("ingesting");
    store
        .set_kb_document_status(
            &ingesting.id,
            deepsolve_server::LOCAL_USER,
            deepsolve_store::KbDocumentStatus::Ingesting,
            None,
        )
        .await
        .expect("status");
    // Another process's live ingest: it touched its document just now.
    let live = store
        .add_kb_document(kb, deepsolve_server::LOCAL_USER, new("live.md"))
        .await
        .expect("live");
    store
        .set_kb_document_status(
            &live.id,
            deepsolve_server::LOCAL_USER,
            deepsolve_store::KbDocumentStatus::Ingesting,
            None,
        )
        .await
        .expect("status");
    // The dead ones stopped making progress longer ago than the staleness limit.
    let stale = live.updated_at
        - i64::try_from(deepsolve_server::ingest::STALE_AFTER.as_millis()).expect("ms")
        - 1_000;
    for id in [&queued.id, &ingesting.id] {
        store
            .set_kb_document_updated_at(id, deepsolve_server::LOCAL_USER, stale)
            .await
            .expect("set back");
    }
    // A second server starting on the same database: what the first left unfinished is
    // failed, with a reason; the live ingest is left to finish.
    let again = deepsolve_server::prepare(
        store.clone(),
        s.state.app.clone(),
        deepsolve_server::ServerConfig::default(),
    )
    .await
    .expect("a server starts");
    drop(again);
    for (id, name) in [(&queued.id, "queued.md"), (&ingesting.id, "half.md")] {
        let (_, view) = s
            .get(
                &format!("/api/v1/knowledge-bases/kept/documents/{id}"),
                None,
            )
            .await;
        assert_eq!(view["status"], "failed", "{view}");
        let error = view["error"].as_str().unwrap_or("");
        assert!(error.contains(name) && error.contains("restart"), "{view}");
    }
    let (_, view) = s
        .get(
            &format!("/api/v1/knowledge-bases/kept/documents/{}", live.id),
            None,
        )
        .await;
    assert_eq!(view["status"], "ingesting", "{view}");
    let (_, detail) = s.get("/api/v1/knowledge-bases/kept", None).await;
    assert_eq!(
        detail["kb"]["ready"], 1,
        "the ready one is untouched: {detail}"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_turn_reads_the_material_it_was_started_with() {
    use deepsolve_protocol::{Material, MaterialDocument, MaterialKb, StoredTurnSpec};
    use deepsolve_store::NewTurn;
    let s = start(kb_cite(), Options::default()).await.server;
    let docs = ready_kb(
        &s,
        None,
        "calculus",
        vec![("lecture.pdf", documents::text_pdf(5))],
    )
    .await;
    let doc = &docs[0];
    let id = |v: &Value| v.as_str().expect("id").to_string();
    // A turn as a dead server left it: recorded with its material, nothing logged.
    let material = Material {
        knowledge_bases: vec![MaterialKb {
            id: id(&doc["kb_id"]),
            name: "calculus".into(),
            documents: 1,
            attachments: false,
        }],
        documents: vec![MaterialDocument {
            id: id(&doc["id"]),
            name: "lecture.pdf".into(),
            kind: "pdf".into(),
            pages: Some(5),
            size: doc["size"].as_u64().expect("size"),
            kb: id(&doc["kb_id"]),
            attached: false,
        }],
    };
    let store = &s.state.store;
    let user = deepsolve_server::LOCAL_USER;
    let problem = "State the rule of Taylor series";
    let session = store.create_session(user, problem).await.expect("session");
    let tools = s
        .state
        .app
        .tools_for_turn_with::<&str>(&[], true)
        .expect("tools");
    let spec = StoredTurnSpec {
        language: deepsolve_protocol::Language::En,
        tools,
        config: deepsolve_core::SolveConfig::default().to_map(),
        context_window: 32_000,
        history: Vec::new(),
        material: Some(material),
        images: Vec::new(),
    };
    let turn = "turn_with_material".to_string();
    store
        .create_turn(&NewTurn {
            id: turn.clone(),
            session_id: session.id,
            user_id: user.into(),
            problem: problem.into(),
            spec,
            owner: "gone".into(),
        })
        .await
        .expect("turn");
    store.mark_interrupted("gone").await.expect("interrupted");
    let (status, body) = s
        .post(&format!("/api/v1/turns/{turn}/resume"), json!({}), None)
        .await;
    assert_eq!(status, 202, "{body}");
    let events = s.events(&turn, None, None).await;
    let (answer_sources, _) = cited(&events);
    assert_eq!(
        answer_sources[0]["document_id"], doc["id"],
        "{answer_sources:?}"
    );
    assert_eq!(answer_sources[0]["page"], 4, "{answer_sources:?}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_very_long_upload_name_keeps_its_extension_and_is_read() {
    let started = two_users().await;
    let s = &started.server;
    let ada = Some(started.tokens[0].as_str());
    let name = format!("lecture-{}-final.md", "long".repeat(1_250));
    let docs = ready_kb(
        s,
        ada,
        "named",
        vec![(
            name.as_str(),
            b"# Limits\n\nA limit is approached.".to_vec(),
        )],
    )
    .await;
    let kept = docs[0]["name"].as_str().expect("name");
    assert_eq!(kept.chars().count(), 200, "{kept}");
    assert!(
        kept.starts_with("lecture-long") && kept.ends_with("longlong-final.md"),
        "{kept}"
    );
    assert_eq!(docs[0]["kind"], "markdown");
    started.server.shutdown().await;
}
