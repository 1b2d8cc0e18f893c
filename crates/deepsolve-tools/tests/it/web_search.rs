//! `web_search` as the catalog builds it from real settings: results numbered through the
//! turn's citations with their URLs and quoted snippets, the chain's failures in the
//! metadata (or the error), and `tools.web_search` checked strictly by the settings loader.

use std::collections::HashMap;
use std::sync::Arc;

use deepsolve_core::*;
use deepsolve_net::search::Provider;
use deepsolve_settings::{LoadOptions, Loaded, SettingsError};
use deepsolve_testkit::web::FixtureServer;
use deepsolve_testkit::web::search::{Behaviour, Vendor, VendorFixture, expected};
use deepsolve_tools::web::search::{WEB_SEARCH, WebSearchTool, search_status_with};
use serde_json::json;

/// Settings loaded through the real loader with the catalog's sections, from `yaml` and
/// `--set`s.
fn load(yaml: &str, sets: &[String]) -> Result<Loaded, SettingsError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    std::fs::write(&path, yaml).unwrap();
    deepsolve_settings::load(&LoadOptions {
        config_path: Some(path),
        sets: sets.to_vec(),
        tool_sections: deepsolve_tools::tool_sections(deepsolve_tools::CATALOG),
        ..Default::default()
    })
}

/// An environment holding `pairs`.
fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

/// `tools.web_search.<provider>.base_url=URL` for each fixture.
fn pointing_at(servers: &[(Vendor, &FixtureServer)]) -> Vec<String> {
    servers
        .iter()
        .map(|(v, s)| format!("tools.web_search.{}.base_url={}", v.name(), s.url()))
        .collect()
}

fn ctx(language: Language, citations: Arc<Citations>) -> ToolContext {
    ToolContext {
        turn_id: "t".into(),
        call_id: "c".into(),
        language,
        citations,
        ..ToolContext::default()
    }
}

#[tokio::test]
async fn results_are_numbered_after_the_turns_sources_with_urls_and_quoted_snippets() {
    let brave = VendorFixture::new(Vendor::Brave, Behaviour::Success)
        .expect_key("brave-key-XYZ")
        .start()
        .unwrap();
    let ddg = VendorFixture::new(Vendor::DuckDuckGo, Behaviour::Success)
        .start()
        .unwrap();
    let mut sets = pointing_at(&[(Vendor::Brave, &brave), (Vendor::DuckDuckGo, &ddg)]);
    sets.push("tools.web_search.provider=brave".into());
    let loaded = load("", &sets).unwrap();
    let tool = WebSearchTool::from_settings(
        &loaded.settings,
        &env(&[("BRAVE_API_KEY", "brave-key-XYZ")]),
    )
    .unwrap();

    // The turn already numbered a passage, and one of brave's results.
    let citations = Arc::new(Citations::default());
    citations.register(Source {
        title: "notes.pdf".into(),
        document_id: Some("doc1".into()),
        ..Source::default()
    });
    citations.register(Source {
        title: "seen before".into(),
        url: Some("https://brave.example/result/2".into()),
        ..Source::default()
    });
    let out = tool
        .run(
            json!({"query": "borrow checker", "max_results": 3}),
            &ctx(Language::En, citations.clone()),
        )
        .await
        .unwrap();
    assert!(out.ok);
    let want = expected(Vendor::Brave, "borrow checker", 3);
    assert_eq!(
        out.content,
        format!(
            "[3] {} — {}\n> {}\n\n[2] seen before — {}\n> {}\n\n[4] {} — {}\n> {}",
            want[0].0, want[0].1, want[0].2, want[1].1, want[1].2, want[2].0, want[2].1, want[2].2
        )
    );
    let numbers: Vec<u32> = out.sources.iter().map(|s| s.n).collect();
    assert_eq!(numbers, [3, 2, 4]);
    assert_eq!(out.sources[0].url.as_deref(), Some(want[0].1.as_str()));
    assert_eq!(out.sources[0].title, want[0].0);
    assert_eq!(out.sources[0].excerpt.as_deref(), Some(want[0].2.as_str()));
    assert_eq!(citations.all().len(), 4);
    assert_eq!(
        out.metadata,
        json!({"provider": "brave", "results": 3, "failures": []})
    );
    assert!(ddg.requests().is_empty(), "the preferred provider answered");
    let sent = &brave.requests()[0];
    assert!(sent.uri.contains("count=3"), "{}", sent.uri);
}

