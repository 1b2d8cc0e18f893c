//! How tools reach the model and calls come back: one [`ToolProtocol`] per way of doing it
//! (`native`: the provider's tool calling; `tags`: `<tool_call>` blocks; `fence`: a fenced
//! JSON call; `code`: a fenced `python` block is a `code_execution` call; `structured`: every
//! reply constrained to a JSON call or answer; `tongyi` and `deepanalyze`: formats trained
//! into those models), and [`Wire`], the turn's choice. `auto` follows the endpoint's probe
//! ([`recommended_protocol`]); with nothing known it is native that falls back to tags once
//! when the provider says tools are unsupported.
//!
//! Every text protocol guards against results the model invents: the request stops where a
//! result would begin, and the reading cuts from there (and after a call's end) in case the
//! server ignored the stop.
//!
//! (Named `wire` rather than `protocol`: `deepsolve-protocol` is the crate of wire *types*
//! shared across processes, and `Protocol` is the user's setting this module implements.)

mod code;
mod deepanalyze;
mod fence;
pub(crate) mod history;
pub(crate) mod markup;
pub(crate) mod native;
mod structured;
pub(crate) mod tags;
mod tongyi;
mod vendors;

use crate::message::Message;
use crate::model::{Honours, Protocol, ReplySchema, ToolChoice, ToolSpec};
use crate::texts::Texts;

pub(crate) use code::first_program;
pub use markup::{MarkupError, ParsedCall, ParsedReply, parse_reply};

/// A request's protocol-specific parts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WireRequest {
    pub(crate) messages: Vec<Message>,
    /// Tools declared natively (empty when they are described in the prompt).
    pub(crate) tools: Vec<ToolSpec>,
    pub(crate) stop: Vec<String>,
    /// A JSON Schema the reply must match (structured output).
    pub(crate) response_format: Option<ReplySchema>,
}

/// One way of offering tools to a model. Adding a protocol is one module implementing this.
pub(crate) trait ToolProtocol: Send + Sync {
    /// The protocol's section of the system prompt (the tools manifest), if it has one.
    fn manifest(&self, specs: &[ToolSpec], texts: &Texts) -> Option<String>;

    /// The request for the neutral, normalised `messages`: how the history's calls and
    /// results are written, which tools are declared, where the reply must stop.
    fn request(
        &self,
        messages: Vec<Message>,
        specs: &[ToolSpec],
        tool_choice: &ToolChoice,
        texts: &Texts,
    ) -> WireRequest;

    /// Read a reply's content: reasoning, calls written as markup, invented results cut.
    /// Every protocol reads markup (vendors emit it over native requests too).
    fn read_reply(&self, content: String) -> ParsedReply {
        markup::parse_reply_owned(content)
    }

    /// Where this protocol's invented results begin, beyond the markup every protocol reads:
    /// the live view shows nothing from one of these on.
    fn live_cuts(&self) -> &'static [&'static str] {
        &[]
    }
}

static NATIVE: native::Native = native::Native;
static TAGS: tags::Tags = tags::Tags;
static FENCE: fence::Fence = fence::Fence;
static CODE: code::Code = code::Code;
static STRUCTURED: structured::Structured = structured::Structured;
static TONGYI: tongyi::Tongyi = tongyi::Tongyi;
static DEEPANALYZE: deepanalyze::DeepAnalyze = deepanalyze::DeepAnalyze;

/// The protocol `auto` uses for an endpoint that honours `honours` (the probe's verdict):
/// native tool calls where they work; else structured output where `json_schema` is honoured;
/// else the code fence (it also reads `<tool_call>` blocks). With nothing known (the default
/// [`Honours`]) it is [`Protocol::Auto`] itself: native, falling back to tags once the
/// provider says tools are unsupported.
pub fn recommended_protocol(honours: &Honours) -> Protocol {
    if honours.native_tools {
        Protocol::Native
    } else if honours.json_schema {
        Protocol::Structured
    } else if *honours == Honours::default() {
        Protocol::Auto
    } else {
        Protocol::Fence
    }
}

/// The strategy of a protocol other than `auto`.
fn strategy(protocol: Protocol) -> &'static dyn ToolProtocol {
    match protocol {
        Protocol::Native | Protocol::Auto => &NATIVE,
        Protocol::Tags => &TAGS,
        Protocol::Fence => &FENCE,
        Protocol::Code => &CODE,
        Protocol::Structured => &STRUCTURED,
        Protocol::Tongyi => &TONGYI,
        Protocol::DeepAnalyze => &DEEPANALYZE,
    }
}

