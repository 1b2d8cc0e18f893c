//! Deciding what a failure means: retry, or give up with which typed error.
//!
//! Decisions are made from the HTTP status plus the *parsed* error fields (`code`, `type`,
//! `param`, `message`), never from a substring search over a raw body: a body that merely
//! quotes the user's prompt ("…does not support tools…") must not switch tools off.

use std::time::Duration;

use deepsolve_core::{Completion, ModelError};

use crate::probe::Capability;
use crate::wire::ProviderError;

/// What one attempt's failure means.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Give up now with this error.
    Fatal(ModelError),
    /// Transient: retry if attempts and visibility allow.
    Retry(Retry),
}

#[derive(Debug)]
pub(crate) struct Retry {
    pub kind: RetryKind,
    /// Short human text for the `Retrying` delta and the final error.
    pub reason: String,
    /// The server's `Retry-After`, already capped.
    pub retry_after: Option<Duration>,
}

#[derive(Debug)]
pub(crate) enum RetryKind {
    RateLimited,
    Server(u16),
    Transport,
    Idle(Duration),
    /// 200 with nothing in it; kept so the last one can be returned when retries run out.
    Empty(Box<Completion>),
}

impl Failure {
    pub(crate) fn retry(kind: RetryKind, reason: impl Into<String>) -> Self {
        Failure::Retry(Retry {
            kind,
            reason: reason.into(),
            retry_after: None,
        })
    }
}

impl Retry {
    /// The outcome once retries are exhausted after `attempts` attempts: the typed error, or,
    /// for an empty reply, the reply itself (the loop has its own handling of empty rounds).
    pub(crate) fn exhausted(self, attempts: u32) -> Result<Completion, ModelError> {
        match self.kind {
            RetryKind::Empty(completion) => Ok(*completion),
            _ => Err(self.into_error(attempts)),
        }
    }

    /// The typed error for this failure after `attempts` attempts.
    pub(crate) fn into_error(self, attempts: u32) -> ModelError {
        let message = self.reason;
        match self.kind {
            RetryKind::RateLimited => ModelError::RateLimited { attempts, message },
            RetryKind::Server(status) => ModelError::Server {
                status,
                attempts,
                message,
            },
            RetryKind::Transport => ModelError::Transport { attempts, message },
            RetryKind::Idle(after) => ModelError::IdleTimeout { after },
            RetryKind::Empty(_) => ModelError::Protocol { message },
        }
    }
}

/// Classifies a non-success HTTP status with its parsed error payload.
pub(crate) fn classify_status(
    status: u16,
    error: &ProviderError,
    retry_after: Option<Duration>,
) -> Failure {
    let message = error.message.clone();
    let with_status = |m: &str| {
        if m.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {m}")
        }
    };
    if matches!(status, 401 | 403) {
        return Failure::Fatal(ModelError::Auth {
            status,
            message: format!(
                "the provider rejected the credentials; check the API key configured for this \
                 endpoint (provider said: {})",
                if message.is_empty() {
                    "nothing"
                } else {
                    &message
                }
            ),
        });
    }
    if status == 413 || (status >= 400 && is_context_length(error)) {
        return Failure::Fatal(ModelError::ContextLength {
            message: with_status(&message),
        });
    }
    if matches!(status, 400 | 404 | 422 | 501) && is_tools_unsupported(error) {
        return Failure::Fatal(ModelError::ToolsUnsupported { message });
    }
    if status == 429 {
        return rate_limited(error, with_status(&message), retry_after);
    }
    if (500..=599).contains(&status) {
        return Failure::Retry(Retry {
            kind: RetryKind::Server(status),
            reason: with_status(&message),
            retry_after,
        });
    }
    if (400..=499).contains(&status) {
        return Failure::Fatal(ModelError::BadRequest { status, message });
    }
    Failure::Fatal(ModelError::Protocol {
        message: format!("unexpected HTTP status {}", with_status(&message)),
    })
}

/// 429 is transient, except an exhausted quota: retrying that only wastes the user's time.
fn rate_limited(error: &ProviderError, reason: String, retry_after: Option<Duration>) -> Failure {
    if error.codes().any(|c| c == "insufficient_quota") {
        return Failure::Fatal(ModelError::RateLimited {
            attempts: 1,
            message: reason,
        });
    }
    Failure::Retry(Retry {
        kind: RetryKind::RateLimited,
        reason,
        retry_after,
    })
}

