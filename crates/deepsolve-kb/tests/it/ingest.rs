//! Ingest and the knowledge service end to end: real documents (PDF through the real child
//! process), a real store (SQLite, and PostgreSQL when configured) and a real index; then the
//! hostile inputs, each ending in a `failed` document that names itself and its problem while
//! the others stay searchable.

use std::path::PathBuf;
use std::sync::Mutex;

use deepsolve_kb::extract::{ChildCommand, Limits};
use deepsolve_kb::{IngestError, IngestProgress, KbError, KbLimits, Knowledge};
use deepsolve_store::{KbDocument, KbDocumentStatus, Store};

use crate::fixtures;
use crate::index::stores;

fn limits() -> Limits {
    Limits {
        pdf_child: Some(ChildCommand {
            program: PathBuf::from(env!("CARGO_BIN_EXE_deepsolve-kb-pdf")),
            args: Vec::new(),
        }),
        pdftotext: None,
        ..Limits::default()
    }
}

fn knowledge(store: &Store, dir: &tempfile::TempDir, kb_limits: KbLimits) -> Knowledge {
    Knowledge::new(store.clone(), dir.path().join("kb-index"), None)
        .with_limits(limits(), kb_limits)
}

/// Zip guards scaled down, so a fixture bomb of a few MiB trips them.
fn small_zip_limits() -> Limits {
    Limits {
        max_inflated_bytes: 1 << 20,
        ..limits()
    }
}

/// Add and run one document; the result of the run and the progress it reported.
async fn ingest(
    knowledge: &Knowledge,
    kb: &str,
    name: &str,
    bytes: Vec<u8>,
) -> (Result<KbDocument, IngestError>, Vec<IngestProgress>, String) {
    let ingestor = knowledge.ingestor();
    let doc = ingestor
        .add("u1", kb, name, bytes.len() as u64)
        .await
        .unwrap();
    assert_eq!(doc.status, KbDocumentStatus::Queued);
    let seen = Mutex::new(Vec::new());
    let record = |p: IngestProgress| seen.lock().unwrap().push(p);
    let result = ingestor.run("u1", &doc.id, bytes, &record).await;
    (result, seen.into_inner().unwrap(), doc.id)
}

#[tokio::test]
async fn every_format_is_ingested_then_found_and_read_page_by_page() {
    for (store, dir) in stores().await {
        let knowledge = knowledge(&store, &dir, KbLimits::default());
        let kb = store.create_kb("u1", "Calculus").await.unwrap();
        let inputs: Vec<(&str, Vec<u8>, &str, Option<u32>)> = vec![
            ("lecture.pdf", fixtures::text_pdf(3), "pdf", Some(3)),
            ("series.docx", fixtures::lecture_docx(), "docx", Some(2)),
            (
                "parts.html",
                fixtures::html_article().into_bytes(),
                "html",
                Some(1),
            ),
            (
                "notes.md",
                fixtures::notes_markdown().into_bytes(),
                "markdown",
                Some(1),
            ),
            ("积分.pdf", fixtures::chinese_pdf(), "pdf", Some(2)),
        ];
        let mut ids = Vec::new();
        for (name, bytes, kind, pages) in inputs {
            let (result, progress, id) = ingest(&knowledge, &kb.id, name, bytes).await;
            let doc = result.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(doc.status, KbDocumentStatus::Ready, "{name}");
            assert_eq!((doc.kind.as_str(), doc.pages), (kind, pages), "{name}");
            assert_eq!(doc.pages_done, pages.unwrap_or(0), "{name}");
            let stages: Vec<&str> = progress.iter().map(|p| p.stage).collect();
            assert_eq!(stages.first(), Some(&"extracting"), "{name}");
            assert_eq!(stages.last(), Some(&"ready"), "{name}");
            assert!(progress.iter().all(|p| p.document_id == id));
            ids.push(id);
        }

        let kbs = vec![kb.id.clone()];
        let found = knowledge
            .search("u1", &kbs, "the chain rule", Some(3))
            .await
            .unwrap();
        let top = &found.hits[0];
        assert_eq!((top.title.as_str(), top.page), ("lecture.pdf", Some(2)));
        let found = knowledge
            .search("u1", &kbs, "ratio test", None)
            .await
            .unwrap();
        assert_eq!(found.hits[0].title, "series.docx");
        assert_eq!(
            found.hits[0].heading_path.last().map(String::as_str),
            Some("Convergence tests")
        );
        let found = knowledge
            .search("u1", &kbs, "eigenvalue", None)
            .await
            .unwrap();
        assert_eq!(found.hits[0].title, "notes.md");
        let found = knowledge
            .search("u1", &kbs, "分部积分", None)
            .await
            .unwrap();
        assert_eq!(found.hits[0].title, "积分.pdf");

        // The whole text, a window at a time, with the page each window starts on.
        let whole = knowledge.read("u1", &ids[0], 0, 100_000).await.unwrap();
        assert_eq!(whole.name, "lecture.pdf");
        assert!(
            whole.text.starts_with("Page 1 of the lecture notes."),
            "{}",
            whole.text
        );
        assert!(whole.text.contains("Page 3 of the lecture notes."));
        assert_eq!(whole.next_offset, None);
        assert_eq!(whole.total_chars, whole.text.chars().count());
        let first = knowledge.read("u1", &ids[0], 0, 40).await.unwrap();
        assert_eq!(first.text.chars().count(), 40);
        assert_eq!((first.page, first.next_offset), (Some(1), Some(40)));
        let mut offset = 0;
        let mut joined = String::new();
        let mut pages = Vec::new();
        loop {
            let window = knowledge.read("u1", &ids[0], offset, 70).await.unwrap();
            assert_eq!(window.offset, offset);
            joined.push_str(&window.text);
            pages.push(window.page);
            match window.next_offset {
                Some(next) => offset = next,
                None => break,
            }
        }
        assert_eq!(joined, whole.text, "the windows put together are the text");
        assert_eq!(pages.first(), Some(&Some(1)));
        assert_eq!(pages.last(), Some(&Some(3)));
        let past = knowledge.read("u1", &ids[0], 1_000_000, 10).await.unwrap();
        assert_eq!((past.text.as_str(), past.next_offset), ("", None));
        // Another user reads nothing of it.
        assert!(matches!(
            knowledge.read("u2", &ids[0], 0, 10).await,
            Err(KbError::UnknownDocument(_))
        ));

        // What a turn over this KB may read.
        let material = knowledge
            .material("u1", std::slice::from_ref(&kb), None)
            .await
            .unwrap();
        assert_eq!(material.knowledge_bases[0].documents, 5);
        assert!(!material.knowledge_bases[0].attachments);
        let names: Vec<&str> = material.documents.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "lecture.pdf",
                "series.docx",
                "parts.html",
                "notes.md",
                "积分.pdf"
            ]
        );
        assert_eq!(material.documents[0].pages, Some(3));
    }
}

