//! The egress guard: which addresses a model-chosen URL may reach.
//!
//! [`classify`] decides one address: public, or [`NotPublic`] naming the range it falls in.
//! Addresses that embed an IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, Teredo, NAT64)
//! are judged by the address they embed, so `::ffff:127.0.0.1` is loopback, not "IPv6".
//! [`EgressGuard`] applies it to URLs ([`EgressGuard::vet_url`]: scheme, userinfo, a literal
//! host in any spelling the WHATWG parser accepts) and to the addresses a name resolves to
//! ([`EgressGuard::check_ip`], which the fetcher's pinned resolver calls for every address).

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};
use url::{Host, Url};

/// Why an address may not be reached: the range it is in, in words ("loopback",
/// "private (10.0.0.0/8)", "6to4 embedding of 127.0.0.1 (loopback)").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotPublic {
    ip: IpAddr,
    range: Cow<'static, str>,
}

impl NotPublic {
    fn new(ip: IpAddr, range: impl Into<Cow<'static, str>>) -> NotPublic {
        NotPublic {
            ip,
            range: range.into(),
        }
    }

    /// The address refused.
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// The range it falls in, in words.
    pub fn range(&self) -> &str {
        &self.range
    }
}

impl fmt::Display for NotPublic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.range)
    }
}

impl std::error::Error for NotPublic {}

/// The IPv4 ranges that are not the public internet, most specific first (the cloud
/// metadata address before the rest of link-local).
const V4_REFUSED: &[(Ipv4Net, &str)] = &[
    (v4net(0, 0, 0, 0, 8), "unspecified (0.0.0.0/8)"),
    (v4net(10, 0, 0, 0, 8), "private (10.0.0.0/8)"),
    (
        v4net(100, 64, 0, 0, 10),
        "carrier-grade NAT (100.64.0.0/10)",
    ),
    (v4net(127, 0, 0, 0, 8), "loopback"),
    (v4net(169, 254, 169, 254, 32), "link-local (cloud metadata)"),
    (v4net(169, 254, 0, 0, 16), "link-local (169.254.0.0/16)"),
    (v4net(172, 16, 0, 0, 12), "private (172.16.0.0/12)"),
    (v4net(192, 0, 0, 0, 24), "reserved (192.0.0.0/24)"),
    (v4net(192, 0, 2, 0, 24), "documentation (192.0.2.0/24)"),
    (
        v4net(192, 88, 99, 0, 24),
        "reserved (192.88.99.0/24, 6to4 relay)",
    ),
    (v4net(192, 168, 0, 0, 16), "private (192.168.0.0/16)"),
    (v4net(198, 18, 0, 0, 15), "benchmarking (198.18.0.0/15)"),
    (
        v4net(198, 51, 100, 0, 24),
        "documentation (198.51.100.0/24)",
    ),
    (v4net(203, 0, 113, 0, 24), "documentation (203.0.113.0/24)"),
    (v4net(224, 0, 0, 0, 4), "multicast (224.0.0.0/4)"),
    (v4net(255, 255, 255, 255, 32), "broadcast (255.255.255.255)"),
    (v4net(240, 0, 0, 0, 4), "reserved (240.0.0.0/4)"),
];

