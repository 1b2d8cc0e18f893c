//! The `kb-cite` policy through the real engine, with stand-ins for `rag` and `read_source`
//! that print what the real tools print and register their sources with the turn's
//! `Citations`: the answer cites the search hit and the page read, and its event carries
//! exactly those sources.

use std::sync::Arc;

use async_trait::async_trait;
use deepsolve_core::{
    Engine, EventKind, Language, Material, MaterialDocument, MaterialKb, Protocol, Source,
    StopReason, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, TurnSpec, VecSink,
};
use deepsolve_testkit::ScriptedModel;
use deepsolve_testkit::policy::{KB_CITE_GOALS, by_name};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn spec(name: &str, required: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("{name} (a stand-in)"),
        parameters: json!({
            "type": "object",
            "properties": {
                required: {"type": "string"},
                "kb": {"type": "string"},
                "top_k": {"type": "integer"},
                "offset": {"type": "integer"},
                "max_chars": {"type": "integer"}
            },
            "required": [required],
            "additionalProperties": false
        }),
    }
}

/// `rag`: two hits, printed as numbered blocks with the passage quoted.
struct Rag(ToolSpec);

fn hit(document: &str, title: &str, page: u32, chunk: &str, text: &str) -> Source {
    Source {
        title: title.into(),
        kb: Some("kb_notes".into()),
        document_id: Some(document.into()),
        page: Some(page),
        chunk_id: Some(chunk.into()),
        section: Some("3 Limits › 3.2 Definition".into()),
        excerpt: Some(text.into()),
        score: Some(0.8),
        ..Source::default()
    }
}

#[async_trait]
impl Tool for Rag {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn run(&self, _args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let hits = [
            hit(
                "doc_lecture",
                "lecture.pdf",
                12,
                "chunk_1",
                "A sequence converges when its terms get arbitrarily close to its limit.",
            ),
            hit("doc_other", "exercises.md", 3, "chunk_9", "Exercise 4."),
        ];
        let label = match ctx.language {
            Language::En => "source",
            Language::Zh => "来源",
        };
        let mut content = String::new();
        let mut sources = Vec::new();
        for h in hits {
            let s = ctx.citations.register(h);
            content.push_str(&format!(
                "[{}] {} · p. {} · {} ({label} {})\n> {}\n\n",
                s.n,
                s.title,
                s.page.unwrap_or_default(),
                s.section.clone().unwrap_or_default(),
                s.document_id.clone().unwrap_or_default(),
                s.excerpt.clone().unwrap_or_default()
            ));
            sources.push(s);
        }
        Ok(ToolOutput {
            sources,
            ..ToolOutput::ok(content)
        })
    }
}

/// `read_source`: the page at offset 0 of the document, registered as one source.
struct ReadSource(ToolSpec);

#[async_trait]
impl Tool for ReadSource {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let id = args["source_id"].as_str().unwrap_or_default();
        if id != "doc_lecture" {
            return Err(ToolError::actionable(format!(
                "unknown source {id} (attached: doc_lecture)"
            )));
        }
        let s = ctx.citations.register(Source {
            title: "lecture.pdf".into(),
            document_id: Some(id.into()),
            page: Some(1),
            ..Source::default()
        });
        let content = format!(
            "[{}] lecture.pdf · p. 1 · characters 0–64 of 64 (the end)\n> Chapter 3. Limits: a sequence converges when …",
            s.n
        );
        Ok(ToolOutput {
            sources: vec![s],
            ..ToolOutput::ok(content)
        })
    }
}

fn material() -> Material {
    Material {
        knowledge_bases: vec![MaterialKb {
            id: "kb_notes".into(),
            name: "notes".into(),
            documents: 2,
            attachments: false,
        }],
        documents: vec![MaterialDocument {
            id: "doc_lecture".into(),
            name: "lecture.pdf".into(),
            kind: "pdf".into(),
            pages: Some(40),
            size: 90_000,
            kb: "kb_notes".into(),
            attached: false,
        }],
    }
}

#[tokio::test]
async fn kb_cite_answers_citing_the_hit_and_the_page_it_read() {
    let cases = [
        (Protocol::Native, Language::En),
        (Protocol::Tags, Language::En),
        (Protocol::Native, Language::Zh),
    ];
    for (protocol, language) in cases {
        let engine = Engine::new(vec![
            Arc::new(Rag(spec("rag", "query"))),
            Arc::new(ReadSource(spec("read_source", "source_id"))),
        ])
        .expect("engine");
        let model = ScriptedModel::new(by_name("kb-cite", 2, None).expect("kb-cite"));
        let mut turn = TurnSpec::new("turn-kb", "What does it mean for a sequence to converge?");
        turn.tools = vec!["rag".into(), "read_source".into()];
        turn.protocol = protocol;
        turn.language = language;
        turn.material = Some(Arc::new(material()));
        let sink = VecSink::default();
        let outcome = engine
            .run_turn(&model, turn, &sink, CancellationToken::new())
            .await
            .expect("the turn starts");
        assert_eq!(outcome.stop_reason, StopReason::Answered, "{protocol}");
        assert_eq!(outcome.rounds, 6, "{protocol}");
        assert!(outcome.solve.all_done());
        assert_eq!(outcome.solve.steps[0].goal, KB_CITE_GOALS[0]);
        let answer = outcome.answer.clone().expect("an answer");
        assert!(
            answer.starts_with("**Answer:** By the notes' definition [1], A sequence converges"),
            "{answer}"
        );
        assert!(answer.ends_with("The source confirms it [3]."), "{answer}");
        let events = sink.take();
        let cited = events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::Answer { sources, .. } => Some(sources.clone()),
                _ => None,
            })
            .expect("an answer event");
        let numbers: Vec<u32> = cited.iter().map(|s| s.n).collect();
        assert_eq!(numbers, [1, 3], "{protocol}: {cited:?}");
        assert_eq!(cited[0].chunk_id.as_deref(), Some("chunk_1"));
        assert_eq!(
            (cited[1].chunk_id.as_deref(), cited[1].page),
            (None, Some(1))
        );
        assert_eq!(outcome.sources, cited);
        let read = events.iter().find_map(|e| match &e.kind {
            EventKind::ToolResult {
                name, sources, ok, ..
            } if name == "read_source" => Some((*ok, sources.len())),
            _ => None,
        });
        assert_eq!(read, Some((true, 1)), "{protocol}");
        let system = &model.requests()[0].messages[0].content;
        assert!(system.contains("`doc_lecture`"), "{system}");
    }
}

#[tokio::test]
async fn kb_cite_without_the_knowledge_tools_answers_without_citations() {
    let engine = Engine::new(vec![]).expect("engine");
    let model = ScriptedModel::new(by_name("kb-cite", 2, None).expect("kb-cite"));
    let sink = VecSink::default();
    let outcome = engine
        .run_turn(
            &model,
            TurnSpec::new("turn-kb", "What is a limit?"),
            &sink,
            CancellationToken::new(),
        )
        .await
        .expect("the turn starts");
    assert_eq!(outcome.stop_reason, StopReason::Answered);
    assert!(outcome.sources.is_empty());
    assert!(
        outcome
            .answer
            .as_deref()
            .is_some_and(|a| a.contains("The notes say nothing")),
        "{outcome:?}"
    );
}
