//! Citation sources through a turn: a tool registers what it found with the turn's
//! `Citations`, its `tool_result` carries them, the answer (forced ones too) carries the
//! ones it cites, checkpoints carry all of them, and a resumed turn keeps their numbers.

use std::sync::Arc;

use async_trait::async_trait;
use deepsolve_core::*;
use serde_json::{Value, json};

use crate::common::*;

/// A fake retrieval tool: `{"q": "c1 c2"}` finds the chunks named, each registered with the
/// turn's numbering, and prints them as numbered blocks. It says whether it saw material.
struct Library {
    spec: ToolSpec,
}

impl Library {
    fn tool() -> Arc<Library> {
        Arc::new(Library {
            spec: ToolSpec {
                name: "library".into(),
                description: "find passages".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"q": {"type": "string"}},
                    "required": ["q"],
                    "additionalProperties": false
                }),
            },
        })
    }
}

fn chunk(id: &str) -> Source {
    Source {
        title: "lecture.pdf".into(),
        kb: Some("kb_notes".into()),
        document_id: Some("doc_lecture".into()),
        page: Some(12),
        chunk_id: Some(id.into()),
        section: Some("3 Limits › 3.2 Squeeze".into()),
        excerpt: Some(format!("passage {id}")),
        ..Source::default()
    }
}

#[async_trait]
impl Tool for Library {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let material = ctx.material.as_ref().map_or(0, |m| m.knowledge_bases.len());
        let sources: Vec<Source> = args["q"]
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .map(|id| ctx.citations.register(chunk(id)))
            .collect();
        let mut content = format!("material: {material} knowledge bases\n");
        for s in &sources {
            content.push_str(&format!("[{}] {} (source doc_lecture)\n", s.n, s.title));
        }
        Ok(ToolOutput {
            sources,
            ..ToolOutput::ok(content)
        })
    }
}

fn library(q: &str) -> Step {
    calls(vec![("library", json!({ "q": q }))])
}

fn material() -> Material {
    Material {
        knowledge_bases: vec![MaterialKb {
            id: "kb_notes".into(),
            name: "notes".into(),
            documents: 1,
            attachments: false,
        }],
        documents: vec![MaterialDocument {
            id: "doc_lecture".into(),
            name: "lecture.pdf".into(),
            kind: "pdf".into(),
            pages: Some(40),
            size: 1_048_576,
            kb: "kb_notes".into(),
            attached: false,
        }],
    }
}

/// The first `library` result's text.
fn first_library_text(run: &Run) -> String {
    run.results()
        .into_iter()
        .find(|(name, ..)| name == "library")
        .map(|(_, _, content)| content)
        .expect("a library result")
}

fn numbers(sources: &[Source]) -> Vec<u32> {
    sources.iter().map(|s| s.n).collect()
}

fn result_sources(run: &Run) -> Vec<Vec<u32>> {
    run.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { name, sources, .. } if name == "library" => {
                Some(numbers(sources))
            }
            _ => None,
        })
        .collect()
}

fn answer_event(run: &Run) -> (bool, Vec<Source>) {
    run.events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Answer {
                forced, sources, ..
            } => Some((*forced, sources.clone())),
            _ => None,
        })
        .expect("an answer event")
}

