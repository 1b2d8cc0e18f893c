//! The round loop: limits checked, the context compacted, one model call per round, and what
//! a failed call leads to (a retry, a protocol switch, a forced answer, the end).

use super::call::CallFailure;
use super::decoding::choice_name;
use super::drafts::Drafts;
use super::turn::{Ending, TurnRun};
use crate::event::{EventKind, WarningKind};
use crate::model::{ChatRequest, ModelError, ToolChoice};
use crate::outcome::StopReason;

/// What a failed model call leads to.
enum AfterFailure {
    /// Try the round again (something was snipped, or the protocol switched).
    Retry,
    End(Ending),
}

impl TurnRun<'_> {
    pub(super) async fn rounds_loop(&mut self) -> Ending {
        loop {
            let request = match self.start_round() {
                Ok(request) => request,
                Err(ending) => return ending,
            };
            let completion = match self.call_model(&request, self.budget.deadline()).await {
                Ok(c) => c,
                Err(failure) => match self.after_failure(failure) {
                    AfterFailure::Retry => continue,
                    AfterFailure::End(ending) => return ending,
                },
            };
            self.ctx.anchor(&completion.usage);
            if self.drafting() {
                self.take_draft(completion);
                continue;
            }
            if let Some(ending) = self.absorb(completion).await {
                return ending;
            }
        }
    }

    /// Check the limits, fit the context, count the round and build its request; or the
    /// ending when no round may start.
    fn start_round(&mut self) -> Result<ChatRequest, Ending> {
        if self.cancel.is_cancelled() {
            return Err(Ending::Cancelled);
        }
        let draft = self.drafting();
        if self.decoding.owes_reasoned_call()
            || self.drafts.as_ref().is_some_and(Drafts::drawing_again)
        {
            self.budget.count_free_round();
        }
        if let Some(stop) = self.budget.exhausted() {
            return Err(Ending::Force(stop));
        }
        let round = self.budget.rounds + 1;
        let tail = self.tail(round);
        let tail_tokens = tail.as_deref().map(crate::tokens::count).unwrap_or(0);
        let estimate = self.compact_if_needed(tail_tokens);
        if estimate > self.budget.ultimatum_limit() {
            return Err(Ending::Force(StopReason::ContextLimit));
        }
        self.budget.rounds = round;
        // A draft offers no tools: text only.
        let choice = if draft {
            ToolChoice::None
        } else {
            self.decoding.choice(&self.record())
        };
        self.emit.emit(EventKind::RoundStarted {
            round,
            max_rounds: self.budget.max_rounds(),
            context_tokens: estimate,
            context_window: self.budget.window(),
            tool_choice: (self.decoding.is_on()).then(|| choice_name(&choice)),
            draft,
        });
        let max_tokens = self.reply.take_max_tokens(self.budget.max_tokens());
        if draft {
            return Ok(self.draft_request(max_tokens));
        }
        let mut request = self.request(tail, tail_tokens, choice, max_tokens);
        self.decoding.narrow(&mut request, &self.record());
        Ok(request)
    }

    /// This round asks for one of the first workings (`solve.drafts`).
    fn drafting(&self) -> bool {
        self.drafts.as_ref().is_some_and(Drafts::drawing)
    }

    fn after_failure(&mut self, failure: CallFailure) -> AfterFailure {
        let error = match failure {
            CallFailure::Cancelled => return AfterFailure::End(Ending::Cancelled),
            CallFailure::Deadline => {
                return AfterFailure::End(Ending::Force(StopReason::TurnTimeout));
            }
            CallFailure::Model(error) => error,
        };
        match error {
            ModelError::ContextLength { message } => self.after_context_length(message),
            ModelError::ToolsUnsupported { message } if self.wire.can_fall_back() => {
                self.after_tools_unsupported(&message)
            }
            e @ ModelError::StreamCut { .. } => {
                self.emit.emit(EventKind::Warning {
                    kind: WarningKind::StreamCut,
                    message: format!("{e}; salvaging with a forced answer"),
                });
                AfterFailure::End(Ending::Salvage(e))
            }
            e => AfterFailure::End(Ending::ModelFailed(e)),
        }
    }

    /// The provider found the prompt too long: snip one more output, or force the answer.
    fn after_context_length(&mut self, message: String) -> AfterFailure {
        self.emit.emit(EventKind::Warning {
            kind: WarningKind::ContextLength,
            message,
        });
        if self.ctx.snip_oldest_tool_output() {
            return AfterFailure::Retry;
        }
        AfterFailure::End(Ending::Force(StopReason::ContextLimit))
    }

    /// `auto` without native tools: the round again, in the text-tag protocol.
    fn after_tools_unsupported(&mut self, message: &str) -> AfterFailure {
        self.emit.emit(EventKind::Warning {
            kind: WarningKind::Protocol,
            message: format!(
                "the provider does not support native tool calling ({message}); switching to the text-tag protocol"
            ),
        });
        self.fall_back_to_tags();
        // The failed call does not count as a round.
        self.budget.rounds -= 1;
        AfterFailure::Retry
    }
}