/// The protocol of one turn.
pub(crate) struct Wire {
    current: &'static dyn ToolProtocol,
    /// The protocol in use (never `auto`: what `auto` resolved to).
    used: Protocol,
    /// `auto`: the protocol to fall back to once, while it has not been used.
    fallback: Option<&'static dyn ToolProtocol>,
    fell_back: bool,
}

impl Wire {
    /// The turn's protocol. `auto` follows [`recommended_protocol`] for what the endpoint
    /// honours; with nothing known it starts native (tags when the model is known to lack
    /// native tools) and may fall back to tags once.
    pub(crate) fn new(
        choice: Protocol,
        known_without_native_tools: bool,
        honours: &Honours,
    ) -> Self {
        let resolved = match choice {
            Protocol::Auto => recommended_protocol(honours),
            other => other,
        };
        let (used, fallback) = match resolved {
            Protocol::Auto if known_without_native_tools => (Protocol::Tags, None),
            Protocol::Auto => (Protocol::Native, Some(&TAGS as &'static dyn ToolProtocol)),
            // The probe saw native calls work; a refusal still switches (a stale verdict).
            Protocol::Native if choice == Protocol::Auto => {
                (Protocol::Native, Some(&TAGS as &'static dyn ToolProtocol))
            }
            other => (other, None),
        };
        Wire {
            current: strategy(used),
            used,
            fallback,
            fell_back: false,
        }
    }

    pub(crate) fn protocol(&self) -> &'static dyn ToolProtocol {
        self.current
    }

    /// The protocol in use now (after a fall-back: tags).
    pub(crate) fn used(&self) -> Protocol {
        self.used
    }

    /// A fallback protocol is there to switch to.
    pub(crate) fn can_fall_back(&self) -> bool {
        self.fallback.is_some()
    }

    /// Switch to the fallback protocol for the rest of the turn. False when there is none
    /// (not `auto`, or already switched).
    pub(crate) fn fall_back(&mut self) -> bool {
        match self.fallback.take() {
            Some(next) => {
                self.current = next;
                self.used = Protocol::Tags;
                self.fell_back = true;
                true
            }
            None => false,
        }
    }

    /// The turn found the model to lack native tool calling.
    pub(crate) fn fell_back(&self) -> bool {
        self.fell_back
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tags describe the tools in the prompt; native declares them.
    fn is_tags(wire: &Wire) -> bool {
        let texts = Texts::builtin(crate::solve::Language::En);
        wire.protocol().manifest(&[], &texts).is_some()
    }

    fn unknown() -> Honours {
        Honours::default()
    }

    #[test]
    fn auto_falls_back_once_and_only_auto_falls_back() {
        let mut auto = Wire::new(Protocol::Auto, false, &unknown());
        assert!(!is_tags(&auto));
        assert_eq!(auto.used(), Protocol::Native);
        assert!(auto.fall_back());
        assert!(is_tags(&auto));
        assert_eq!(auto.used(), Protocol::Tags);
        assert!(!auto.fall_back() && auto.fell_back());
        assert!(is_tags(&Wire::new(Protocol::Auto, true, &unknown())));
        let mut native = Wire::new(Protocol::Native, false, &unknown());
        assert!(!native.fall_back() && !native.fell_back());
        assert!(is_tags(&Wire::new(Protocol::Tags, false, &unknown())));
    }

    #[test]
    fn auto_follows_the_probe() {
        let nothing = unknown();
        assert_eq!(recommended_protocol(&nothing), Protocol::Auto);
        let native = Honours {
            native_tools: true,
            json_schema: true,
            stop_sequences: true,
            ..unknown()
        };
        assert_eq!(recommended_protocol(&native), Protocol::Native);
        let schema = Honours {
            json_schema: true,
            stop_sequences: true,
            ..unknown()
        };
        assert_eq!(recommended_protocol(&schema), Protocol::Structured);
        let plain = Honours {
            stop_sequences: true,
            context_window: Some(16_384),
            ..unknown()
        };
        assert_eq!(recommended_protocol(&plain), Protocol::Fence);
        // What a turn with `auto` then uses; only the native choice keeps its fall-back.
        for (honours, used, can_fall_back) in [
            (&nothing, Protocol::Native, true),
            (&native, Protocol::Native, true),
            (&schema, Protocol::Structured, false),
            (&plain, Protocol::Fence, false),
        ] {
            let wire = Wire::new(Protocol::Auto, false, honours);
            assert_eq!(wire.used(), used, "{honours:?}");
            assert_eq!(wire.can_fall_back(), can_fall_back, "{honours:?}");
        }
        // A protocol named in the settings wins over the probe.
        let wire = Wire::new(Protocol::Tongyi, false, &native);
        assert_eq!(wire.used(), Protocol::Tongyi);
        assert!(!wire.can_fall_back());
    }
}