#[tokio::test]
async fn a_failing_provider_is_noted_in_the_metadata_and_the_next_one_answers() {
    let tavily = VendorFixture::new(Vendor::Tavily, Behaviour::RateLimited)
        .start()
        .unwrap();
    let ddg = VendorFixture::new(Vendor::DuckDuckGo, Behaviour::Success)
        .start()
        .unwrap();
    let loaded = load(
        "",
        &pointing_at(&[(Vendor::Tavily, &tavily), (Vendor::DuckDuckGo, &ddg)]),
    )
    .unwrap();
    let tool = WebSearchTool::from_settings(&loaded.settings, &env(&[("MY_TAVILY", "tvly-1")]));
    // The default variable is unset: tavily is not configured, only DuckDuckGo is asked.
    let out = tool
        .unwrap()
        .run(json!({"query": "q"}), &ctx(Language::En, Arc::default()))
        .await
        .unwrap();
    assert_eq!(out.metadata["provider"], "duckduckgo");
    assert!(tavily.requests().is_empty());

    let mut sets = pointing_at(&[(Vendor::Tavily, &tavily), (Vendor::DuckDuckGo, &ddg)]);
    sets.push("tools.web_search.tavily.api_key_env=MY_TAVILY".into());
    let loaded = load("", &sets).unwrap();
    let tool =
        WebSearchTool::from_settings(&loaded.settings, &env(&[("MY_TAVILY", "tvly-1")])).unwrap();
    let out = tool
        .run(
            json!({"query": "q", "max_results": 1}),
            &ctx(Language::En, Arc::default()),
        )
        .await
        .unwrap();
    assert_eq!(
        out.metadata,
        json!({
            "provider": "duckduckgo",
            "results": 1,
            "failures": [{"provider": "tavily", "reason": "rate limited (429)"}]
        })
    );
    assert_eq!(out.sources.len(), 1);
    assert!(
        out.content
            .starts_with("[1] duckduckgo result 1 — https://duckduckgo.example/result/1\n> ")
    );
    assert_eq!(
        tavily.requests()[0].header("authorization"),
        Some("Bearer tvly-1")
    );
}

#[tokio::test]
async fn when_every_provider_fails_the_model_is_told_each_reason_without_the_keys() {
    let zhipu = VendorFixture::new(Vendor::Zhipu, Behaviour::Unauthorized)
        .start()
        .unwrap();
    let ddg = VendorFixture::new(Vendor::DuckDuckGo, Behaviour::Unavailable)
        .start()
        .unwrap();
    let loaded = load(
        "",
        &pointing_at(&[(Vendor::Zhipu, &zhipu), (Vendor::DuckDuckGo, &ddg)]),
    )
    .unwrap();
    let tool =
        WebSearchTool::from_settings(&loaded.settings, &env(&[("ZHIPU_API_KEY", "zp-secret")]))
            .unwrap();
    let e = tool
        .run(json!({"query": "q"}), &ctx(Language::En, Arc::default()))
        .await
        .unwrap_err();
    assert!(e.is_actionable());
    assert_eq!(
        e.message(),
        "web search failed, try again later or go on without it: every search provider failed: zhipu: the key was refused (401): check ZHIPU_API_KEY; duckduckgo: the service failed (503)"
    );
    assert!(!e.message().contains("zp-secret"));
}

