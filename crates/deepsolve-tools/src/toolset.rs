//! The mechanism of the tool catalog: what an entry says ([`ToolEntry`]), what the app gives
//! the factories ([`Deps`]), and the one rule by which `solve` (the CLI), `serve` (the HTTP
//! API) and its OpenAI facade mount the tools ([`Toolset`]). The catalog itself, the list of
//! entries, is [`crate::CATALOG`].
//!
//! # The mounting rule
//!
//! 1. At start, every entry's factory runs on what the app provides (settings, model clients,
//!    the sandbox). A tool it builds is *mounted*: registered with the engine. One it cannot
//!    build is *unavailable*, with the reason (e.g. "no sandbox: bubblewrap is missing").
//! 2. A turn is offered every mounted [`Policy::Automatic`] tool (in catalog order), then the
//!    tools it requests — `tools.enabled` in the settings, then `--tool` (CLI) or the request's
//!    `tools` (API; none through the OpenAI facade) — each once, in that order. An
//!    [`Policy::OptIn`] tool is offered only when requested. A [`Policy::WithMaterial`] tool
//!    (`rag`, `read_source`) is offered exactly when the turn has material (knowledge bases or
//!    attachments: [`Toolset::for_turn_with`]), never by request: naming it is accepted and
//!    changes nothing. A [`Policy::WithTool`] tool (`web_fetch`) follows its leader: offered
//!    on every turn that is offered that tool, and on request.
//! 3. Requesting a name that is not in the catalog, or a tool that is unavailable, is an error
//!    naming the known or the available tools ([`ToolRequestError`]); the turn does not start.
//! 4. A tool named in `tools.disabled` is never built: it is unavailable ("disabled by
//!    tools.disabled"), automatic or not. That wins over `tools.enabled` (the name is skipped
//!    there) and over a turn's request (refused with that reason). Naming a tool the catalog
//!    does not have, or a solve tool (the engine's own), is an error ([`DisabledError`]).

use std::fmt;
use std::sync::Arc;

use deepsolve_core::solve::{is_solve_tool, spine::SOLVE_TOOL_NAMES};
use deepsolve_core::{ChatModel, Language, ShownArgument, ToolRef};
use deepsolve_sandbox::Sandbox;
use deepsolve_settings::{Field, Settings, ToolSection};

/// The settings sections `entries` declare, for the settings loader
/// (`LoadOptions::tool_sections`) and `settings set`.
pub fn tool_sections(entries: &[ToolEntry]) -> Vec<ToolSection> {
    entries.iter().filter_map(ToolEntry::section).collect()
}

/// When a turn is offered a mounted tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// On every turn, whenever its dependency works (the sandbox for the code tools).
    Automatic,
    /// Only on turns that ask for it.
    OptIn,
    /// Exactly on turns that have material (knowledge bases or attachments) to read.
    WithMaterial,
    /// On every turn that is offered the named tool (`web_fetch` with `web_search`: a search
    /// is worth little if its pages cannot be read), and on turns that ask for it.
    WithTool(&'static str),
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Automatic => "automatic",
            Policy::OptIn => "opt-in",
            Policy::WithMaterial => "with-material",
            Policy::WithTool(_) => "with-tool",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::WithTool(leader) => write!(f, "with {leader}"),
            _ => f.write_str(self.as_str()),
        }
    }
}

/// A tool's line in the playbook, per language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaybookLine {
    pub en: &'static str,
    pub zh: &'static str,
}

impl PlaybookLine {
    pub const fn get(&self, language: Language) -> &'static str {
        match language {
            Language::En => self.en,
            Language::Zh => self.zh,
        }
    }
}

/// The argument of a tool's calls a front end shows first, as its entry declares it: it goes
/// on every `tool_call` event ([`deepsolve_core::ShownArgument`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown {
    /// The argument's name (`code`, `query`, …).
    pub argument: &'static str,
    /// The language to highlight it as (`python`, `bash`); `None`: plain text.
    pub language: Option<&'static str>,
}

impl Shown {
    /// As the protocol carries it.
    pub fn to_wire(self) -> ShownArgument {
        ShownArgument {
            name: self.argument.to_string(),
            language: self.language.map(str::to_string),
        }
    }
}

/// A line `deepsolve doctor` prints about a tool, beyond whether it is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DoctorLine {
    /// Printed as it is (the tool's own block: a heading, aligned details).
    Note(String),
    /// Something to fix, marked as a warning. Never unhealthy: a tool's report informs.
    Warn(String),
}

