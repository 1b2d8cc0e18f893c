//! The search chain against each vendor's fixture: every provider in every answer shape, the
//! chain falling through, and no key reaching a host that is not its vendor's.

use std::time::Duration;

use deepsolve_net::search::{
    Provider, ProviderConfig, ProviderError, SearchChain, SearchConfig, SearchError,
};
use deepsolve_testkit::web::FixtureServer;
use deepsolve_testkit::web::search::{Behaviour, Vendor, VendorFixture, expected};

const QUERY: &str = "rust borrow checker";

fn provider(vendor: Vendor) -> Provider {
    vendor.name().parse().unwrap()
}

/// The key a test gives each keyed vendor: distinct, so a leak names its source.
fn key_of(vendor: Vendor) -> Option<String> {
    provider(vendor)
        .is_keyed()
        .then(|| format!("{}-key-XYZ", vendor.name()))
}

/// `vendor` pointed at `server`, with its test key.
fn configured(vendor: Vendor, server: &FixtureServer) -> ProviderConfig {
    let p = provider(vendor);
    let config = ProviderConfig::new(p).with_base_url(server.url());
    match p.default_key_env() {
        Some(env) => config.with_key(env, key_of(vendor)),
        None => config,
    }
}

fn fixture(vendor: Vendor, behaviour: Behaviour) -> FixtureServer {
    let mut fixture = VendorFixture::new(vendor, behaviour);
    if let Some(key) = key_of(vendor) {
        fixture = fixture.expect_key(key);
    }
    fixture.start().unwrap()
}

/// A chain that knows only `vendor`, at `server`.
fn chain_of(vendor: Vendor, server: &FixtureServer) -> SearchChain {
    SearchChain::new(SearchConfig::default().with_provider(configured(vendor, server)))
}

/// One provider asked directly, with `behaviour`: what it returned, and the fixture's log.
async fn ask(
    vendor: Vendor,
    behaviour: Behaviour,
) -> (
    Result<Vec<deepsolve_net::search::SearchResult>, ProviderError>,
    FixtureServer,
) {
    let server = fixture(vendor, behaviour);
    let chain = chain_of(vendor, &server);
    let found = chain.search_with(provider(vendor), QUERY, 2).await;
    (found, server)
}

#[tokio::test]
async fn every_provider_reads_its_vendors_success_shape() {
    for vendor in Vendor::ALL {
        let (found, server) = ask(vendor, Behaviour::Success).await;
        let found = found.unwrap_or_else(|e| panic!("{}: {e}", vendor.name()));
        let got: Vec<(String, String, String)> = found
            .into_iter()
            .map(|r| (r.title, r.url, r.snippet))
            .collect();
        assert_eq!(got, expected(vendor, QUERY, 2), "{}", vendor.name());
        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{}: one request", vendor.name());
        assert_eq!(requests[0].method, vendor.method().as_str());
    }
}

#[tokio::test]
async fn every_provider_reads_its_vendors_empty_shape_as_no_results() {
    for vendor in Vendor::ALL {
        let (found, _server) = ask(vendor, Behaviour::Empty).await;
        assert_eq!(
            found.unwrap_or_else(|e| panic!("{}: {e}", vendor.name())),
            vec![],
            "{}",
            vendor.name()
        );
    }
}

/// The reason every provider gives for `behaviour`.
async fn reasons(behaviour: Behaviour) -> Vec<(Vendor, String)> {
    let mut out = Vec::new();
    for vendor in Vendor::ALL {
        let (found, _server) = ask(vendor, behaviour.clone()).await;
        match found {
            Ok(results) => panic!("{}: {behaviour:?} gave {results:?}", vendor.name()),
            Err(e) => out.push((vendor, e.to_string())),
        }
    }
    out
}

#[tokio::test]
async fn a_refused_key_names_the_variable_to_check() {
    for (vendor, reason) in reasons(Behaviour::Unauthorized).await {
        match provider(vendor).default_key_env() {
            Some(env) => assert_eq!(
                reason,
                format!("the key was refused (401): check {env}"),
                "{}",
                vendor.name()
            ),
            None => assert!(
                reason.starts_with("it refused the request (401)"),
                "{reason}"
            ),
        }
    }
}