#[tokio::test]
async fn names_resolve_to_the_users_knowledge_bases_and_attachments_stay_hidden() {
    for (store, dir) in stores().await {
        let knowledge = knowledge(&store, &dir, KbLimits::default());
        let calculus = store.create_kb("u1", "Calculus").await.unwrap();
        let algebra = store.create_kb("u1", "Algebra").await.unwrap();
        store.create_kb("u2", "Physics").await.unwrap();
        let wanted = vec![
            calculus.id.clone(),
            "algebra".to_string(),
            "Calculus".to_string(),
        ];
        let found = knowledge.resolve_kbs("u1", &wanted).await.unwrap();
        let ids: Vec<&str> = found.iter().map(|k| k.id.as_str()).collect();
        assert_eq!(ids, [calculus.id.as_str(), algebra.id.as_str()]);
        let err = knowledge
            .resolve_kbs("u1", &["Physics".to_string()])
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown knowledge base 'Physics' (yours: Algebra, Calculus)"
        );
        let KbError::UnknownKb { available, .. } = err else {
            panic!("{err:?}");
        };
        assert_eq!(available, ["Algebra", "Calculus"]);
        let err = knowledge
            .search("u1", &["kb_nope".to_string()], "x", None)
            .await
            .unwrap_err();
        assert!(matches!(err, KbError::UnknownKb { .. }), "{err:?}");

        let attachments = knowledge.attachments_kb("u1", "turn_1").await.unwrap();
        assert_eq!(
            knowledge.attachments_kb("u1", "turn_1").await.unwrap().id,
            attachments.id
        );
        let (result, _, _) = ingest(
            &knowledge,
            &attachments.id,
            "sheet.md",
            b"# Exercise sheet\n\nProve that the harmonic series diverges.".to_vec(),
        )
        .await;
        result.unwrap();
        assert!(
            knowledge
                .resolve_kbs("u1", std::slice::from_ref(&attachments.name))
                .await
                .is_err()
        );
        let material = knowledge
            .material("u1", &[calculus], Some(&attachments))
            .await
            .unwrap();
        assert_eq!(material.knowledge_bases.len(), 2);
        let own = &material.knowledge_bases[1];
        assert!(own.attachments);
        assert_eq!((own.name.as_str(), own.documents), ("attachments", 1));
        assert_eq!(material.documents.len(), 1);
        assert!(material.documents[0].attached);
        let found = knowledge
            .search(
                "u1",
                std::slice::from_ref(&attachments.id),
                "harmonic series",
                None,
            )
            .await
            .unwrap();
        assert_eq!(found.hits[0].title, "sheet.md");

        // Deleting a KB takes its index with it; another user's KB is not theirs to delete.
        assert!(!knowledge.delete_kb("u2", &attachments.id).await.unwrap());
        assert!(dir.path().join("kb-index").join(&attachments.id).exists());
        assert!(knowledge.delete_kb("u1", &attachments.id).await.unwrap());
        assert!(!dir.path().join("kb-index").join(&attachments.id).exists());
        assert!(!knowledge.delete_kb("u1", &attachments.id).await.unwrap());
    }
}

