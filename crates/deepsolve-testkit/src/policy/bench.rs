//! [`FirstCodeCall`]: a one-step solve whose work is a single small `code_execution` call,
//! for measuring the first code call of a turn.

use serde_json::json;

use crate::policy::Policy;
use crate::policy::moves::{common, final_answer, finish_call, plan_call};
use crate::reply::{Reply, Turn};
use crate::request::PolicyRequest;
use crate::sse::split_chars;

/// The code the call runs.
pub const FIRST_CODE: &str = "print(1)";

/// The narration streamed (as one delta) right before the call's arguments.
pub const CODE_NARRATION: &str = "Running the code.";

/// Plans one step, calls `code_execution` with `{"code": "print(1)"}` (its arguments streamed
/// `args_chunk` characters per delta, as a model streams them, after one delta of
/// [`CODE_NARRATION`]), finishes the step with what it printed and answers. A paced, stamping
/// mock thus tells when the call was complete: the narration's stamp plus
/// [`FirstCodeCall::argument_deltas`] delta intervals.
///
/// **Expected ending:** `answered` after 4 rounds with one `code_execution` call when the turn
/// offers it; without it, 3 rounds and no call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstCodeCall {
    pub args_chunk: usize,
}

impl Default for FirstCodeCall {
    /// Four characters per delta: a few tokens' worth.
    fn default() -> Self {
        FirstCodeCall { args_chunk: 4 }
    }
}

impl FirstCodeCall {
    /// The call's arguments as streamed.
    pub fn arguments() -> String {
        json!({"code": FIRST_CODE}).to_string()
    }

    /// How many deltas the arguments take.
    pub fn argument_deltas(&self) -> usize {
        split_chars(&Self::arguments(), self.args_chunk).len()
    }
}

impl Policy for FirstCodeCall {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        let Some(plan) = req.plan() else {
            return plan_call(req, 1);
        };
        let Some(step) = plan.current() else {
            return final_answer(Some(&plan), false);
        };
        if req.offers("code_execution") && req.calls_to("code_execution") == 0 {
            let call = Turn::raw_calls(vec![("code_execution", Self::arguments())])
                .with_text(CODE_NARRATION);
            let mut style = call.style;
            style.args_chunk = self.args_chunk;
            style.text_chunk = 0;
            return Reply::Turn(call.with_style(style));
        }
        let results: Vec<_> = req
            .tool_results()
            .into_iter()
            .filter(|r| r.name.as_deref() == Some("code_execution"))
            .collect();
        finish_call(step, &results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_take_a_few_deltas() {
        assert_eq!(FirstCodeCall::arguments(), r#"{"code":"print(1)"}"#);
        assert_eq!(FirstCodeCall::default().argument_deltas(), 5);
        assert_eq!(FirstCodeCall { args_chunk: 0 }.argument_deltas(), 1);
    }
}