#[tokio::test]
async fn no_results_are_said_in_the_turns_language() {
    let ddg = VendorFixture::new(Vendor::DuckDuckGo, Behaviour::Empty)
        .start()
        .unwrap();
    let loaded = load("", &pointing_at(&[(Vendor::DuckDuckGo, &ddg)])).unwrap();
    let tool = WebSearchTool::from_settings(&loaded.settings, &env(&[])).unwrap();
    let out = tool
        .run(
            json!({"query": "xyzzy"}),
            &ctx(Language::Zh, Arc::default()),
        )
        .await
        .unwrap();
    assert!(out.ok && out.sources.is_empty());
    assert_eq!(out.content, "没有找到“xyzzy”的结果；换个说法再试");
    let out = tool
        .run(
            json!({"query": "xyzzy"}),
            &ctx(Language::En, Arc::default()),
        )
        .await
        .unwrap();
    assert_eq!(out.content, "no results for \"xyzzy\"; try other words");
    assert_eq!(out.metadata["failures"][0]["reason"], "no results");
}

#[tokio::test]
async fn max_results_defaults_to_the_setting_and_the_schema_bounds_it() {
    let serper = VendorFixture::new(Vendor::Serper, Behaviour::Success)
        .expect_key("s-1")
        .start()
        .unwrap();
    let mut sets = pointing_at(&[(Vendor::Serper, &serper)]);
    sets.push("tools.web_search.max_results=2".into());
    let loaded = load("", &sets).unwrap();
    let tool =
        WebSearchTool::from_settings(&loaded.settings, &env(&[("SERPER_API_KEY", "s-1")])).unwrap();
    let out = tool
        .run(json!({"query": "q"}), &ctx(Language::En, Arc::default()))
        .await
        .unwrap();
    assert_eq!(out.sources.len(), 2);
    let body: serde_json::Value = serde_json::from_str(&serper.requests()[0].body).unwrap();
    assert_eq!(body, json!({"q": "q", "num": 2}));
    let schema = &tool.spec().parameters;
    assert_eq!(schema["properties"]["max_results"]["minimum"], 1);
    assert_eq!(schema["properties"]["max_results"]["maximum"], 10);
    assert_eq!(schema["required"], json!(["query"]));
    assert_eq!(tool.spec().name, WEB_SEARCH);
}

