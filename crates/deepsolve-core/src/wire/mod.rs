//! How tools reach the model and calls come back: one [`ToolProtocol`] per way of doing it
//! (`native`: the provider's tool calling; `tags`: a text protocol in the prompt), and
//! [`Wire`], the turn's choice — `auto` is native that falls back to tags once when the
//! provider says tools are unsupported.
//!
//! (Named `wire` rather than `protocol`: `deepsolve-protocol` is the crate of wire *types*
//! shared across processes, and `Protocol` is the user's setting this module implements.)

pub(crate) mod markup;
pub(crate) mod native;
pub(crate) mod tags;
mod vendors;

use crate::message::Message;
use crate::model::{Protocol, ToolSpec};
use crate::texts::Texts;

pub use markup::{MarkupError, ParsedCall, ParsedReply, parse_reply};

/// A request's protocol-specific parts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WireRequest {
    pub(crate) messages: Vec<Message>,
    /// Tools declared natively (empty when they are described in the prompt).
    pub(crate) tools: Vec<ToolSpec>,
    pub(crate) stop: Vec<String>,
}

/// One way of offering tools to a model. Adding a protocol is one module implementing this.
pub(crate) trait ToolProtocol: Send + Sync {
    /// The protocol's section of the system prompt (the tools manifest), if it has one.
    fn manifest(&self, specs: &[ToolSpec], texts: &Texts) -> Option<String>;

    /// The request for the neutral, normalised `messages`: how the history's calls and
    /// results are written, which tools are declared, where the reply must stop.
    fn request(&self, messages: Vec<Message>, specs: &[ToolSpec], texts: &Texts) -> WireRequest;

    /// Read a reply's content: reasoning, calls written as markup, invented results cut.
    /// Every protocol reads markup (vendors emit it over native requests too).
    fn read_reply(&self, content: String) -> ParsedReply {
        markup::parse_reply_owned(content)
    }
}

static NATIVE: native::Native = native::Native;
static TAGS: tags::Tags = tags::Tags;

/// The protocol of one turn.
pub(crate) struct Wire {
    current: &'static dyn ToolProtocol,
    /// `auto`: the protocol to fall back to once, while it has not been used.
    fallback: Option<&'static dyn ToolProtocol>,
    fell_back: bool,
}

impl Wire {
    /// The turn's protocol; `auto` starts with tags when the model is known to lack native
    /// tools.
    pub(crate) fn new(choice: Protocol, known_without_native_tools: bool) -> Self {
        let (current, fallback): (&'static dyn ToolProtocol, _) = match choice {
            Protocol::Native => (&NATIVE, None),
            Protocol::Tags => (&TAGS, None),
            Protocol::Auto if known_without_native_tools => (&TAGS, None),
            Protocol::Auto => (&NATIVE, Some(&TAGS as &'static dyn ToolProtocol)),
        };
        Wire {
            current,
            fallback,
            fell_back: false,
        }
    }

    pub(crate) fn protocol(&self) -> &'static dyn ToolProtocol {
        self.current
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

    #[test]
    fn auto_falls_back_once_and_only_auto_falls_back() {
        let mut auto = Wire::new(Protocol::Auto, false);
        assert!(!is_tags(&auto));
        assert!(auto.fall_back());
        assert!(is_tags(&auto));
        assert!(!auto.fall_back() && auto.fell_back());
        assert!(is_tags(&Wire::new(Protocol::Auto, true)));
        let mut native = Wire::new(Protocol::Native, false);
        assert!(!native.fall_back() && !native.fell_back());
        assert!(is_tags(&Wire::new(Protocol::Tags, false)));
    }
}
