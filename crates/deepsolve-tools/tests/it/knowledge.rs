//! `rag` and `read_source` against a real store and a real index: numbering through the
//! turn's citations, the turn's material as the only reach, paging through a document.

use std::sync::Arc;

use deepsolve_core::{Citations, Language, Material, Tool, ToolContext, ToolOutput};
use deepsolve_kb::{IngestProgress, Knowledge};
use deepsolve_store::{KnowledgeBase, Store, StoreOptions};
use deepsolve_testkit::documents;
use deepsolve_tools::knowledge::rag::RagTool;
use deepsolve_tools::knowledge::read_source::ReadSourceTool;
use deepsolve_tools::{CATALOG, Policy, Toolset};
use serde_json::json;

/// A knowledge service over a fresh SQLite store in `dir`.
pub(crate) async fn service(dir: &tempfile::TempDir) -> Knowledge {
    let store = Store::open_sqlite(&dir.path().join("kb.db"), StoreOptions::default())
        .await
        .unwrap();
    Knowledge::new(store, dir.path().join("kb-index"), None)
}

async fn add(knowledge: &Knowledge, kb: &KnowledgeBase, name: &str, text: &str) -> String {
    let ingestor = knowledge.ingestor();
    let doc = ingestor
        .add("u1", &kb.id, name, text.len() as u64)
        .await
        .unwrap();
    let quiet = |_: IngestProgress| {};
    ingestor
        .run("u1", &doc.id, text.as_bytes().to_vec(), &quiet)
        .await
        .unwrap();
    doc.id
}

const LIMITS: &str = "# Analysis\n\n## 3.2 Limits\n\nA sequence converges to a limit when its terms \
                      eventually stay arbitrarily close to it.\n";

struct Rig {
    _dir: tempfile::TempDir,
    knowledge: Knowledge,
    calculus: KnowledgeBase,
    notes: String,
    limits: String,
    secret: String,
    material: Arc<Material>,
}

async fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let knowledge = service(&dir).await;
    let store = knowledge.store().clone();
    let calculus = store.create_kb("u1", "Calculus").await.unwrap();
    let other = store.create_kb("u1", "Other").await.unwrap();
    let notes = add(
        &knowledge,
        &calculus,
        "notes.md",
        &documents::notes_markdown(),
    )
    .await;
    let limits = add(&knowledge, &calculus, "limits.md", LIMITS).await;
    let secret = add(
        &knowledge,
        &other,
        "secret.md",
        "# Secret\n\nThe eigenvalue diary.",
    )
    .await;
    let material = knowledge
        .material("u1", std::slice::from_ref(&calculus), None)
        .await
        .unwrap();
    Rig {
        _dir: dir,
        knowledge,
        calculus,
        notes,
        limits,
        secret,
        material: Arc::new(material),
    }
}

fn context(material: Option<Arc<Material>>, language: Language) -> ToolContext {
    ToolContext {
        turn_id: "turn_1".into(),
        user_id: Some("u1".into()),
        language,
        material,
        citations: Arc::new(Citations::new(Vec::new())),
        ..ToolContext::default()
    }
}

async fn call(
    tool: &dyn Tool,
    args: serde_json::Value,
    ctx: &ToolContext,
) -> Result<ToolOutput, String> {
    tool.run(args, ctx)
        .await
        .map_err(|e| e.message().to_string())
}