/// The IPv6 ranges refused outright (the embedding ranges are handled before these).
const V6_REFUSED: &[(Ipv6Net, &str)] = &[
    (
        v6net([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),
        "NAT64 local-use (64:ff9b:1::/48)",
    ),
    (
        v6net([0x100, 0, 0, 0, 0, 0, 0, 0], 64),
        "discard (100::/64)",
    ),
    (
        v6net([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48),
        "benchmarking (2001:2::/48)",
    ),
    (
        v6net([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28),
        "reserved (2001:10::/28, ORCHID)",
    ),
    (
        v6net([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
        "documentation (2001:db8::/32)",
    ),
    (
        v6net([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),
        "documentation (3fff::/20)",
    ),
    (
        v6net([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),
        "unique-local (fc00::/7)",
    ),
    (
        v6net([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
        "link-local (fe80::/10)",
    ),
    (
        v6net([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),
        "site-local (fec0::/10)",
    ),
    (
        v6net([0xff00, 0, 0, 0, 0, 0, 0, 0], 8),
        "multicast (ff00::/8)",
    ),
];

/// Global unicast: everything outside it that no rule above names is still not the internet.
const V6_GLOBAL_UNICAST: Ipv6Net = v6net([0x2000, 0, 0, 0, 0, 0, 0, 0], 3);

const fn v4net(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Ipv4Net {
    match Ipv4Net::new(Ipv4Addr::new(a, b, c, d), prefix) {
        Ok(net) => net,
        Err(_) => panic!("a refused IPv4 range has a prefix over 32"),
    }
}

const fn v6net(s: [u16; 8], prefix: u8) -> Ipv6Net {
    let addr = Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
    match Ipv6Net::new(addr, prefix) {
        Ok(net) => net,
        Err(_) => panic!("a refused IPv6 range has a prefix over 128"),
    }
}

/// Whether `ip` is on the public internet; if not, the range it is in.
pub fn classify(ip: IpAddr) -> Result<(), NotPublic> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4).map_err(|range| NotPublic::new(ip, range)),
        IpAddr::V6(v6) => classify_v6(v6).map_err(|range| NotPublic::new(ip, range)),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Result<(), Cow<'static, str>> {
    match V4_REFUSED.iter().find(|(net, _)| net.contains(&ip)) {
        Some((_, range)) => Err(Cow::Borrowed(*range)),
        None => Ok(()),
    }
}

/// An IPv6 address that carries an IPv4 address a packet may end up at.
#[derive(Debug, Clone, Copy)]
enum Embedding {
    Mapped,
    Compatible,
    SixToFour,
    Teredo,
    Nat64,
}

impl Embedding {
    fn name(self) -> &'static str {
        match self {
            Embedding::Mapped => "IPv4-mapped",
            Embedding::Compatible => "IPv4-compatible",
            Embedding::SixToFour => "6to4",
            Embedding::Teredo => "Teredo",
            Embedding::Nat64 => "NAT64",
        }
    }
}

/// The IPv4 address `ip` embeds, and how, if it is one of the embedding forms. (`::` and
/// `::1` are themselves, not IPv4-compatible forms: [`classify_v6`] names them first.)
fn embedded_v4(ip: Ipv6Addr) -> Option<(Embedding, Ipv4Addr)> {
    let s = ip.segments();
    let low32 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => Some((Embedding::Mapped, low32(hi, lo))),
        [0, 0, 0, 0, 0, 0, hi, lo] => Some((Embedding::Compatible, low32(hi, lo))),
        [0x2002, hi, lo, ..] => Some((Embedding::SixToFour, low32(hi, lo))),
        // Teredo's client address is the last 32 bits, inverted (RFC 4380).
        [0x2001, 0, _, _, _, _, hi, lo] => Some((Embedding::Teredo, low32(!hi, !lo))),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some((Embedding::Nat64, low32(hi, lo))),
        _ => None,
    }
}

fn classify_v6(ip: Ipv6Addr) -> Result<(), Cow<'static, str>> {
    if ip.is_unspecified() {
        return Err(Cow::Borrowed("unspecified (::)"));
    }
    if ip.is_loopback() {
        return Err(Cow::Borrowed("loopback"));
    }
    if let Some((how, v4)) = embedded_v4(ip) {
        return classify_v4(v4)
            .map_err(|range| Cow::Owned(format!("{} embedding of {v4} ({range})", how.name())));
    }
    if let Some((_, range)) = V6_REFUSED.iter().find(|(net, _)| net.contains(&ip)) {
        return Err(Cow::Borrowed(*range));
    }
    if !V6_GLOBAL_UNICAST.contains(&ip) {
        return Err(Cow::Borrowed("reserved (outside 2000::/3)"));
    }
    Ok(())
}

/// Why a URL is refused before anything is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    #[error("'{input}' is not a URL ({reason}): give a full http:// or https:// address")]
    Unparsable { input: String, reason: String },
    #[error("{url} is refused: web_fetch reads http and https URLs only, not {scheme}:")]
    Scheme { url: String, scheme: String },
    #[error(
        "{url} is refused: it carries a user name or password (user@host), which web_fetch never sends"
    )]
    Userinfo {
        /// The URL with its user name and password removed.
        url: String,
    },
    #[error("{url} is refused: it names no host")]
    NoHost { url: String },
    #[error("{url} is refused: {} is not a public address — {reason}", .reason.ip())]
    Address { url: String, reason: NotPublic },
}

/// Which addresses outbound fetches may reach: the public internet only, or (in-process
/// tests only) that and loopback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressGuard {
    loopback_allowed: bool,
}

impl Default for EgressGuard {
    fn default() -> Self {
        EgressGuard::public_only()
    }
}

impl EgressGuard {
    /// The guard every real fetch uses: public addresses only.
    pub const fn public_only() -> EgressGuard {
        EgressGuard {
            loopback_allowed: false,
        }
    }

    /// Public addresses and loopback (127.0.0.0/8 and `::1`, nothing else: not 10/8, not
    /// `::ffff:127.0.0.1`), so in-process tests can reach fixtures. Only Rust code compiled
    /// with the `test-loopback` feature can call it; no setting or argument reaches it.
    #[cfg(feature = "test-loopback")]
    pub const fn allowing_loopback_for_tests() -> EgressGuard {
        EgressGuard {
            loopback_allowed: true,
        }
    }

    /// Whether a connection to `ip` is allowed.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), NotPublic> {
        if self.loopback_allowed && is_plain_loopback(ip) {
            return Ok(());
        }
        classify(ip)
    }

    /// Parse `input` and [`vet`](EgressGuard::vet) it.
    pub fn vet_url(&self, input: &str) -> Result<Url, UrlRefused> {
        let url = Url::parse(input.trim()).map_err(|e| UrlRefused::Unparsable {
            input: shorten(input, 200),
            reason: e.to_string(),
        })?;
        self.vet(&url)?;
        Ok(url)
    }

    /// Whether `url` may be fetched, as far as can be told before resolving its name: http(s),
    /// no userinfo, and a literal IP host (in any spelling: the parser has normalised
    /// `2130706433`, `0x7f.1` and `0177.0.0.1` to 127.0.0.1) that is allowed. A name is
    /// checked when it is resolved (the fetcher's pinned resolver).
    pub fn vet(&self, url: &Url) -> Result<(), UrlRefused> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(UrlRefused::Scheme {
                url: without_userinfo(url),
                scheme: url.scheme().to_owned(),
            });
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlRefused::Userinfo {
                url: without_userinfo(url),
            });
        }
        let ip = match url.host() {
            None => {
                return Err(UrlRefused::NoHost {
                    url: url.to_string(),
                });
            }
            Some(Host::Domain(_)) => return Ok(()),
            Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        };
        self.check_ip(ip).map_err(|reason| UrlRefused::Address {
            url: url.to_string(),
            reason,
        })
    }
}

/// [`EgressGuard::vet_url`] with the public-only guard.
pub fn vet_url(input: &str) -> Result<Url, UrlRefused> {
    EgressGuard::public_only().vet_url(input)
}

/// 127.0.0.0/8 or `::1`, as written (an IPv4-mapped loopback is not let through).
fn is_plain_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    }
}

/// The URL as it may be shown: without its user name and password.
fn without_userinfo(url: &Url) -> String {
    let mut shown = url.clone();
    // Fails only for URLs that cannot have userinfo, which then have none to hide.
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

/// At most `max` characters of `text`, with an ellipsis if cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}
