//! Every scripted policy driven through the real `deepsolve_core::Engine` (not the simulated
//! engine of `common`), in both tool protocols, with every request the model received kept.
//!
//! - English turns: every request is fingerprinted and compared with
//!   `snapshots/en_requests.txt`, so a refactoring that changes one byte the model reads
//!   fails here. `DEEPSOLVE_BLESS=1` rewrites the file after an intended change;
//!   `DEEPSOLVE_DUMP_REQUESTS=<dir>` writes every request as JSON, to diff two versions.
//! - Chinese turns: no English engine text reaches the model, and the Chinese texts do —
//!   the fragments to look for are derived from the text catalog itself.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use deepsolve_core::solve::SolveStep;
use deepsolve_core::{
    AnswerSource, ChatRequest, Engine, Language, Material, MaterialDocument, MaterialKb, PriorTurn,
    Protocol, Role, SolveRecord, Text, Texts, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
    TurnImage, TurnOutcome, TurnSpec, VecSink,
};
use deepsolve_testkit::policy::{POLICY_NAMES, by_name};
use deepsolve_testkit::{Reply, ScriptedModel, Turn};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A work tool: a deterministic derivation ending in `Answer: 42`, like the `reason` tool.
struct Reason {
    spec: ToolSpec,
}

impl Reason {
    fn new(description: &str) -> Self {
        Reason {
            spec: ToolSpec {
                name: "reason".into(),
                description: description.into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "context": {"type": "string"}},
                    "required": ["query"],
                    "additionalProperties": false
                }),
            },
        }
    }
}

#[async_trait]
impl Tool for Reason {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The real `reason` tool's lines, so the playbook reads as in production.
    fn playbook_line(&self, language: Language) -> Option<&str> {
        Some(match language {
            Language::En => "`reason`: a hard sub-derivation, worked carefully",
            Language::Zh => "`reason`：完成一段困难的子推导",
        })
    }

    async fn run(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = args["query"].as_str().unwrap_or_default();
        match query {
            "break" => Err(ToolError::internal("the derivation service is down")),
            "refuse" => Err(ToolError::actionable("the query names no quantity")),
            _ => Ok(ToolOutput::ok(format!("{query}\n=> 6 = 2 * 3\nAnswer: 42"))),
        }
    }
}

/// The protocols a policy is played in: the one it is written for (`auto` for the provider
/// without native tools) and the text-tag protocol.
pub(crate) fn protocols_for(name: &str) -> [Protocol; 2] {
    match name {
        "no-native-tools" => [Protocol::Auto, Protocol::Tags],
        _ => [Protocol::Native, Protocol::Tags],
    }
}

pub(crate) struct Played {
    pub outcome: TurnOutcome,
    pub requests: Vec<ChatRequest>,
    pub events: Vec<deepsolve_core::event::TurnEvent>,
}

/// One turn of policy `name` through the engine.
pub(crate) async fn play(
    name: &str,
    protocol: Protocol,
    language: Language,
    problem: &str,
    tool_description: &str,
) -> Played {
    let policy = by_name(name, 2, Some("reason".into())).expect("a known policy");
    let turn = Setup {
        protocol,
        language,
        problem,
        tool_description,
    };
    play_model(ScriptedModel::new(policy), &turn, |_| {}).await
}

/// How a turn is set up.
pub(crate) struct Setup<'a> {
    pub protocol: Protocol,
    pub language: Language,
    pub problem: &'a str,
    pub tool_description: &'a str,
}

/// One turn of `model` through the engine, `configure` adjusting the spec.
pub(crate) async fn play_model(
    model: ScriptedModel,
    setup: &Setup<'_>,
    configure: impl FnOnce(&mut TurnSpec),
) -> Played {
    let tool = Reason::new(setup.tool_description);
    let engine = Engine::new(vec![Arc::new(tool)]).expect("engine");
    let mut spec = TurnSpec::new("turn-1", setup.problem);
    spec.tools = vec!["reason".into()];
    spec.protocol = setup.protocol;
    spec.language = setup.language;
    configure(&mut spec);
    let sink = VecSink::default();
    let outcome = engine
        .run_turn(&model, spec, &sink, CancellationToken::new())
        .await
        .expect("the turn starts");
    Played {
        outcome,
        requests: model.requests(),
        events: sink.take(),
    }
}

