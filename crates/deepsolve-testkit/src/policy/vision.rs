//! [`Vision`]: a scripted model that sees. It reads the images it is sent from their pixels
//! ([`crate::images::see`]) and answers from what they show, so a test proves the image
//! reached the model (through the CLI, the API or the facade) and was the one sent.

use std::ops::ControlFlow;

use serde_json::json;

use crate::images::{Seen, see};
use crate::policy::Policy;
use crate::policy::geogebra::{is_figure_request, table_value};
use crate::policy::moves::{call_once, derivation, finish_call_for, plan_of, short, step_summary};
use crate::progress::PlanStep;
use crate::reply::Reply;
use crate::request::PolicyRequest;

/// The goals of its two steps.
pub const VISION_GOALS: [&str; 2] = ["Read the figure", "Answer from the figure"];

/// The tool that reads the figure for it when it is sent no image (a model that cannot see).
pub const FIGURE_TOOL: &str = "geogebra_analysis";

/// What S1's summary says when nothing could read the figure.
pub const NO_FIGURE: &str = "no figure could be read";

/// The name its figure gives the angle at C (`γ = Angle(A, C, B)`).
pub const ANGLE_C: &str = "γ";

/// A solver that sees the turn's images:
///
/// - a tool-less call with an image (the vision probe, a tool's vision sub-call) is answered
///   with the name of the colour that fills the image, in the language of the question
///   (`green`, `绿色`) — but `geogebra_analysis`'s figure request gets the marked triangle as
///   GeoGebra commands ([`figure_commands`]); a tool-less call without one gets a derivation;
/// - a solve plans two steps, [`VISION_GOALS`]. `S1` finishes with what the images show
///   ([`Seen::describe`]: size, colour, the triangle's vertices `A`, `B`, `C` when they are
///   marked); when the request carries no image, it calls [`FIGURE_TOOL`] `{question}` once
///   (when offered) and finishes with the figure's [`ANGLE_C`] (`γ = x° at (…)`) or its
///   result, else with [`NO_FIGURE`]. `S2` finishes with `Angle C ≈ x°` measured on the first
///   image with a triangle, or read from S1's `γ` (or says there is none);
/// - the answer is `**Answer:** <S2> From the figure: <S1>`.
///
/// **Expected ending:** `answered`, both steps done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vision;

impl Vision {
    /// What the request's images show, each described.
    fn seen(req: &PolicyRequest) -> Vec<Seen> {
        req.images().iter().filter_map(|i| see(&i.bytes)).collect()
    }

    /// A tool-less call: with an image, the colour that fills it, or the triangle it shows
    /// as GeoGebra commands when a figure tool asks for them.
    fn look(req: &PolicyRequest) -> Reply {
        let Some(seen) = Self::seen(req).into_iter().next() else {
            return derivation(req);
        };
        if is_figure_request(req)
            && let Some(commands) = figure_commands(&seen)
        {
            let figure = json!({"constraints": [], "relations": ["find ∠C"], "commands": commands});
            return Reply::text(format!("```json\n{figure}\n```"));
        }
        let chinese = req.messages.iter().any(|m| {
            m.content
                .chars()
                .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
        });
        Reply::text(if chinese {
            colour_zh(seen.colour)
        } else {
            seen.colour
        })
    }

    /// `S1`: say what the images show, or have the figure tool read them.
    fn read_move(req: &PolicyRequest, step: &PlanStep) -> Reply {
        let seen = Self::seen(req);
        if !seen.is_empty() {
            let described: Vec<String> = seen
                .iter()
                .enumerate()
                .map(|(i, s)| format!("image {}: {}", i + 1, s.describe()))
                .collect();
            return finish_call_for(&step.id, &described.join("; "));
        }
        let question = || json!({"question": req.problem()});
        let results = match call_once(req, FIGURE_TOOL, question, "Reading the figure.") {
            ControlFlow::Continue(results) => results,
            ControlFlow::Break(call) => return call,
        };
        let summary = results.first().map_or(NO_FIGURE.to_string(), |r| {
            table_value(&r.content, ANGLE_C)
                .map(|value| format!("{ANGLE_C} = {value}"))
                .unwrap_or_else(|| short(&r.content, 300))
        });
        finish_call_for(&step.id, &summary)
    }

    /// `S2`: the angle at C of the first marked triangle, seen, or read from the figure's
    /// table in S1's summary.
    fn angle_move(req: &PolicyRequest, step: &PlanStep) -> Reply {
        let from_figure = || {
            let read = step_summary(req.plan().as_ref(), 0);
            let value = read.strip_prefix(ANGLE_C)?.strip_prefix(" = ")?;
            value.split('°').next()?.parse::<f64>().ok()
        };
        let angle = Self::seen(req)
            .iter()
            .find_map(Seen::angle_c)
            .or_else(from_figure);
        let summary = match angle {
            Some(angle) => format!("{ANGLE_PREFIX}{angle:.1}°"),
            None => "the figure shows no marked triangle to measure".to_string(),
        };
        finish_call_for(&step.id, &summary)
    }

