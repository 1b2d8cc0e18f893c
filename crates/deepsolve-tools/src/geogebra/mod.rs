//! `geogebra_analysis {question}`: the turn's figure (or a construction described in words)
//! as GeoGebra commands that no model output reaches unchecked.
//!
//! A model (the vision model, `models.vision`, when the turn has images; otherwise the main
//! model, from the question's text) is asked for `{constraints, relations, commands}`. Every
//! command goes through `deepsolve-geometry`: read, then evaluated as a construction. When any
//! fails, the model gets one repair round with the errors (each at its command and column);
//! what still fails is dropped, each with a note. The rest is evaluated and drawn by us as SVG
//! into the turn's workspace, and the result carries the validated commands (a `ggbscript`
//! block), a table of objects and coordinates, the notes, and the figure as an artifact.

mod reply;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_core::{
    Artifact, ChatModel, Language, Message, SolveConfig, Tool, ToolContext, ToolError, ToolOutput,
    ToolRef, ToolSpec, Usage,
};
use deepsolve_geometry::{Checked, GeoError, Lang, RenderOptions, check, object_table, render_svg};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::toolset::{Deps, PlaybookLine, Unavailable};
use reply::{FigureReply, Unreadable, read_reply};

pub const GEOGEBRA_ANALYSIS: &str = "geogebra_analysis";
/// Its line in the playbook.
pub(crate) const PLAYBOOK: PlaybookLine = PlaybookLine {
    en: "`geogebra_analysis`: a geometry figure (the problem's image, or a construction described in words) as checked GeoGebra commands, the coordinates of every object, and a drawn figure",
    zh: "`geogebra_analysis`：把几何图形（题目的图片，或文字描述的作图）转成经过校验的 GeoGebra 命令、每个对象的坐标和绘制好的图形",
};
const MAX_QUESTION_CHARS: u64 = 8_000;
/// The figure's media type.
pub const SVG_MIME: &str = "image/svg+xml";

/// The catalog's factory: the vision model when `models.vision` is set, the main model for
/// text.
pub(crate) fn build(deps: &Deps) -> Result<ToolRef, Unavailable> {
    let vision = deps.vision.clone()?;
    let solve = &deps.settings.solve;
    Ok(Arc::new(GeogebraTool::new(
        deps.main_model.clone(),
        vision,
        solve.max_tokens,
        solve.temperature as f32,
    )))
}

pub struct GeogebraTool {
    spec: ToolSpec,
    main: Arc<dyn ChatModel>,
    vision: Option<Arc<dyn ChatModel>>,
    max_tokens: u32,
    temperature: f32,
}

impl GeogebraTool {
    /// `vision`: the model that reads the turn's images (`None`: the tool reads text only).
    pub fn new(
        main: Arc<dyn ChatModel>,
        vision: Option<Arc<dyn ChatModel>>,
        max_tokens: u32,
        temperature: f32,
    ) -> Self {
        GeogebraTool {
            spec: ToolSpec {
                name: GEOGEBRA_ANALYSIS.into(),
                description: "Read the geometry figure of the problem (its attached image, or a construction described in `question`) into GeoGebra commands checked by a parser and an evaluator; returns the commands, the coordinates of every object (lengths, angles in degrees), and the figure drawn as SVG.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS, "description": "What to read or draw: the problem and what the figure must show (with no image, describe the construction)."}
                    },
                    "required": ["question"],
                    "additionalProperties": false
                }),
            },
            main,
            vision,
            max_tokens,
            temperature,
        }
    }
}

#[async_trait]
impl Tool for GeogebraTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn reads_images(&self) -> bool {
        self.vision.is_some()
    }

    /// Two model calls at most (the figure and its repair): each gets the per-call budget.
    fn timeout(&self, config: &SolveConfig) -> Duration {
        config.tool_timeout() * 2
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let question = args["question"].as_str().unwrap_or_default().trim();
        let words = Words::of(ctx.language);
        let (model, sight) = self.model_for(ctx);
        let mut talk = Conversation::new(self, model, ctx, question, sight);
        let analysed = talk.analyse(words).await?;
        let figure = write_figure(ctx, &analysed.final_check).await?;
        Ok(result(&analysed, figure, sight, words, talk.usage))
    }
}

