//! Absolute, signed links to artifacts, for the OpenAI facade's answers.
//!
//! A chat UI in front of the facade (Open WebUI, LibreChat) shows the answer's Markdown in the
//! user's browser: an `<img src>` there cannot send the bearer token the facade's caller has.
//! So the facade hands out links that carry their own proof: `…/api/v1/artifacts/{id}/signed?
//! u=<owner>&exp=<unix seconds>&sig=<HMAC-SHA256>`, valid for one artifact of one user until
//! the expiry (`server.artifact_link_hours`). Anyone holding the link can fetch that file
//! until then, as with any shared link; nothing else opens with it.
//!
//! The links are absolute: their origin is `server.public_url` when set. Without it, the
//! request's `Host` is believed only when it names a loopback address (a `Host` header is the
//! client's to write, and a forged one would send the links — and their signatures — to
//! someone else's server); otherwise the answer lists the files by name without links.

use std::fmt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, header};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The key that signs artifact links (32 bytes). `Debug` does not show it.
#[derive(Clone)]
pub struct LinkKey([u8; 32]);

impl fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LinkKey(***)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LinkKeyError {
    #[error("the link secret is too short ({0} bytes): use at least 32 random characters")]
    TooShort(usize),
    #[error("cannot {action} the link key file {path}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the link key file {0} is not 64 hexadecimal digits: delete it to make a new one")]
    Malformed(String),
}

/// Shortest secret accepted from the environment.
const MIN_SECRET_BYTES: usize = 32;

impl LinkKey {
    /// A fresh random key (links die with the process: for tests, and as a last resort).
    pub fn random() -> Self {
        LinkKey(rand::random())
    }

    /// A key from an operator's secret (e.g. the variable named by `server.link_secret_env`,
    /// the same on every replica).
    pub fn from_secret(secret: &str) -> Result<Self, LinkKeyError> {
        let secret = secret.trim();
        if secret.len() < MIN_SECRET_BYTES {
            return Err(LinkKeyError::TooShort(secret.len()));
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(&<Sha256 as sha2::Digest>::digest(secret.as_bytes()));
        Ok(LinkKey(key))
    }

    /// The key kept in `path` (hex), made and written (mode 0600) the first time, so links
    /// survive a restart.
    pub fn load_or_create(path: &Path) -> Result<Self, LinkKeyError> {
        let shown = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let mut key = [0u8; 32];
                hex::decode_to_slice(text.trim(), &mut key)
                    .map_err(|_| LinkKeyError::Malformed(shown))?;
                Ok(LinkKey(key))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = LinkKey::random();
                write_private(path, &hex::encode(key.0)).map_err(|source| LinkKeyError::Io {
                    action: "write",
                    path: shown,
                    source,
                })?;
                Ok(key)
            }
            Err(source) => Err(LinkKeyError::Io {
                action: "read",
                path: shown,
                source,
            }),
        }
    }

    fn mac(&self, artifact_id: &str, user_id: &str, expires: u64) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        // Length-prefixed fields: no two (id, user, expiry) triples sign the same bytes.
        for field in [artifact_id.as_bytes(), user_id.as_bytes()] {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field);
        }
        mac.update(&expires.to_be_bytes());
        mac
    }

    fn sign(&self, artifact_id: &str, user_id: &str, expires: u64) -> String {
        hex::encode(
            self.mac(artifact_id, user_id, expires)
                .finalize()
                .into_bytes(),
        )
    }

    /// The signature is this key's for the triple (compared in constant time).
    fn verify(&self, artifact_id: &str, user_id: &str, expires: u64, sig: &str) -> bool {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(sig, &mut bytes).is_ok()
            && self
                .mac(artifact_id, user_id, expires)
                .verify_slice(&bytes)
                .is_ok()
    }
}

/// Create `path` with `text`, readable by its owner only, failing if it appeared meanwhile.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// The server's public origin (and path prefix), e.g. `https://solve.example.com`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl(String);

#[derive(Debug, thiserror::Error)]
#[error(
    "'{0}' is not a public URL: write the scheme and host, e.g. https://solve.example.com (a path prefix may follow; no query, no user name)"
)]
pub struct BadPublicUrl(String);