    fn answer(req: &PolicyRequest) -> Reply {
        let plan = req.plan();
        let (read, result) = (
            step_summary(plan.as_ref(), 0),
            step_summary(plan.as_ref(), 1),
        );
        Reply::text(format!("**Answer:** {result}\n\nFrom the figure: {read}"))
    }
}

/// The marked triangle of `seen` as GeoGebra commands: its vertices in units of 100 px with
/// y up, the triangle, and the angle at C captioned `∠C`; `None` without a triangle.
pub fn figure_commands(seen: &Seen) -> Option<Vec<String>> {
    let [a, b, c] = seen.vertices?;
    let height = f64::from(seen.height);
    let point = |name: &str, (x, y): (f64, f64)| {
        format!("{name} = ({:.2}, {:.2})", x / 100.0, (height - y) / 100.0)
    };
    Some(vec![
        point("A", a),
        point("B", b),
        point("C", c),
        "t = Polygon(A, B, C)".to_string(),
        format!("{ANGLE_C} = Angle(A, C, B)"),
        format!("SetCaption({ANGLE_C}, \"∠C\")"),
    ])
}

/// The angle an answer of this policy gives (`Angle C ≈ x°`), `NaN` when it gives none: what
/// a test compares with the angle it drew.
pub fn answered_angle(answer: &str) -> f64 {
    answer
        .split(ANGLE_PREFIX)
        .nth(1)
        .and_then(|t| t.split('°').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(f64::NAN)
}

/// How `S2` (and so the answer) states the angle.
const ANGLE_PREFIX: &str = "Angle C ≈ ";

fn colour_zh(colour: &str) -> &'static str {
    match colour {
        "red" => "红色",
        "green" => "绿色",
        "blue" => "蓝色",
        "white" => "白色",
        "black" => "黑色",
        "yellow" => "黄色",
        "purple" => "紫色",
        _ => "灰色",
    }
}

impl Policy for Vision {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if req.is_subcall() {
            return Self::look(req);
        }
        if req.is_forced_answer() {
            return Self::answer(req);
        }
        let Some(plan) = req.plan() else {
            let analysis = format!(
                "Read the figure, then answer: {}",
                short(&req.problem(), 60)
            );
            return plan_of(analysis, &VISION_GOALS);
        };
        let Some(step) = plan.current().cloned() else {
            return Self::answer(req);
        };
        match plan.steps.iter().position(|s| s.id == step.id) {
            Some(0) => Self::read_move(req, &step),
            _ => Self::angle_move(req, &step),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::{Triangle, solid_png};
    use crate::{Reply, ScriptedModel};
    use deepsolve_core::{ChatModel, ChatRequest, Message, ToolChoice, TurnImage};

    fn image(bytes: Vec<u8>) -> TurnImage {
        TurnImage {
            id: "image_1".into(),
            name: "figure.png".into(),
            mime: "image/png".into(),
            width: 0,
            height: 0,
            bytes: bytes.into(),
        }
    }

    fn tool_less(system: &str, bytes: Vec<u8>) -> ChatRequest {
        ChatRequest {
            messages: vec![
                Message::system(system),
                Message::user_with_images("", vec![image(bytes)].into()),
            ],
            tools: vec![],
            tool_choice: ToolChoice::Auto,
            max_tokens: 16,
            temperature: 0.0,
            stop: vec![],
            response_format: None,
        }
    }

    #[tokio::test]
    async fn a_tool_less_call_with_an_image_gets_its_colour_in_the_questions_language() {
        let model = ScriptedModel::new(Vision);
        let green = || solid_png(8, 8, [30, 180, 30]);
        let en = model
            .complete(&tool_less("Which colour?", green()), &mut |_| {})
            .await
            .expect("a reply");
        assert_eq!(en.text, "green");
        let zh = model
            .complete(&tool_less("什么颜色？", green()), &mut |_| {})
            .await
            .expect("a reply");
        assert_eq!(zh.text, "绿色");
    }

    #[test]
    fn it_measures_the_triangle_it_is_shown() {
        let triangle = Triangle::right(300, 300);
        let req = PolicyRequest::from_chat(&ChatRequest {
            tools: vec![],
            ..tool_less("s", triangle.png())
        });
        let step = PlanStep {
            id: "S2".into(),
            goal: VISION_GOALS[1].into(),
            done: false,
            summary: None,
        };
        let Reply::Turn(turn) = Vision::angle_move(&req, &step) else {
            panic!("a finish call");
        };
        let args: serde_json::Value = serde_json::from_str(&turn.tool_calls[0].1).expect("json");
        assert_eq!(
            args["summary"],
            format!("Angle C ≈ {:.1}°", triangle.angle_c())
        );
        let summary = args["summary"].as_str().unwrap_or_default();
        assert!((answered_angle(summary) - triangle.angle_c()).abs() < 0.06);
        assert!(answered_angle("no angle here").is_nan());
    }
}