/// How the figure was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sight {
    /// The vision model read the turn's images.
    Images(usize),
    /// The turn has images, but no model here sees them: drawn from the text.
    Unseen(usize),
    /// No image: drawn from the text.
    Text,
}

impl GeogebraTool {
    fn model_for(&self, ctx: &ToolContext) -> (Arc<dyn ChatModel>, Sight) {
        let images = ctx.images.len();
        match (&self.vision, images) {
            (_, 0) => (self.main.clone(), Sight::Text),
            (Some(vision), n) => (vision.clone(), Sight::Images(n)),
            (None, n) => (self.main.clone(), Sight::Unseen(n)),
        }
    }
}

/// The calls to the model: the figure, then at most one repair.
struct Conversation {
    model: Arc<dyn ChatModel>,
    messages: Vec<Message>,
    language: Language,
    max_tokens: u32,
    temperature: f32,
    usage: Usage,
}

/// What the conversation settled on.
struct Analysed {
    reply: FigureReply,
    /// The first reply could not be read (it was asked for again).
    first_unreadable: Option<Unreadable>,
    /// The errors of the first reply's commands (sent to the repair round).
    first_errors: Vec<GeoError>,
    /// The repair reply could not be read (the first reply's commands were kept).
    repair_unreadable: Option<Unreadable>,
    /// The commands after the repair round (or the first ones), checked.
    checked: Checked,
    /// Only the commands that were built, checked again: what the result shows and draws.
    final_check: Checked,
}

/// A reply read, and its commands checked.
type Read = Result<(FigureReply, Checked), Unreadable>;

impl Conversation {
    fn new(
        tool: &GeogebraTool,
        model: Arc<dyn ChatModel>,
        ctx: &ToolContext,
        question: &str,
        sight: Sight,
    ) -> Self {
        let language = ctx.language;
        let user = match sight {
            Sight::Images(n) => Message::user_with_images(
                prompt(language, Prompt::UserImage)
                    .replace("{images}", &n.to_string())
                    .replace("{question}", question),
                ctx.images.clone(),
            ),
            Sight::Unseen(_) | Sight::Text => {
                Message::user(prompt(language, Prompt::UserText).replace("{question}", question))
            }
        };
        Conversation {
            model,
            messages: vec![Message::system(prompt(language, Prompt::System)), user],
            language,
            max_tokens: tool.max_tokens,
            temperature: tool.temperature,
            usage: Usage::default(),
        }
    }

    /// One call with the conversation so far; the reply joins it, read and checked.
    async fn ask(&mut self) -> Result<Read, ToolError> {
        let completion = crate::subcall::complete(
            self.model.as_ref(),
            self.messages.clone(),
            self.max_tokens,
            self.temperature,
            "figure",
        )
        .await?;
        self.usage.add(&completion.usage);
        self.messages
            .push(Message::assistant(completion.text.clone()));
        Ok(read_reply(&completion.text).map(|reply| {
            let checked = check(&reply.commands.join("\n"));
            (reply, checked)
        }))
    }

    /// The one repair round: `note` says what was wrong.
    async fn repair(&mut self, note: String) -> Result<Read, ToolError> {
        self.messages.push(Message::user(note));
        self.ask().await
    }

