//! A tool's own section `tools.<tool>`, declared by the tool and handed to the loader: checked
//! as strictly as every other key through the file, `DEEPSOLVE_TOOLS__<TOOL>__<KEY>`, `--set`,
//! `settings get` and `settings set`, and read back by the tool as its own struct. The
//! declaration here is the tests' own (a web search tool as it might declare itself).

use std::fs;
use std::path::{Path, PathBuf};

use deepsolve_settings::{
    Clamp, Field, Kind, LoadOptions, Loaded, SettingsError, ToolSection, get, load, set_in_file,
};
use serde::Deserialize;
use serde_json::json;
use tempfile::TempDir;

const PROVIDERS: &[&str] = &["searxng", "brave", "duckduckgo"];
const ENDPOINT: &[Field] = &[
    Field::new("base_url", Kind::Text),
    Field::new("api_key_env", Kind::EnvName),
];
const WEB_SEARCH: ToolSection = ToolSection {
    tool: "web_search",
    fields: &[
        Field::new("provider", Kind::Choice(PROVIDERS)),
        Field::new("max_results", Kind::Number(Clamp::whole(1.0, 50.0))),
        Field::new("safe", Kind::Flag),
        Field::new("brave", Kind::Section(ENDPOINT)),
    ],
};

/// What the tool would deserialise its section into.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
struct WebSearch {
    provider: Option<String>,
    max_results: Option<u32>,
    safe: Option<bool>,
    brave: Option<Endpoint>,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
struct Endpoint {
    base_url: Option<String>,
    api_key_env: Option<String>,
}

fn file(yaml: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    fs::write(&path, yaml).unwrap();
    (dir, path)
}

fn opts(path: &Path, env: &[(&str, &str)], sets: &[&str]) -> LoadOptions {
    LoadOptions {
        config_path: Some(path.to_path_buf()),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        sets: sets.iter().map(|s| s.to_string()).collect(),
        tool_sections: vec![WEB_SEARCH],
    }
}

fn load_ok(path: &Path, env: &[(&str, &str)], sets: &[&str]) -> Loaded {
    load(&opts(path, env, sets)).unwrap()
}

fn load_err(path: &Path, env: &[(&str, &str)], sets: &[&str]) -> String {
    load(&opts(path, env, sets)).unwrap_err().to_string()
}

#[test]
fn a_valid_section_loads_and_reads_as_the_tools_struct() {
    let (_d, path) = file(
        "tools:\n  enabled: [web_search]\n  web_search:\n    provider: brave\n    \
         max_results: 8\n    safe: on\n    brave:\n      api_key_env: BRAVE_KEY\n",
    );
    let loaded = load_ok(&path, &[], &[]);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let s = &loaded.settings;
    assert_eq!(s.tools.enabled, ["web_search"]);
    let read: WebSearch = s.tool_settings("web_search").unwrap();
    assert_eq!(
        read,
        WebSearch {
            provider: Some("brave".into()),
            max_results: Some(8),
            safe: Some(true),
            brave: Some(Endpoint {
                base_url: None,
                api_key_env: Some("BRAVE_KEY".into()),
            }),
        }
    );
    assert_eq!(s.tool_section("web_search").unwrap()["max_results"], 8);
    // A tool whose section is empty gets its defaults.
    let (_d, empty) = file("");
    let none: WebSearch = load_ok(&empty, &[], &[])
        .settings
        .tool_settings("web_search")
        .unwrap();
    assert_eq!(none, WebSearch::default());
}

#[test]
fn an_unknown_key_in_a_tool_section_gets_the_nearest_key() {
    let (_d, path) = file("tools:\n  web_search:\n    max_result: 3\n");
    let e = load_err(&path, &[], &[]);
    assert_eq!(
        e,
        format!(
            "unknown setting 'tools.web_search.max_result' in {} (known in tools.web_search: \
             provider, max_results, safe, brave) — did you mean 'tools.web_search.max_results'?",
            path.display()
        )
    );
    let (_d, path) = file("tools:\n  web_search:\n    brave:\n      base_ur: http://b\n");
    let e = load_err(&path, &[], &[]);
    assert!(
        e.starts_with("unknown setting 'tools.web_search.brave.base_ur' in ")
            && e.contains("(known in tools.web_search.brave: base_url, api_key_env)")
            && e.ends_with(" — did you mean 'tools.web_search.brave.base_url'?"),
        "{e}"
    );
}

#[test]
fn an_undeclared_tool_section_is_unknown() {
    let (_d, path) = file("tools:\n  web_serch:\n    provider: brave\n");
    let e = load_err(&path, &[], &[]);
    assert!(
        e.starts_with(&format!(
            "unknown setting 'tools.web_serch' in {} (known in tools: enabled, disabled, sandbox, \
             web_search)",
            path.display()
        )) && e.ends_with(" — did you mean 'tools.web_search'?"),
        "{e}"
    );
    // Without the declaration, the section is not a setting at all.
    let (_d, path) = file("tools:\n  web_search:\n    provider: brave\n");
    let e = load(&LoadOptions {
        config_path: Some(path.clone()),
        ..LoadOptions::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("unknown setting 'tools.web_search' in ")
            && e.contains("(known in tools: enabled, disabled, sandbox)"),
        "{e}"
    );
}

#[test]
fn wrong_types_name_the_full_key_and_where_it_came_from() {
    let (_d, path) = file("tools:\n  web_search:\n    provider: bing\n");
    assert_eq!(
        load_err(&path, &[], &[]),
        format!(
            "setting 'tools.web_search.provider' in {} must be one of searxng, brave, \
             duckduckgo, got \"bing\"",
            path.display()
        )
    );
    let (_d, path) = file("");
    assert_eq!(
        load_err(
            &path,
            &[("DEEPSOLVE_TOOLS__WEB_SEARCH__MAX_RESULTS", "many")],
            &[]
        ),
        "setting 'tools.web_search.max_results' from environment variable \
         DEEPSOLVE_TOOLS__WEB_SEARCH__MAX_RESULTS must be a whole number, got \"many\""
    );
    assert_eq!(
        load_err(&path, &[], &["tools.web_search.safe=maybe"]),
        "setting 'tools.web_search.safe' in --set tools.web_search.safe=… must be true or \
         false, got \"maybe\""
    );
    let e = load_err(
        &path,
        &[],
        &["tools.web_search.brave.api_key_env=sk-abc def"],
    );
    assert!(
        e.starts_with(
            "setting 'tools.web_search.brave.api_key_env' in --set \
             tools.web_search.brave.api_key_env=… must be an environment variable name"
        ) && !e.contains("sk-abc"),
        "{e}"
    );
    let (_d, path) = file("tools:\n  web_search: 3\n");
    let e = load_err(&path, &[], &[]);
    assert!(
        e.contains("'tools.web_search'") && e.contains("a mapping"),
        "{e}"
    );
}

#[test]
fn env_and_set_values_are_typed_and_clamped() {
    let (_d, path) = file("tools:\n  web_search:\n    provider: searxng\n");
    let loaded = load_ok(
        &path,
        &[
            ("DEEPSOLVE_TOOLS__WEB_SEARCH__MAX_RESULTS", "500"),
            ("DEEPSOLVE_TOOLS__WEB_SEARCH__BRAVE__BASE_URL", "http://b"),
        ],
        &[
            "tools.web_search.provider=brave",
            "tools.web_search.safe=no",
        ],
    );
    let read: WebSearch = loaded.settings.tool_settings("web_search").unwrap();
    assert_eq!(read.provider.as_deref(), Some("brave"));
    assert_eq!(read.max_results, Some(50));
    assert_eq!(read.safe, Some(false));
    assert_eq!(
        read.brave.and_then(|b| b.base_url).as_deref(),
        Some("http://b")
    );
    assert_eq!(
        loaded.warnings,
        [
            "tools.web_search.max_results = 500 is outside 1..=50; using 50 (from environment \
          variable DEEPSOLVE_TOOLS__WEB_SEARCH__MAX_RESULTS)"
        ]
    );
    let e = load_err(
        &path,
        &[("DEEPSOLVE_TOOLS__WEB_SEARCH__PROVIDR", "brave")],
        &[],
    );
    assert!(
        e.contains("from environment variable DEEPSOLVE_TOOLS__WEB_SEARCH__PROVIDR")
            && e.ends_with(" — did you mean 'tools.web_search.provider'?"),
        "{e}"
    );
    let e = load_err(&path, &[], &["tools.web_search.providr=brave"]);
    assert!(
        e.starts_with("unknown setting 'tools.web_search.providr' in --set")
            && e.ends_with(" — did you mean 'tools.web_search.provider'?"),
        "{e}"
    );
}

#[test]
fn settings_get_shows_the_section_and_its_keys() {
    let (_d, path) = file("tools:\n  web_search:\n    provider: duckduckgo\n    max_results: 5\n");
    let loaded = load_ok(&path, &[], &[]);
    assert_eq!(
        get(&loaded, Some("tools.web_search")).unwrap(),
        json!({"provider": "duckduckgo", "max_results": 5})
    );
    assert_eq!(
        get(&loaded, Some("tools.web_search.max_results")).unwrap(),
        json!(5)
    );
    assert_eq!(
        get(&loaded, Some("tools.web_search.brave.base_url")).unwrap(),
        json!(null)
    );
    let whole = get(&loaded, None).unwrap();
    assert_eq!(whole["tools"]["web_search"]["provider"], "duckduckgo");
    assert_eq!(whole["sandbox"]["backend"], "auto");
    let e = get(&loaded, Some("tools.web_search.max_reslts"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("unknown setting 'tools.web_search.max_reslts' on the command line")
            && e.ends_with(" — did you mean 'tools.web_search.max_results'?"),
        "{e}"
    );
}

#[test]
fn settings_set_writes_a_tool_key_checked_and_clamped() {
    let (_d, path) = file("");
    let warnings = set_in_file(&path, "tools.web_search.max_results", "99", &[WEB_SEARCH]).unwrap();
    assert!(
        warnings.iter().any(|w| w.contains("using 50")),
        "{warnings:?}"
    );
    set_in_file(&path, "tools.web_search.provider", "brave", &[WEB_SEARCH]).unwrap();
    let read: WebSearch = load_ok(&path, &[], &[])
        .settings
        .tool_settings("web_search")
        .unwrap();
    assert_eq!(read.max_results, Some(50));
    assert_eq!(read.provider.as_deref(), Some("brave"));

    let before = fs::read_to_string(&path).unwrap();
    let e = set_in_file(&path, "tools.web_search.provider", "bing", &[WEB_SEARCH]).unwrap_err();
    assert!(matches!(e, SettingsError::WrongType { .. }), "{e}");
    // A file holding a tool's section is only writable by someone who knows the declaration.
    let e = set_in_file(&path, "solve.max_rounds", "3", &[]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("unknown setting 'tools.web_search'"),
        "{e}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), before);
}
