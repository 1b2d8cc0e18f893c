//! `geogebra_analysis` with scripted models: a valid construction drawn into the workspace; an
//! invalid command repaired in the repair round; one still invalid after it, dropped with a
//! note; a degenerate construction named and dropped; the Chinese prompt in a Chinese turn;
//! the turn's image reaching the vision model as an image part (and not reaching a model that
//! cannot see it).

use std::path::Path;
use std::sync::Arc;

use deepsolve_core::sha256_hex;
use deepsolve_core::{Language, Tool, ToolContext, ToolOutput, TurnImage};
use deepsolve_testkit::{Reply, ScriptedModel};
use deepsolve_tools::geogebra::{GEOGEBRA_ANALYSIS, GeogebraTool, SVG_MIME};
use deepsolve_tools::{CATALOG, Toolset, Unavailable};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TRIANGLE: [&str; 7] = [
    "A = (0, 0)",
    "B = (4, 0)",
    "C = (0, 3)",
    "t = Polygon(A, B, C)",
    "β = Angle(C, B, A)",
    "M = Midpoint(B, C)",
    "SetCaption(M, \"midpoint of BC\")",
];

fn figure(commands: &[&str]) -> Reply {
    Reply::text(
        json!({
            "constraints": ["AB = 4", "AC = 3", "angle A = 90°"],
            "relations": ["M is the midpoint of BC", "find angle B"],
            "commands": commands,
        })
        .to_string(),
    )
}

fn image() -> TurnImage {
    TurnImage {
        id: "image_1".into(),
        name: "triangle.png".into(),
        mime: "image/png".into(),
        width: 1,
        height: 1,
        bytes: Arc::from(&b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR-triangle"[..]),
    }
}

fn ctx(workspace: Option<&Path>, language: Language, images: Vec<TurnImage>) -> ToolContext {
    ToolContext {
        turn_id: "t".into(),
        workspace: workspace.map(Path::to_path_buf),
        call_id: "call_7".into(),
        language,
        cancel: CancellationToken::new(),
        images: images.into(),
        ..ToolContext::default()
    }
}

fn tool(main: &Arc<ScriptedModel>, vision: Option<&Arc<ScriptedModel>>) -> GeogebraTool {
    GeogebraTool::new(
        main.clone(),
        vision.map(|v| v.clone() as Arc<dyn deepsolve_core::ChatModel>),
        4000,
        0.2,
    )
}

async fn run(tool: &GeogebraTool, ctx: &ToolContext) -> ToolOutput {
    tool.run(
        json!({"question": "Find angle B of the right triangle ABC."}),
        ctx,
    )
    .await
    .unwrap_or_else(|e| panic!("{e:?}"))
}

/// The ```ggbscript block of a result.
fn script(content: &str) -> Vec<String> {
    content
        .split("```ggbscript\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The figure the result reports, read from the workspace, checked to be ours.
fn saved_figure(out: &ToolOutput, workspace: &Path) -> String {
    assert_eq!(out.artifacts.len(), 1, "{:?}", out.artifacts);
    let artifact = &out.artifacts[0];
    assert_eq!(artifact.mime, SVG_MIME);
    let bytes = std::fs::read(workspace.join(&artifact.path)).unwrap();
    assert_eq!(artifact.size, bytes.len() as u64);
    assert_eq!(
        artifact.rendered_sha256.as_deref(),
        Some(sha256_hex(&bytes).as_str())
    );
    assert!(
        out.content.contains(&artifact.path),
        "the result names the file"
    );
    String::from_utf8(bytes).unwrap()
}

#[tokio::test]
async fn a_valid_construction_is_checked_tabled_and_drawn_into_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let main = Arc::new(ScriptedModel::sequence(vec![]));
    let vision = Arc::new(ScriptedModel::sequence(vec![figure(&TRIANGLE)]));
    let tool = tool(&main, Some(&vision));
    let out = run(&tool, &ctx(Some(dir.path()), Language::En, vec![image()])).await;
    assert!(out.ok, "{}", out.content);
    assert_eq!(script(&out.content), TRIANGLE);
    for row in [
        "| C | point | (0, 3) | (0, 3) |",
        "| β | angle | Angle(C, B, A) | 36.8699° at (4, 0) |",
        "| M (\"midpoint of BC\") | point | Midpoint(B, C) | (2, 1.5) |",
        "| t | polygon | Polygon(A, B, C) | (0, 0), (4, 0), (0, 3), area 6 |",
    ] {
        assert!(out.content.contains(row), "{row}\n{}", out.content);
    }
    assert!(out.content.contains("Given:\n- AB = 4\n"));
    assert!(
        out.content
            .contains("Relations:\n- M is the midpoint of BC\n")
    );
    assert!(!out.content.contains("Notes:"), "nothing to note");
    assert!(out.content.contains("read from the turn's 1 image(s)"));
    let svg = saved_figure(&out, dir.path());
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.contains(">midpoint of BC</text>") && svg.contains(">36.87°</text>"));
    assert_eq!(out.artifacts[0].path, "geogebra_call_7.svg");
    assert_eq!(out.metadata["model"], "vision");
    assert_eq!(out.metadata["repaired"], false);
    assert!(out.usage.unwrap().total() > 0);
    assert_eq!(main.request_count(), 0, "the vision model read the image");
    vision.assert_clean();
}

#[tokio::test]
async fn the_image_reaches_the_vision_model_as_an_image_part() {
    let main = Arc::new(ScriptedModel::sequence(vec![]));
    let vision = Arc::new(ScriptedModel::sequence(vec![figure(&TRIANGLE)]));
    let tool = tool(&main, Some(&vision));
    assert!(tool.reads_images());
    run(&tool, &ctx(None, Language::En, vec![image()])).await;
    let request = &vision.requests()[0];
    assert!(request.tools.is_empty(), "a tool-less sub-call");
    let user = &request.messages[1];
    assert_eq!(user.images.len(), 1);
    assert_eq!(user.images[0].bytes, image().bytes);
    assert_eq!(user.images[0].mime, "image/png");
    assert!(user.content.contains("Find angle B") && user.content.contains("(1 image(s))"));
    assert!(request.messages[0].content.contains("\"commands\""));
}

#[tokio::test]
async fn without_a_vision_model_an_image_is_not_sent_and_the_result_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let main = Arc::new(ScriptedModel::sequence(vec![figure(&TRIANGLE)]));
    let tool = tool(&main, None);
    assert!(!tool.reads_images());
    let out = run(&tool, &ctx(Some(dir.path()), Language::En, vec![image()])).await;
    let request = &main.requests()[0];
    assert!(request.messages.iter().all(|m| m.images.is_empty()));
    assert!(request.messages[1].content.contains("There is no image"));
    assert!(
        out.content.contains(
            "Notes:\n- the turn's 1 image(s) were not read: no vision model is configured (models.vision)"
        ),
        "{}",
        out.content
    );
    assert!(out.content.contains("drawn from the question's text"));
    assert_eq!(out.metadata["model"], "main");
}

