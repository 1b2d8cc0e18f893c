//! A turn's images: with the problem, as image parts, for a model that sees them — through
//! every round, folds, the forced answer, the text protocol and a resume; listed in the system
//! prompt with the tools that read them for a model that does not.

use std::sync::Arc;

use crate::common::*;
use deepsolve_core::*;
use serde_json::{Value, json};

fn figure(id: &str) -> TurnImage {
    TurnImage {
        id: id.into(),
        name: format!("{id}.png"),
        mime: "image/png".into(),
        width: 320,
        height: 200,
        bytes: Arc::from(&b"\x89PNG\r\n\x1a\nfake"[..]),
    }
}

fn with_images(sees: bool) -> impl FnOnce(&mut TurnSpec) {
    move |spec| {
        spec.images = vec![figure("image_1"), figure("image_2")].into();
        spec.sees_images = sees;
    }
}

/// The user messages of a request that carry images, with how many each.
fn image_messages(req: &ChatRequest) -> Vec<(usize, usize)> {
    req.messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.has_images())
        .map(|(i, m)| (i, m.images.len()))
        .collect()
}

fn solve_in_two_steps() -> Fake {
    Fake::seq(vec![
        plan(&["read the figure", "compute"]),
        finish("S1", "a right angle at C"),
        echo("angle sum"),
        finish("S2", "C = 90°"),
        text("C = 90°"),
    ])
}

#[tokio::test]
async fn a_model_that_sees_gets_the_images_with_the_problem_in_every_request() {
    let run = run_with(solve_in_two_steps(), vec![Arc::new(Echo::named("echo"))], {
        with_images(true)
    })
    .await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    for (n, req) in run.requests.iter().enumerate() {
        // The problem is the first user message (no history here): it alone has images.
        assert_eq!(image_messages(req), [(1, 2)], "request {n}");
        assert!(
            req.messages[1].content.starts_with("Solve x^2"),
            "request {n}"
        );
        assert_eq!(req.messages[1].images[0].id, "image_1");
    }
    let system = &run.requests[0].messages[0].content;
    assert!(system.contains("# Images") && system.contains("shown to you"));
    assert!(
        system.contains("`image_2`: image_2.png (320×200)"),
        "{system}"
    );
}

#[tokio::test]
async fn a_forced_answer_still_sees_the_images() {
    let model = Fake::new(|req, n| {
        if req.tool_choice == ToolChoice::None {
            text("forced")
        } else if n == 0 {
            plan(&["a"])
        } else {
            echo(&format!("try {n}"))
        }
    });
    let run = run_with(model, vec![Arc::new(Echo::named("echo"))], |spec| {
        with_images(true)(spec);
        spec.config.max_rounds = 2;
        spec.config.settlement_rounds = 0;
    })
    .await;
    assert_eq!(run.outcome.answer.as_deref(), Some("forced"));
    let last = run.requests.last().expect("the forced call");
    assert_eq!(last.tool_choice, ToolChoice::None);
    assert_eq!(image_messages(last), [(1, 2)]);
}

/// A tool that says it reads images (as a figure-reading tool does).
struct Reader(ToolSpec);

#[async_trait::async_trait]
impl Tool for Reader {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn reads_images(&self) -> bool {
        true
    }

    async fn run(&self, _args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let names: Vec<&str> = ctx.images.iter().map(|i| i.name.as_str()).collect();
        Ok(ToolOutput::ok(format!("read {}", names.join(", "))))
    }
}

#[tokio::test]
async fn a_model_that_cannot_see_is_told_which_tools_read_the_images() {
    let reader: ToolRef = Arc::new(Reader(ToolSpec {
        name: "figure_reader".into(),
        description: "reads the turn's figures".into(),
        parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
    }));
    let model = Fake::seq(vec![
        plan(&["read the figure"]),
        calls(vec![("figure_reader", json!({}))]),
        finish("S1", "read"),
        text("C = 90°"),
    ]);
    let run = run_with(
        model,
        vec![reader, Arc::new(Echo::named("echo"))],
        with_images(false),
    )
    .await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    for req in &run.requests {
        assert!(image_messages(req).is_empty(), "no image part is sent");
    }
    let system = &run.requests[0].messages[0].content;
    assert!(system.contains("You cannot see them"), "{system}");
    assert!(system.contains("`figure_reader`") && !system.contains("`echo`."));
    assert!(system.contains("`image_1`: image_1.png (320×200)"));
    // The tool got the images out of band.
    let results = run.results();
    let read = results.iter().find(|(name, ..)| name == "figure_reader");
    assert_eq!(
        read.map(|(_, ok, content)| (*ok, content.as_str())),
        Some((true, "read image_1.png, image_2.png"))
    );
}

#[tokio::test]
async fn the_text_protocol_keeps_the_problems_images() {
    let run = run_with(
        solve_in_two_steps(),
        vec![Arc::new(Echo::named("echo"))],
        |spec| {
            with_images(true)(spec);
            spec.protocol = Protocol::Tags;
        },
    )
    .await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    for req in &run.requests {
        assert!(req.tools.is_empty(), "tags: no native tools");
        assert_eq!(image_messages(req), [(1, 2)]);
    }
    // Results came back as text in user messages, after the problem, without images.
    let last = run.requests.last().expect("a request");
    assert!(last.messages.iter().skip(2).all(|m| !m.has_images()));
}

#[tokio::test]
async fn a_resumed_turn_sends_the_same_images() {
    let first = Fake::seq(vec![
        plan(&["read", "compute"]),
        finish("S1", "right angle at C"),
        Step::Fail(ModelError::Auth {
            status: 401,
            message: "boom".into(),
        }),
    ]);
    let run1 = run_with(first, vec![], with_images(true)).await;
    let checkpoint = run1
        .events
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::Checkpoint { checkpoint } => Some(checkpoint.clone()),
            _ => None,
        })
        .expect("a checkpoint after S1");
    let second = Fake::seq(vec![finish("S2", "C = 90°"), text("C = 90°")]);
    let run2 = run_with(second, vec![], |spec| {
        with_images(true)(spec);
        spec.resume = Some(checkpoint);
    })
    .await;
    assert_eq!(run2.outcome.stop_reason, StopReason::Answered);
    let before = &run1.requests[0].messages[1];
    for req in &run2.requests {
        let problem = &req.messages[1];
        assert_eq!(problem.images, before.images);
        assert!(problem.content.starts_with(&before.content));
    }
}

#[tokio::test]
async fn images_count_in_the_context_estimate() {
    // A window that the text fits in but two images do not: the estimate must see them.
    let model = || {
        Fake::new(|req, _| {
            if req.tool_choice == ToolChoice::None {
                unreported(text("forced"))
            } else {
                unreported(text("answered"))
            }
        })
    };
    let small = |spec: &mut TurnSpec| {
        spec.context_window = 6_000;
        spec.config.max_tokens = 1_000;
    };
    let without = run_with(model(), vec![], small).await;
    assert_eq!(without.outcome.answer.as_deref(), Some("answered"));
    let with = run_with(model(), vec![], |spec| {
        small(spec);
        spec.images = (1..=4).map(|i| figure(&format!("image_{i}"))).collect();
        spec.sees_images = true;
    })
    .await;
    assert_eq!(with.outcome.stop_reason, StopReason::ContextLimit);
}