fn checkpoints(run: &Run) -> Vec<Checkpoint> {
    run.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Checkpoint { checkpoint } => Some(checkpoint.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_answer_carries_exactly_the_sources_it_cites() {
    let model = Fake::seq(vec![
        plan(&["read the notes", "conclude"]),
        library("c1 c2"),
        library("c2 c3"),
        finish("S1", "the squeeze theorem applies [2]"),
        finish("S2", "the limit is 0"),
        text(
            "By the notes [2][3], the limit is 0. In code, `xs[1]` is not a citation; [9] is unknown.",
        ),
    ]);
    let run = run_with(model, vec![Library::tool()], |s| {
        s.material = Some(Arc::new(material()));
    })
    .await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    // The same passage (c2) keeps its number in the second call.
    assert_eq!(result_sources(&run), [vec![1, 2], vec![2, 3]]);
    let (forced, sources) = answer_event(&run);
    assert!(!forced);
    assert_eq!(numbers(&sources), [2, 3]);
    assert_eq!(sources[0].chunk_id.as_deref(), Some("c2"));
    assert_eq!(
        sources[0].section.as_deref(),
        Some("3 Limits › 3.2 Squeeze")
    );
    assert_eq!(run.outcome.sources, sources);
    // Every checkpoint carries every source numbered so far.
    let cps = checkpoints(&run);
    assert_eq!(cps.len(), 2);
    assert!(cps.iter().all(|c| numbers(&c.sources) == [1, 2, 3]));
    // The tool saw the material; the system prompt lists it, the same in every request.
    assert!(first_library_text(&run).starts_with("material: 1 knowledge bases"));
    let system = &run.requests[0].messages[0].content;
    assert!(
        system.contains("- Knowledge base `notes` (1 documents):"),
        "{system}"
    );
    assert!(system.contains("  - lecture.pdf · pdf · 40 pages · 1.0 MB (source `doc_lecture`)"));
    assert!(
        run.requests
            .iter()
            .all(|r| &r.messages[0].content == system)
    );
}

#[tokio::test]
async fn a_turn_without_material_has_no_manifest_and_an_answer_without_sources() {
    let model = Fake::seq(vec![
        plan(&["a"]),
        library("c1"),
        finish("S1", "done"),
        text("x = 2 [1, 3]"),
    ]);
    let run = run_with(model, vec![Library::tool()], |_| {}).await;
    assert!(!run.requests[0].messages[0].content.contains("# Material"));
    assert!(first_library_text(&run).starts_with("material: 0 knowledge bases"));
    // [3] is no source of this turn; [1] is.
    assert_eq!(numbers(&answer_event(&run).1), [1]);
    let model = Fake::seq(vec![plan(&["a"]), finish("S1", "done"), text("x = 2")]);
    let run = run_with(model, vec![Library::tool()], |_| {}).await;
    assert!(answer_event(&run).1.is_empty());
    assert!(run.outcome.sources.is_empty());
}

#[tokio::test]
async fn a_forced_answer_carries_its_citations_too() {
    let model = Fake::new(|req, n| {
        if req.tool_choice == ToolChoice::None {
            text("forced: by [1], x = 2")
        } else if n == 0 {
            plan(&["a"])
        } else {
            library(&format!("c{n}"))
        }
    });
    let run = run_with(model, vec![Library::tool()], |s| {
        s.config.max_rounds = 3;
        s.config.settlement_rounds = 1;
    })
    .await;
    assert_eq!(run.outcome.answer_source, Some(AnswerSource::Forced));
    let (forced, sources) = answer_event(&run);
    assert!(forced);
    assert_eq!(numbers(&sources), [1]);
    assert_eq!(sources[0].chunk_id.as_deref(), Some("c1"));
    assert_eq!(run.outcome.sources, sources);
}

#[tokio::test]
async fn a_resumed_turn_keeps_the_numbering_of_its_checkpoint() {
    let first = Fake::seq(vec![
        plan(&["read", "conclude"]),
        library("c1 c2"),
        finish("S1", "read [1] and [2]"),
        Step::Fail(ModelError::Auth {
            status: 401,
            message: "boom".into(),
        }),
    ]);
    let run1 = run_with(first, vec![Library::tool()], |_| {}).await;
    let checkpoint = checkpoints(&run1).pop().expect("a checkpoint after S1");
    assert_eq!(numbers(&checkpoint.sources), [1, 2]);
    // A checkpoint stored before sources were kept still reads, with none.
    let mut old = serde_json::to_value(&checkpoint).expect("json");
    old.as_object_mut().expect("an object").remove("sources");
    let old: Checkpoint = serde_json::from_value(old).expect("an old checkpoint reads");
    assert!(old.sources.is_empty());

    let second = Fake::seq(vec![
        library("c2 c4"),
        finish("S2", "c4 settles it"),
        text("From [1] and [3]: done."),
    ]);
    let run2 = run_with(second, vec![Library::tool()], |s| {
        s.resume = Some(checkpoint.clone());
        s.first_seq = 40;
    })
    .await;
    assert_eq!(run2.outcome.stop_reason, StopReason::Answered);
    assert_eq!(result_sources(&run2), [vec![2, 3]]);
    let cited = answer_event(&run2).1;
    assert_eq!(numbers(&cited), [1, 3]);
    assert_eq!(
        cited[0].chunk_id.as_deref(),
        Some("c1"),
        "restored, never re-found"
    );
    assert_eq!(cited[1].chunk_id.as_deref(), Some("c4"));
    assert_eq!(numbers(&checkpoints(&run2)[0].sources), [1, 2, 3]);
}
