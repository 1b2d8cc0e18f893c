//! `reason`: one tool-less sub-call, its text returned and its tokens reported.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use deepsolve_core::*;
use deepsolve_tools::reason::{REASON, ReasonTool};
use serde_json::json;

struct Recorder {
    seen: Mutex<Vec<ChatRequest>>,
    reply: String,
}

#[async_trait]
impl ChatModel for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    async fn complete(
        &self,
        req: &ChatRequest,
        _: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        self.seen.lock().unwrap().push(req.clone());
        Ok(Completion {
            text: self.reply.clone(),
            reasoning: String::new(),
            tool_calls: vec![],
            finish_reason: FinishReason::Stop,
            usage: Usage {
                prompt_tokens: 30,
                completion_tokens: 12,
                estimated: false,
                cached_tokens: None,
            },
        })
    }
}

fn ctx() -> ToolContext {
    ToolContext {
        turn_id: "t".into(),
        session_id: None,
        user_id: None,
        workspace: None,
        call_id: "c".into(),
        language: Language::En,
        cancel: tokio_util::sync::CancellationToken::new(),
        deadline: None,
        ..ToolContext::default()
    }
}

#[tokio::test]
async fn makes_one_tool_less_call_and_reports_usage() {
    let model = Arc::new(Recorder {
        seen: Mutex::new(vec![]),
        reply: "x = 2\nAnswer: 2".into(),
    });
    let tool = ReasonTool::new(model.clone(), 1000, 0.2);
    let out = tool
        .run(json!({"query": "solve x-2=0", "context": "linear"}), &ctx())
        .await
        .unwrap();
    assert!(out.ok);
    assert_eq!(out.content, "x = 2\nAnswer: 2");
    assert_eq!(out.usage.unwrap().total(), 42);
    let seen = model.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].tools.is_empty(), "the sub-call offers no tools");
    assert!(seen[0].messages[1].content.contains("Context:\nlinear"));
    assert!(seen[0].messages[0].content.contains("Answer:"));
}

#[tokio::test]
async fn an_empty_reply_is_an_error_for_the_model() {
    let model = Arc::new(Recorder {
        seen: Mutex::new(vec![]),
        reply: "  ".into(),
    });
    let tool = ReasonTool::new(model, 1000, 0.2);
    let err = tool.run(json!({"query": "q"}), &ctx()).await.unwrap_err();
    assert!(err.message().contains("no text"));
}

/// `reason` as the catalog builds it from settings loaded with the catalog's tool sections.
fn built_from(sets: &[&str], model: Arc<Recorder>) -> ToolRef {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    std::fs::write(&path, "").unwrap();
    let loaded = deepsolve_settings::load(&deepsolve_settings::LoadOptions {
        config_path: Some(path),
        sets: sets.iter().map(|s| s.to_string()).collect(),
        tool_sections: deepsolve_tools::tool_sections(deepsolve_tools::CATALOG),
        ..Default::default()
    })
    .unwrap();
    let entry = deepsolve_tools::CATALOG
        .iter()
        .find(|e| e.name == REASON)
        .unwrap();
    assert_eq!(entry.settings.first(), Some(&"tools.reason"));
    let deps = deepsolve_tools::Deps {
        settings: loaded.settings,
        main_model: model.clone(),
        reasoning_model: Ok(model),
        vision: Ok(None),
        sandbox: Err(deepsolve_tools::Unavailable("not in these tests".into())),
        knowledge: Err(deepsolve_tools::Unavailable("not in these tests".into())),
        pdf_child: None,
    };
    (entry.build)(&deps).unwrap()
}

#[tokio::test]
async fn tools_reason_max_tokens_is_the_sub_calls_budget_clamped() {
    for (sets, expected) in [
        (&[][..], 8192),
        (&["tools.reason.max_tokens=30000"][..], 30000),
        (&["tools.reason.max_tokens=900000"][..], 200_000),
        (
            &["solve.max_tokens=1000", "tools.reason.max_tokens=5000"][..],
            5000,
        ),
        (&["solve.max_tokens=1000"][..], 1000),
    ] {
        let model = Arc::new(Recorder {
            seen: Mutex::new(vec![]),
            reply: "Answer: 1".into(),
        });
        let tool = built_from(sets, model.clone());
        tool.run(json!({"query": "q"}), &ctx()).await.unwrap();
        let seen = model.seen.lock().unwrap();
        assert_eq!(seen[0].max_tokens, expected, "{sets:?}");
    }
}