/// What a tool adds to `deepsolve doctor`, from the settings in force.
pub type DoctorHook = fn(&Settings) -> Vec<DoctorLine>;

/// Why a tool cannot be mounted, in words for a person (`doctor`, the web UI, the error of a
/// turn that asks for it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// Why a tool named in `tools.disabled` is not mounted.
pub const DISABLED: &str = "disabled by tools.disabled";

/// What the app provides to the factories.
#[derive(Clone)]
pub struct Deps {
    pub settings: Settings,
    pub main_model: Arc<dyn ChatModel>,
    /// The model behind `reason` (`models.reason`, else the main model), or why there is none.
    pub reasoning_model: Result<Arc<dyn ChatModel>, Unavailable>,
    /// The model that reads images (`models.vision`; `None`: not configured), or why the
    /// configured one cannot be used.
    pub vision: Result<Option<Arc<dyn ChatModel>>, Unavailable>,
    /// A sandbox whose probe ran real code, or why there is none.
    pub sandbox: Result<Sandbox, Unavailable>,
    /// The knowledge-base service behind `rag` and `read_source`, or why there is none.
    pub knowledge: Result<deepsolve_kb::Knowledge, Unavailable>,
    /// The program that parses PDFs out of process (`deepsolve __pdf-child` for the binary);
    /// `None`: a `deepsolve-kb-pdf` beside the executable, else `pdftotext`.
    pub pdf_child: Option<deepsolve_kb::extract::ChildCommand>,
}

/// Builds a tool from what the app provides, or says why it cannot.
pub type Factory = fn(&Deps) -> Result<ToolRef, Unavailable>;

/// One tool, as the catalog knows it.
#[derive(Debug, Clone, Copy)]
pub struct ToolEntry {
    /// The name the model calls it by (and `--tool`, `tools.enabled`, the API's `tools` use).
    pub name: &'static str,
    pub policy: Policy,
    /// Its line in the playbook (the mounted tool answers `Tool::playbook_line` with it).
    pub playbook: PlaybookLine,
    /// The argument of its calls a front end shows first (`None`: the arguments as they are).
    pub shows: Option<Shown>,
    /// What it adds to `deepsolve doctor` (`None`: nothing beyond mounted or not).
    pub doctor: Option<DoctorHook>,
    /// The settings that shape it, as dotted keys or sections, the ones it owns first.
    pub settings: &'static [&'static str],
    /// The keys of its own section, `tools.<name>` (empty: it has none). The loader checks
    /// them like every other key ([`tool_sections`]); the factory reads them with
    /// `deps.settings.tool_settings(name)`.
    pub section: &'static [Field],
    /// Its turns need a workspace directory.
    pub needs_workspace: bool,
    pub build: Factory,
}

impl ToolEntry {
    /// Build it on `deps`: the factory's tool, carrying what this entry says about it.
    pub fn mount(&self, deps: &Deps) -> Result<ToolRef, Unavailable> {
        (self.build)(deps).map(|tool| crate::cataloged::cataloged(tool, self))
    }

    /// Its own settings section, if it declares one.
    pub fn section(&self) -> Option<ToolSection> {
        (!self.section.is_empty()).then_some(ToolSection {
            tool: self.name,
            fields: self.section,
        })
    }
}

/// A tool the engine has, and how turns get it.
#[derive(Clone)]
struct Mounted {
    name: String,
    policy: Policy,
    needs_workspace: bool,
    tool: ToolRef,
}

/// One tool's state, for `doctor` and the web UI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolStatus<'a> {
    pub name: &'a str,
    pub policy: Policy,
    /// `None`: mounted.
    pub unavailable: Option<&'a Unavailable>,
}

/// The catalog mounted on what the app provides: the tools the engine gets, the ones it
/// cannot have and why, and the per-turn selection (the mounting rule, see the module docs).
#[derive(Clone, Default)]
pub struct Toolset {
    mounted: Vec<Mounted>,
    unavailable: Vec<(String, Policy, Unavailable)>,
    /// `tools.enabled`: requested by every turn.
    enabled: Vec<String>,
}