#[tokio::test]
async fn rag_numbers_passages_through_the_turns_citations_and_quotes_them() {
    let rig = rig().await;
    let rag = RagTool::new(rig.knowledge.clone());
    let ctx = context(Some(rig.material.clone()), Language::En);
    let out = call(&rag, json!({"query": "eigenvalue"}), &ctx)
        .await
        .unwrap();
    let first_line = out.content.lines().next().unwrap();
    assert_eq!(
        first_line,
        format!(
            "[1] notes.md · Linear algebra › Eigenvalues (source {})",
            rig.notes
        )
    );
    assert!(
        out.content.contains("\n> An eigenvector of a matrix"),
        "{}",
        out.content
    );
    assert!(
        !out.content.contains("secret"),
        "another KB is out of reach: {}",
        out.content
    );
    let source = &out.sources[0];
    assert_eq!(source.n, 1);
    assert_eq!(source.document_id.as_deref(), Some(rig.notes.as_str()));
    assert_eq!(source.kb.as_deref(), Some(rig.calculus.id.as_str()));
    assert_eq!(
        source.section.as_deref(),
        Some("Linear algebra › Eigenvalues")
    );
    assert!(
        source
            .excerpt
            .as_deref()
            .unwrap()
            .starts_with("# Linear algebra")
    );
    assert!(source.chunk_id.is_some());

    // A new passage gets the next number; a passage seen before keeps its own.
    let out = call(
        &rag,
        json!({"query": "sequence limit", "kb": "calculus", "top_k": 1}),
        &ctx,
    )
    .await
    .unwrap();
    assert_eq!(out.sources.len(), 1);
    assert_eq!(out.sources[0].n, 2);
    assert!(
        out.content
            .starts_with("[2] limits.md · Analysis › 3.2 Limits"),
        "{}",
        out.content
    );
    let out = call(
        &rag,
        json!({"query": "eigenvector matrix", "top_k": 1}),
        &ctx,
    )
    .await
    .unwrap();
    assert_eq!(out.sources[0].n, 1);
    assert_eq!(ctx.citations.all().len(), 2);

    let out = call(&rag, json!({"query": "zebra"}), &ctx).await.unwrap();
    assert!(out.sources.is_empty());
    assert!(
        out.content.starts_with("no passage matches"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn rag_refuses_a_knowledge_base_the_turn_does_not_have_and_names_the_attached_ones() {
    let rig = rig().await;
    let rag = RagTool::new(rig.knowledge.clone());
    let ctx = context(Some(rig.material.clone()), Language::En);
    let err = call(&rag, json!({"query": "eigenvalue", "kb": "Other"}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        format!(
            "unknown knowledge base 'Other' (attached: Calculus ({})); name one of these, or leave kb out to search them all",
            rig.calculus.id
        )
    );
    let zh = context(Some(rig.material.clone()), Language::Zh);
    let out = call(&rag, json!({"query": "eigenvalue"}), &zh)
        .await
        .unwrap();
    let expected = format!(
        "[1] notes.md · Linear algebra › Eigenvalues (来源 {})",
        rig.notes
    );
    assert!(out.content.starts_with(&expected), "{}", out.content);
    let err = call(&rag, json!({"query": "x", "kb": "Other"}), &zh)
        .await
        .unwrap_err();
    assert!(err.starts_with("未知的知识库 'Other'"), "{err}");
    let err = call(
        &rag,
        json!({"query": "eigenvalue"}),
        &context(None, Language::En),
    )
    .await
    .unwrap_err();
    assert!(err.contains("no knowledge bases"), "{err}");
}

#[tokio::test]
async fn read_source_pages_through_a_document_and_registers_what_it_read() {
    let rig = rig().await;
    let read = ReadSourceTool::new(rig.knowledge.clone());
    let ctx = context(Some(rig.material.clone()), Language::En);
    let total = documents::notes_markdown().trim_end().chars().count();
    let out = call(
        &read,
        json!({"source_id": rig.notes, "max_chars": 30}),
        &ctx,
    )
    .await
    .unwrap();
    let (header, body) = out.content.split_once('\n').unwrap();
    assert_eq!(
        header,
        format!(
            "[1] notes.md · characters 0–30 of {total} · next page: read_source with offset 30"
        )
    );
    assert!(body.starts_with("> # Linear algebra"), "{body}");
    assert_eq!(out.sources.len(), 1);
    assert_eq!(
        out.sources[0].document_id.as_deref(),
        Some(rig.notes.as_str())
    );
    assert_eq!(out.sources[0].kb.as_deref(), Some(rig.calculus.id.as_str()));

    let out = call(&read, json!({"source_id": rig.notes, "offset": 30}), &ctx)
        .await
        .unwrap();
    let header = out.content.lines().next().unwrap();
    assert_eq!(
        header,
        format!("[1] notes.md · characters 30–{total} of {total} · end of the document"),
        "the same document (no pages) keeps its number"
    );
    let out = call(&read, json!({"source_id": rig.limits}), &ctx)
        .await
        .unwrap();
    assert_eq!(out.sources[0].n, 2);
    assert!(
        out.content.contains("> A sequence converges"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn read_source_refuses_a_document_outside_the_turns_material() {
    let rig = rig().await;
    let read = ReadSourceTool::new(rig.knowledge.clone());
    let ctx = context(Some(rig.material.clone()), Language::En);
    for id in [rig.secret.as_str(), "kbd_nope"] {
        let err = call(&read, json!({"source_id": id}), &ctx)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            format!(
                "unknown source '{id}' (attached: notes.md ({}), limits.md ({})); use a document id from this list or from a rag passage",
                rig.notes, rig.limits
            )
        );
    }
    // Another user, same material: the store answers for the user, not the list.
    let mut theirs = context(Some(rig.material.clone()), Language::En);
    theirs.user_id = Some("u2".into());
    let err = call(&read, json!({"source_id": rig.notes}), &theirs)
        .await
        .unwrap_err();
    assert!(err.starts_with("unknown source"), "{err}");
    assert!(ctx.citations.all().is_empty());
}

#[tokio::test]
async fn the_knowledge_tools_are_offered_exactly_when_a_turn_has_material() {
    let dir = tempfile::tempdir().unwrap();
    let mut deps = crate::catalog::deps(crate::catalog::no_sandbox());
    deps.knowledge = Ok(service(&dir).await);
    let set = Toolset::mount(CATALOG, &deps);
    let knowledge: Vec<String> = CATALOG
        .iter()
        .filter(|e| e.policy == Policy::WithMaterial)
        .map(|e| e.name.to_string())
        .collect();
    assert_eq!(knowledge, ["rag", "read_source"]);
    let none: &[&str] = &[];
    assert!(set.for_turn(none).unwrap().is_empty());
    assert!(
        set.for_turn(&["rag"]).unwrap().is_empty(),
        "never by request"
    );
    assert_eq!(set.for_turn_with(none, true).unwrap(), knowledge);
    assert_eq!(
        set.for_turn_with(&["read_source"], true).unwrap(),
        knowledge
    );
    assert!(!set.needs_workspace(&knowledge));

    // Without the service they are unavailable, and a turn with material is refused.
    let set = Toolset::mount(CATALOG, &crate::catalog::deps(crate::catalog::no_sandbox()));
    let err = set.for_turn_with(none, true).unwrap_err();
    assert_eq!(err.unavailable.len(), 2);
    assert!(err.to_string().contains("no store in these tests"), "{err}");
    assert!(set.for_turn(none).unwrap().is_empty());
}
