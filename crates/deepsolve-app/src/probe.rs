//! The endpoint probe's verdict for the main model (`deepsolve_llm::probe`): kept per
//! endpoint and model in the user's cache directory, taken up by the main client when it is
//! made (so `ChatModel::honours` answers from it in every front end), probed by `doctor`
//! (and again when a request contradicted it), and the context window a turn gets.

use std::path::PathBuf;
use std::time::Duration;

use deepsolve_core::{Honours, Language, Texts};
use deepsolve_llm::{OpenAiClient, ProbeSpec, Verdict, WindowSource};
use deepsolve_settings::Settings;

/// Overrides where the verdicts are kept (tests, unusual installs).
pub const PROBE_FILE_ENV: &str = "DEEPSOLVE_ENDPOINT_PROBE_FILE";

/// Where verdicts are kept: [`PROBE_FILE_ENV`], else
/// `$XDG_CACHE_HOME/deepsolve/endpoint-probes.json`.
pub fn probe_file() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(PROBE_FILE_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    dirs::cache_dir().map(|dir| dir.join("deepsolve").join("endpoint-probes.json"))
}

/// Let `client` keep its verdicts in [`probe_file`] and take up the one kept for its
/// endpoint and model (stale or not; see `OpenAiClient::keep_verdicts_in`).
pub fn take_up_kept_verdict(client: &OpenAiClient) -> Option<Verdict> {
    client.keep_verdicts_in(probe_file()?)
}

/// The probe as a solve in `language` would ask it: the real playbook and solve tools.
pub fn probe_spec(language: Language, check_timeout: Duration) -> ProbeSpec {
    ProbeSpec::new(&Texts::builtin(language), &[]).with_check_timeout(check_timeout)
}

/// The verdict to use: the kept one unless it is missing, stale or `recheck` asks for a new
/// one; then a probe (kept for the next process). `Ok((verdict, probed_now))`.
pub async fn probed(
    client: &OpenAiClient,
    recheck: bool,
    check_timeout: Duration,
) -> Result<(Verdict, bool), deepsolve_core::ModelError> {
    if !recheck
        && !client.needs_probe()
        && let Some(verdict) = client.verdict()
    {
        return Ok((verdict, false));
    }
    let verdict = client
        .probe(&probe_spec(Language::En, check_timeout))
        .await?;
    Ok((verdict, true))
}

/// Where a turn's context window comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowOrigin {
    /// `llm.context_window`.
    Configured,
    /// The server said so (the probe's verdict; `Verdict::window_source` says where).
    Server,
    /// Nothing said: [`deepsolve_core::DEFAULT_CONTEXT_WINDOW`].
    Assumed,
}

/// The context window turns get: `llm.context_window` when set, else the window the server
/// says it has (`honours.context_window`, from the probe), else the default.
pub fn context_window(settings: &Settings, honours: &Honours) -> (u64, WindowOrigin) {
    if let Some(configured) = settings.llm.context_window {
        return (configured, WindowOrigin::Configured);
    }
    match honours.context_window {
        Some(server) => (server, WindowOrigin::Server),
        None => (
            deepsolve_core::DEFAULT_CONTEXT_WINDOW,
            WindowOrigin::Assumed,
        ),
    }
}

/// How `doctor` says where a window came from.
pub fn describe_origin(origin: WindowOrigin, source: Option<WindowSource>) -> String {
    match (origin, source) {
        (WindowOrigin::Configured, _) => "from llm.context_window".to_string(),
        (WindowOrigin::Server, Some(source)) => format!("from {}", source.describe()),
        (WindowOrigin::Server, None) => "from the server".to_string(),
        (WindowOrigin::Assumed, _) => {
            "assumed: the server does not say; set llm.context_window".to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_window_wins_then_the_server_s() {
        let mut settings = Settings::default();
        let server = Honours {
            context_window: Some(16_384),
            ..Honours::default()
        };
        assert_eq!(
            context_window(&settings, &server),
            (16_384, WindowOrigin::Server)
        );
        assert_eq!(
            context_window(&settings, &Honours::default()),
            (
                deepsolve_core::DEFAULT_CONTEXT_WINDOW,
                WindowOrigin::Assumed
            )
        );
        settings.llm.context_window = Some(8_192);
        assert_eq!(
            context_window(&settings, &server),
            (8_192, WindowOrigin::Configured)
        );
    }
}
