//! The endpoint probe's verdict for the main model (`deepsolve_llm::probe`): kept per
//! endpoint and model in the user's cache directory, taken up by the main client when it is
//! made (so `ChatModel::honours` answers from it in every front end), probed by `doctor`
//! (and again when a request contradicted it), and the context window a turn gets.

use std::path::PathBuf;
use std::time::Duration;

use deepsolve_core::{Honours, Language, Texts};
use deepsolve_llm::{OpenAiClient, ProbeSpec, Verdict, WindowSource};
use deepsolve_settings::{Loaded, ProbeWhen, Settings};

use crate::models::{MainChoice, main_choice};

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

/// How long each of the probe's requests may take on first use: a small local model on a
/// slow machine needs about a minute for a plan under the full playbook.
pub const FIRST_USE_CHECK_TIMEOUT: Duration = Duration::from_secs(120);

/// The endpoint and model a first-use probe is due for (`llm.probe: first_use`, an endpoint
/// configured, no verdict kept for it or a stale one), so a front end can say why the first
/// turn waits; `None` when nothing will be probed.
pub fn first_use_due(loaded: &Loaded) -> Option<(String, String)> {
    if loaded.settings.llm.probe != ProbeWhen::FirstUse {
        return None;
    }
    let MainChoice::Endpoint { base_url, model } = main_choice(loaded, None).ok()? else {
        return None;
    };
    let kept =
        probe_file().and_then(|file| deepsolve_llm::verdicts::read(&file, &base_url, &model));
    kept.is_none_or(|v| v.stale.is_some())
        .then_some((base_url, model))
}

/// Probe `client` now when `settings` ask for it on first use and no fresh verdict is kept:
/// what the probe finds is kept and taken up, so this turn and every later process holds the
/// spine as the endpoint allows. A probe that fails leaves nothing known, and is not an
/// error here: the turn's own requests meet the same endpoint and say what is wrong.
pub async fn on_first_use(settings: &Settings, client: &OpenAiClient) {
    if settings.llm.probe != ProbeWhen::FirstUse || !client.needs_probe() {
        return;
    }
    if let Err(e) = client
        .probe(&probe_spec(Language::En, FIRST_USE_CHECK_TIMEOUT))
        .await
    {
        tracing::warn!("the endpoint probe on first use failed: {e}");
    }
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