    /// Ask, check every command, repair once, keep what is built.
    async fn analyse(&mut self, words: &Words) -> Result<Analysed, ToolError> {
        let language = self.language;
        let mut analysed = Analysed {
            reply: FigureReply::default(),
            first_unreadable: None,
            first_errors: Vec::new(),
            repair_unreadable: None,
            checked: Checked::default(),
            final_check: Checked::default(),
        };
        (analysed.reply, analysed.checked) = match self.ask().await? {
            Ok((reply, checked)) if checked.errors.is_empty() => (reply, checked),
            Ok((reply, checked)) => {
                analysed.first_errors = checked.errors.clone();
                let note = prompt(language, Prompt::Repair)
                    .replace("{errors}", &error_lines(&checked.errors, language));
                match self.repair(note).await? {
                    Ok(repaired) => repaired,
                    Err(why) => {
                        analysed.repair_unreadable = Some(why);
                        (reply, checked)
                    }
                }
            }
            Err(why) => {
                let note =
                    prompt(language, Prompt::Unreadable).replace("{why}", why.describe(language));
                analysed.first_unreadable = Some(why);
                self.repair(note).await?.map_err(|why| {
                    ToolError::actionable(format!(
                        "{} ({})",
                        words.unreadable,
                        why.describe(language)
                    ))
                })?
            }
        };
        analysed.final_check = only_built(&analysed.checked);
        if analysed.final_check.construction.objects.is_empty() {
            return Err(ToolError::actionable(format!(
                "{}\n{}",
                words.nothing_built,
                error_lines(&analysed.checked.errors, language)
            )));
        }
        Ok(analysed)
    }
}

/// The commands of `checked` that were built, checked on their own (dropping any that fail
/// there too, which a command can only do through a name it was given differently).
fn only_built(checked: &Checked) -> Checked {
    let mut current = checked.clone();
    if current.errors.is_empty() {
        // Every command was built: the script checks the same on its own.
        return current;
    }
    for _ in 0..4 {
        let script: Vec<String> = current
            .valid_commands()
            .iter()
            .map(|c| c.text.clone())
            .collect();
        let again = check(&script.join("\n"));
        let done = again.errors.is_empty();
        current = again;
        if done {
            break;
        }
    }
    current
}