/// The failed document's error, from the store.
async fn failure(store: &Store, id: &str) -> String {
    let doc = store.kb_document(id, "u1").await.unwrap().unwrap();
    assert_eq!(doc.status, KbDocumentStatus::Failed, "{doc:?}");
    doc.error.unwrap()
}

#[tokio::test]
async fn hostile_documents_fail_by_name_and_leave_the_others_searchable() {
    for (store, dir) in stores().await {
        // Room for the good document's one chunk and two more: five pages will not fit.
        let kb_limits = KbLimits {
            max_file_bytes: 2 * 1024 * 1024,
            max_chunks_per_kb: 3,
            ..KbLimits::default()
        };
        let knowledge = Knowledge::new(store.clone(), dir.path().join("kb-index"), None)
            .with_limits(small_zip_limits(), kb_limits);
        let kb = store.create_kb("u1", "Notes").await.unwrap();
        let (good, _, good_id) = ingest(
            &knowledge,
            &kb.id,
            "notes.md",
            fixtures::notes_markdown().into_bytes(),
        )
        .await;
        good.unwrap();
        let held = store.kb_chunk_count(&kb.id, "u1").await.unwrap();
        assert_eq!(held, 1);

        let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
            (
                "bomb.docx",
                fixtures::bomb_docx(8 << 20),
                "bomb.docx",
                "bomb.docx: refused as a zip bomb",
            ),
            (
                "huge.pdf",
                fixtures::many_pages_pdf(10_000),
                "huge.pdf",
                "huge.pdf: 10000 pages is over the limit of 2000",
            ),
            (
                "junk.pdf",
                fixtures::malformed_pdf(),
                "junk.pdf",
                "junk.pdf: the PDF parser failed",
            ),
            (
                "fake.pdf",
                b"hello, I am text".to_vec(),
                "fake.pdf",
                "fake.pdf: not a PDF (no %PDF header)",
            ),
            (
                "../../etc/passwd",
                b"root:x:0:0:root:/root:/bin/bash\n".to_vec(),
                "passwd",
                "passwd: unsupported format",
            ),
            (
                "long.pdf",
                fixtures::text_pdf(5),
                "long.pdf",
                "long.pdf: its 5 passages would take the knowledge base 'Notes' over its limit of 3 (it holds 1)",
            ),
        ];
        for (upload, bytes, stored, message) in cases {
            let (result, _, id) = ingest(&knowledge, &kb.id, upload, bytes).await;
            let err = result.expect_err(upload);
            assert!(err.to_string().starts_with(message), "{upload}: {err}");
            let doc = store.kb_document(&id, "u1").await.unwrap().unwrap();
            assert_eq!(doc.name, stored);
            assert_eq!(failure(&store, &id).await, err.to_string());
        }
        // A traversal name that is otherwise fine is read under its base name.
        let (ok, _, _) = ingest(
            &knowledge,
            &kb.id,
            "../../secret.md",
            b"# Secret\n\nA plain note about limits.".to_vec(),
        )
        .await;
        assert_eq!(ok.unwrap().name, "secret.md");

        // Too large is refused before anything is recorded.
        let err = knowledge
            .ingestor()
            .add("u1", &kb.id, "big.pdf", 3 * 1024 * 1024)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "big.pdf: 3 MiB is over the limit of 2 MiB");
        let err = knowledge
            .ingestor()
            .add("u1", "kb_missing", "a.md", 10)
            .await
            .unwrap_err();
        assert!(matches!(err, IngestError::UnknownKb(_)), "{err:?}");

        // Nothing of the failures was kept; the good documents are untouched and found.
        assert_eq!(store.kb_chunk_count(&kb.id, "u1").await.unwrap(), 2);
        let docs = store.kb_documents(&kb.id, "u1").await.unwrap();
        assert_eq!(docs.len(), 8);
        assert_eq!(
            docs.iter()
                .filter(|d| d.status == KbDocumentStatus::Ready)
                .count(),
            2
        );
        let found = knowledge
            .search("u1", std::slice::from_ref(&kb.id), "eigenvalue", None)
            .await
            .unwrap();
        assert_eq!(found.hits.len(), 1);
        assert_eq!(found.hits[0].document_id, good_id);
        let material = knowledge.material("u1", &[kb], None).await.unwrap();
        assert_eq!(
            material.documents.len(),
            2,
            "failed documents are no material"
        );
    }
}

