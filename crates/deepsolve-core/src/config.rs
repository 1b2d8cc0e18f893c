//! The solve knobs. Each knob is declared once, as one line of the `solve_knobs!` table below:
//! its [`SolveConfig`] field and type, default, clamp, help text, parsing and the description
//! clients read ([`SolveConfig::knob_docs`]) all follow from that line. Every value is clamped
//! on load and on write, with a warning naming the key, the value and the range.
//!
//! Unknown keys — in the solve section and anywhere else in the settings — are reported by
//! [`UnknownKeys`], the one builder of those messages, which also suggests the nearest known key.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Declares the solve knobs, one line each:
///
/// - a number: `name: type = default in min..=max, "help" / "帮助";` where `type` is `f64`,
///   `u32` or `u64` (the whole-number types clamp to whole numbers);
/// - a flag: `name = default, "help" / "帮助";`.
///
/// The help is written in English, then in Chinese: clients show the one of their language.
///
/// It generates the [`SolveConfig`] struct (the help is the field's doc), [`KNOBS`], [`FLAGS`],
/// [`SolveConfig::knob_docs`] and the reading of every field; the defaults are read from an
/// empty map. A default outside its clamp does not compile.
macro_rules! solve_knobs {
    (
        numbers {
            $( $key:ident : $ty:ty = $default:literal in $min:literal ..= $max:literal,
               $help:literal / $help_zh:literal; )*
        }
        flags {
            $( $flag:ident = $flag_default:literal, $flag_help:literal / $flag_help_zh:literal; )*
        }
        choices {
            $( $choice:ident : $cty:ident = $choice_default:ident, $choice_help:literal / $choice_help_zh:literal; )*
        }
    ) => {
        /// The solve knobs of one turn; see the `solve_knobs!` table in `config.rs`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub struct SolveConfig {
            $( #[doc = $help] pub $key: $ty, )*
            $( #[doc = $flag_help] pub $flag: bool, )*
            $( #[doc = $choice_help] pub $choice: $cty, )*
        }

        /// Each knob's contract, under the knob's own name.
        #[allow(non_upper_case_globals)]
        mod declared {
            #[allow(unused_imports, reason = "a table may declare no choice")]
            use super::{Choice, Flag, Knob, KnobNumber};
            $( use super::$cty; )*
            $(
                pub(super) const $key: Knob = Knob {
                    key: stringify!($key),
                    default: $default as f64,
                    min: $min as f64,
                    max: $max as f64,
                    integer: <$ty as KnobNumber>::INTEGER,
                    help: $help,
                    help_zh: $help_zh,
                };
                const _: () = assert!(
                    $key.is_consistent(),
                    concat!("the default of ", stringify!($key), " is outside its clamp")
                );
            )*
            $(
                pub(super) const $flag: Flag = Flag {
                    key: stringify!($flag),
                    default: $flag_default,
                    help: $flag_help,
                    help_zh: $flag_help_zh,
                };
            )*
            $(
                pub(super) const $choice: Choice = Choice {
                    key: stringify!($choice),
                    default: $cty::$choice_default.name(),
                    options: $cty::NAMES,
                    expected: $cty::EXPECTED,
                    help: $choice_help,
                    help_zh: $choice_help_zh,
                };
            )*
        }

        /// The numeric knobs, in the order they are documented.
        pub const KNOBS: &[Knob] = &[$(declared::$key),*];

        /// The boolean knobs, in the order they are documented.
        pub const FLAGS: &[Flag] = &[$(declared::$flag),*];

        /// Every knob, numbers first, in the order they are documented.
        const DOCS: &[KnobDoc] = &[
            $(KnobDoc::Number(declared::$key),)*
            $(KnobDoc::Flag(declared::$flag),)*
            $(KnobDoc::Choice(declared::$choice),)*
        ];

        /// The knobs with named values, in the order they are documented.
        pub const CHOICES: &[Choice] = &[$(declared::$choice),*];

        impl SolveConfig {
            /// Every knob from `map` (absent or `null` = its default); clamp warnings are pushed
            /// in table order.
            fn read(
                map: &Map<String, Value>,
                warnings: &mut Vec<ClampWarning>,
            ) -> Result<Self, ConfigError> {
                Ok(SolveConfig {
                    $( $key: <$ty as KnobNumber>::from_clamped(
                        declared::$key.read(map, warnings)?,
                    ), )*
                    $( $flag: declared::$flag.read(map)?, )*
                    $( $choice: $cty::from_name(declared::$choice.read(map)?)
                        .unwrap_or_default(), )*
                })
            }
        }
    };
}

solve_knobs! {
    numbers {
        temperature: f64 = 0.3 in 0.0..=2.0, "sampling temperature"
            / "采样温度";
        max_tokens: u32 = 8192 in 1..=200_000, "output tokens per model call"
            / "每次调用模型的输出令牌数";
        max_rounds: u32 = 12 in 1..=50, "model calls that may use tools"
            / "可以使用工具的模型调用次数";
        max_replans: u32 = 2 in 0..=10, "solve_replan budget"
            / "重新规划（solve_replan）的次数上限";
        max_steps: u32 = 12 in 1..=12, "plan length; longer plans are truncated"
            / "计划的步骤数上限，更长的计划会被截断";
        settlement_rounds: u32 = 2 in 0..=5,
            "extra rounds after max_rounds with a finish-now notice"
            / "超过 max_rounds 后附带“立即完成”提示的额外轮数";
        turn_timeout_s: u64 = 1200 in 10..=21_600, "wall-clock limit of a turn"
            / "每轮提问的总时长上限（秒）";
        tool_timeout_s: u64 = 60 in 1..=600, "per tool call"
            / "每次工具调用的时长上限（秒）";
        code_timeout_s: u64 = 30 in 1..=600, "per call of a tool that runs code in the sandbox"
            / "在沙箱中运行代码的工具每次调用的时长上限（秒）";
        stream_idle_timeout_s: u64 = 120 in 5..=600,
            "no byte from the model for this long is an error"
            / "模型在这么多秒内没有输出任何字节即视为出错";
        max_parallel_tool_calls: u32 = 8 in 1..=32,
            "tool calls run per round; the rest are skipped"
            / "每轮最多运行的工具调用数，其余的会被跳过";
        token_budget: u64 = 0 in 0..=1_000_000_000, "total tokens per turn; 0 = off"
            / "每轮提问的令牌总预算；0 表示不限";
        ultimatum_at: f64 = 0.85 in 0.3..=0.95,
            "fraction of the context window that forces an answer"
            / "上下文窗口占用达到此比例时强制给出解答";
        drafts: u32 = 3 in 1..=9,
            "most first workings asked for where a new problem is drafted: more until one boxed result is reached twice"
            / "新问题起草时最多请求的解答遍数：直到某个 \\boxed 结果出现两次为止";
    }
    flags {
        plan_first = true, "refuse work tools before solve_plan"
            / "在 solve_plan 之前拒绝使用工作工具";
        fold = true,
            "fold a finished step's messages out of the context (off only to measure what folding saves)"
            / "把已完成步骤的消息折叠出上下文（仅在测量折叠效果时关闭）";
    }
    choices {
        enforce: Enforce = Auto,
            "how the solve spine is held: decoding (tool_choice each round), prompt (instructions and nudges only), auto (decoding where the endpoint honours tool_choice)"
            / "如何让模型遵循解题主线：decoding（每轮用 tool_choice 约束输出）、prompt（只靠提示与催促）、auto（端点支持 tool_choice 时用 decoding）";
        draft: Draft = Auto,
            "the model's first working of a new problem: on (asked the way the model is asked plainly, without tools or playbook, then kept as the reasoning the plan starts from), off (under the playbook, with the tools), auto (on where the spine is held at decoding time and the model is not known to plan on its own)"
            / "新问题的第一遍解答：on（像直接提问那样，不带工具和解题手册，作为制定计划的推理保留）、off（在解题手册下、带工具）、auto（在解码时约束主线且不知道模型会自行制定计划时为 on）";
    }
}

/// How the solve spine is held (`solve.enforce`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforce {
    /// Decoding wherever the endpoint is known to honour `tool_choice`, else prompt.
    #[default]
    Auto,
    /// Every round's `tool_choice` follows the spine: a plan call, a tool call while a step is
    /// open, text once every step is finished.
    Decoding,
    /// Instructions and nudges only; every round is `tool_choice: auto`.
    Prompt,
}

impl Enforce {
    /// Every value's name, in the order they are documented.
    pub const NAMES: &'static [&'static str] = &["auto", "decoding", "prompt"];
    /// What a wrong value is told it should be.
    pub const EXPECTED: &'static str = "one of auto, decoding, prompt";

    pub const fn name(self) -> &'static str {
        match self {
            Enforce::Auto => "auto",
            Enforce::Decoding => "decoding",
            Enforce::Prompt => "prompt",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Enforce::Auto),
            "decoding" => Some(Enforce::Decoding),
            "prompt" => Some(Enforce::Prompt),
            _ => None,
        }
    }
}