#[tokio::test]
async fn without_an_image_the_main_model_draws_the_described_construction() {
    let main = Arc::new(ScriptedModel::sequence(vec![figure(&TRIANGLE)]));
    let vision = Arc::new(ScriptedModel::sequence(vec![]));
    let tool = tool(&main, Some(&vision));
    let out = run(&tool, &ctx(None, Language::En, vec![])).await;
    assert_eq!(script(&out.content), TRIANGLE);
    assert_eq!(vision.request_count(), 0);
    assert!(out.artifacts.is_empty());
    assert!(
        out.content
            .starts_with("Figure: not saved (this turn has no workspace)")
    );
}

#[tokio::test]
async fn an_invalid_command_is_repaired_in_the_one_repair_round() {
    let dir = tempfile::tempdir().unwrap();
    let mut broken = TRIANGLE.to_vec();
    broken.insert(3, "Segmnt(A, B)");
    let mut fixed = TRIANGLE.to_vec();
    fixed.insert(3, "Segment(A, B)");
    let vision = Arc::new(ScriptedModel::sequence(vec![
        figure(&broken),
        figure(&fixed),
    ]));
    let main = Arc::new(ScriptedModel::sequence(vec![]));
    let out = run(
        &tool(&main, Some(&vision)),
        &ctx(Some(dir.path()), Language::En, vec![image()]),
    )
    .await;
    let requests = vision.requests();
    assert_eq!(requests.len(), 2);
    let repair = requests[1].messages.last().unwrap();
    assert!(
        repair.content.contains(
            "- command 4, column 1 (`Segmnt(A, B)`): unknown command 'Segmnt'; did you mean 'Segment'?"
        ),
        "{}",
        repair.content
    );
    assert!(
        requests[1].messages[2].content.contains("Segmnt"),
        "the first reply is kept"
    );
    assert_eq!(script(&out.content), fixed);
    assert!(
        out.content
            .contains("- 1 command error(s) were sent back for one repair round:")
    );
    assert!(
        out.content
            .contains("- after the repair round every command is valid")
    );
    assert_eq!(out.metadata["repaired"], true);
    assert_eq!(out.metadata["dropped"], 0);
    assert!(saved_figure(&out, dir.path()).contains("<g class=\"segment\">"));
}

