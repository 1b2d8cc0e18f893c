//! The process's exit codes, one per kind of outcome, mapped from typed errors: the model
//! client's (`ErrorKind` of the turn's error), the settings' (`SettingsError`), the app's and
//! the command line's own ([`UsageError`]), and the turn's stop reason.

use std::process::ExitCode;

use deepsolve_protocol::ErrorKind;

/// What the exit code says. Documented in `--help` ([`HELP`]) and `docs/guide.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// An answer (or a command that did what it was asked).
    Answer,
    /// No answer, or another failure.
    Failure,
    /// The command line or the settings are wrong.
    Usage,
    /// The model endpoint refused the credentials.
    Auth,
    /// The model endpoint could not be reached or is not available.
    Unavailable,
    /// The model endpoint rate-limited us.
    RateLimited,
    /// Cancelled (Ctrl-C).
    Cancelled,
}

/// The exit codes as `--help` lists them.
pub(crate) const HELP: &str = "\
Exit codes:
  0    an answer (or the command did what it was asked)
  1    no answer, or another failure
  2    usage or settings error (a wrong flag, key or value; a problem too large)
  3    the model endpoint refused the credentials (401, 403)
  4    the model endpoint is unreachable or unavailable (network, 5xx, timeouts)
  5    the model endpoint rate-limited the requests (429)
  130  cancelled (Ctrl-C)";

impl Exit {
    pub(crate) fn code(self) -> u8 {
        match self {
            Exit::Answer => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Auth => 3,
            Exit::Unavailable => 4,
            Exit::RateLimited => 5,
            Exit::Cancelled => 130,
        }
    }

    /// The exit of a turn that failed on a model error of `kind`.
    pub(crate) fn for_model_error(kind: ErrorKind) -> Exit {
        match kind {
            ErrorKind::Auth => Exit::Auth,
            ErrorKind::RateLimited => Exit::RateLimited,
            ErrorKind::Transport
            | ErrorKind::Server
            | ErrorKind::IdleTimeout
            | ErrorKind::StreamCut => Exit::Unavailable,
            _ => Exit::Failure,
        }
    }

    /// The exit of a command that failed with `error`: usage and settings errors are 2,
    /// everything else 1.
    pub(crate) fn for_error(error: &anyhow::Error) -> Exit {
        let usage = error.chain().any(|cause| {
            cause.is::<UsageError>()
                || cause.is::<deepsolve_settings::SettingsError>()
                || cause.is::<deepsolve_app::ToolRequestError>()
                || matches!(
                    cause.downcast_ref::<deepsolve_server::ServerError>(),
                    Some(deepsolve_server::ServerError::UnsafeBind(_))
                )
                || matches!(
                    cause.downcast_ref::<deepsolve_app::AppError>(),
                    Some(
                        deepsolve_app::AppError::NoModel { .. }
                            | deepsolve_app::AppError::NoModelCache
                            | deepsolve_app::AppError::Local(_)
                            | deepsolve_app::AppError::LocalNotBuilt
                            | deepsolve_app::AppError::SandboxRequired(_)
                            | deepsolve_app::AppError::Enabled(_)
                            | deepsolve_app::AppError::Disabled(_)
                    )
                )
        });
        if usage { Exit::Usage } else { Exit::Failure }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// A mistake on the command line (exit 2): no problem given, or two; an unknown turn.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(pub(crate) String);

impl UsageError {
    pub(crate) fn error(message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(UsageError(message.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_class_has_its_code() {
        assert_eq!(Exit::for_model_error(ErrorKind::Auth).code(), 3);
        assert_eq!(Exit::for_model_error(ErrorKind::Transport).code(), 4);
        assert_eq!(Exit::for_model_error(ErrorKind::Server).code(), 4);
        assert_eq!(Exit::for_model_error(ErrorKind::RateLimited).code(), 5);
        assert_eq!(Exit::for_model_error(ErrorKind::BadRequest).code(), 1);
        let usage = UsageError::error("no problem").context("solve");
        assert_eq!(Exit::for_error(&usage), Exit::Usage);
        assert_eq!(
            Exit::for_error(&anyhow::anyhow!("disk full")),
            Exit::Failure
        );
        for (exit, line) in [(Exit::Auth, "  3 "), (Exit::Cancelled, "  130")] {
            assert!(HELP.contains(line), "{exit:?}");
        }
    }
}