#[tokio::test]
async fn a_document_retried_after_a_failure_is_read_afresh() {
    for (store, dir) in stores().await {
        let knowledge = knowledge(&store, &dir, KbLimits::default());
        let kb = store.create_kb("u1", "Notes").await.unwrap();
        let ingestor = knowledge.ingestor();
        let doc = ingestor.add("u1", &kb.id, "notes.md", 10).await.unwrap();
        let quiet = |_: IngestProgress| {};
        let err = ingestor
            .run("u1", &doc.id, Vec::new(), &quiet)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "notes.md: the document has no text");
        let bytes = fixtures::notes_markdown().into_bytes();
        let again = ingestor
            .run("u1", &doc.id, bytes.clone(), &quiet)
            .await
            .unwrap();
        assert_eq!((again.status, again.error), (KbDocumentStatus::Ready, None));
        // Running it once more replaces its chunks rather than adding to them.
        ingestor.run("u1", &doc.id, bytes, &quiet).await.unwrap();
        assert_eq!(store.kb_chunk_count(&kb.id, "u1").await.unwrap(), 1);
        let err = ingestor
            .run("u2", &doc.id, Vec::new(), &quiet)
            .await
            .unwrap_err();
        assert!(matches!(err, IngestError::UnknownDocument(_)), "{err:?}");
    }
}

#[tokio::test]
async fn progress_moves_page_by_page_while_a_long_pdf_is_stored() {
    for (store, dir) in stores().await {
        let knowledge = knowledge(&store, &dir, KbLimits::default());
        let kb = store.create_kb("u1", "Long").await.unwrap();
        let (result, progress, _) =
            ingest(&knowledge, &kb.id, "long.pdf", fixtures::text_pdf(31)).await;
        let doc = result.unwrap();
        assert_eq!((doc.pages, doc.pages_done), (Some(31), 31));
        let storing: Vec<u32> = progress
            .iter()
            .filter(|p| p.stage == "storing")
            .map(|p| p.pages_done)
            .collect();
        // 31 pages in groups of two: 2, 4, …, 30, then 31.
        let mut expected: Vec<u32> = (1..=15).map(|i| i * 2).collect();
        expected.push(31);
        assert_eq!(storing[1..], expected[..], "{progress:?}");
        assert!(progress.iter().skip(1).all(|p| p.pages_total == Some(31)));
        let done: Vec<u32> = progress.iter().map(|p| p.pages_done).collect();
        assert!(done.windows(2).all(|w| w[0] <= w[1]), "{done:?}");
        assert_eq!(done.last(), Some(&31));
    }
}

#[tokio::test]
async fn a_document_past_its_time_budget_fails_naming_the_stage_and_the_limit() {
    for (store, dir) in stores().await {
        let kb_limits = KbLimits {
            ingest_timeout: std::time::Duration::ZERO,
            ..KbLimits::default()
        };
        let knowledge = knowledge(&store, &dir, kb_limits);
        let kb = store.create_kb("u1", "Notes").await.unwrap();
        let run = vec![b'x'; 4 * 1024 * 1024];
        let (result, _, id) = ingest(&knowledge, &kb.id, "image.md", run).await;
        let err = result.unwrap_err();
        assert!(matches!(err, IngestError::TimedOut { .. }), "{err:?}");
        let message = failure(&store, &id).await;
        assert_eq!(message, err.to_string());
        assert!(
            message.starts_with("image.md: ")
                && message
                    .contains("took it past the ingest time limit of 0 s (kb.ingest_timeout_s)"),
            "{message}"
        );
        assert_eq!(store.kb_chunk_count(&kb.id, "u1").await.unwrap(), 0);
    }
}

#[tokio::test]
async fn a_cancelled_ingest_stops_and_keeps_nothing() {
    for (store, dir) in stores().await {
        let knowledge = knowledge(&store, &dir, KbLimits::default());
        let kb = store.create_kb("u1", "Notes").await.unwrap();
        let bytes = vec![b'x'; 8 * 1024 * 1024];
        let ingestor = knowledge.ingestor();
        let doc = ingestor
            .add("u1", &kb.id, "image.md", bytes.len() as u64)
            .await
            .unwrap();
        let cancel = tokio_util::sync::CancellationToken::new();
        let canceller = cancel.clone();
        // Cancelled once chunking has begun: the CPU-bound stage.
        let on_progress = move |p: IngestProgress| {
            if p.stage == "chunking" {
                canceller.cancel();
            }
        };
        let result = ingestor
            .run_until("u1", &doc.id, bytes, &on_progress, &cancel)
            .await;
        assert!(
            matches!(result, Err(IngestError::Cancelled { .. })),
            "{result:?}"
        );
        assert_eq!(store.kb_chunk_count(&kb.id, "u1").await.unwrap(), 0);
    }
}