/// A turn scripted reply by reply, for the engine texts no policy reaches.
pub(crate) struct Scenario {
    pub name: &'static str,
    pub protocol: Protocol,
    pub configure: fn(&mut TurnSpec),
    pub replies: fn() -> Vec<Reply>,
}

fn plan(goals: &[&str]) -> Reply {
    let steps: Vec<Value> = goals.iter().map(|g| json!({"goal": g})).collect();
    Reply::calls(vec![(
        "solve_plan",
        json!({"analysis": "factor it", "steps": steps}),
    )])
}

fn finish(id: &str, summary: &str) -> Reply {
    Reply::calls(vec![(
        "solve_finish_step",
        json!({"step_id": id, "summary": summary}),
    )])
}

fn reason(query: &str) -> (&'static str, Value) {
    ("reason", json!({"query": query}))
}

fn unchanged(_: &mut TurnSpec) {}

/// Two knowledge bases: notes with 45 documents (40 listed), and the turn's attachments.
fn manifest_material() -> Material {
    let doc = |kb: &str, i: usize, pages: Option<u32>| MaterialDocument {
        id: format!("doc_{kb}_{i}"),
        name: format!("chapter-{i}.pdf"),
        kind: "pdf".into(),
        pages,
        size: 40_000 + i as u64,
        kb: kb.into(),
        attached: kb == "kb_attached",
    };
    Material {
        knowledge_bases: vec![
            MaterialKb {
                id: "kb_notes".into(),
                name: "notes".into(),
                documents: 45,
                attachments: false,
            },
            MaterialKb {
                id: "kb_attached".into(),
                name: String::new(),
                documents: 1,
                attachments: true,
            },
        ],
        documents: (0..45)
            .map(|i| doc("kb_notes", i, Some(12)))
            .chain([doc("kb_attached", 0, None)])
            .collect(),
    }
}

/// Two figures of the problem (small PNGs made by the testkit).
fn figures() -> Arc<[TurnImage]> {
    [("image_1", [220, 30, 30]), ("image_2", [30, 30, 220])]
        .into_iter()
        .map(|(id, rgb)| TurnImage {
            id: id.into(),
            name: format!("{id}.png"),
            mime: "image/png".into(),
            width: 4,
            height: 3,
            bytes: deepsolve_testkit::images::solid_png(4, 3, rgb).into(),
        })
        .collect()
}

fn empty() -> Reply {
    Reply::Turn(Turn::text("").with_usage(Some((100, 20))))
}

