//! The work tools of the solve surface and their catalog.
//!
//! # Adding a tool
//!
//! A tool is two things, in two places: its module (the `deepsolve_core::Tool` impl, its
//! playbook line in en and zh, the keys of its own settings section `tools.<name>` if it has
//! any, a `doctor` report if it has more to say than mounted or not, and a factory that builds
//! it from [`Deps`]), and its entry in [`CATALOG`] below, next to the module's `mod` line.
//! Nothing else names it: the entry's [`ToolEntry::mount`] gives the engine a tool that answers
//! `Tool::playbook_line` and `Tool::shown_argument` (the argument front ends show first, on
//! every `tool_call` event) from the entry; the front ends mount it through [`Toolset::mount`],
//! the settings loader checks its section through [`tool_sections`], and `deepsolve doctor`
//! reports it through [`Toolset::status`] and the entry's `doctor` hook.
//!
//! A tool with settings declares them as `&[deepsolve_settings::Field]` (text, env var names,
//! choices, lists of names, clamped numbers, flags, nested sections) in its entry's `section`.
//! The app hands [`tool_sections`] to the settings loader, which checks `tools.<name>` as
//! strictly as any key (in the file, `DEEPSOLVE_TOOLS__<NAME>__<KEY>`, `--set`,
//! `settings get|set`); the factory reads it as the tool's own serde struct with
//! `deps.settings.tool_settings(name)` (see `reason`'s `tools.reason.max_tokens`).
//!
//! The rule by which turns get the mounted tools is in [`toolset`].

mod cataloged;
pub mod code;
pub mod geogebra;
pub mod knowledge;
pub mod reason;
mod subcall;
pub mod toolset;
pub mod web;

pub use toolset::{
    DISABLED, Deps, DisabledError, DoctorHook, DoctorLine, Factory, PlaybookLine, Policy, Shown,
    ToolEntry, ToolRequestError, ToolStatus, Toolset, Unavailable, check_disabled, tool_sections,
};

pub use code::sandboxed::human_size;

/// Re-exported so a front end can build the knowledge tools' service without naming the crate.
pub use deepsolve_kb::Knowledge;

/// Re-exported so a front end can detect a sandbox without naming the crate.
pub use deepsolve_sandbox::{
    Limits, PythonOptions, Recheck, Sandbox, SandboxConfig, SandboxError, SandboxMode, Stopped,
};

/// The catalog: every tool deepsolve knows, in the order turns are offered them.
pub const CATALOG: &[ToolEntry] = &[
    ToolEntry {
        name: code::CODE_EXECUTION,
        policy: Policy::Automatic,
        playbook: code::python::PLAYBOOK,
        shows: Some(Shown {
            argument: "code",
            language: Some("python"),
        }),
        doctor: None,
        settings: &["solve.code_timeout_s", "sandbox.backend"],
        section: &[],
        needs_workspace: true,
        build: code::build_code_execution,
    },
    ToolEntry {
        name: code::EXEC,
        policy: Policy::Automatic,
        playbook: code::exec::PLAYBOOK,
        shows: Some(Shown {
            argument: "command",
            language: Some("bash"),
        }),
        doctor: None,
        settings: &["solve.code_timeout_s", "sandbox.backend"],
        section: &[],
        needs_workspace: true,
        build: code::build_exec,
    },
    ToolEntry {
        name: reason::REASON,
        policy: Policy::OptIn,
        playbook: reason::PLAYBOOK,
        shows: Some(Shown {
            argument: "query",
            language: None,
        }),
        doctor: None,
        settings: &[
            "tools.reason",
            "models.reason",
            "solve.max_tokens",
            "solve.temperature",
        ],
        section: reason::SETTINGS,
        needs_workspace: false,
        build: reason::build,
    },
    ToolEntry {
        name: knowledge::RAG,
        policy: Policy::WithMaterial,
        playbook: knowledge::rag::PLAYBOOK,
        shows: Some(Shown {
            argument: "query",
            language: None,
        }),
        doctor: None,
        settings: &["models.embedding", "kb"],
        section: &[],
        needs_workspace: false,
        build: knowledge::build_rag,
    },
    ToolEntry {
        name: knowledge::READ_SOURCE,
        policy: Policy::WithMaterial,
        playbook: knowledge::read_source::PLAYBOOK,
        shows: Some(Shown {
            argument: "source_id",
            language: None,
        }),
        doctor: None,
        settings: &["kb"],
        section: &[],
        needs_workspace: false,
        build: knowledge::build_read_source,
    },
    ToolEntry {
        name: web::WEB_SEARCH,
        policy: Policy::OptIn,
        playbook: web::search::PLAYBOOK,
        shows: Some(Shown {
            argument: "query",
            language: None,
        }),
        doctor: Some(web::search::doctor),
        settings: &["tools.web_search"],
        section: web::search::SETTINGS,
        needs_workspace: false,
        build: web::search::build,
    },
    ToolEntry {
        name: web::WEB_FETCH,
        policy: Policy::WithTool(web::WEB_SEARCH),
        playbook: web::fetch::PLAYBOOK,
        shows: Some(Shown {
            argument: "url",
            language: None,
        }),
        doctor: None,
        settings: &[],
        section: &[],
        needs_workspace: false,
        build: web::fetch::build,
    },
    ToolEntry {
        name: geogebra::GEOGEBRA_ANALYSIS,
        policy: Policy::OptIn,
        playbook: geogebra::PLAYBOOK,
        shows: None,
        doctor: None,
        settings: &["models.vision", "solve.max_tokens", "solve.temperature"],
        section: &[],
        needs_workspace: true,
        build: geogebra::build,
    },
];