#[tokio::test]
async fn a_command_still_invalid_after_the_repair_round_is_dropped_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let mut broken = TRIANGLE.to_vec();
    broken.push("N = Midpoint(A,");
    let vision = Arc::new(ScriptedModel::sequence(vec![
        figure(&broken),
        figure(&broken),
    ]));
    let main = Arc::new(ScriptedModel::sequence(vec![]));
    let out = run(
        &tool(&main, Some(&vision)),
        &ctx(Some(dir.path()), Language::En, vec![image()]),
    )
    .await;
    assert_eq!(vision.request_count(), 2, "one repair round, no more");
    assert_eq!(
        script(&out.content),
        TRIANGLE,
        "no invalid command reaches the result"
    );
    assert!(
        out.content.contains(
            "- dropped: command 8, column 16 (`N = Midpoint(A,`): the command ends where an expression was expected"
        ),
        "{}",
        out.content
    );
    assert_eq!(out.metadata["dropped"], 1);
    saved_figure(&out, dir.path());
}

#[tokio::test]
async fn a_degenerate_construction_is_named_and_dropped_with_what_depends_on_it() {
    let parallel = [
        "A = (0, 0)",
        "B = (4, 0)",
        "C = (0, 2)",
        "D = (4, 2)",
        "P = Intersect(Line(A, B), Line(C, D))",
        "s = Segment(P, C)",
        "q = Polygon(A, B, D, C)",
    ];
    let vision = Arc::new(ScriptedModel::sequence(vec![
        figure(&parallel),
        figure(&parallel),
    ]));
    let main = Arc::new(ScriptedModel::sequence(vec![]));
    let out = run(
        &tool(&main, Some(&vision)),
        &ctx(None, Language::En, vec![image()]),
    )
    .await;
    let repair = vision.requests()[1]
        .messages
        .last()
        .unwrap()
        .content
        .clone();
    assert!(repair.contains(
        "- command 5, column 5 (`P = Intersect(Line(A, B), Line(C, D))`): the lines are parallel and do not intersect"
    ), "{repair}");
    assert!(repair.contains(
        "- command 6, column 13 (`s = Segment(P, C)`): 'P' (line 5) could not be constructed"
    ));
    let kept: Vec<&str> = vec![
        parallel[0],
        parallel[1],
        parallel[2],
        parallel[3],
        parallel[6],
    ];
    assert_eq!(script(&out.content), kept);
    assert!(out.content.contains("- dropped: command 5, column 5"));
    assert!(out.content.contains("- dropped: command 6, column 13"));
    assert_eq!(out.metadata["dropped"], 2);
}

#[tokio::test]
async fn a_chinese_turn_gets_the_chinese_prompts_and_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut broken = TRIANGLE.to_vec();
    broken.push("Cirle(A, 2)");
    let vision = Arc::new(ScriptedModel::sequence(vec![
        figure(&broken),
        figure(&TRIANGLE),
    ]));
    let main = Arc::new(ScriptedModel::sequence(vec![]));
    let out = run(
        &tool(&main, Some(&vision)),
        &ctx(Some(dir.path()), Language::Zh, vec![image()]),
    )
    .await;
    let requests = vision.requests();
    let system = &requests[0].messages[0].content;
    assert!(
        system.starts_with("你把几何图形转换成能画出它的 GeoGebra 命令"),
        "{system}"
    );
    assert!(
        requests[0].messages[1]
            .content
            .contains("图形见附图（1 张）")
    );
    let repair = &requests[1].messages.last().unwrap().content;
    assert!(
        repair.starts_with("有些命令无法使用。")
            && repair.contains(
                "- 第 8 条命令，第 1 列（`Cirle(A, 2)`）：未知命令 'Cirle'；是否想写 'Circle'？"
            ),
        "{repair}"
    );
    for english in ["You turn", "Reply with", "Some commands"] {
        assert!(
            requests
                .iter()
                .flat_map(|r| &r.messages)
                .all(|m| !m.content.contains(english)),
            "{english}"
        );
    }
    assert!(
        out.content.starts_with("图形：geogebra_call_7.svg"),
        "{}",
        out.content
    );
    for heading in [
        "对象：",
        "已知：",
        "关系：",
        "说明：",
        "修正后所有命令均有效",
    ] {
        assert!(out.content.contains(heading), "{heading}\n{}", out.content);
    }
    assert!(out.content.contains("未知命令 'Cirle'"), "{}", out.content);
    assert!(
        out.content
            .contains("| β | 角 | Angle(C, B, A) | 36.8699° 位于 (4, 0) |")
    );
    let english = [
        "| name",
        "area",
        "Figure:",
        "Objects:",
        "Notes:",
        "dropped",
        "repair round",
        "unknown",
    ];
    for english in english {
        assert!(!out.content.contains(english), "{english}\n{}", out.content);
    }
}