/// How a new problem's first working is asked for (`solve.draft`).
///
/// A small model asked under the playbook, with the tools offered, worked the problem less
/// well than asked plainly (the 1.5B model's first working ended on the right result in 10 of
/// 30 problems where plain chat was right in 15), and a turn's answer follows its first
/// working. Asked plainly, the first working is the model's own best; the spine (plan, steps,
/// code, answer) then checks it instead of starting from a worse one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Draft {
    /// On where the spine is held at decoding time and the model is not known to plan on its
    /// own (`Honours::plans_unforced`); off otherwise.
    #[default]
    Auto,
    /// The first rounds of a new problem (no earlier turns, material or images) are asked
    /// with a short step-by-step system prompt and no tools, at most `drafts` of them (see
    /// `engine::drafts`); the working kept is the reasoning before the plan. Only where the
    /// spine is held at decoding time: it is what then asks for the plan.
    On,
    /// Round 1 is asked like every other round: the playbook, the tools, `auto`.
    Off,
}

impl Draft {
    /// Every value's name, in the order they are documented.
    pub const NAMES: &'static [&'static str] = &["auto", "on", "off"];
    /// What a wrong value is told it should be.
    pub const EXPECTED: &'static str = "one of auto, on, off";

    pub const fn name(self) -> &'static str {
        match self {
            Draft::Auto => "auto",
            Draft::On => "on",
            Draft::Off => "off",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Draft::Auto),
            "on" => Some(Draft::On),
            "off" => Some(Draft::Off),
            _ => None,
        }
    }
}