pub(crate) const SCENARIOS: &[Scenario] = &[
    // Cut off by the output limit, then an answer without a plan, nudged once.
    Scenario {
        name: "continue-then-no-plan",
        protocol: Protocol::Native,
        configure: unchanged,
        replies: || {
            vec![
                Reply::Turn(Turn::text("x = 2 or").with_finish("length")),
                Reply::text(" x = 3."),
                Reply::text("x = 2 or x = 3, immediately."),
            ]
        },
    },
    // Three unreadable text calls in a row: a forced answer after the ultimatum.
    Scenario {
        name: "unreadable-calls",
        protocol: Protocol::Tags,
        configure: unchanged,
        replies: || {
            let broken = || Reply::text("<tool_call>not json at all</tool_call>");
            vec![broken(), broken(), broken(), Reply::text("x = 2 or x = 3.")]
        },
    },
    // The spine's refusals, the gates, a validation error, a batched finish, duplicates, the
    // token notice, the finish-gate nudge, silence, and the step-summary fallback answer.
    Scenario {
        name: "refusals-and-fallback",
        protocol: Protocol::Native,
        configure: |spec| {
            spec.config.token_budget = 2_000;
            spec.config.max_parallel_tool_calls = 4;
        },
        replies: || {
            vec![
                Reply::calls(vec![(
                    "solve_finish_step",
                    json!({"step_id": "S1", "summary": "x"}),
                )]),
                plan(&["factor", "solve"]),
                Reply::calls(vec![(
                    "solve_plan",
                    json!({"analysis": "again", "steps": [{"goal": "g"}]}),
                )]),
                Reply::calls(vec![
                    ("reason", json!({})),
                    (
                        "solve_finish_step",
                        json!({"step_id": "S1", "summary": "x"}),
                    ),
                    reason("q"),
                    reason("q"),
                    reason("r"),
                ]),
                finish("S9", "x"),
                finish("S2", "x"),
                finish("S1", ""),
                finish("S1", "(x-2)(x-3)"),
                finish("S1", "again"),
                Reply::calls(vec![("solve_replan", json!({"reason": "", "steps": []}))]),
                Reply::calls(vec![("solve_replan", json!({"reason": "r", "steps": []}))]),
                Reply::text("x = 2 or x = 3."),
                empty(),
                empty(),
                empty(),
            ]
        },
    },
    // The round budget spent without a plan, with a previous turn in the history.
    Scenario {
        name: "round-budget-without-plan",
        protocol: Protocol::Tags,
        configure: |spec| {
            spec.config.max_rounds = 1;
            spec.config.settlement_rounds = 1;
            spec.history = vec![PriorTurn {
                problem: "Factor x^2 - 5x + 6.".into(),
                answer: "(x-2)(x-3)".into(),
                solve: Some(SolveRecord {
                    analysis: "factor it".into(),
                    steps: vec![SolveStep {
                        id: "S1".into(),
                        goal: "factor".into(),
                        done: true,
                        summary: Some("(x-2)(x-3)".into()),
                    }],
                    replans_used: 0,
                    replans_max: 2,
                    plan_history: vec![],
                }),
            }];
        },
        replies: || vec![Reply::text("x = 2."), Reply::text("x = 2 or x = 3.")],
    },
    // A tool that fails: internally (the model gets a neutral message), and for its input.
    Scenario {
        name: "failing-tool",
        protocol: Protocol::Native,
        configure: unchanged,
        replies: || {
            vec![
                plan(&["factor"]),
                Reply::calls(vec![reason("break"), reason("refuse")]),
                finish("S1", "(x-2)(x-3)"),
                Reply::text("x = 2 or x = 3."),
            ]
        },
    },
    // A turn with material: the manifest in the system prompt (two knowledge bases, one of
    // them the attachments, one with more documents than are listed), and an answer citing.
    Scenario {
        name: "material-manifest",
        protocol: Protocol::Native,
        configure: |spec| spec.material = Some(Arc::new(manifest_material())),
        replies: || {
            vec![
                plan(&["look it up"]),
                finish("S1", "(x-2)(x-3) [1]"),
                Reply::text("x = 2 or x = 3 [1]."),
            ]
        },
    },
    // A turn with figures for a model that sees them: image parts with the problem, and the
    // images section of the system prompt.
    Scenario {
        name: "images-seen",
        protocol: Protocol::Native,
        configure: |spec| {
            spec.images = figures();
            spec.sees_images = true;
        },
        replies: || {
            vec![
                plan(&["read the figure"]),
                finish("S1", "a right angle at C"),
                Reply::text("C = 90°."),
            ]
        },
    },
    // The same figures for a model that cannot see them, in the text protocol: listed only,
    // with no tool to read them.
    Scenario {
        name: "images-unseen",
        protocol: Protocol::Tags,
        configure: |spec| spec.images = figures(),
        replies: || {
            vec![
                plan(&["work from the text"]),
                finish("S1", "no figure to read"),
                Reply::text("The figure is needed for C."),
            ]
        },
    },
];