impl PublicUrl {
    pub fn parse(text: &str) -> Result<Self, BadPublicUrl> {
        let bad = || BadPublicUrl(text.to_string());
        let trimmed = text.trim().trim_end_matches('/');
        let rest = ["https://", "http://"]
            .iter()
            .find_map(|scheme| strip_prefix_ignore_case(trimmed, scheme))
            .ok_or_else(bad)?;
        let host = rest.split('/').next().unwrap_or_default();
        let plain = |c: char| c.is_ascii_alphanumeric() || "-._~:[]/%".contains(c);
        if host.is_empty() || host.contains('@') || !rest.chars().all(plain) {
            return Err(bad());
        }
        Ok(PublicUrl(trimmed.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Where this request's links point: the configured public URL, else `http://<Host>` when
/// the `Host` header names a loopback address, else nowhere.
pub fn link_origin(public_url: Option<&PublicUrl>, headers: &HeaderMap) -> Option<String> {
    if let Some(url) = public_url {
        return Some(url.as_str().to_string());
    }
    let host = headers.get(header::HOST)?.to_str().ok()?.trim();
    is_loopback_host(host).then(|| format!("http://{host}"))
}

/// `localhost`, `127.x.y.z` or `[::1]`, with an optional port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                name
            } else {
                host
            }
        }),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Signs links for one origin.
pub struct LinkSigner<'a> {
    pub key: &'a LinkKey,
    pub origin: String,
    pub ttl: Duration,
}

impl LinkSigner<'_> {
    /// An absolute link to `artifact_id` of `user_id`, valid for the signer's ttl.
    pub fn artifact_url(&self, artifact_id: &str, user_id: &str) -> String {
        let expires = unix_now().saturating_add(self.ttl.as_secs());
        let sig = self.key.sign(artifact_id, user_id, expires);
        format!(
            "{}/api/v1/artifacts/{artifact_id}/signed?u={user_id}&exp={expires}&sig={sig}",
            self.origin
        )
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why a signed link was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkRefused {
    Expired,
    BadSignature,
}

/// Check a signed link's parts against `key` and the clock.
pub fn check_link(
    key: &LinkKey,
    artifact_id: &str,
    user_id: &str,
    expires: u64,
    sig: &str,
) -> Result<(), LinkRefused> {
    if !key.verify(artifact_id, user_id, expires, sig) {
        return Err(LinkRefused::BadSignature);
    }
    if expires < unix_now() {
        return Err(LinkRefused::Expired);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_opens_one_artifact_of_one_user_until_it_expires() {
        let key = LinkKey::random();
        let later = unix_now() + 60;
        let sig = key.sign("art_1", "usr_a", later);
        assert_eq!(check_link(&key, "art_1", "usr_a", later, &sig), Ok(()));
        for (id, user, exp) in [
            ("art_2", "usr_a", later),
            ("art_1", "usr_b", later),
            ("art_1", "usr_a", later + 1),
        ] {
            assert_eq!(
                check_link(&key, id, user, exp, &sig),
                Err(LinkRefused::BadSignature)
            );
        }
        assert_eq!(
            check_link(&LinkKey::random(), "art_1", "usr_a", later, &sig),
            Err(LinkRefused::BadSignature)
        );
        assert_eq!(
            check_link(&key, "art_1", "usr_a", later, "zz"),
            Err(LinkRefused::BadSignature)
        );
        let past = unix_now() - 1;
        let old = key.sign("art_1", "usr_a", past);
        assert_eq!(
            check_link(&key, "art_1", "usr_a", past, &old),
            Err(LinkRefused::Expired)
        );
    }

    #[test]
    fn a_key_file_is_made_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/link.key");
        let made = LinkKey::load_or_create(&path).unwrap();
        let read = LinkKey::load_or_create(&path).unwrap();
        assert_eq!(made.0, read.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "nonsense").unwrap();
        assert!(matches!(
            LinkKey::load_or_create(&path),
            Err(LinkKeyError::Malformed(_))
        ));
        assert!(matches!(
            LinkKey::from_secret("short"),
            Err(LinkKeyError::TooShort(5))
        ));
        assert_eq!(format!("{made:?}"), "LinkKey(***)");
    }

    #[test]
    fn links_point_at_the_public_url_or_a_loopback_host_only() {
        let mut headers = HeaderMap::new();
        assert_eq!(link_origin(None, &headers), None);
        for (host, ok) in [
            ("127.0.0.1:8080", true),
            ("localhost:3000", true),
            ("[::1]:8080", true),
            ("localhost", true),
            ("evil.example:8080", false),
            ("10.0.0.1:80", false),
            ("localhost.evil.example", false),
        ] {
            headers.insert(header::HOST, host.parse().unwrap());
            assert_eq!(
                link_origin(None, &headers),
                ok.then(|| format!("http://{host}")),
                "{host}"
            );
        }
        let public = PublicUrl::parse("https://solve.example.com/ds/").unwrap();
        assert_eq!(
            link_origin(Some(&public), &headers).as_deref(),
            Some("https://solve.example.com/ds")
        );
        for bad in [
            "solve.example.com",
            "ftp://x",
            "https://",
            "https://u:p@host",
            "https://host/?q=1",
            "https://host/a b",
        ] {
            assert!(PublicUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