/// One knob whose value is one of a few names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Choice {
    pub key: &'static str,
    pub default: &'static str,
    pub options: &'static [&'static str],
    /// What a wrong value is told it should be ("one of …").
    #[serde(skip)]
    pub expected: &'static str,
    pub help: &'static str,
    /// The help in Chinese (clients read it through the settings API; not in `knob_docs`).
    #[serde(skip)]
    pub help_zh: &'static str,
}

impl Choice {
    /// This knob's value in `map` (any case, blanks ignored); absent or `null` means the
    /// default, anything but one of its names is an error naming them.
    fn read(&self, map: &Map<String, Value>) -> Result<&'static str, ConfigError> {
        let value = match map.get(self.key) {
            None | Some(Value::Null) => return Ok(self.default),
            Some(value) => value,
        };
        let named = value.as_str().map(|s| s.trim().to_ascii_lowercase());
        named
            .and_then(|name| self.options.iter().copied().find(|o| *o == name))
            .ok_or_else(|| ConfigError::WrongType {
                key: self.key.to_string(),
                expected: self.expected,
                got: value.to_string(),
            })
    }
}

/// One numeric knob and its contract.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Knob {
    pub key: &'static str,
    pub default: f64,
    pub min: f64,
    pub max: f64,
    pub integer: bool,
    pub help: &'static str,
    /// The help in Chinese (clients read it through the settings API; not in `knob_docs`).
    #[serde(skip)]
    pub help_zh: &'static str,
}

impl Knob {
    /// The default lies inside the clamp (and is whole for an integer knob); checked at compile
    /// time for every declared knob.
    const fn is_consistent(&self) -> bool {
        let whole = !self.integer || (self.default as u64) as f64 == self.default;
        self.min <= self.default && self.default <= self.max && whole
    }

    /// This knob's value in `map`, clamped; absent or `null` means the default.
    fn read(
        &self,
        map: &Map<String, Value>,
        warnings: &mut Vec<ClampWarning>,
    ) -> Result<f64, ConfigError> {
        let Some(value) = map.get(self.key).filter(|v| !v.is_null()) else {
            return Ok(self.default);
        };
        let (used, warning) = clamp_knob(self, number_of(self.key, value)?);
        warnings.extend(warning);
        Ok(used)
    }
}

/// One boolean knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Flag {
    pub key: &'static str,
    pub default: bool,
    pub help: &'static str,
    /// The help in Chinese (clients read it through the settings API; not in `knob_docs`).
    #[serde(skip)]
    pub help_zh: &'static str,
}

impl Flag {
    /// This flag's value in `map`; absent or `null` means the default. YAML and environment
    /// spellings (`on`, `no`, …) are accepted as strings.
    fn read(&self, map: &Map<String, Value>) -> Result<bool, ConfigError> {
        match map.get(self.key) {
            None | Some(Value::Null) => Ok(self.default),
            Some(value) => parse_flag(value).ok_or_else(|| ConfigError::WrongType {
                key: self.key.to_string(),
                expected: "true or false",
                got: value.to_string(),
            }),
        }
    }
}