/// One scripted scenario through the engine.
pub(crate) async fn play_scenario(
    scenario: &Scenario,
    language: Language,
    problem: &str,
    tool_description: &str,
) -> Played {
    let setup = Setup {
        protocol: scenario.protocol,
        language,
        problem,
        tool_description,
    };
    let model = ScriptedModel::sequence((scenario.replies)());
    play_model(model, &setup, scenario.configure).await
}

pub(crate) fn request_json(req: &ChatRequest) -> Value {
    let mut messages = json!(req.messages);
    // Image parts are not serialised with a message: fingerprint each (where it is, what it
    // is, a hash of its bytes). Messages without images read as before.
    for (message, json) in req
        .messages
        .iter()
        .zip(messages.as_array_mut().into_iter().flatten())
    {
        if message.has_images() {
            let images: Vec<Value> = message
                .images
                .iter()
                .map(|i| json!([i.id, i.mime, i.width, i.height, fnv1a(&i.bytes)]))
                .collect();
            json["images"] = json!(images);
        }
    }
    json!({
        "messages": messages,
        "tools": req.tools,
        "tool_choice": req.tool_choice,
        "max_tokens": req.max_tokens,
        "temperature": req.temperature,
        "stop": req.stop,
    })
}

/// FNV-1a, 64 bits: stable across Rust versions and platforms (unlike `DefaultHasher`).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

const EN_PROBLEM: &str = "Find all real x with x^2 - 5x + 6 = 0.";
const SNAPSHOT: &str = "tests/it/snapshots/en_requests.txt";