#[tokio::test]
async fn rate_limits_service_failures_and_malformed_answers_are_named() {
    for (vendor, reason) in reasons(Behaviour::RateLimited).await {
        assert_eq!(reason, "rate limited (429)", "{}", vendor.name());
    }
    for (vendor, reason) in reasons(Behaviour::Unavailable).await {
        assert_eq!(reason, "the service failed (503)", "{}", vendor.name());
    }
    for (vendor, reason) in reasons(Behaviour::Malformed).await {
        assert!(
            reason.starts_with("unreadable response: ") && reason.chars().count() < 260,
            "{}: {reason}",
            vendor.name()
        );
    }
}

#[tokio::test]
async fn a_wrong_key_is_refused_by_the_vendor_and_the_error_does_not_carry_it() {
    let server = VendorFixture::new(Vendor::Serper, Behaviour::Success)
        .expect_key("the-right-one")
        .start()
        .unwrap();
    let chain = chain_of(Vendor::Serper, &server);
    let e = chain
        .search_with(Provider::Serper, QUERY, 3)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the key was refused (401): check SERPER_API_KEY"
    );
    let sent = &server.requests()[0];
    assert_eq!(sent.header("x-api-key"), Some("serper-key-XYZ"));
}

#[tokio::test]
async fn a_keyed_provider_asked_without_a_key_sends_nothing() {
    let server = fixture(Vendor::Brave, Behaviour::Success);
    let config = SearchConfig::default()
        .with_provider(ProviderConfig::new(Provider::Brave).with_base_url(server.url()));
    let chain = SearchChain::new(config);
    let e = chain
        .search_with(Provider::Brave, QUERY, 3)
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "no key: set BRAVE_API_KEY");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_silent_provider_times_out_and_an_absent_one_is_unreachable() {
    let server = fixture(Vendor::Tavily, Behaviour::Stall(Duration::from_secs(5)));
    let config = SearchConfig {
        timeout: Duration::from_millis(300),
        ..SearchConfig::default()
    }
    .with_provider(configured(Vendor::Tavily, &server));
    let chain = SearchChain::new(config);
    let e = chain
        .search_with(Provider::Tavily, QUERY, 3)
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "no answer within 0.3 s");

    // A port nobody listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = SearchConfig::default().with_provider(
        ProviderConfig::new(Provider::Searxng).with_base_url(format!("http://127.0.0.1:{port}")),
    );
    let chain = SearchChain::new(config);
    let e = chain
        .search_with(Provider::Searxng, QUERY, 3)
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), format!("cannot reach 127.0.0.1:{port}"));
}

#[tokio::test]
async fn a_redirect_is_not_followed_so_a_custom_key_header_stays_home() {
    let elsewhere =
        FixtureServer::start(VendorFixture::new(Vendor::Brave, Behaviour::Success).router())
            .unwrap();
    let target = format!("{}/res/v1/web/search?q=x&count=3", elsewhere.url());
    let server = fixture(Vendor::Brave, Behaviour::RedirectTo(target.clone()));
    let chain = chain_of(Vendor::Brave, &server);
    let e = chain
        .search_with(Provider::Brave, QUERY, 3)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("it answered with a redirect (302) to {target}, which is not followed")
    );
    assert!(
        elsewhere.requests().is_empty(),
        "the redirect's host saw nothing"
    );
}

#[tokio::test]
async fn a_searxng_that_refuses_says_what_to_check() {
    let (found, _server) = ask(Vendor::Searxng, Behaviour::Unauthorized).await;
    assert_eq!(
        found.unwrap_err().to_string(),
        "it refused the request (401): is json in the instance's search.formats (settings.yml), and may this host use it?"
    );
}