/// A true/false setting as JSON, YAML or an environment variable spells it: a boolean, or
/// `true|yes|on|strict` / `false|no|off` in any case, surrounding blanks ignored. The one rule
/// for every flag, the solve knobs' and the tools' alike.
pub fn parse_flag(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "strict" => Some(true),
            "false" | "no" | "off" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Any knob, with its kind: `{"kind": "number", "key", "default", "min", "max", "integer",
/// "help"}` or `{"kind": "flag", "key", "default", "help"}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KnobDoc {
    Number(Knob),
    Flag(Flag),
    Choice(Choice),
}

impl KnobDoc {
    pub fn key(&self) -> &'static str {
        match self {
            KnobDoc::Number(knob) => knob.key,
            KnobDoc::Flag(flag) => flag.key,
            KnobDoc::Choice(choice) => choice.key,
        }
    }

    pub fn help(&self) -> &'static str {
        match self {
            KnobDoc::Number(knob) => knob.help,
            KnobDoc::Flag(flag) => flag.help,
            KnobDoc::Choice(choice) => choice.help,
        }
    }
}

/// The Rust types a numeric knob may have.
trait KnobNumber {
    /// Clamped to whole numbers.
    const INTEGER: bool;
    /// The value after [`clamp_knob`], which already made it whole and in range.
    fn from_clamped(value: f64) -> Self;
}

impl KnobNumber for f64 {
    const INTEGER: bool = false;
    fn from_clamped(value: f64) -> Self {
        value
    }
}

impl KnobNumber for u32 {
    const INTEGER: bool = true;
    fn from_clamped(value: f64) -> Self {
        value as u32
    }
}

impl KnobNumber for u64 {
    const INTEGER: bool = true;
    fn from_clamped(value: f64) -> Self {
        value as u64
    }
}

impl Default for SolveConfig {
    fn default() -> Self {
        // Built from the knob table so the defaults are written down once.
        SolveConfig::from_map(&Map::new())
            .map(|(cfg, _)| cfg)
            .unwrap_or_else(|_| unreachable!("an empty map has no bad keys"))
    }
}

/// A value that was out of range (or not a finite number) and was replaced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClampWarning {
    pub key: String,
    pub value: String,
    pub used: f64,
    pub min: f64,
    pub max: f64,
}

impl fmt::Display for ClampWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} = {} is outside {}..={}; using {}",
            self.key, self.value, self.min, self.max, self.used
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Keys that are not knobs, every one of them named (boxed: the message carries the known
    /// keys and the suggestions).
    #[error("{0}")]
    UnknownKey(Box<UnknownKeys>),
    #[error("solve setting '{key}' must be {expected}, got {got}")]
    WrongType {
        key: String,
        expected: &'static str,
        got: String,
    },
}

/// A key the reference once had and ignores now (`max_iterations_per_step`): accepted and
/// ignored with a warning wherever a solve section is read.
pub fn is_legacy(key: &str) -> bool {
    LEGACY_KEYS.iter().any(|(legacy, _)| *legacy == key)
}

/// Every knob's key, comma-separated, in the order they are documented.
pub fn known_keys() -> String {
    DOCS.iter().map(KnobDoc::key).collect::<Vec<_>>().join(", ")
}

/// Clamp one knob's value. Non-finite numbers fall back to the default.
pub fn clamp_knob(knob: &Knob, value: f64) -> (f64, Option<ClampWarning>) {
    let used = if !value.is_finite() {
        knob.default
    } else {
        let v = value.clamp(knob.min, knob.max);
        if knob.integer { v.round() } else { v }
    };
    let changed = !value.is_finite() || used != value;
    let warning = changed.then(|| ClampWarning {
        key: knob.key.to_string(),
        value: value.to_string(),
        used,
        min: knob.min,
        max: knob.max,
    });
    (used, warning)
}

/// A number as the settings spell it: a JSON number, or a string such as `"1e3"`, `".nan"` or
/// `"-.inf"` (YAML and the environment produce those). `None` for anything else.
pub fn number_value(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            ".nan" | "nan" => Some(f64::NAN),
            ".inf" | "+.inf" | "inf" | "+inf" => Some(f64::INFINITY),
            "-.inf" | "-inf" => Some(f64::NEG_INFINITY),
            t => t.parse::<f64>().ok(),
        },
        _ => None,
    }
}

fn number_of(key: &str, value: &Value) -> Result<f64, ConfigError> {
    number_value(value).ok_or_else(|| ConfigError::WrongType {
        key: key.to_string(),
        expected: "a number",
        got: value.to_string(),
    })
}

/// Keys of older solve sections that are accepted and ignored, each with why, so old settings
/// files keep loading (the reference ignores the same key on purpose).
const LEGACY_KEYS: &[(&str, &str)] = &[(
    "max_iterations_per_step",
    "steps are not bounded one by one; max_rounds bounds the whole turn",
)];

impl SolveConfig {
    /// Build from a map of knob values (missing keys take defaults). Unknown keys (all of them,
    /// with suggestions) and wrong types are errors; out-of-range values are clamped and
    /// reported. Legacy keys are ignored: see [`SolveConfig::legacy_warnings`].
    pub fn from_map(map: &Map<String, Value>) -> Result<(Self, Vec<ClampWarning>), ConfigError> {
        let unknown: Vec<String> = map
            .keys()
            .filter(|key| Self::knob(key).is_none() && !is_legacy(key))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            let unknown = UnknownKeys::new(unknown, KnownKeys::solve());
            return Err(ConfigError::UnknownKey(Box::new(unknown)));
        }
        let mut warnings = Vec::new();
        let config = Self::read(map, &mut warnings)?;
        Ok((config, warnings))
    }

    /// One warning per legacy key in `map` (accepted and ignored by [`SolveConfig::from_map`]),
    /// for every reader of a solve section to pass on.
    pub fn legacy_warnings(map: &Map<String, Value>) -> Vec<String> {
        LEGACY_KEYS
            .iter()
            .filter(|(key, _)| map.contains_key(*key))
            .map(|(key, why)| format!("solve.{key} is no longer used and is ignored ({why})"))
            .collect()
    }

    /// Every knob, with its kind, default, clamp and help: what a client needs to show and
    /// check the settings.
    pub fn knob_docs() -> &'static [KnobDoc] {
        DOCS
    }

    /// The knob called `key`, if there is one.
    pub fn knob(key: &str) -> Option<&'static KnobDoc> {
        DOCS.iter().find(|doc| doc.key() == key)
    }

    /// The knobs as a map, for writing back and for `settings get`.
    pub fn to_map(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => unreachable!("SolveConfig serialises to an object"),
        }
    }

    /// Apply overrides (e.g. a turn's `config`) on top of this config, strictly.
    pub fn with_overrides(
        &self,
        overrides: &Map<String, Value>,
    ) -> Result<(Self, Vec<ClampWarning>), ConfigError> {
        let mut map = self.to_map();
        for (k, v) in overrides {
            map.insert(k.clone(), v.clone());
        }
        // Every key of `self.to_map()` is known, so an unknown key is one of the overrides.
        Self::from_map(&map)
    }

    pub fn turn_timeout(&self) -> Duration {
        Duration::from_secs(self.turn_timeout_s)
    }

    pub fn tool_timeout(&self) -> Duration {
        Duration::from_secs(self.tool_timeout_s)
    }

    pub fn stream_idle_timeout(&self) -> Duration {
        Duration::from_secs(self.stream_idle_timeout_s)
    }
}

/// What is known at the place where an unknown key was written: the hint of the message, and
/// the candidates for "did you mean".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KnownKeys {
    /// The top level of the settings: its sections.
    Sections(Vec<String>),
    /// The keys of one section (`llm`, `models.reason`, `solve`).
    Section { name: String, keys: Vec<String> },
    /// A single value, which has no keys below it.
    Value { name: String },
}

impl KnownKeys {
    /// The solve section: every knob.
    pub fn solve() -> Self {
        KnownKeys::Section {
            name: "solve".into(),
            keys: DOCS.iter().map(|doc| doc.key().to_string()).collect(),
        }
    }

    fn candidates(&self) -> &[String] {
        match self {
            KnownKeys::Sections(keys) | KnownKeys::Section { keys, .. } => keys,
            KnownKeys::Value { .. } => &[],
        }
    }
}

impl fmt::Display for KnownKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnownKeys::Sections(keys) => write!(f, "known sections: {}", keys.join(", ")),
            KnownKeys::Section { name, keys } => write!(f, "known in {name}: {}", keys.join(", ")),
            KnownKeys::Value { name } => {
                write!(f, "'{name}' is a single value, it has no sub-keys")
            }
        }
    }
}

/// Keys nobody declared, written at one place. Every unknown-key message — the settings file,
/// `DEEPSOLVE_<SECTION>__<KEY>` variables, `--set`, `settings get|set`, a turn's `config`,
/// the settings API — is this type's `Display`:
///
/// `unknown setting 'solve.max_round' in settings.yaml (known in solve: …) — did you mean
/// 'solve.max_rounds'?`
///
/// The suggestion is the known key nearest to each unknown one, when it is close enough to be
/// a typo; nothing is suggested otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKeys {
    /// The path of the place as the writer sees it (`solve`), shown before every key; empty
    /// when the keys are written bare (a turn's `config`).
    prefix: String,
    /// The keys below the place. A key may reach deeper (`modle.x`): its first segment is the
    /// unknown one.
    keys: Vec<String>,
    /// Where the keys were written (`in settings.yaml`), when the writer knows.
    origin: Option<String>,
    known: KnownKeys,
}