#[tokio::test]
async fn english_requests_are_byte_for_byte_the_recorded_ones() {
    let dump = std::env::var_os("DEEPSOLVE_DUMP_REQUESTS").map(std::path::PathBuf::from);
    let mut lines = String::new();
    for name in POLICY_NAMES {
        for protocol in protocols_for(name) {
            let played = play(
                name,
                protocol,
                Language::En,
                EN_PROBLEM,
                "a hard sub-derivation",
            )
            .await;
            let jsons: Vec<Value> = played.requests.iter().map(request_json).collect();
            let body = serde_json::to_string_pretty(&jsons).expect("requests serialise");
            if let Some(dir) = &dump {
                std::fs::create_dir_all(dir).expect("dump dir");
                std::fs::write(dir.join(format!("{name}.{protocol}.json")), &body)
                    .expect("dump written");
            }
            let stop = played.outcome.stop_reason;
            writeln!(
                lines,
                "{name} {protocol} {stop} {} {:016x}",
                jsons.len(),
                fnv1a(body.as_bytes())
            )
            .expect("write to a string");
        }
    }
    for scenario in SCENARIOS {
        let played =
            play_scenario(scenario, Language::En, EN_PROBLEM, "a hard sub-derivation").await;
        let jsons: Vec<Value> = played.requests.iter().map(request_json).collect();
        let body = serde_json::to_string_pretty(&jsons).expect("requests serialise");
        if let Some(dir) = &dump {
            std::fs::write(dir.join(format!("{}.json", scenario.name)), &body)
                .expect("dump written");
            let answer = played.outcome.answer.clone().unwrap_or_default();
            std::fs::write(dir.join(format!("{}.answer.txt", scenario.name)), &answer)
                .expect("dump written");
        }
        let stop = played.outcome.stop_reason;
        let answer = fnv1a(played.outcome.answer.unwrap_or_default().as_bytes());
        writeln!(
            lines,
            "{} {} {stop} {} {:016x} answer {answer:016x}",
            scenario.name,
            scenario.protocol,
            jsons.len(),
            fnv1a(body.as_bytes())
        )
        .expect("write to a string");
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
    if std::env::var_os("DEEPSOLVE_BLESS").is_some() {
        std::fs::write(&path, &lines).expect("snapshot written");
        return;
    }
    let recorded = std::fs::read_to_string(&path).expect("the recorded snapshot");
    let changed: Vec<String> = recorded
        .lines()
        .zip(lines.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  recorded {a}\n  now      {b}"))
        .collect();
    assert!(
        changed.is_empty() && recorded.lines().count() == lines.lines().count(),
        "English requests changed (DEEPSOLVE_DUMP_REQUESTS=<dir> dumps them):\n{}",
        changed.join("\n")
    );
}

// --- Chinese turns -------------------------------------------------------------------------

const ZH_PROBLEM: &str = "求出满足 x^2 - 5x + 6 = 0 的所有实数 x。";
const ZH_TOOL: &str = "仔细完成一段困难的子推导";

/// The pieces of a text between its placeholders and line breaks, trimmed.
fn pieces(template: &str) -> Vec<String> {
    let mut marked = template.to_string();
    for name in Texts::placeholders(template) {
        marked = marked.replace(&format!("{{{name}}}"), "\n");
    }
    marked
        .lines()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// Pieces cut finer, at punctuation too: a partly translated text shows up.
fn fine_pieces(template: &str) -> Vec<String> {
    pieces(template)
        .iter()
        .flat_map(|p| p.split(['.', ':', ';', ',', '(', ')', '—', '?', '!']))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

fn is_cjk(c: char) -> bool {
    ('\u{4e00}'..='\u{9fff}').contains(&c)
}

/// An English piece that tells where it came from: four letters or more.
fn is_telling(piece: &str) -> bool {
    piece.chars().filter(char::is_ascii_alphabetic).count() >= 4
}

/// Words of English prose in a piece: letters only (an apostrophe allowed), so markup, JSON,
/// tool names and ids do not count.
fn prose_words(piece: &str) -> usize {
    piece
        .split_whitespace()
        .filter(|w| {
            let w = w
                .trim_matches(|c: char| matches!(c, '(' | ')' | '.' | ',' | ':' | ';' | '!' | '?'));
            w.len() >= 2 && w.chars().all(|c| c.is_ascii_alphabetic() || c == '\'')
        })
        .count()
}

/// One text as the test looks for it.
struct Probe {
    text: Text,
    /// English prose: pieces cut at punctuation with three words of prose or more.
    english: Vec<String>,
    /// Telling English pieces: how an English turn shows the text was used.
    english_seen: Vec<String>,
    /// Chinese pieces the English text does not share.
    chinese: Vec<String>,
}

fn probes() -> Vec<Probe> {
    let en = Texts::builtin(Language::En);
    let zh = Texts::builtin(Language::Zh);
    Text::ALL
        .iter()
        .map(|&text| {
            let (en_text, zh_text) = (en.get(text), zh.get(text));
            let english_seen: Vec<String> = pieces(en_text)
                .into_iter()
                .filter(|p| !zh_text.contains(p.as_str()) && is_telling(p))
                .collect();
            let english = fine_pieces(en_text)
                .into_iter()
                .filter(|p| prose_words(p) >= 3)
                .collect();
            let chinese = pieces(zh_text)
                .into_iter()
                .filter(|p| p.chars().any(is_cjk) && !en_text.contains(p.as_str()))
                .collect();
            Probe {
                text,
                english,
                english_seen,
                chinese,
            }
        })
        .collect()
}

fn json_strings(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|v| json_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| json_strings(v, out)),
        _ => {}
    }
}

/// Everything the engine wrote that the model read: system, user and tool messages (JSON
/// results decoded too), the tools' descriptions, and an answer assembled by the engine.
fn engine_text(played: &Played) -> String {
    let mut out = String::new();
    for request in &played.requests {
        for message in request
            .messages
            .iter()
            .filter(|m| m.role != Role::Assistant)
        {
            out.push_str(&message.content);
            out.push('\n');
            for line in message.content.lines() {
                if let Ok(value) = serde_json::from_str::<Value>(line) {
                    json_strings(&value, &mut out);
                }
            }
        }
        for tool in &request.tools {
            out.push_str(&tool.description);
            out.push('\n');
            json_strings(&tool.parameters, &mut out);
        }
    }
    if played.outcome.answer_source == Some(AnswerSource::StepSummaries) {
        out.push_str(played.outcome.answer.as_deref().unwrap_or_default());
    }
    out
}

/// The turns to compare: every policy in both protocols, and every scenario.
async fn en_and_zh_turns() -> Vec<(String, Played, Played)> {
    let mut turns = Vec::new();
    for name in POLICY_NAMES {
        for protocol in protocols_for(name) {
            let en = play(name, protocol, Language::En, EN_PROBLEM, ZH_TOOL).await;
            let zh = play(name, protocol, Language::Zh, ZH_PROBLEM, ZH_TOOL).await;
            turns.push((format!("{name} {protocol}"), en, zh));
        }
    }
    for scenario in SCENARIOS {
        let en = play_scenario(scenario, Language::En, EN_PROBLEM, ZH_TOOL).await;
        let zh = play_scenario(scenario, Language::Zh, ZH_PROBLEM, ZH_TOOL).await;
        turns.push((scenario.name.to_string(), en, zh));
    }
    turns
}

impl Probe {
    /// Every telling English piece occurs: the English turn used this text.
    fn used_in(&self, english_turn: &str) -> bool {
        !self.english_seen.is_empty()
            && self
                .english_seen
                .iter()
                .all(|p| english_turn.contains(p.as_str()))
    }

    /// What is wrong with the Chinese turn as far as this text goes.
    fn problems(&self, turn: &str, english_turn: &str, chinese_turn: &str) -> Vec<String> {
        let name = self.text.name();
        let leaked = self
            .english
            .iter()
            .filter(|p| chinese_turn.contains(p.as_str()))
            .map(|p| format!("{turn}: English {name} in a Chinese turn: {p:?}"));
        let missing = self
            .chinese
            .iter()
            .filter(|_| self.used_in(english_turn))
            .filter(|p| !chinese_turn.contains(p.as_str()))
            .map(|p| format!("{turn}: {name} used in English but not in Chinese: {p:?}"));
        leaked.chain(missing).collect()
    }
}

#[tokio::test]
async fn chinese_turns_carry_no_english_engine_text_and_the_chinese_texts_arrive() {
    let probes = probes();
    let mut problems = Vec::new();
    let mut exercised = BTreeSet::new();
    for (turn, en, zh) in en_and_zh_turns().await {
        assert_eq!(
            (en.outcome.stop_reason, en.requests.len()),
            (zh.outcome.stop_reason, zh.requests.len()),
            "{turn}: the language changed how the turn went"
        );
        let (en_text, zh_text) = (engine_text(&en), engine_text(&zh));
        for probe in &probes {
            problems.extend(probe.problems(&turn, &en_text, &zh_text));
            if probe.used_in(&en_text) {
                exercised.insert(probe.text.name());
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for name in [
        "playbook",
        "tags_manifest",
        "nudge_continue",
        "nudge_act_now",
        "nudge_plan_first",
        "nudge_open_steps",
        "ultimatum",
        "notice_round_budget_spent",
        "notice_token_budget",
        "unreadable_call",
        "summary_answer_header",
        "plan_analysis",
        "progress_header",
        "progress_all_done",
        "refuse_over_limit",
        "refuse_unknown_tool",
        "refuse_invalid_arguments",
        "refuse_duplicate",
        "refuse_repetition",
        "refuse_plan_first",
        "refuse_finish_batched",
        "invalid_json",
        "solve_plan_description",
        "plan_exists",
        "plan_instruction",
        "finish_no_plan",
        "finish_unknown_step",
        "finish_skipped",
        "finish_empty_summary",
        "finish_already_done",
        "replan_budget_spent",
        "replan_no_reason",
        "replan_empty_steps",
        "tool_failed",
        "tool_internal_error",
        "material_header",
        "material_kb",
        "material_attachments",
        "material_document",
        "material_more",
        "images_seen",
        "images_unseen_no_reader",
    ] {
        assert!(exercised.contains(name), "no turn exercised {name}");
    }
}