#[tokio::test]
async fn the_calls_deadline_bounds_the_chain() {
    let tavily = fixture(Vendor::Tavily, Behaviour::Stall(Duration::from_secs(10)));
    let ddg = fixture(Vendor::DuckDuckGo, Behaviour::Success);
    let config = SearchConfig::default()
        .with_provider(configured(Vendor::Tavily, &tavily))
        .with_provider(configured(Vendor::DuckDuckGo, &ddg));
    let chain = SearchChain::new(config);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(800);
    let started = std::time::Instant::now();
    let e = chain
        .search_before(QUERY, 3, Some(deadline))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let SearchError::AllFailed(failures) = e else {
        panic!("{e:?}")
    };
    assert!(
        failures[0]
            .to_string()
            .starts_with("tavily: no answer within 0."),
        "{failures:?}"
    );
    assert_eq!(
        failures[1].to_string(),
        "duckduckgo: not asked: the call ran out of time"
    );
    assert!(ddg.requests().is_empty());
}

#[tokio::test]
async fn the_chain_falls_through_to_duckduckgo_and_records_each_failure() {
    let brave = fixture(Vendor::Brave, Behaviour::RateLimited);
    let tavily = fixture(Vendor::Tavily, Behaviour::Unavailable);
    let ddg = fixture(Vendor::DuckDuckGo, Behaviour::Success);
    let config = SearchConfig {
        preferred: Some(Provider::Brave),
        ..SearchConfig::default()
    }
    .with_provider(configured(Vendor::Brave, &brave))
    .with_provider(configured(Vendor::Tavily, &tavily))
    .with_provider(configured(Vendor::DuckDuckGo, &ddg));
    let chain = SearchChain::new(config);
    let outcome = chain.search(QUERY, 5).await.unwrap();
    assert_eq!(outcome.provider, Provider::DuckDuckGo);
    assert_eq!(outcome.results.len(), 3);
    assert_eq!(
        outcome.results[0].url,
        "https://duckduckgo.example/result/1"
    );
    let failures: Vec<String> = outcome.failures.iter().map(ToString::to_string).collect();
    assert_eq!(
        failures,
        [
            "brave: rate limited (429)",
            "tavily: the service failed (503)"
        ]
    );
    assert_eq!(brave.requests().len(), 1);
    assert_eq!(tavily.requests().len(), 1);
}

#[tokio::test]
async fn the_preferred_provider_goes_first_and_an_empty_answer_falls_through() {
    let serper = fixture(Vendor::Serper, Behaviour::Empty);
    let brave = fixture(Vendor::Brave, Behaviour::Success);
    let config = SearchConfig {
        preferred: Some(Provider::Serper),
        ..SearchConfig::default()
    }
    .with_provider(configured(Vendor::Serper, &serper))
    .with_provider(configured(Vendor::Brave, &brave));
    assert_eq!(
        config.order(),
        [Provider::Serper, Provider::Brave, Provider::DuckDuckGo]
    );
    let outcome = SearchChain::new(config).search(QUERY, 1).await.unwrap();
    assert_eq!(outcome.provider, Provider::Brave);
    assert_eq!(outcome.results.len(), 1);
    assert_eq!(outcome.failures[0].to_string(), "serper: no results");
}

#[tokio::test]
async fn when_every_provider_fails_the_error_names_each_failure() {
    let jina = fixture(Vendor::Jina, Behaviour::Unauthorized);
    let ddg = fixture(Vendor::DuckDuckGo, Behaviour::Malformed);
    let config = SearchConfig {
        preferred: Some(Provider::Searxng),
        ..SearchConfig::default()
    }
    .with_provider(configured(Vendor::Jina, &jina))
    .with_provider(configured(Vendor::DuckDuckGo, &ddg));
    let e = SearchChain::new(config).search(QUERY, 3).await.unwrap_err();
    let SearchError::AllFailed(failures) = &e else {
        panic!("{e:?}")
    };
    let who: Vec<Provider> = failures.iter().map(|f| f.provider).collect();
    assert_eq!(
        who,
        [Provider::Searxng, Provider::Jina, Provider::DuckDuckGo]
    );
    let text = e.to_string();
    assert!(text.starts_with("every search provider failed: searxng: not configured (tools.web_search.searxng.base_url is not set); jina: the key was refused (401): check JINA_API_KEY; duckduckgo: unreadable response: "), "{text}");
    assert!(!text.contains("jina-key-XYZ"));
}