impl UnknownKeys {
    /// `keys`, written at a place where `known` is what exists.
    pub fn new(keys: Vec<String>, known: KnownKeys) -> Self {
        UnknownKeys {
            prefix: String::new(),
            keys,
            origin: None,
            known,
        }
    }

    /// The place is below `prefix` (`solve`): keys and suggestions are shown as `solve.key`.
    pub fn under(mut self, prefix: &str) -> Self {
        self.prefix = join_key(prefix, &self.prefix);
        self
    }

    /// Where the keys were written, as it follows the keys in the message (`in settings.yaml`,
    /// `from environment variable DEEPSOLVE_SOLVE__MAX_ROUND`).
    pub fn found(mut self, origin: impl fmt::Display) -> Self {
        self.origin = Some(origin.to_string());
        self
    }

    /// The unknown keys, as the writer wrote them.
    pub fn keys(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| join_key(&self.prefix, k))
            .collect()
    }

    /// What is known where the keys were written.
    pub fn known(&self) -> &KnownKeys {
        &self.known
    }

    /// For each unknown key close to a known one: the unknown key and the key it likely meant,
    /// both as written (`solve.max_round`, `solve.max_rounds`).
    pub fn suggestions(&self) -> Vec<(String, String)> {
        self.keys
            .iter()
            .filter_map(|key| {
                let (first, rest) = match key.split_once('.') {
                    Some((first, rest)) => (first, Some(rest)),
                    None => (key.as_str(), None),
                };
                let near = nearest(first, self.known.candidates())?;
                let meant = match rest {
                    Some(rest) => format!("{near}.{rest}"),
                    None => near.to_string(),
                };
                Some((join_key(&self.prefix, key), join_key(&self.prefix, &meant)))
            })
            .collect()
    }
}

