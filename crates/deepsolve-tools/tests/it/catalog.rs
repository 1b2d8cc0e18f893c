//! The catalog and its mounting rule: every entry builds the tool it names, with its own
//! playbook line; a turn gets the automatic tools, then `tools.enabled`, then what it asks
//! for; unknown and unavailable tools are refused with the names that would work.

use std::sync::Arc;

use async_trait::async_trait;
use deepsolve_core::*;
use deepsolve_settings::Settings;
use deepsolve_tools::*;

struct Silent;

#[async_trait]
impl ChatModel for Silent {
    fn name(&self) -> &str {
        "silent"
    }

    async fn complete(&self, _: &ChatRequest, _: DeltaSink<'_>) -> Result<Completion, ModelError> {
        Err(ModelError::Protocol {
            message: "not in these tests".into(),
        })
    }
}

/// Without isolation: building a code tool runs no code, and these tests run none.
async fn unsandboxed() -> Sandbox {
    Sandbox::detect(SandboxConfig::with_mode(SandboxMode::None))
        .await
        .expect("python3 for the sandbox (scripts/install-deps)")
}

pub(crate) fn deps(sandbox: Result<Sandbox, Unavailable>) -> Deps {
    let model: Arc<dyn ChatModel> = Arc::new(Silent);
    Deps {
        settings: Settings::default(),
        main_model: model.clone(),
        reasoning_model: Ok(model),
        vision: Ok(None),
        sandbox,
        knowledge: Err(Unavailable("no store in these tests".into())),
        pdf_child: None,
    }
}

pub(crate) fn no_sandbox() -> Result<Sandbox, Unavailable> {
    Err(Unavailable("bubblewrap is missing".into()))
}

#[tokio::test]
async fn every_entry_builds_the_tool_it_names_with_its_playbook_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut deps = deps(Ok(unsandboxed().await));
    deps.knowledge = Ok(crate::knowledge::service(&dir).await);
    for entry in CATALOG {
        let tool = entry
            .mount(&deps)
            .unwrap_or_else(|e| panic!("{}: {e}", entry.name));
        assert_eq!(
            tool.shown_argument(),
            entry.shows.map(deepsolve_tools::Shown::to_wire),
            "{}",
            entry.name
        );
        assert_eq!(tool.spec().name, entry.name);
        for language in [Language::En, Language::Zh] {
            let line = tool.playbook_line(language);
            assert_eq!(line, Some(entry.playbook.get(language)), "{}", entry.name);
            let named = format!("`{}`", entry.name);
            assert!(line.is_some_and(|l| l.starts_with(&named)), "{line:?}");
        }
    }
    let mut names: Vec<&str> = CATALOG.iter().map(|e| e.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), CATALOG.len(), "a name is in the catalog twice");
}

#[tokio::test]
async fn a_turn_gets_the_automatic_tools_then_what_it_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut deps = deps(Ok(unsandboxed().await));
    deps.knowledge = Ok(crate::knowledge::service(&dir).await);
    let set = Toolset::mount(CATALOG, &deps);
    assert_eq!(set.tools().len(), CATALOG.len());
    assert!(set.status().iter().all(|s| s.unavailable.is_none()));
    let automatic: Vec<String> = CATALOG
        .iter()
        .filter(|e| e.policy == Policy::Automatic)
        .map(|e| e.name.to_string())
        .collect();
    let none: &[&str] = &[];
    assert_eq!(set.for_turn(none).unwrap(), automatic);
    let opt_in: Vec<&str> = CATALOG
        .iter()
        .filter(|e| e.policy == Policy::OptIn)
        .map(|e| e.name)
        .collect();
    let asked: Vec<&str> = opt_in.iter().chain(&opt_in).copied().collect();
    let offered = set.for_turn(&asked).unwrap();
    let mut expected = automatic.clone();
    expected.extend(opt_in.iter().map(|n| n.to_string()));
    assert_eq!(
        offered,
        with_companions(expected),
        "each once, automatic first, companions last"
    );
    // Asking for an automatic tool changes nothing.
    assert_eq!(set.for_turn(&automatic).unwrap(), automatic);
    assert!(set.needs_workspace(&automatic));
    for entry in CATALOG.iter().filter(|e| e.policy == Policy::OptIn) {
        assert_eq!(set.needs_workspace(&[entry.name]), entry.needs_workspace);
    }
}

#[tokio::test]
async fn tools_enabled_in_the_settings_are_requested_by_every_turn() {
    let mut deps = deps(no_sandbox());
    let opt_in: Vec<String> = CATALOG
        .iter()
        .filter(|e| e.policy == Policy::OptIn)
        .map(|e| e.name.to_string())
        .collect();
    deps.settings.tools.enabled = opt_in.clone();
    let set = Toolset::mount(CATALOG, &deps);
    let none: &[&str] = &[];
    assert_eq!(set.for_turn(none).unwrap(), with_companions(opt_in));
}

/// `names`, then the catalog's [`Policy::WithTool`] tools whose leader is among them.
fn with_companions(mut names: Vec<String>) -> Vec<String> {
    for entry in CATALOG {
        if let Policy::WithTool(leader) = entry.policy
            && names.iter().any(|n| n == leader)
            && !names.iter().any(|n| n == entry.name)
        {
            names.push(entry.name.to_string());
        }
    }
    names
}