/// Classifies an `{"error": …}` that arrived inside a 200 stream: the status comes from the
/// payload when it carries one, a rate-limit code means 429, anything else counts as a server
/// error (transient).
pub(crate) fn classify_stream_error(error: &ProviderError) -> Failure {
    let rate_limited = error.codes().any(|c| c.contains("rate_limit"));
    let status = match error.status {
        Some(status) if status >= 400 => status,
        _ if rate_limited => 429,
        _ => 500,
    };
    classify_status(status, error, None)
}

/// Machine codes that mean the prompt does not fit.
const CONTEXT_CODES: [&str; 3] = [
    "context_length_exceeded",
    "exceed_context_size_error",
    "context_window_exceeded",
];

/// Phrases providers use in the message for the same condition (OpenAI, DeepSeek and vLLM:
/// "maximum context length is N tokens"; llama.cpp: "exceeds the available context size";
/// Anthropic-style gateways: "prompt is too long").
const CONTEXT_PHRASES: [&str; 8] = [
    "maximum context length",
    "context length exceeded",
    "context_length_exceeded",
    "exceeds the context",
    "exceeds the available context",
    "exceeds the maximum context",
    "context window exceeded",
    "prompt is too long",
];

pub(crate) fn is_context_length(error: &ProviderError) -> bool {
    if error.codes().any(|c| CONTEXT_CODES.contains(&c.as_str())) {
        return true;
    }
    let message = error.message.to_ascii_lowercase();
    CONTEXT_PHRASES.iter().any(|p| message.contains(p))
}

const TOOLS_CODES: [&str; 3] = [
    "tools_not_supported",
    "tool_use_not_supported",
    "function_calling_not_supported",
];

/// OpenAI's shape for "this model takes no tools": `param` names the field, `code` says it is
/// unsupported.
const UNSUPPORTED_PARAM_CODES: [&str; 2] = ["unsupported_parameter", "unsupported_value"];
const TOOL_PARAMS: [&str; 3] = ["tools", "tool_choice", "functions"];

/// Messages of servers without machine codes (Ollama: "… does not support tools"; vLLM:
/// "\"auto\" tool choice requires --enable-auto-tool-choice …"; llama.cpp: "tools param
/// requires --jinja flag").
const TOOLS_PHRASES: [&str; 7] = [
    "does not support tools",
    "--enable-auto-tool-choice",
    "tools param requires --jinja",
    "tool use is not supported",
    "tool calling is not supported",
    "tools are not supported",
    "does not support function calling",
];

pub(crate) fn is_tools_unsupported(error: &ProviderError) -> bool {
    if error.codes().any(|c| TOOLS_CODES.contains(&c.as_str())) {
        return true;
    }
    let param_is_tools = error
        .param
        .as_deref()
        .is_some_and(|p| TOOL_PARAMS.contains(&p));
    if param_is_tools
        && error
            .codes()
            .any(|c| UNSUPPORTED_PARAM_CODES.contains(&c.as_str()))
    {
        return true;
    }
    let message = error.message.to_ascii_lowercase();
    TOOLS_PHRASES.iter().any(|p| message.contains(p))
}

