//! The egress guard: the classifier (named ranges, property tests over every refused range and
//! every IPv4 embedding), and the SSRF suite through the real `Fetcher` — each form refused,
//! and no fixture request arriving for the refused hop.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use deepsolve_net::egress::{EgressGuard, UrlRefused, classify, vet_url};
use deepsolve_net::fetch::{FetchError, FetchLimits, Fetcher, PinnedResolver, ResolveFailure};
use proptest::prelude::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// The range `classify` names for `text`, or "public".
fn range_of(text: &str) -> String {
    match classify(ip(text)) {
        Ok(()) => "public".into(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_refused_range_is_named() {
    let cases = [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("10.0.0.1", "private (10.0.0.0/8)"),
        ("172.16.0.1", "private (172.16.0.0/12)"),
        ("172.31.255.255", "private (172.16.0.0/12)"),
        ("192.168.1.1", "private (192.168.0.0/16)"),
        ("169.254.169.254", "link-local (cloud metadata)"),
        ("169.254.1.1", "link-local (169.254.0.0/16)"),
        ("100.64.0.1", "carrier-grade NAT (100.64.0.0/10)"),
        ("100.127.255.254", "carrier-grade NAT (100.64.0.0/10)"),
        ("0.0.0.0", "unspecified (0.0.0.0/8)"),
        ("0.1.2.3", "unspecified (0.0.0.0/8)"),
        ("224.0.0.1", "multicast (224.0.0.0/4)"),
        ("239.255.255.250", "multicast (224.0.0.0/4)"),
        ("240.0.0.1", "reserved (240.0.0.0/4)"),
        ("255.255.255.255", "broadcast (255.255.255.255)"),
        ("192.0.0.8", "reserved (192.0.0.0/24)"),
        ("192.0.2.1", "documentation (192.0.2.0/24)"),
        ("198.18.0.1", "benchmarking (198.18.0.0/15)"),
        ("198.19.255.1", "benchmarking (198.18.0.0/15)"),
        ("198.51.100.7", "documentation (198.51.100.0/24)"),
        ("203.0.113.9", "documentation (203.0.113.0/24)"),
        ("::", "unspecified (::)"),
        ("::1", "loopback"),
        (
            "::ffff:127.0.0.1",
            "IPv4-mapped embedding of 127.0.0.1 (loopback)",
        ),
        (
            "::ffff:10.1.2.3",
            "IPv4-mapped embedding of 10.1.2.3 (private (10.0.0.0/8))",
        ),
        (
            "::127.0.0.1",
            "IPv4-compatible embedding of 127.0.0.1 (loopback)",
        ),
        ("2002:7f00:1::", "6to4 embedding of 127.0.0.1 (loopback)"),
        (
            "2002:a9fe:a9fe::1",
            "6to4 embedding of 169.254.169.254 (link-local (cloud metadata))",
        ),
        // Teredo: client 127.0.0.1 is stored inverted as 80ff:fffe.
        (
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            "Teredo embedding of 127.0.0.1 (loopback)",
        ),
        (
            "64:ff9b::a00:1",
            "NAT64 embedding of 10.0.0.1 (private (10.0.0.0/8))",
        ),
        ("64:ff9b:1::1", "NAT64 local-use (64:ff9b:1::/48)"),
        ("fc00::1", "unique-local (fc00::/7)"),
        ("fd12:3456::1", "unique-local (fc00::/7)"),
        ("fe80::1", "link-local (fe80::/10)"),
        ("febf::1", "link-local (fe80::/10)"),
        ("fec0::1", "site-local (fec0::/10)"),
        ("ff02::1", "multicast (ff00::/8)"),
        ("2001:db8::1", "documentation (2001:db8::/32)"),
        ("100::1", "discard (100::/64)"),
        ("4000::1", "reserved (outside 2000::/3)"),
    ];
    for (addr, range) in cases {
        assert_eq!(range_of(addr), range, "{addr}");
    }
}

#[test]
fn public_addresses_pass() {
    for addr in [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.215.14",
        "172.15.255.255",
        "172.32.0.1",
        "100.63.255.255",
        "100.128.0.1",
        "169.253.1.1",
        "2606:4700:4700::1111",
        "2001:4860:4860::8888",
        "::ffff:8.8.8.8",
        "2002:808:808::1",
        "64:ff9b::808:808",
    ] {
        assert_eq!(range_of(addr), "public", "{addr}");
    }
}

#[test]
fn vet_url_reads_every_spelling_of_a_literal_host_as_the_address_it_is() {
    for spelling in [
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0177.0.0.1/",
        "http://0x7f000001/",
        "http://127.1/",
        "http://[::ffff:7f00:1]/",
        "HTTP://127.0.0.1./",
    ] {
        match vet_url(spelling) {
            Err(UrlRefused::Address { reason, .. }) => {
                assert!(reason.range().contains("loopback"), "{spelling}: {reason}")
            }
            other => panic!("{spelling}: {other:?}"),
        }
    }
}

#[test]
fn vet_url_refuses_userinfo_and_other_schemes_and_keeps_secrets_out_of_the_sentence() {
    let err = vet_url("http://a:hunter2@example.com/").unwrap_err();
    assert!(matches!(err, UrlRefused::Userinfo { .. }), "{err:?}");
    let text = err.to_string();
    assert!(!text.contains("hunter2") && !text.contains("a:"), "{text}");
    assert!(text.contains("user name or password"), "{text}");
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "gopher://example.com:70/1",
        "data:text/html,hi",
    ] {
        assert!(
            matches!(vet_url(url), Err(UrlRefused::Scheme { .. })),
            "{url}"
        );
    }
    assert!(matches!(
        vet_url("not a url"),
        Err(UrlRefused::Unparsable { .. })
    ));
    let accepted = vet_url(" https://example.com/a?b=c ").unwrap();
    assert_eq!(accepted.as_str(), "https://example.com/a?b=c");
}

#[test]
fn the_resolver_refuses_a_name_if_any_of_its_addresses_is_not_public() {
    let resolver = PinnedResolver::new(EgressGuard::public_only());
    let public = SocketAddr::from((Ipv4Addr::new(8, 8, 8, 8), 0));
    let private = SocketAddr::from((Ipv4Addr::new(10, 0, 0, 7), 0));
    assert!(resolver.check_all("two.example", &[public]).is_ok());
    match resolver.check_all("mixed.example", &[public, private]) {
        Err(ResolveFailure::NotPublic { host, reason }) => {
            assert_eq!(host, "mixed.example");
            assert_eq!(reason.ip(), private.ip());
        }
        other => panic!("{other:?}"),
    }
}

// ---- property tests: generated within each CIDR ----------------------------------------

/// The refused IPv4 ranges, as the issue lists them.
const V4_REFUSED: &[(&str, u8)] = &[
    ("0.0.0.0", 8),
    ("10.0.0.0", 8),
    ("100.64.0.0", 10),
    ("127.0.0.0", 8),
    ("169.254.0.0", 16),
    ("172.16.0.0", 12),
    ("192.0.0.0", 24),
    ("192.0.2.0", 24),
    ("192.168.0.0", 16),
    ("198.18.0.0", 15),
    ("198.51.100.0", 24),
    ("203.0.113.0", 24),
    ("224.0.0.0", 4),
    ("240.0.0.0", 4),
];

/// The IPv6 ranges refused outright.
const V6_REFUSED: &[(&str, u8)] = &[
    ("fc00::", 7),
    ("fe80::", 10),
    ("fec0::", 10),
    ("ff00::", 8),
    ("2001:db8::", 32),
    ("100::", 64),
];

fn in_v4(index: usize, bits: u32) -> Ipv4Addr {
    let (base, prefix) = V4_REFUSED[index % V4_REFUSED.len()];
    let base = u32::from(base.parse::<Ipv4Addr>().unwrap());
    let host_mask = u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
    Ipv4Addr::from((base & !host_mask) | (bits & host_mask))
}

fn in_v6(index: usize, bits: u128) -> Ipv6Addr {
    let (base, prefix) = V6_REFUSED[index % V6_REFUSED.len()];
    let base = u128::from(base.parse::<Ipv6Addr>().unwrap());
    let host_mask = u128::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
    Ipv6Addr::from((base & !host_mask) | (bits & host_mask))
}

/// Every way an IPv6 address carries `v4` (`noise` fills the bits the form leaves free).
fn embeddings(v4: Ipv4Addr, noise: u64) -> Vec<Ipv6Addr> {
    let v4 = u128::from(u32::from(v4));
    let noise = u128::from(noise);
    vec![
        Ipv6Addr::from((0xffff_u128 << 32) | v4), // ::ffff:v4
        Ipv6Addr::from(v4),                       // ::v4
        Ipv6Addr::from((0x2002_u128 << 112) | (v4 << 80) | (noise & 0xffff_ffff_ffff_ffff_ffff)), // 2002:v4::
        Ipv6Addr::from(
            (0x2001_0000_u128 << 96)
                | ((noise & 0xffff_ffff_ffff_ffff) << 32)
                | (!v4 & 0xffff_ffff),
        ), // Teredo
        Ipv6Addr::from((0x0064_ff9b_u128 << 96) | v4), // 64:ff9b::v4
    ]
}

proptest! {
    #[test]
    fn every_address_of_a_refused_v4_range_is_refused(index in 0usize..64, bits in any::<u32>()) {
        let addr = in_v4(index, bits);
        prop_assert!(classify(IpAddr::V4(addr)).is_err(), "{addr}");
    }

    #[test]
    fn every_address_of_a_refused_v6_range_is_refused(index in 0usize..64, bits in any::<u128>()) {
        let addr = in_v6(index, bits);
        prop_assert!(classify(IpAddr::V6(addr)).is_err(), "{addr}");
    }

    #[test]
    fn every_embedding_of_a_refused_v4_is_refused(
        index in 0usize..64,
        bits in any::<u32>(),
        noise in any::<u64>(),
    ) {
        let v4 = in_v4(index, bits);
        for v6 in embeddings(v4, noise) {
            prop_assert!(classify(IpAddr::V6(v6)).is_err(), "{v6} embeds {v4}");
        }
    }

    /// An embedding is judged exactly as the address it embeds (`::` and `::1`, which are
    /// themselves, are refused either way).
    #[test]
    fn an_embedding_is_as_public_as_what_it_embeds(v4 in any::<u32>(), noise in any::<u64>()) {
        let v4 = Ipv4Addr::from(v4);
        let public = classify(IpAddr::V4(v4)).is_ok();
        for v6 in embeddings(v4, noise) {
            prop_assert_eq!(classify(IpAddr::V6(v6)).is_ok(), public, "{} embeds {}", v6, v4);
        }
    }
}

// ---- the SSRF suite, through the real Fetcher -------------------------------------------

fn fetcher(guard: EgressGuard) -> Fetcher {
    let limits = FetchLimits {
        timeout: Duration::from_secs(10),
        ..FetchLimits::default()
    };
    Fetcher::new(guard, limits)
}

/// A fetch of `url` that `guard` must refuse before sending anything.
async fn refused(guard: EgressGuard, url: &str) -> FetchError {
    match fetcher(guard).fetch(url).await {
        Ok(page) => panic!("{url} was fetched: {}", page.final_url),
        Err(e) => {
            assert!(e.is_refusal(), "{url}: not a refusal: {e}");
            e
        }
    }
}

#[cfg(feature = "test-loopback")]
mod with_the_switch {
    use super::*;

    #[test]
    fn the_test_switch_lets_loopback_through_and_nothing_else() {
        let switch = EgressGuard::allowing_loopback_for_tests();
        for allowed in ["127.0.0.1", "127.9.8.7", "::1"] {
            assert!(switch.check_ip(ip(allowed)).is_ok(), "{allowed}");
            assert!(
                EgressGuard::public_only().check_ip(ip(allowed)).is_err(),
                "{allowed}"
            );
        }
        for refused in [
            "10.0.0.1",
            "192.168.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "::",
            "::ffff:127.0.0.1",
            "2002:7f00:1::",
            "fe80::1",
        ] {
            assert!(switch.check_ip(ip(refused)).is_err(), "{refused}");
        }
        assert_eq!(EgressGuard::default(), EgressGuard::public_only());
    }

    #[tokio::test]
    async fn the_resolver_refuses_localhost_unless_the_switch_is_on() {
        let refused = PinnedResolver::new(EgressGuard::public_only())
            .resolve_host("localhost")
            .await
            .unwrap_err();
        assert!(
            matches!(refused, ResolveFailure::NotPublic { .. }),
            "{refused}"
        );
        let addrs = PinnedResolver::new(EgressGuard::allowing_loopback_for_tests())
            .resolve_host("localhost")
            .await
            .unwrap();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }

    proptest! {
        #[test]
        fn the_switch_allows_all_of_127_slash_8_and_none_of_10_slash_8(low in any::<u32>()) {
            let switch = EgressGuard::allowing_loopback_for_tests();
            let loopback = Ipv4Addr::from((127u32 << 24) | (low & 0x00ff_ffff));
            let private = Ipv4Addr::from((10u32 << 24) | (low & 0x00ff_ffff));
            prop_assert!(switch.check_ip(IpAddr::V4(loopback)).is_ok());
            prop_assert!(switch.check_ip(IpAddr::V4(private)).is_err());
        }
    }
    use deepsolve_net::fetch::Url;
    use deepsolve_testkit::web::FixtureServer;
    use deepsolve_testkit::web::pages::{ARTICLE_PHRASE, pages_router};

    fn server() -> FixtureServer {
        FixtureServer::start(pages_router()).unwrap()
    }

    /// `{base}/redirect?to=<to>`.
    fn redirect_to(base: &str, to: &str) -> String {
        let mut url = Url::parse(&format!("{base}/redirect")).unwrap();
        url.query_pairs_mut().append_pair("to", to);
        url.to_string()
    }

    #[tokio::test]
    async fn every_loopback_spelling_is_refused_by_default_and_nothing_reaches_the_fixture() {
        let fixture = server();
        let port = fixture.addr().port();
        let public = EgressGuard::public_only();
        let cases = [
            (format!("http://127.0.0.1:{port}/article"), "loopback"),
            (format!("https://127.0.0.1:{port}/article"), "loopback"),
            (format!("http://2130706433:{port}/article"), "loopback"),
            (format!("http://0x7f.1:{port}/article"), "loopback"),
            (format!("http://0177.0.0.1:{port}/article"), "loopback"),
            (
                format!("http://[::ffff:127.0.0.1]:{port}/article"),
                "IPv4-mapped embedding of 127.0.0.1",
            ),
            (
                format!("http://[::127.0.0.1]:{port}/article"),
                "IPv4-compatible embedding of 127.0.0.1",
            ),
            (format!("http://0.0.0.0:{port}/article"), "unspecified"),
            (format!("http://[::]:{port}/article"), "unspecified"),
            (format!("http://localhost:{port}/article"), "loopback"),
            (
                format!("http://public@127.0.0.1:{port}/article"),
                "user name or password",
            ),
            (
                format!("http://a:b@127.0.0.1:{port}/article"),
                "user name or password",
            ),
        ];
        for (url, why) in &cases {
            let err = refused(public, url).await;
            let text = err.to_string();
            assert!(text.contains(why), "{url}: {text}");
        }
        assert_eq!(fixture.requests(), [], "a refused URL reached the fixture");
        // The control: the same fixture answers when loopback is allowed.
        let page = fetcher(EgressGuard::allowing_loopback_for_tests())
            .fetch(&cases[0].0)
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&page.body).contains(ARTICLE_PHRASE));
        assert_eq!(fixture.requests().len(), 1);
    }

    #[tokio::test]
    async fn the_switch_still_refuses_what_is_not_plain_loopback() {
        let fixture = server();
        let port = fixture.addr().port();
        let switch = EgressGuard::allowing_loopback_for_tests();
        for url in [
            format!("http://[::ffff:127.0.0.1]:{port}/article"),
            format!("http://0.0.0.0:{port}/article"),
            format!("http://[::]:{port}/article"),
            format!("http://public@127.0.0.1:{port}/article"),
        ] {
            refused(switch, &url).await;
        }
        assert_eq!(fixture.requests(), []);
    }

    #[tokio::test]
    async fn ipv6_loopback_is_refused_by_default() {
        let fixture =
            FixtureServer::start_on(SocketAddr::from((Ipv6Addr::LOCALHOST, 0)), pages_router())
                .unwrap();
        let url = format!("http://[::1]:{}/article", fixture.addr().port());
        let err = refused(EgressGuard::public_only(), &url).await;
        assert!(err.to_string().contains("loopback"), "{err}");
        assert_eq!(fixture.requests(), []);
        fetcher(EgressGuard::allowing_loopback_for_tests())
            .fetch(&url)
            .await
            .unwrap();
        assert_eq!(fixture.requests().len(), 1);
    }

    #[tokio::test]
    async fn a_redirect_chain_that_ends_private_is_refused_at_the_private_hop() {
        let fixture = server();
        let base = fixture.url();
        let last = redirect_to(&base, "http://10.0.0.1/admin");
        let first = redirect_to(&base, &last);
        let err = refused(EgressGuard::allowing_loopback_for_tests(), &first).await;
        assert!(matches!(err, FetchError::RedirectRefused { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("10.0.0.1") && text.contains("private (10.0.0.0/8)"),
            "{text}"
        );
        let uris: Vec<String> = fixture.requests().into_iter().map(|r| r.uri).collect();
        assert_eq!(uris.len(), 2, "{uris:?}");
        assert!(
            uris.iter().all(|u| u.starts_with("/redirect?to=")),
            "{uris:?}"
        );
    }

    #[tokio::test]
    async fn every_redirect_hop_is_vetted_again() {
        let fixture = server();
        let base = fixture.url();
        let port = fixture.addr().port();
        let switch = EgressGuard::allowing_loopback_for_tests();
        let cases = [
            (
                format!("http://[::ffff:127.0.0.1]:{port}/article"),
                "IPv4-mapped",
            ),
            (
                "http://169.254.169.254/latest/meta-data/".to_string(),
                "cloud metadata",
            ),
            ("http://[fd00::1]/".to_string(), "unique-local"),
            ("http://[fe80::1]/".to_string(), "link-local"),
            (
                "http://[2002:a00:1::]/".to_string(),
                "6to4 embedding of 10.0.0.1",
            ),
            (
                "http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/".to_string(),
                "Teredo embedding of 10.0.0.1",
            ),
            ("http://100.64.0.1/".to_string(), "carrier-grade NAT"),
            ("http://172.16.5.4/".to_string(), "private (172.16.0.0/12)"),
            (
                "http://192.168.0.1/".to_string(),
                "private (192.168.0.0/16)",
            ),
            (
                format!("http://public@127.0.0.1:{port}/article"),
                "user name or password",
            ),
            ("file:///etc/passwd".to_string(), "not file:"),
            ("gopher://127.0.0.1:70/".to_string(), "not gopher:"),
        ];
        for (i, (target, why)) in cases.iter().enumerate() {
            let err = refused(switch, &redirect_to(&base, target)).await;
            assert!(
                matches!(err, FetchError::RedirectRefused { .. }),
                "{target}: {err:?}"
            );
            assert!(err.to_string().contains(why), "{target}: {err}");
            assert_eq!(fixture.requests().len(), i + 1, "{target}: a hop too many");
        }
    }

    #[tokio::test]
    async fn a_redirect_to_a_spelled_out_loopback_is_followed_under_the_switch_only_as_loopback() {
        let fixture = server();
        let port = fixture.addr().port();
        let target = format!("http://2130706433:{port}/article");
        let page = fetcher(EgressGuard::allowing_loopback_for_tests())
            .fetch(&redirect_to(&fixture.url(), &target))
            .await
            .unwrap();
        assert_eq!(page.final_url.host_str(), Some("127.0.0.1"));
        assert_eq!(page.hops.len(), 1);
    }
}

#[tokio::test]
async fn private_and_reserved_literals_are_refused_before_connecting() {
    let cases = [
        ("http://10.0.0.1/", "private (10.0.0.0/8)"),
        ("http://10.255.255.255:8080/x", "private (10.0.0.0/8)"),
        ("http://172.16.0.1/", "private (172.16.0.0/12)"),
        ("http://172.31.255.255/", "private (172.16.0.0/12)"),
        ("http://192.168.1.1/", "private (192.168.0.0/16)"),
        (
            "http://169.254.169.254/latest/meta-data/",
            "link-local (cloud metadata)",
        ),
        ("http://100.64.0.1/", "carrier-grade NAT"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://[::1]/", "loopback"),
        (
            "http://[::ffff:127.0.0.1]/",
            "IPv4-mapped embedding of 127.0.0.1 (loopback)",
        ),
        ("http://[fc00::1]/", "unique-local (fc00::/7)"),
        ("http://[fd12:3456::1]/", "unique-local (fc00::/7)"),
        ("http://[fe80::1]/", "link-local (fe80::/10)"),
        (
            "http://[2002:7f00:1::]/",
            "6to4 embedding of 127.0.0.1 (loopback)",
        ),
        (
            "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",
            "Teredo embedding of 127.0.0.1 (loopback)",
        ),
        (
            "http://[64:ff9b::a9fe:a9fe]/",
            "NAT64 embedding of 169.254.169.254",
        ),
        ("http://224.0.0.1/", "multicast"),
        ("http://255.255.255.255/", "broadcast"),
        ("http://192.0.2.1/", "documentation"),
        ("http://198.18.0.1/", "benchmarking"),
        ("http://240.0.0.1/", "reserved (240.0.0.0/4)"),
        ("http://[fec0::1]/", "site-local"),
        ("http://[2001:db8::1]/", "documentation (2001:db8::/32)"),
        ("http://[100::1]/", "discard (100::/64)"),
        ("http://2130706433/", "loopback"),
        ("http://0x7f.1/", "loopback"),
        ("http://0177.0.0.1/", "loopback"),
    ];
    for (url, why) in cases {
        let err = refused(EgressGuard::public_only(), url).await;
        assert!(
            matches!(err, FetchError::Refused(UrlRefused::Address { .. })),
            "{url}: {err:?}"
        );
        assert!(err.to_string().contains(why), "{url}: {err}");
    }
}

#[tokio::test]
async fn other_schemes_are_refused() {
    for (url, scheme) in [
        ("file:///etc/passwd", "file"),
        ("ftp://example.com/pub/x", "ftp"),
        ("gopher://example.com:70/1", "gopher"),
        ("javascript:alert(1)", "javascript"),
    ] {
        let err = refused(EgressGuard::public_only(), url).await;
        let text = err.to_string();
        assert!(
            text.contains(&format!("not {scheme}:")) && text.contains("http and https"),
            "{url}: {text}"
        );
    }
}