#[tokio::test]
async fn without_a_sandbox_the_code_tools_are_unavailable_and_say_why() {
    let set = Toolset::mount(CATALOG, &deps(no_sandbox()));
    let code_tools = [
        deepsolve_tools::code::CODE_EXECUTION,
        deepsolve_tools::code::EXEC,
    ];
    for entry in CATALOG.iter().filter(|e| code_tools.contains(&e.name)) {
        let why = set.why_unavailable(entry.name).expect("not mounted");
        assert_eq!(why.to_string(), "no sandbox: bubblewrap is missing");
        let err = set.for_turn(&[entry.name]).unwrap_err();
        assert_eq!(err.unavailable, vec![(entry.name.to_string(), why.clone())]);
        assert!(err.unknown.is_empty());
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "the tool '{}' is not available: no sandbox",
                entry.name
            )),
            "{text}"
        );
        assert!(!err.available.contains(&entry.name.to_string()));
    }
    let none: &[&str] = &[];
    let offered = set.for_turn(none).unwrap();
    assert!(
        offered.is_empty(),
        "only automatic tools here need the sandbox: {offered:?}"
    );
}

#[tokio::test]
async fn unknown_tools_are_named_with_the_known_ones() {
    let set = Toolset::mount(CATALOG, &deps(no_sandbox()));
    let err = set.for_turn(&["rm_rf", "browser", "rm_rf"]).unwrap_err();
    assert_eq!(err.unknown, ["rm_rf", "browser"]);
    let text = err.to_string();
    assert!(
        text.starts_with("unknown tools 'rm_rf', 'browser' (known: "),
        "{text}"
    );
    for entry in CATALOG {
        assert!(text.contains(entry.name), "{text}");
    }
}

#[tokio::test]
async fn a_tool_from_outside_the_catalog_follows_the_same_rule() {
    let reason = (CATALOG
        .iter()
        .find(|e| e.policy == Policy::OptIn)
        .expect("an opt-in tool")
        .build)(&deps(no_sandbox()))
    .expect("built");
    let name = reason.spec().name.clone();
    let set = Toolset::default().with_tool(reason, Policy::OptIn);
    let none: &[&str] = &[];
    assert!(set.for_turn(none).unwrap().is_empty());
    assert_eq!(
        set.for_turn(&[name.as_str()]).unwrap(),
        std::slice::from_ref(&name)
    );
    assert_eq!(set.available(), [name]);
}

#[test]
fn the_settings_an_entry_declares_exist() {
    let keys = deepsolve_settings::all_keys(&tool_sections(CATALOG));
    for entry in CATALOG {
        for declared in entry.settings {
            let section = format!("{declared}.");
            assert!(
                keys.iter()
                    .any(|k| k == declared || k.starts_with(&section)),
                "{}: '{declared}' is not a setting",
                entry.name
            );
        }
    }
}

/// A tool that only has a name, for the mounting rule's tests.
struct Named(ToolSpec);

#[async_trait]
impl Tool for Named {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn run(&self, _: serde_json::Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ok("ran"))
    }
}

fn named(name: &str) -> ToolRef {
    Arc::new(Named(ToolSpec {
        name: name.into(),
        description: String::new(),
        parameters: serde_json::json!({"type": "object"}),
    }))
}

#[test]
fn a_companion_follows_its_leader_and_comes_on_request() {
    let set = Toolset::default()
        .with_tool(named("search"), Policy::OptIn)
        .with_tool(named("fetch"), Policy::WithTool("search"))
        .with_tool(named("other"), Policy::OptIn);
    let none: &[&str] = &[];
    assert!(set.for_turn(none).unwrap().is_empty());
    assert_eq!(set.for_turn(&["search"]).unwrap(), ["search", "fetch"]);
    assert_eq!(
        set.for_turn(&["fetch", "search"]).unwrap(),
        ["fetch", "search"]
    );
    assert_eq!(set.for_turn(&["fetch"]).unwrap(), ["fetch"]);
    assert_eq!(set.for_turn(&["other"]).unwrap(), ["other"]);
    assert_eq!(Policy::WithTool("search").to_string(), "with search");
}

#[test]
fn web_fetch_comes_with_web_search() {
    let entry = CATALOG
        .iter()
        .find(|e| e.name == "web_fetch")
        .expect("web_fetch");
    assert_eq!(entry.policy, Policy::WithTool("web_search"));
    let leader = CATALOG
        .iter()
        .find(|e| e.name == "web_search")
        .expect("web_search");
    assert_eq!(leader.policy, Policy::OptIn);
}

/// Core's texts name no work tool: what one tool is for is its own playbook line.
#[test]
fn no_engine_text_names_a_catalog_tool() {
    for language in [Language::En, Language::Zh] {
        let texts = deepsolve_core::Texts::builtin(language);
        for text in deepsolve_core::Text::ALL {
            let body = texts.get(*text);
            for entry in CATALOG {
                let named = format!("`{}`", entry.name);
                assert!(
                    !body.contains(&named),
                    "{language:?} {} names {named}",
                    text.name()
                );
            }
        }
    }
}