impl fmt::Display for UnknownKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = self.keys();
        let noun = if keys.len() == 1 {
            "setting"
        } else {
            "settings"
        };
        let quoted: Vec<String> = keys.iter().map(|k| format!("'{k}'")).collect();
        write!(f, "unknown {noun} {}", quoted.join(", "))?;
        if let Some(origin) = &self.origin {
            write!(f, " {origin}")?;
        }
        write!(f, " ({})", self.known)?;
        match self.suggestions().as_slice() {
            [] => Ok(()),
            [(_, meant)] if keys.len() == 1 => write!(f, " — did you mean '{meant}'?"),
            several => {
                let each: Vec<String> = several
                    .iter()
                    .map(|(key, meant)| format!("'{meant}' for '{key}'"))
                    .collect();
                write!(f, " — did you mean {}?", each.join(", "))
            }
        }
    }
}

fn join_key(prefix: &str, key: &str) -> String {
    match (prefix.is_empty(), key.is_empty()) {
        (true, _) => key.to_string(),
        (_, true) => prefix.to_string(),
        _ => format!("{prefix}.{key}"),
    }
}

/// Keys longer than this are not typos of a known key; skipping them bounds the work an
/// untrusted request can cause.
const MAX_SUGGESTED_LEN: usize = 64;

/// The known name nearest to `word` when it is close enough to be a typo: at most a third of
/// the word's length in edits (at least 1, at most 3), case ignored. Ties go to the first name.
pub fn nearest<'a>(word: &str, names: &'a [String]) -> Option<&'a str> {
    let len = word.chars().count();
    if len > MAX_SUGGESTED_LEN {
        return None;
    }
    let limit = (len / 3).clamp(1, 3);
    names
        .iter()
        .filter(|name| name.chars().count().abs_diff(len) <= limit)
        .map(|name| (edit_distance(word, name), name))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name.as_str())
}

