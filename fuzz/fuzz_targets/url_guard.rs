//! `vet_url` on arbitrary text: never panics; whatever it accepts is http(s) without userinfo
//! and has a public literal host or a DNS name (checked again, independently of the guard's
//! own code path, with `classify`), and its serialisation is accepted again.
#![no_main]

use std::net::IpAddr;

use deepsolve_net::egress::{classify, vet_url};
use deepsolve_net::fetch::Url;
use libfuzzer_sys::fuzz_target;
use url::Host;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(url) = vet_url(text) else {
        return;
    };
    assert!(matches!(url.scheme(), "http" | "https"), "scheme {}", url.scheme());
    assert!(url.username().is_empty() && url.password().is_none(), "userinfo in {url}");
    match url.host() {
        Some(Host::Domain(name)) => assert!(!name.is_empty(), "empty host in {url}"),
        Some(Host::Ipv4(v4)) => {
            assert!(classify(IpAddr::V4(v4)).is_ok(), "{v4} accepted");
            assert!(std_public_v4(v4), "{v4} accepted, which the standard library calls special");
        }
        Some(Host::Ipv6(v6)) => {
            assert!(classify(IpAddr::V6(v6)).is_ok(), "{v6} accepted");
            // An independent oracle: the standard library's own predicates.
            assert!(!v6.is_loopback() && !v6.is_unspecified() && !v6.is_multicast(), "{v6} accepted");
            assert!(!v6.is_unique_local() && !v6.is_unicast_link_local(), "{v6} accepted");
            if let Some(v4) = v6.to_ipv4() {
                assert!(std_public_v4(v4), "{v6} embeds {v4}, which the standard library calls special");
            }
        }
        None => panic!("no host in {url}"),
    }
    let again: Url = vet_url(url.as_str()).unwrap_or_else(|e| panic!("{url} refused on re-read: {e}"));
    assert_eq!(again, url, "not stable");
});

/// Not one of the ranges the standard library names (an oracle independent of `classify`).
fn std_public_v4(v4: std::net::Ipv4Addr) -> bool {
    !(v4.is_private()
        || v4.is_loopback()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_documentation()
        || v4.is_multicast())
}