#[tokio::test]
async fn no_key_reaches_another_vendors_host() {
    // Every vendor on its own port, each keyed one with its own key; all but DuckDuckGo fail
    // in some way, so every one of them is asked.
    let failing = [
        Behaviour::RateLimited,
        Behaviour::Unavailable,
        Behaviour::Empty,
        Behaviour::Malformed,
        Behaviour::Unauthorized,
        Behaviour::RedirectTo("http://127.0.0.1:9/".into()),
        Behaviour::Empty,
    ];
    let servers: Vec<(Vendor, FixtureServer)> = Vendor::ALL
        .into_iter()
        .zip(failing.into_iter().chain([Behaviour::Success]))
        .map(|(vendor, behaviour)| (vendor, fixture(vendor, behaviour)))
        .collect();
    let mut config = SearchConfig::default();
    for (vendor, server) in &servers {
        config = config.with_provider(configured(*vendor, server));
    }
    let outcome = SearchChain::new(config.clone())
        .search(QUERY, 3)
        .await
        .unwrap();
    assert_eq!(outcome.provider, Provider::DuckDuckGo);
    assert_eq!(outcome.failures.len(), 7, "{:?}", outcome.failures);

    let keys: Vec<(Vendor, String)> = Vendor::ALL
        .into_iter()
        .filter_map(|v| key_of(v).map(|k| (v, k)))
        .collect();
    assert_eq!(keys.len(), 6);
    for (vendor, server) in &servers {
        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{} was asked once", vendor.name());
        for request in &requests {
            let seen = format!(
                "{}\n{}\n{}",
                request.uri,
                request.all_header_values(),
                request.body
            );
            for (owner, key) in &keys {
                assert_eq!(
                    seen.contains(key.as_str()),
                    owner == vendor,
                    "{}'s request and {}'s key: {seen}",
                    vendor.name(),
                    owner.name()
                );
            }
        }
    }
    // Nor does any key reach the outcome or a Debug.
    let shown = format!("{outcome:?} {config:?}");
    for (_, key) in &keys {
        assert!(!shown.contains(key.as_str()), "{shown}");
    }
}

#[test]
fn status_says_which_providers_are_configured_and_why() {
    let config = SearchConfig {
        preferred: Some(Provider::Tavily),
        ..SearchConfig::default()
    }
    .with_provider(ProviderConfig::new(Provider::Searxng).with_base_url("https://searx.example/"))
    .with_provider(ProviderConfig::new(Provider::Tavily).with_key("MY_TAVILY", Some("t-1".into())))
    .with_provider(
        ProviderConfig::new(Provider::Brave).with_key("BRAVE_API_KEY", Some("  ".into())),
    );
    let status = config.status();
    let line = |p: Provider| status.iter().find(|s| s.provider == p).unwrap().clone();
    assert_eq!(status.len(), 8);
    assert!(line(Provider::Searxng).configured);
    assert_eq!(
        line(Provider::Searxng).why,
        "instance at https://searx.example/"
    );
    assert!(line(Provider::Tavily).configured && line(Provider::Tavily).preferred);
    assert_eq!(line(Provider::Tavily).why, "key from MY_TAVILY");
    assert!(!line(Provider::Brave).configured, "a blank key is no key");
    assert_eq!(line(Provider::Brave).why, "BRAVE_API_KEY is not set");
    assert_eq!(line(Provider::Zhipu).why, "ZHIPU_API_KEY is not set");
    assert!(line(Provider::DuckDuckGo).configured);
    assert_eq!(
        config.order(),
        [Provider::Tavily, Provider::Searxng, Provider::DuckDuckGo]
    );
    assert!(!format!("{config:?}").contains("t-1"));
}

#[tokio::test]
async fn an_empty_query_asks_nobody() {
    let ddg = fixture(Vendor::DuckDuckGo, Behaviour::Success);
    let chain = SearchChain::new(
        SearchConfig::default().with_provider(configured(Vendor::DuckDuckGo, &ddg)),
    );
    assert_eq!(chain.search("   ", 3).await, Err(SearchError::EmptyQuery));
    assert!(ddg.requests().is_empty());
}