/// The decoding-time capability a refused request names, for a kept probe verdict to be
/// checked against: the server says tools are unsupported, or its parsed error names
/// `tool_choice`, `response_format` (or `json_schema`) or `stop`, in `param` or in its
/// message. Only a 400, 404, 422 or 501 refuses a parameter.
pub(crate) fn rejected_capability(status: u16, error: &ProviderError) -> Option<Capability> {
    if !matches!(status, 400 | 404 | 422 | 501) {
        return None;
    }
    if is_tools_unsupported(error) {
        return Some(Capability::NativeTools);
    }
    let param = error.param.as_deref().unwrap_or_default();
    let message = error.message.to_ascii_lowercase();
    let names = |word: &str| param == word || message.contains(word);
    if names("tool_choice") {
        Some(Capability::ToolChoiceNamed)
    } else if names("response_format") || names("json_schema") {
        Some(Capability::JsonSchema)
    } else if param == "stop" {
        Some(Capability::StopSequences)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(status: u16, body: &str) -> Failure {
        classify_status(status, &ProviderError::from_body(body), None)
    }

    fn fatal_kind(f: Failure) -> &'static str {
        match f {
            Failure::Fatal(e) => e.kind(),
            Failure::Retry(r) => panic!("expected fatal, got retry {r:?}"),
        }
    }

    #[test]
    fn auth_statuses_are_fatal_and_point_at_the_key() {
        match classify(401, r#"{"error":{"message":"Incorrect API key"}}"#) {
            Failure::Fatal(ModelError::Auth { status, message }) => {
                assert_eq!(status, 401);
                assert!(message.contains("check the API key"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fatal_kind(classify(403, "forbidden")), "auth");
    }

    #[test]
    fn context_length_by_code_or_message() {
        let by_code = r#"{"error":{"message":"x","code":"context_length_exceeded"}}"#;
        assert_eq!(fatal_kind(classify(400, by_code)), "context_length");
        let by_message = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400}"#;
        assert_eq!(fatal_kind(classify(400, by_message)), "context_length");
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#;
        assert_eq!(fatal_kind(classify(400, llama)), "context_length");
        assert_eq!(fatal_kind(classify(413, "")), "context_length");
    }

    #[test]
    fn tools_unsupported_by_fields() {
        let ollama = r#"{"error":{"message":"registry.ollama.ai/library/gemma:2b does not support tools","type":"api_error","param":null,"code":null}}"#;
        assert_eq!(fatal_kind(classify(400, ollama)), "tools_unsupported");
        let vllm = r#"{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(fatal_kind(classify(400, vllm)), "tools_unsupported");
        let openai = r#"{"error":{"message":"'tools' is not supported with this model.","type":"invalid_request_error","param":"tools","code":"unsupported_parameter"}}"#;
        assert_eq!(fatal_kind(classify(400, openai)), "tools_unsupported");
        let coded = r#"{"error":{"message":"nope","code":"tools_not_supported"}}"#;
        assert_eq!(fatal_kind(classify(422, coded)), "tools_unsupported");
        // A schema error in one tool is the caller's bug, not a missing capability.
        let schema = r#"{"error":{"message":"Invalid schema for function 'f'","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}"#;
        assert_eq!(fatal_kind(classify(400, schema)), "bad_request");
        // Same words outside the message field do not count.
        let quoted = r#"{"error":{"message":"invalid request"},"echo":"does not support tools"}"#;
        assert_eq!(fatal_kind(classify(400, quoted)), "bad_request");
    }

    #[test]
    fn a_refused_parameter_names_its_capability() {
        let named =
            |status, body: &str| rejected_capability(status, &ProviderError::from_body(body));
        let choice = r#"{"error":{"message":"Invalid value for 'tool_choice': unsupported","param":"tool_choice"}}"#;
        assert_eq!(named(400, choice), Some(Capability::ToolChoiceNamed));
        let format = r#"{"error":{"message":"response_format json_schema is not supported"}}"#;
        assert_eq!(named(400, format), Some(Capability::JsonSchema));
        let tools = r#"{"error":{"message":"m does not support tools"}}"#;
        assert_eq!(named(400, tools), Some(Capability::NativeTools));
        assert_eq!(
            named(400, r#"{"error":{"message":"bad","param":"stop"}}"#),
            Some(Capability::StopSequences)
        );
        assert_eq!(
            named(400, r#"{"error":{"message":"invalid messages"}}"#),
            None
        );
        assert_eq!(named(500, choice), None, "a server error refuses nothing");
    }

    #[test]
    fn transient_statuses_retry_and_quota_does_not() {
        assert!(matches!(
            classify(429, "slow down"),
            Failure::Retry(Retry {
                kind: RetryKind::RateLimited,
                ..
            })
        ));
        assert!(matches!(
            classify(503, ""),
            Failure::Retry(Retry {
                kind: RetryKind::Server(503),
                ..
            })
        ));
        let quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        assert_eq!(fatal_kind(classify(429, quota)), "rate_limited");
        assert_eq!(fatal_kind(classify(404, "no such model")), "bad_request");
    }

    #[test]
    fn stream_errors_take_their_status_from_the_payload() {
        let e = ProviderError::from_body(r#"{"error":{"message":"boom","type":"server_error"}}"#);
        assert!(matches!(
            classify_stream_error(&e),
            Failure::Retry(Retry {
                kind: RetryKind::Server(500),
                ..
            })
        ));
        let e = ProviderError::from_body(
            r#"{"error":{"message":"slow","code":"rate_limit_exceeded"}}"#,
        );
        assert!(matches!(
            classify_stream_error(&e),
            Failure::Retry(Retry {
                kind: RetryKind::RateLimited,
                ..
            })
        ));
        let e = ProviderError::from_body(
            r#"{"error":{"message":"x","code":"context_length_exceeded"}}"#,
        );
        assert_eq!(fatal_kind(classify_stream_error(&e)), "context_length");
    }
}