#[test]
fn tools_web_search_is_checked_strictly_by_the_settings_loader() {
    // Every documented key loads, from the file and from --set.
    let yaml = "tools:\n  web_search:\n    provider: searxng\n    max_results: 7\n    searxng:\n      base_url: https://searx.example\n    brave:\n      api_key_env: MY_BRAVE\n    zhipu:\n      base_url: https://zhipu.example\n      api_key_env: ZP\n    duckduckgo:\n      base_url: https://ddg.example\n";
    let loaded = load(
        yaml,
        &["tools.web_search.bocha.api_key_env=BOCHA_KEY_2".into()],
    )
    .unwrap();
    let status = search_status_with(
        &loaded.settings,
        &env(&[
            ("MY_BRAVE", "b"),
            ("BOCHA_KEY_2", "c"),
            ("TAVILY_API_KEY", ""),
        ]),
    )
    .unwrap();
    assert_eq!(
        status.order,
        [
            Provider::Searxng,
            Provider::Brave,
            Provider::Bocha,
            Provider::DuckDuckGo
        ]
    );
    let why: Vec<(String, bool, String)> = status
        .providers
        .iter()
        .map(|s| (s.provider.to_string(), s.configured, s.why.clone()))
        .collect();
    assert_eq!(
        why,
        [
            (
                "searxng".into(),
                true,
                "instance at https://searx.example".into()
            ),
            ("brave".into(), true, "key from MY_BRAVE".into()),
            ("tavily".into(), false, "TAVILY_API_KEY is not set".into()),
            ("serper".into(), false, "SERPER_API_KEY is not set".into()),
            ("jina".into(), false, "JINA_API_KEY is not set".into()),
            ("bocha".into(), true, "key from BOCHA_KEY_2".into()),
            ("zhipu".into(), false, "ZP is not set".into()),
            (
                "duckduckgo".into(),
                true,
                "keyless HTML search, always the last resort".into()
            ),
        ]
    );
    assert!(status.providers[0].preferred);

    // An unknown key, at the top of the section or in a provider's, is refused by name.
    for set in [
        "tools.web_search.providers=brave",
        "tools.web_search.brave.api_key=sk-in-clear",
        "tools.web_search.searxng.api_key_env=SEARX",
        "tools.web_search.google.base_url=https://google.example",
    ] {
        let e = load("", &[set.into()]).unwrap_err().to_string();
        let key = set.split('=').next().unwrap();
        let last = key.rsplit('.').next().unwrap();
        assert!(e.contains(last), "{set}: {e}");
    }
    // A provider that is not one of the eight is refused with the choices.
    let e = load("", &["tools.web_search.provider=google".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("google") && e.contains("duckduckgo"), "{e}");
    // An env var name must be one.
    assert!(load("", &["tools.web_search.jina.api_key_env=not a name".into()]).is_err());

    // max_results is clamped into 1..10, with a warning.
    for (given, kept) in [("50", 10), ("0", 1), ("3", 3)] {
        let loaded = load("", &[format!("tools.web_search.max_results={given}")]).unwrap();
        let tool = WebSearchTool::from_settings(&loaded.settings, &env(&[])).unwrap();
        assert!(
            tool.spec()
                .description
                .contains(&format!("(default {kept} results)")),
            "{given}: {}",
            tool.spec().description
        );
        if given != "3" {
            assert!(
                loaded.warnings.iter().any(|w| w.contains("max_results")),
                "{:?}",
                loaded.warnings
            );
        }
    }
}

#[tokio::test]
async fn the_catalog_builds_it_from_the_default_settings() {
    let entry = deepsolve_tools::CATALOG
        .iter()
        .find(|e| e.name == WEB_SEARCH)
        .unwrap();
    assert_eq!(entry.policy, deepsolve_tools::Policy::OptIn);
    assert!(entry.section().is_some());
    let deps = crate::catalog::deps(crate::catalog::no_sandbox());
    let tool = (entry.build)(&deps).unwrap();
    assert_eq!(tool.spec().name, WEB_SEARCH);
}

#[tokio::test]
async fn a_cancelled_call_stops_waiting_for_the_provider() {
    let ddg = VendorFixture::new(
        Vendor::DuckDuckGo,
        Behaviour::Stall(std::time::Duration::from_secs(30)),
    )
    .start()
    .unwrap();
    let loaded = load("", &pointing_at(&[(Vendor::DuckDuckGo, &ddg)])).unwrap();
    let tool = WebSearchTool::from_settings(&loaded.settings, &env(&[])).unwrap();
    let ctx = ctx(Language::En, Arc::default());
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = std::time::Instant::now();
    let e = tool.run(json!({"query": "q"}), &ctx).await.unwrap_err();
    assert_eq!(e.message(), "the search was cancelled");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[tokio::test]
async fn the_calls_deadline_leaves_time_to_report_the_failures() {
    let ddg = VendorFixture::new(
        Vendor::DuckDuckGo,
        Behaviour::Stall(std::time::Duration::from_secs(30)),
    )
    .start()
    .unwrap();
    let loaded = load("", &pointing_at(&[(Vendor::DuckDuckGo, &ddg)])).unwrap();
    let tool = WebSearchTool::from_settings(&loaded.settings, &env(&[])).unwrap();
    let mut ctx = ctx(Language::En, Arc::default());
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(2500);
    ctx.deadline = Some(deadline);
    let e = tool.run(json!({"query": "q"}), &ctx).await.unwrap_err();
    assert!(
        tokio::time::Instant::now() < deadline,
        "returned before the engine's deadline"
    );
    assert!(
        e.message().contains("duckduckgo: no answer within 1."),
        "{}",
        e.message()
    );
}