impl Toolset {
    /// Run every entry's factory on `deps`, except those `tools.disabled` names.
    pub fn mount(entries: &[ToolEntry], deps: &Deps) -> Toolset {
        let disabled = &deps.settings.tools.disabled;
        let is_disabled = |name: &str| disabled.iter().any(|d| d.trim() == name);
        let mut set = Toolset {
            enabled: (deps.settings.tools.enabled.iter())
                .filter(|name| !is_disabled(name.trim()))
                .cloned()
                .collect(),
            ..Toolset::default()
        };
        for entry in entries {
            if is_disabled(entry.name) {
                let why = Unavailable(DISABLED.into());
                set.unavailable
                    .push((entry.name.to_string(), entry.policy, why));
                continue;
            }
            match entry.mount(deps) {
                Ok(tool) => set.mounted.push(Mounted {
                    name: entry.name.to_string(),
                    policy: entry.policy,
                    needs_workspace: entry.needs_workspace,
                    tool,
                }),
                Err(why) => set
                    .unavailable
                    .push((entry.name.to_string(), entry.policy, why)),
            }
        }
        set
    }

    /// Add a tool built outside the catalog (tests, embedders); it follows the same rule.
    /// It is given a workspace like the code tools.
    pub fn with_tool(mut self, tool: ToolRef, policy: Policy) -> Self {
        self.mounted.push(Mounted {
            name: tool.spec().name.clone(),
            policy,
            needs_workspace: true,
            tool,
        });
        self
    }

    /// The mounted tools, for `Engine::new`.
    pub fn tools(&self) -> Vec<ToolRef> {
        self.mounted.iter().map(|m| m.tool.clone()).collect()
    }

    /// The names of the mounted tools.
    pub fn available(&self) -> Vec<String> {
        self.mounted.iter().map(|m| m.name.clone()).collect()
    }

    /// Every tool known here, mounted first, with its policy and why it is not mounted.
    pub fn status(&self) -> Vec<ToolStatus<'_>> {
        let mounted = self.mounted.iter().map(|m| ToolStatus {
            name: &m.name,
            policy: m.policy,
            unavailable: None,
        });
        let missing = self
            .unavailable
            .iter()
            .map(|(name, policy, why)| ToolStatus {
                name,
                policy: *policy,
                unavailable: Some(why),
            });
        mounted.chain(missing).collect()
    }

    /// Why `name` is not mounted (`None`: it is, or it is not known).
    pub fn why_unavailable(&self, name: &str) -> Option<&Unavailable> {
        self.unavailable
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, why)| why)
    }

    /// The work tools a turn without material is offered: the automatic ones, then
    /// `tools.enabled`, then `requested`, each once; an unknown or unavailable name is an
    /// error.
    pub fn for_turn<S: AsRef<str>>(
        &self,
        requested: &[S],
    ) -> Result<Vec<String>, ToolRequestError> {
        self.for_turn_with(requested, false)
    }

    /// [`Toolset::for_turn`] for a turn that has material (`true`: its knowledge tools
    /// follow the automatic ones; one that is unavailable is an error) or not.
    pub fn for_turn_with<S: AsRef<str>>(
        &self,
        requested: &[S],
        has_material: bool,
    ) -> Result<Vec<String>, ToolRequestError> {
        let mut offered: Vec<String> = self
            .mounted
            .iter()
            .filter(|m| m.policy == Policy::Automatic)
            .map(|m| m.name.clone())
            .collect();
        let mut error = ToolRequestError::default();
        if has_material {
            offered.extend(
                (self.mounted.iter())
                    .filter(|m| m.policy == Policy::WithMaterial)
                    .map(|m| m.name.clone()),
            );
            error.unavailable.extend(
                (self.unavailable.iter())
                    .filter(|(_, policy, _)| *policy == Policy::WithMaterial)
                    .map(|(name, _, why)| (name.clone(), why.clone())),
            );
        }
        let asked = self
            .enabled
            .iter()
            .map(String::as_str)
            .chain(requested.iter().map(AsRef::as_ref))
            .map(str::trim);
        for name in asked {
            if self.is_with_material(name) {
                continue;
            }
            if self.mounted.iter().any(|m| m.name == name) {
                if !offered.iter().any(|o| o == name) {
                    offered.push(name.to_string());
                }
            } else if let Some(why) = self.why_unavailable(name) {
                if !error.unavailable.iter().any(|(n, _)| n == name) {
                    error.unavailable.push((name.to_string(), why.clone()));
                }
            } else if !error.unknown.iter().any(|n| n == name) {
                error.unknown.push(name.to_string());
            }
        }
        if error.unknown.is_empty() && error.unavailable.is_empty() {
            self.add_companions(&mut offered);
            return Ok(offered);
        }
        error.available = self.available();
        error.known = self.status().iter().map(|s| s.name.to_string()).collect();
        Err(error)
    }

    /// Every mounted [`Policy::WithTool`] tool whose leader is offered, after the offered ones.
    fn add_companions(&self, offered: &mut Vec<String>) {
        for m in &self.mounted {
            let Policy::WithTool(leader) = m.policy else {
                continue;
            };
            if offered.iter().any(|o| o == leader) && !offered.contains(&m.name) {
                offered.push(m.name.clone());
            }
        }
    }

    /// Whether `name` is offered by the turn's material alone.
    fn is_with_material(&self, name: &str) -> bool {
        self.mounted
            .iter()
            .any(|m| m.name == name && m.policy == Policy::WithMaterial)
            || (self.unavailable.iter()).any(|(n, p, _)| n == name && *p == Policy::WithMaterial)
    }

    /// Whether a turn offered `offered` needs a workspace.
    pub fn needs_workspace<S: AsRef<str>>(&self, offered: &[S]) -> bool {
        self.mounted
            .iter()
            .any(|m| m.needs_workspace && offered.iter().any(|o| o.as_ref() == m.name))
    }
}