/// The optimal-string-alignment distance between `a` and `b`, case ignored: insertions,
/// deletions, substitutions and swaps of neighbours (`modle` → `model`) cost one edit each.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    // Rows i-2, i-1 and i of the distance table between the prefixes of `a` and `b`.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        current[0] = i;
        for j in 1..=b.len() {
            let substitution = previous[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            let mut best = substitution.min(previous[j] + 1).min(current[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod legacy_tests {
    use super::*;

    #[test]
    fn the_legacy_key_is_accepted_ignored_and_warned_about() {
        let mut map = Map::new();
        map.insert("max_iterations_per_step".into(), Value::from(5));
        map.insert("max_rounds".into(), Value::from(7));
        let (config, clamps) = SolveConfig::from_map(&map).unwrap();
        assert_eq!(config.max_rounds, 7);
        assert!(clamps.is_empty());
        let warnings = SolveConfig::legacy_warnings(&map);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("solve.max_iterations_per_step is no longer used"));
        assert!(SolveConfig::legacy_warnings(&Map::new()).is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = SolveConfig::default();
        assert_eq!(c.temperature, 0.3);
        assert_eq!(c.max_tokens, 8192);
        assert_eq!(c.max_rounds, 12);
        assert_eq!(c.max_replans, 2);
        assert_eq!(c.max_steps, 12);
        assert_eq!(c.settlement_rounds, 2);
        assert_eq!(c.turn_timeout_s, 1200);
        assert_eq!(c.tool_timeout_s, 60);
        assert_eq!(c.code_timeout_s, 30);
        assert_eq!(c.stream_idle_timeout_s, 120);
        assert_eq!(c.max_parallel_tool_calls, 8);
        assert!(c.plan_first);
    }

    #[test]
    fn enforce_is_one_of_its_names_in_any_case() {
        assert_eq!(SolveConfig::default().enforce, Enforce::Auto);
        let map = json!({"enforce": " Decoding "})
            .as_object()
            .cloned()
            .unwrap();
        assert_eq!(
            SolveConfig::from_map(&map).unwrap().0.enforce,
            Enforce::Decoding
        );
        let map = json!({"enforce": "prompt"}).as_object().cloned().unwrap();
        assert_eq!(
            SolveConfig::from_map(&map).unwrap().0.enforce,
            Enforce::Prompt
        );
        let map = json!({"enforce": "grammar"}).as_object().cloned().unwrap();
        let err = SolveConfig::from_map(&map).unwrap_err().to_string();
        assert!(
            err.contains("enforce") && err.contains("auto, decoding, prompt"),
            "{err}"
        );
        let written = SolveConfig::default().to_map();
        assert_eq!(written["enforce"], json!("auto"));
        let back = SolveConfig::from_map(&written).unwrap().0;
        assert_eq!(back, SolveConfig::default());
    }

    #[test]
    fn draft_is_one_of_its_names_and_a_wrong_one_is_told_its_own_choices() {
        assert_eq!(SolveConfig::default().draft, Draft::Auto);
        let map = json!({"draft": "OFF"}).as_object().cloned().unwrap();
        assert_eq!(SolveConfig::from_map(&map).unwrap().0.draft, Draft::Off);
        let map = json!({"draft": "decoding"}).as_object().cloned().unwrap();
        let err = SolveConfig::from_map(&map).unwrap_err().to_string();
        assert!(
            err.contains("draft") && err.contains("auto, on, off"),
            "{err}"
        );
        assert_eq!(SolveConfig::default().to_map()["draft"], json!("auto"));
    }

    #[test]
    fn unknown_key_is_named() {
        let map = json!({"max_round": 3}).as_object().cloned().unwrap();
        let err = SolveConfig::from_map(&map).unwrap_err();
        assert!(err.to_string().contains("'max_round'"), "{err}");
    }

    #[test]
    fn wrong_type_is_named() {
        let map = json!({"max_rounds": "many"}).as_object().cloned().unwrap();
        let err = SolveConfig::from_map(&map).unwrap_err();
        assert!(err.to_string().contains("max_rounds"), "{err}");
    }

    #[test]
    fn out_of_range_is_clamped_with_a_warning() {
        let map = json!({"max_rounds": 1000, "temperature": ".nan"})
            .as_object()
            .cloned()
            .unwrap();
        let (c, w) = SolveConfig::from_map(&map).unwrap();
        assert_eq!(c.max_rounds, 50);
        assert_eq!(c.temperature, 0.3);
        assert_eq!(w.len(), 2);
        assert!(w[1].to_string().contains("max_rounds = 1000"), "{}", w[1]);
    }

    #[test]
    fn every_field_is_a_documented_knob_in_table_order() {
        let docs: Vec<&str> = SolveConfig::knob_docs().iter().map(KnobDoc::key).collect();
        let mut fields: Vec<String> = SolveConfig::default().to_map().keys().cloned().collect();
        fields.sort();
        let mut sorted = docs.clone();
        sorted.sort();
        assert_eq!(fields, sorted);
        assert_eq!(docs.len(), KNOBS.len() + FLAGS.len() + CHOICES.len());
        assert_eq!(docs[0], "temperature");
        assert_eq!(docs.last(), Some(&"draft"));
        assert!(known_keys().starts_with("temperature, max_tokens, max_rounds"));
    }

    #[test]
    fn every_knob_has_its_help_in_english_and_chinese() {
        let helps = (KNOBS.iter().map(|k| (k.key, k.help, k.help_zh)))
            .chain(FLAGS.iter().map(|f| (f.key, f.help, f.help_zh)))
            .chain(CHOICES.iter().map(|c| (c.key, c.help, c.help_zh)));
        for (key, en, zh) in helps {
            assert!(en.is_ascii() && !en.is_empty(), "{key}: {en:?}");
            assert!(zh.chars().any(|c| c > '\u{2e80}'), "{key}: {zh:?}");
        }
    }

    #[test]
    fn knob_docs_describe_kind_default_and_clamp() {
        let rounds = serde_json::to_value(SolveConfig::knob("max_rounds")).unwrap();
        assert_eq!(
            rounds,
            json!({"kind": "number", "key": "max_rounds", "default": 12.0, "min": 1.0,
                   "max": 50.0, "integer": true, "help": "model calls that may use tools"})
        );
        let temperature = SolveConfig::knob("temperature").unwrap();
        assert!(matches!(temperature, KnobDoc::Number(k) if !k.integer && k.max == 2.0));
        let fold = serde_json::to_value(SolveConfig::knob("fold")).unwrap();
        assert_eq!(fold["kind"], "flag");
        assert_eq!(fold["default"], true);
        assert!(SolveConfig::knob("max_round").is_none());
    }

    #[test]
    fn every_unknown_key_is_named_with_the_nearest_known_one() {
        let map = json!({"max_round": 3, "warp_speed": 9, "fodl": false})
            .as_object()
            .cloned()
            .unwrap();
        let err = SolveConfig::from_map(&map).unwrap_err();
        let ConfigError::UnknownKey(unknown) = &err else {
            panic!("{err}")
        };
        let mut keys = unknown.keys();
        keys.sort();
        assert_eq!(keys, ["fodl", "max_round", "warp_speed"]);
        let text = err.to_string();
        assert!(text.starts_with("unknown settings '"), "{text}");
        assert!(text.contains("(known in solve: temperature, "), "{text}");
        assert!(text.contains("'max_rounds' for 'max_round'"), "{text}");
        assert!(text.contains("'fold' for 'fodl'"), "{text}");
        assert!(!text.contains("for 'warp_speed'"), "{text}");
    }

    #[test]
    fn one_unknown_key_reads_as_a_question() {
        let map = json!({"max_round": 3}).as_object().cloned().unwrap();
        let Err(ConfigError::UnknownKey(unknown)) = SolveConfig::from_map(&map) else {
            panic!("refused")
        };
        let text = unknown.under("solve").found("in s.yaml").to_string();
        assert_eq!(
            text,
            format!(
                "unknown setting 'solve.max_round' in s.yaml (known in solve: {}) — did you \
                 mean 'solve.max_rounds'?",
                known_keys()
            )
        );
    }

    #[test]
    fn nothing_is_suggested_when_nothing_is_close() {
        for far in [
            "warp_speed",
            "bogus",
            "x",
            "timeout",
            &"max_rounds".repeat(10),
        ] {
            let unknown = UnknownKeys::new(vec![far.to_string()], KnownKeys::solve());
            assert!(unknown.suggestions().is_empty(), "{far}: {unknown}");
            assert!(!unknown.to_string().contains("did you mean"), "{unknown}");
        }
    }

    #[test]
    fn suggestions_keep_the_path_and_the_rest_of_the_key() {
        let sections = KnownKeys::Sections(vec!["llm".into(), "models".into(), "solve".into()]);
        let unknown = UnknownKeys::new(vec!["lm.model".into()], sections);
        assert_eq!(
            unknown.to_string(),
            "unknown setting 'lm.model' (known sections: llm, models, solve) — did you mean \
             'llm.model'?"
        );
        let llm = KnownKeys::Section {
            name: "llm".into(),
            keys: vec!["base_url".into(), "model".into()],
        };
        let unknown = UnknownKeys::new(vec!["MODEL".into()], llm).under("llm");
        assert_eq!(
            unknown.suggestions(),
            [("llm.MODEL".to_string(), "llm.model".to_string())]
        );
        let leaf = KnownKeys::Value {
            name: "llm.model".into(),
        };
        let unknown = UnknownKeys::new(vec!["x".into()], leaf).under("llm.model");
        assert_eq!(
            unknown.to_string(),
            "unknown setting 'llm.model.x' ('llm.model' is a single value, it has no sub-keys)"
        );
    }

    #[test]
    fn edit_distance_counts_a_swap_as_one_edit() {
        assert_eq!(edit_distance("modle", "model"), 1);
        assert_eq!(edit_distance("max_round", "max_rounds"), 1);
        assert_eq!(edit_distance("Max_Rounds", "max_rounds"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("ca", "abc"), 3);
    }

    proptest! {
        #[test]
        fn every_knob_lands_in_range(idx in 0..KNOBS.len(), v in proptest::num::f64::ANY) {
            let knob = &KNOBS[idx];
            let (used, warning) = clamp_knob(knob, v);
            prop_assert!(used >= knob.min && used <= knob.max);
            if v.is_finite() && v >= knob.min && v <= knob.max && (!knob.integer || v.fract() == 0.0) {
                prop_assert!(warning.is_none());
            } else {
                prop_assert!(warning.is_some());
            }
        }
    }
}