#[tokio::test]
async fn a_reply_that_is_not_json_gets_one_more_chance_then_an_error() {
    let vision = Arc::new(ScriptedModel::sequence(vec![
        Reply::text("I see a right triangle."),
        figure(&TRIANGLE),
    ]));
    let main = Arc::new(ScriptedModel::sequence(vec![]));
    let tool = tool(&main, Some(&vision));
    let out = run(&tool, &ctx(None, Language::En, vec![image()])).await;
    assert_eq!(script(&out.content), TRIANGLE);
    assert!(
        out.content
            .contains("the first reply could not be read (there is no JSON object in it)")
    );
    let ask_again = vision.requests()[1]
        .messages
        .last()
        .unwrap()
        .content
        .clone();
    assert!(ask_again.starts_with(
        "Your reply is not the JSON object asked for (there is no JSON object in it)"
    ));

    let stubborn = Arc::new(ScriptedModel::sequence(vec![
        Reply::text("no"),
        Reply::text("{\"commands\": []}"),
    ]));
    let err = GeogebraTool::new(main.clone(), Some(stubborn), 4000, 0.2)
        .run(
            json!({"question": "?"}),
            &ctx(None, Language::En, vec![image()]),
        )
        .await
        .unwrap_err();
    assert!(err.is_actionable());
    assert!(err.message().contains("did not reply with the JSON object asked for, twice (it has no \"commands\" list of strings)"), "{}", err.message());
}

#[tokio::test]
async fn nothing_buildable_is_an_error_naming_every_problem() {
    let vision = Arc::new(ScriptedModel::sequence(vec![
        figure(&["Foo(1)", "A = (1,"]),
        figure(&["Foo(1)", "A = (1,"]),
    ]));
    let main = Arc::new(ScriptedModel::sequence(vec![]));
    let err = tool(&main, Some(&vision))
        .run(
            json!({"question": "?"}),
            &ctx(None, Language::En, vec![image()]),
        )
        .await
        .unwrap_err();
    let message = err.message();
    assert!(
        message.starts_with("no object of the figure could be built"),
        "{message}"
    );
    assert!(message.contains("command 1, column 1 (`Foo(1)`): unknown command 'Foo'"));
    assert!(message.contains("command 2, column 8 (`A = (1,`)"));
}

#[cfg(unix)]
#[tokio::test]
async fn the_figure_never_goes_through_a_path_planted_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("victim.txt");
    std::fs::write(&target, "untouched").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("geogebra_call_7.svg")).unwrap();
    let vision = Arc::new(ScriptedModel::sequence(vec![figure(&TRIANGLE)]));
    let main = Arc::new(ScriptedModel::sequence(vec![]));
    let out = run(
        &tool(&main, Some(&vision)),
        &ctx(Some(dir.path()), Language::En, vec![image()]),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    assert_eq!(out.artifacts[0].path, "geogebra_call_7_2.svg");
    saved_figure(&out, dir.path());
}

#[tokio::test]
async fn the_catalog_mounts_it_opt_in_and_a_broken_vision_model_says_why() {
    let mut deps = crate::catalog::deps(crate::catalog::no_sandbox());
    let set = Toolset::mount(CATALOG, &deps);
    assert!(set.available().contains(&GEOGEBRA_ANALYSIS.to_string()));
    let none: &[&str] = &[];
    assert!(
        !set.for_turn(none)
            .unwrap()
            .contains(&GEOGEBRA_ANALYSIS.to_string())
    );
    assert!(
        set.for_turn(&[GEOGEBRA_ANALYSIS])
            .unwrap()
            .contains(&GEOGEBRA_ANALYSIS.to_string())
    );
    deps.vision = Err(Unavailable("cannot use models.vision: bad URL".into()));
    let set = Toolset::mount(CATALOG, &deps);
    let why = set.why_unavailable(GEOGEBRA_ANALYSIS).expect("unavailable");
    assert_eq!(why.to_string(), "cannot use models.vision: bad URL");
}