/// `tools.disabled` names tools that are not in the catalog, or solve tools.
pub fn check_disabled(entries: &[ToolEntry], disabled: &[String]) -> Result<(), DisabledError> {
    let known: Vec<String> = entries.iter().map(|e| e.name.to_string()).collect();
    let mut error = DisabledError::default();
    for name in disabled.iter().map(|n| n.trim()) {
        if is_solve_tool(name) {
            error.solve.push(name.to_string());
        } else if !known.iter().any(|k| k == name) {
            error.unknown.push(name.to_string());
        }
    }
    if error.unknown.is_empty() && error.solve.is_empty() {
        return Ok(());
    }
    error.known = known;
    Err(error)
}

/// What is wrong with `tools.disabled`.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
pub struct DisabledError {
    /// Names no catalog entry has.
    pub unknown: Vec<String>,
    /// Solve tools, which cannot be switched off.
    pub solve: Vec<String>,
    /// Every name the catalog knows.
    pub known: Vec<String>,
}

impl fmt::Display for DisabledError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.unknown.is_empty() {
            parts.push(unknown_tools(&self.unknown, &self.known));
        }
        if !self.solve.is_empty() {
            parts.push(format!(
                "{} cannot be disabled: the solve tools ({}) are the engine's own and every turn has them",
                quoted(&self.solve),
                SOLVE_TOOL_NAMES.join(", ")
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// A turn asked for tools it cannot have.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
pub struct ToolRequestError {
    /// Names no catalog entry has.
    pub unknown: Vec<String>,
    /// Known tools that are not mounted, and why.
    pub unavailable: Vec<(String, Unavailable)>,
    /// Every name the catalog knows.
    pub known: Vec<String>,
    /// The names of the mounted tools.
    pub available: Vec<String>,
}

impl fmt::Display for ToolRequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.unknown.is_empty() {
            parts.push(unknown_tools(&self.unknown, &self.known));
        }
        for (name, why) in &self.unavailable {
            parts.push(format!(
                "the tool '{name}' is not available: {why} (available: {})",
                or_none(&self.available)
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// "unknown tool(s) 'x', 'y' (known: …)": the one wording of names no catalog entry has.
fn unknown_tools(unknown: &[String], known: &[String]) -> String {
    format!(
        "unknown {} {} (known: {})",
        plural("tool", unknown.len()),
        quoted(unknown),
        or_none(known)
    )
}

fn plural(word: &str, n: usize) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Names joined by commas, or "none".
pub fn or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

impl fmt::Debug for Deps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deps")
            .field("main_model", &self.main_model.name())
            .field(
                "reasoning_model",
                &self.reasoning_model.as_ref().map(|m| m.name()),
            )
            .field(
                "vision",
                &self.vision.as_ref().map(|m| m.as_ref().map(|m| m.name())),
            )
            .field("sandbox", &self.sandbox.as_ref().map(Sandbox::describe))
            .field("knowledge", &self.knowledge.is_ok())
            .field("pdf_child", &self.pdf_child)
            .finish_non_exhaustive()
    }
}