/// One line per error: the command's number, the column, the command and what is wrong.
fn error_lines(errors: &[GeoError], language: Language) -> String {
    errors
        .iter()
        .map(|e| format!("- {}", error_line(e, language)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The turn's language, as the geometry crate names it.
fn lang(language: Language) -> Lang {
    match language {
        Language::En => Lang::En,
        Language::Zh => Lang::Zh,
    }
}

fn error_line(e: &GeoError, language: Language) -> String {
    let (command, message) = (e.quoted_command(), e.kind.message(lang(language)));
    match language {
        Language::En => format!(
            "command {}, column {} (`{command}`): {message}",
            e.line, e.column
        ),
        Language::Zh => format!(
            "第 {} 条命令，第 {} 列（`{command}`）：{message}",
            e.line, e.column
        ),
    }
}

/// Where the figure went in the workspace, or why it was not saved.
enum Figure {
    Saved(Artifact),
    NoWorkspace,
}

/// Draws the construction and writes it into the turn's workspace under a name no other
/// call uses, never through an existing path (code in the sandbox may have planted a link).
async fn write_figure(ctx: &ToolContext, checked: &Checked) -> Result<Figure, ToolError> {
    let Some(workspace) = &ctx.workspace else {
        return Ok(Figure::NoWorkspace);
    };
    let svg = render_svg(&checked.construction, &RenderOptions::default());
    let stem = format!("geogebra_{}", file_safe(&ctx.call_id));
    for attempt in 1..=20 {
        let name = if attempt == 1 {
            format!("{stem}.svg")
        } else {
            format!("{stem}_{attempt}.svg")
        };
        match create_new(&workspace.join(&name), svg.as_bytes()).await {
            Ok(()) => {
                return Ok(Figure::Saved(Artifact {
                    path: name,
                    size: svg.len() as u64,
                    mime: SVG_MIME.into(),
                    id: None,
                    url: None,
                    rendered_sha256: Some(deepsolve_core::sha256_hex(svg.as_bytes())),
                }));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(ToolError::internal(format!(
                    "cannot write the figure into the workspace: {e}"
                )));
            }
        }
    }
    Err(ToolError::internal(
        "cannot write the figure: every name for it is taken",
    ))
}

async fn create_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .await?;
    file.write_all(bytes).await?;
    file.flush().await
}

/// A call id as part of a file name: letters, digits, `-` and `_` only, at most 40.
fn file_safe(id: &str) -> String {
    let safe: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(40)
        .collect();
    if safe.is_empty() {
        "figure".into()
    } else {
        safe
    }
}

/// The result for the model.
fn result(
    analysed: &Analysed,
    figure: Figure,
    sight: Sight,
    words: &Words,
    usage: Usage,
) -> ToolOutput {
    let built = &analysed.final_check;
    let commands: Vec<&str> = built.commands.iter().map(|c| c.text.as_str()).collect();
    let mut out = String::new();
    let source = match sight {
        Sight::Images(n) => words.read_images.replace("{n}", &n.to_string()),
        Sight::Unseen(_) | Sight::Text => words.from_text.to_string(),
    };
    let saved = match &figure {
        Figure::Saved(artifact) => artifact.path.clone(),
        Figure::NoWorkspace => words.not_saved.to_string(),
    };
    out.push_str(
        &words
            .figure
            .replace("{file}", &saved)
            .replace("{objects}", &built.construction.objects.len().to_string())
            .replace("{commands}", &commands.len().to_string())
            .replace("{source}", &source),
    );
    out.push_str("\n\n```ggbscript\n");
    out.push_str(&commands.join("\n"));
    out.push_str("\n```\n\n");
    out.push_str(words.objects);
    out.push('\n');
    out.push_str(&object_table(&built.construction, lang(words.language)));
    list(&mut out, words.given, &analysed.reply.constraints);
    list(&mut out, words.relations, &analysed.reply.relations);
    let notes = notes(analysed, sight, words);
    list(&mut out, words.notes, &notes);
    let dropped = analysed.checked.failed_lines().len();
    let metadata = json!({
        "model": match sight { Sight::Images(_) => "vision", _ => "main" },
        "images": match sight { Sight::Images(n) | Sight::Unseen(n) => n, Sight::Text => 0 },
        "commands": commands.len(),
        "objects": built.construction.objects.len(),
        "repaired": !analysed.first_errors.is_empty(),
        "dropped": dropped,
    });
    ToolOutput {
        artifacts: match figure {
            Figure::Saved(artifact) => vec![artifact],
            Figure::NoWorkspace => Vec::new(),
        },
        metadata,
        usage: Some(usage),
        ..ToolOutput::ok(out)
    }
}

/// `\n{header}\n- item…` when there are items.
fn list(out: &mut String, header: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    out.push('\n');
    out.push_str(header);
    out.push('\n');
    for item in items {
        out.push_str("- ");
        out.push_str(item);
        out.push('\n');
    }
}

/// What was repaired, what was dropped and why, and whether the images were read.
fn notes(analysed: &Analysed, sight: Sight, words: &Words) -> Vec<String> {
    let mut notes = Vec::new();
    if let Sight::Unseen(n) = sight {
        notes.push(words.unseen.replace("{n}", &n.to_string()));
    }
    let language = words.language;
    if let Some(why) = &analysed.first_unreadable {
        notes.push(
            words
                .first_unreadable
                .replace("{why}", why.describe(language)),
        );
    }
    if !analysed.first_errors.is_empty() {
        let sent = analysed.first_errors.len().to_string();
        notes.push(words.repair_round.replace("{n}", &sent));
        for e in &analysed.first_errors {
            notes.push(format!("  {}", error_line(e, language)));
        }
    }
    if let Some(why) = &analysed.repair_unreadable {
        notes.push(
            words
                .repair_unreadable
                .replace("{why}", why.describe(language)),
        );
    }
    if analysed.checked.errors.is_empty() {
        if !analysed.first_errors.is_empty() {
            notes.push(words.all_repaired.to_string());
        }
    } else {
        for e in &analysed.checked.errors {
            notes.push(format!("{}: {}", words.dropped, error_line(e, language)));
        }
    }
    notes
}

/// The model-facing words of the result, per language.
struct Words {
    language: Language,
    figure: &'static str,
    read_images: &'static str,
    from_text: &'static str,
    not_saved: &'static str,
    objects: &'static str,
    given: &'static str,
    relations: &'static str,
    notes: &'static str,
    unseen: &'static str,
    repair_round: &'static str,
    all_repaired: &'static str,
    repair_unreadable: &'static str,
    first_unreadable: &'static str,
    dropped: &'static str,
    unreadable: &'static str,
    nothing_built: &'static str,
}

impl Words {
    fn of(language: Language) -> &'static Words {
        match language {
            Language::En => &EN,
            Language::Zh => &ZH,
        }
    }
}

const EN: Words = Words {
    language: Language::En,
    figure: "Figure: {file} ({objects} objects from {commands} checked commands, {source})",
    read_images: "read from the turn's {n} image(s)",
    from_text: "drawn from the question's text",
    not_saved: "not saved (this turn has no workspace)",
    objects: "Objects:",
    given: "Given:",
    relations: "Relations:",
    notes: "Notes:",
    unseen: "the turn's {n} image(s) were not read: no vision model is configured (models.vision), so this figure comes from the question's text only",
    repair_round: "{n} command error(s) were sent back for one repair round:",
    all_repaired: "after the repair round every command is valid",
    repair_unreadable: "the repair reply could not be read ({why}); the first commands were kept and the invalid ones dropped",
    first_unreadable: "the first reply could not be read ({why}) and was asked for again",
    dropped: "dropped",
    unreadable: "the figure model did not reply with the JSON object asked for, twice",
    nothing_built: "no object of the figure could be built; the errors:",
};

const ZH: Words = Words {
    language: Language::Zh,
    figure: "图形：{file}（由 {commands} 条已校验命令得到 {objects} 个对象，{source}）",
    read_images: "读取自本轮的 {n} 张图片",
    from_text: "根据题目文字绘制",
    not_saved: "未保存（本轮没有工作目录）",
    objects: "对象：",
    given: "已知：",
    relations: "关系：",
    notes: "说明：",
    unseen: "本轮的 {n} 张图片未被读取：没有配置视觉模型（models.vision），因此该图只根据题目文字绘制",
    repair_round: "{n} 条命令错误已发回进行一轮修正：",
    all_repaired: "修正后所有命令均有效",
    repair_unreadable: "修正轮的回复无法解析（{why}）；保留了第一次的命令并去掉了无效的命令",
    first_unreadable: "第一次回复无法解析（{why}），已要求重新回复",
    dropped: "已去掉",
    unreadable: "作图模型两次都没有按要求回复 JSON 对象",
    nothing_built: "图形中没有任何对象能被构造；错误如下：",
};

#[derive(Debug, Clone, Copy)]
enum Prompt {
    System,
    UserImage,
    UserText,
    Repair,
    Unreadable,
}

fn prompt(language: Language, which: Prompt) -> &'static str {
    match (language, which) {
        (Language::En, Prompt::System) => include_str!("prompts/en/system.md"),
        (Language::En, Prompt::UserImage) => include_str!("prompts/en/user_image.md"),
        (Language::En, Prompt::UserText) => include_str!("prompts/en/user_text.md"),
        (Language::En, Prompt::Repair) => include_str!("prompts/en/repair.md"),
        (Language::En, Prompt::Unreadable) => include_str!("prompts/en/unreadable.md"),
        (Language::Zh, Prompt::System) => include_str!("prompts/zh/system.md"),
        (Language::Zh, Prompt::UserImage) => include_str!("prompts/zh/user_image.md"),
        (Language::Zh, Prompt::UserText) => include_str!("prompts/zh/user_text.md"),
        (Language::Zh, Prompt::Repair) => include_str!("prompts/zh/repair.md"),
        (Language::Zh, Prompt::Unreadable) => include_str!("prompts/zh/unreadable.md"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_become_safe_file_names() {
        assert_eq!(file_safe("call_1"), "call_1");
        assert_eq!(file_safe("../../x y"), "xy");
        assert_eq!(file_safe("//"), "figure");
    }

    #[test]
    fn every_prompt_has_its_placeholders_in_both_languages() {
        for language in [Language::En, Language::Zh] {
            assert!(prompt(language, Prompt::UserImage).contains("{question}"));
            assert!(prompt(language, Prompt::UserImage).contains("{images}"));
            assert!(prompt(language, Prompt::UserText).contains("{question}"));
            assert!(prompt(language, Prompt::Repair).contains("{errors}"));
            assert!(prompt(language, Prompt::Unreadable).contains("{why}"));
            assert!(prompt(language, Prompt::System).contains("\"commands\""));
        }
    }
}
