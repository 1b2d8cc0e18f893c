//! The spine at decoding time (`solve.enforce`): each round, what the model may emit follows
//! from the spine's state — a `solve_plan` call before a plan, a tool call while a step is
//! open, text once every step is finished — through `tool_choice`, so the tool list and the
//! prompt's prefix never change.
//!
//! A reply may think first: a round that wants a call is asked with `auto`, and only when its
//! reply carries no call is that text kept as the model's own reasoning (appended, so the
//! prefix stays byte-stable) and the round asked again for the call itself. Forcing a call
//! from the first token starved a small model's reasoning; this way the call comes after it.
//! A model that answers the forced request with text anyway does not honour `tool_choice`:
//! the prompt and its nudges hold the spine for the rest of the turn.
//!
//! Each step has one free round; its later rounds ask for calls, and the step's result goes
//! into `solve_finish_step`. The reasoning before the plan stays for the whole turn, joined
//! to the plan's call: it is the model's first working of the whole problem, and every step
//! and the answer work from it. (Dropped once the plan was made, a right first working was
//! lost: the 1.5B model's steps then computed it again, worse.)

use super::reply::Interpreted;
use super::turn::TurnRun;
use super::vet::{Vetted, vet, writes_a_call};
use crate::config::Enforce;
use crate::dispatch::Signature;
use crate::event::{EventKind, WarningKind};
use crate::message::{Message, ToolCall};
use crate::model::{ChatRequest, FinishReason, Honours, ToolChoice};
use crate::solve::SolveRecord;
use crate::solve::is_solve_tool;
use crate::solve::spine::{SOLVE_FINISH_STEP, SOLVE_PLAN, SOLVE_REPLAN};
use crate::wire::first_program;
use crate::wire::history::{CODE_TOOL, code_arguments};

/// How the turn holds the spine, and what its last reply left due.
#[derive(Debug, Default)]
pub(super) struct Decoding {
    /// Each round's `tool_choice` follows the spine (else every round is `auto`).
    on: bool,
    /// A named `tool_choice` is honoured: the plan is asked for by name. Otherwise as a
    /// required call (llama.cpp's server, for one, reads a named choice as `auto`), which the
    /// notice in the tail and the plan-first rule steer to `solve_plan`.
    named: bool,
    /// The last reply was text where the spine wants a call: this round asks for the call.
    call_due: bool,
    /// A call had to be asked for in this turn: the model does not follow the spine on its
    /// own, and from then on each round's tail names the step to work on. A model that does
    /// follow it never sees that line, so its requests are those of the prompt alone.
    stepped_in: bool,
    /// A program written in a step's prose was run as a call (said once per turn).
    ran_written_program: bool,
    /// The step (id and goal) that has had its free round: one per step, and the step's
    /// later rounds ask for calls. A small model given a free round after each result
    /// wrote the same reasoning again, round after round (the 1.5B model copied one reply
    /// six times until the repetition guard ended the turn).
    thought_step: Option<(String, String)>,
    /// The reasoning kept now came before the plan: the message that joins it to the plan's
    /// call stays, with the call's result, for the rest of the turn (no fold drops it), so
    /// every step and the answer work from it.
    reasoning_before_plan: bool,
    /// What the round being answered admits, where a narrowed required call went out as
    /// plain `required` (`ToolChoice::Among`: llama.cpp's server, for one, then lets the model
    /// call any tool offered).
    admitted: Option<Vec<String>>,
    /// The last reply called only outside what its round admitted: the next round offers
    /// just the tools it admits (one prefill of the prompt from the tools on, paid only then).
    narrow_list_next: bool,
    /// This round's tool list was narrowed to what it admits.
    list_narrowed: bool,
    /// The answer round's reply was a call, set aside: the next round is the answer round
    /// again, offering no tools.
    bare_answer_next: bool,
    /// The answer round was asked offering no tools (once a turn).
    bare_answer_asked: bool,
    /// The model called `solve_plan` or `solve_replan` where a round admitted only the step's
    /// tools: from then on the turn's requests offer neither (one prefill of the prompt from
    /// the tools on, paid once; the list is stable again after it).
    plan_tools_withdrawn: bool,
    /// The open step's work calls so far (the step, and each call's signature).
    step_work: Option<((String, String), Vec<Signature>)>,
    /// A work call of the open step was made again: the step's next rounds admit only
    /// `solve_finish_step`.
    finish_due: bool,
}

/// Whether `enforce` holds the spine at decoding time for a model that honours `honours`.
/// A required call is what it needs (a named one only spares the plan's call a choice).
pub(super) fn enforced(enforce: Enforce, honours: &Honours) -> bool {
    match enforce {
        Enforce::Decoding => true,
        Enforce::Prompt => false,
        Enforce::Auto => honours.tool_choice_required,
    }
}

impl Decoding {
    pub(super) fn new(on: bool, named: bool) -> Self {
        Decoding {
            on,
            named,
            call_due: false,
            stepped_in: false,
            ran_written_program: false,
            thought_step: None,
            reasoning_before_plan: false,
            admitted: None,
            narrow_list_next: false,
            list_narrowed: false,
            bare_answer_next: false,
            bare_answer_asked: false,
            plan_tools_withdrawn: false,
            step_work: None,
            finish_due: false,
        }
    }

    pub(super) fn is_on(&self) -> bool {
        self.on
    }

    /// The round's `tool_choice` for a spine in the state of `record`.
    pub(super) fn choice(&self, record: &SolveRecord) -> ToolChoice {
        if !self.on {
            return ToolChoice::Auto;
        }
        if !wants_call(record) {
            return ToolChoice::None;
        }
        match (
            self.call_due || self.step_thought(record),
            record.has_plan(),
        ) {
            (false, _) => ToolChoice::Auto,
            (true, false) if self.named => ToolChoice::Named(SOLVE_PLAN.to_string()),
            (true, false) => ToolChoice::Required,
            (true, true) => ToolChoice::Required,
        }
    }
}

impl Decoding {
    /// Narrows what a round may call, where `tool_choice` alone would not.
    ///
    /// A free round may call only what the spine would accept: `solve_plan` before the plan,
    /// anything else after it (`ToolChoice::AutoAmong`; the tool list stays, an endpoint is
    /// sent `auto`, and the local model's grammar admits just these names once a call
    /// opens). In free rounds the 0.5B model called work tools before a plan, and
    /// `solve_plan` again after one, its JSON unconstrained.
    ///
    /// Before the plan, a required call (a named choice not being honoured) would let the
    /// model call any tool (the 0.5B model on llama.cpp's server called work tools, and no
    /// plan came): that round alone offers `solve_plan`; the changed list costs one prefill of
    /// the prompt from the tools on, and the next round's request is the usual one again.
    ///
    /// With a plan, a required call may be any tool but `solve_plan`, which can only be
    /// refused now (the 0.5B model in-process called it again round after round), and
    /// `solve_replan`, which stays the free round's to choose: made to call something, the
    /// 1.5B model replanned with the current step alone as the new plan, dropping the steps
    /// after it (5 of 17 turns, every replan in a required round), and its answer lost their
    /// results. The tool list stays, and the choice names the tools that remain; only after
    /// a reply that called nothing the round admits is the list narrowed to them
    /// ([`TurnRun::set_aside_strays`]), and after a plan tool called there, neither plan tool
    /// is offered again in the turn.
    pub(super) fn narrow(&mut self, request: &mut ChatRequest, record: &SolveRecord) {
        self.admitted = None;
        self.list_narrowed = std::mem::take(&mut self.narrow_list_next);
        if std::mem::take(&mut self.bare_answer_next) {
            request.tools.clear();
            return;
        }
        let offers_plan = request.tools.iter().any(|t| t.name == SOLVE_PLAN);
        if !self.on || !offers_plan {
            return;
        }
        if self.plan_tools_withdrawn && record.has_plan() {
            request
                .tools
                .retain(|t| t.name != SOLVE_PLAN && t.name != SOLVE_REPLAN);
        }
        if request.tool_choice == ToolChoice::Auto {
            let planned = record.has_plan();
            let callable = (request.tools.iter())
                .map(|t| t.name.clone())
                .filter(|n| {
                    if planned {
                        n != SOLVE_PLAN
                    } else {
                        n == SOLVE_PLAN
                    }
                })
                .collect();
            request.tool_choice = ToolChoice::AutoAmong(callable);
            return;
        }
        if request.tool_choice != ToolChoice::Required {
            return;
        }
        if !record.has_plan() {
            if !self.named {
                request.tools.retain(|t| t.name == SOLVE_PLAN);
            }
        } else {
            let finish_only = self.finish_due && self.records_open_step(record);
            let rest: Vec<String> = (request.tools.iter())
                .map(|t| t.name.clone())
                .filter(|n| n != SOLVE_PLAN && n != SOLVE_REPLAN)
                .filter(|n| !finish_only || n == SOLVE_FINISH_STEP)
                .collect();
            if !rest.is_empty() {
                if self.list_narrowed {
                    request.tools.retain(|t| rest.contains(&t.name));
                }
                self.admitted = Some(rest.clone());
                request.tool_choice = ToolChoice::Among(rest);
            }
        }
    }
}

impl Decoding {
    /// The work calls recorded are the open step's.
    fn records_open_step(&self, record: &SolveRecord) -> bool {
        let open = open_step(record);
        open.is_some() && self.step_work.as_ref().map(|(step, _)| step) == open.as_ref()
    }

    /// Record the work calls a round made in the open step of `record`; a call the step had
    /// made already (the same tool and arguments) leaves only `solve_finish_step` for the
    /// step's next rounds: its result is in the context, and the model is going round. (The
    /// 1.5B model on llama.cpp's server ran `zack_age = 21 / 2` eight times in one step, two
    /// malformed copies in between keeping the repetition guard's streak short, until the
    /// turn ran out of rounds.)
    fn note_step_work(
        &mut self,
        record: &SolveRecord,
        calls: &[ToolCall],
        signatures: &[Signature],
    ) {
        if !self.on {
            return;
        }
        let Some(open) = open_step(record) else {
            self.step_work = None;
            self.finish_due = false;
            return;
        };
        if !self.records_open_step(record) {
            self.step_work = Some((open, Vec::new()));
            self.finish_due = false;
        }
        let Some((_, seen)) = self.step_work.as_mut() else {
            return;
        };
        let work = (calls.iter().zip(signatures)).filter(|(c, _)| !is_solve_tool(&c.name));
        for (_, sig) in work {
            self.finish_due |= seen.contains(sig);
            seen.push(*sig);
        }
    }
}

/// The open step of `record`, as `Decoding::thought_step` names it.
fn open_step(record: &SolveRecord) -> Option<(String, String)> {
    (record.current()).map(|s| (s.id.clone(), s.goal.clone()))
}

/// The spine wants a call: there is no plan yet, or a step is open.
fn wants_call(record: &SolveRecord) -> bool {
    !record.has_plan() || record.open_steps().next().is_some()
}

/// How a round's `tool_choice` is named in its `round_started` event.
pub(super) fn choice_name(choice: &ToolChoice) -> String {
    match choice {
        ToolChoice::Auto | ToolChoice::AutoAmong(_) => "auto".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Required | ToolChoice::Among(_) => "required".into(),
        ToolChoice::Named(name) => name.clone(),
    }
}

impl Decoding {
    /// A reply without calls to this round is the model's reasoning before a call that is
    /// then asked for: decoding is on, the spine wants a call, and the call was not asked for
    /// already.
    pub(super) fn takes_reasoning(&self, record: &SolveRecord) -> bool {
        self.on && !self.call_due && !self.step_thought(record) && wants_call(record)
    }

    /// This round asked for a call outright: the one the last round's reasoning owes, or
    /// the next of a step that has had its free round.
    pub(super) fn asked_for_call(&self, record: &SolveRecord) -> bool {
        self.on && (self.call_due || self.step_thought(record))
    }

    /// This round asks for the call the last round's reasoning owes: the second half of
    /// that round, not a round of its own.
    pub(super) fn owes_reasoned_call(&self) -> bool {
        self.on && self.call_due
    }

    /// The open step has had its free round.
    fn step_thought(&self, record: &SolveRecord) -> bool {
        match (&self.thought_step, record.current()) {
            (Some((id, goal)), Some(step)) => *id == step.id && *goal == step.goal,
            _ => false,
        }
    }

    /// The tail names the step to work on: decoding had to step in this turn.
    pub(super) fn directs_steps(&self) -> bool {
        self.on && self.stepped_in
    }
}

impl TurnRun<'_> {
    /// `text` after the reasoning kept for the call it goes with, in one assistant message
    /// (content beside the calls): the reasoning's tokens stay where they were in the prompt.
    /// Whether that message stays for the rest of the turn: it carries the reasoning that
    /// came before the plan it made.
    pub(super) fn joined_to_reasoning(&mut self, text: String) -> (String, bool) {
        if !self.decoding.call_due {
            return (text, false);
        }
        let before_plan = std::mem::take(&mut self.decoding.reasoning_before_plan);
        let keep = before_plan && self.record().has_plan();
        let joined = match self.ctx.take_trailing_assistant_text() {
            Some(reasoning) if text.is_empty() => reasoning,
            Some(reasoning) => format!("{reasoning}\n\n{text}"),
            None => return (text, false),
        };
        (joined, keep)
    }

    /// Keep `text` as the model's reasoning and ask for the call in the next round. Text
    /// held back from replies cut off before it is part of the same reasoning, already in
    /// the context. What the reply copied from the tails it was shown is not reasoning (the
    /// 0.5B and 1.5B models both answered a step's round with the progress block, copied):
    /// it is left out, and a reply that is nothing else leaves nothing behind.
    pub(super) fn keep_reasoning(&mut self, text: &str) {
        self.decoding.call_due = true;
        self.decoding.stepped_in = true;
        let record = self.record();
        self.decoding.reasoning_before_plan = !record.has_plan();
        self.decoding.thought_step = open_step(&record);
        self.reply.take_answer_parts();
        if let Vetted::Answer(own) = vet(text, &self.texts, &self.shown_tail_lines, &self.problem) {
            self.ctx.push(Message::assistant(own.trim().to_string()));
        }
    }

    /// The model answered a request for a call with text: `tool_choice` is not honoured, and
    /// the prompt (with its nudges) holds the spine for the rest of the turn.
    /// The reasoning kept before is taken back out of the context and returned, to go before
    /// the reply's own text.
    pub(super) fn decoding_not_honoured(&mut self) -> Option<String> {
        self.let_go_of_decoding("the model answered a required tool call with text: tool_choice is not honoured here; the prompt holds the spine for the rest of the turn")
    }

    /// Decoding stops holding the spine for the rest of the turn (`why` says so in a
    /// warning); the reasoning kept for the call that was asked for comes back.
    pub(super) fn let_go_of_decoding(&mut self, why: &str) -> Option<String> {
        let reasoning = self.ctx.take_trailing_assistant_text();
        self.decoding = Decoding::new(false, false);
        self.emit.emit(EventKind::Warning {
            kind: WarningKind::Protocol,
            message: why.to_string(),
        });
        reasoning
    }

    /// Calls outside what the round admitted are not run: an endpoint sent plain `required`
    /// for a narrowed choice let the model call any tool it was offered, and made to call
    /// something, the 1.5B model on llama.cpp's server called `solve_replan` or `solve_plan`
    /// in 7 of 50 such rounds (one turn replanned until its round budget was spent). A reply
    /// with nothing else is set aside, and `true` asks the round again offering only the
    /// tools it admits; a reply that strays even then has its calls run, and refused, as
    /// before.
    pub(super) fn set_aside_strays(&mut self, reply: &mut Interpreted) -> bool {
        let Some(admitted) = self.decoding.admitted.take() else {
            return false;
        };
        let calls = &mut reply.completion.tool_calls;
        let strays: Vec<String> = (calls.iter())
            .filter(|c| !admitted.contains(&c.name))
            .map(|c| c.name.clone())
            .collect();
        if strays.is_empty() || self.decoding.list_narrowed {
            return false;
        }
        calls.retain(|c| admitted.contains(&c.name));
        let again = calls.is_empty() && reply.unreadable.is_empty();
        // The plan's tools called where a step's call was due are withdrawn for the rest of
        // the turn: the 1.5B model on llama.cpp's server called `solve_plan` again in 7 and
        // `solve_replan` in 8 of 99 required rounds (a replan there dropped the steps after
        // the current one), and a list narrowed for one round and then restored cost two
        // prefills of the whole prompt each time. Withdrawn, the round asked again offers the
        // turn's list from then on: one prefill. (Withdrawing `solve_plan` alone, the retry
        // that still offered `solve_replan` was a replan that lost the plan's last step.)
        let plan_tool = |n: &String| n == SOLVE_PLAN || n == SOLVE_REPLAN;
        self.decoding.plan_tools_withdrawn |= strays.iter().any(plan_tool);
        self.decoding.narrow_list_next = again;
        let then = if again {
            "; the round is asked again, offering only those tools"
        } else {
            ""
        };
        self.emit.emit(EventKind::Warning {
            kind: WarningKind::Protocol,
            message: format!(
                "the model called {} where this round admits only {}: not run{then}",
                strays.join(", "),
                admitted.join(", "),
            ),
        });
        again
    }

    /// The answer round (`tool_choice: "none"`, every step finished) answered with a call:
    /// native, in markup, or written out as JSON (alone, or fenced after some prose, which
    /// stood as a useless answer). An endpoint without a grammar beside tools
    /// does not hold `"none"` to text, and while the tools were shown the 1.5B model on
    /// llama.cpp's server wrote its last `solve_finish_step` call again there (3 of 20
    /// turns). Once a turn, such a reply is set aside and the round asked again offering no
    /// tools (one prefill, paid only then; a forced answer after it reuses that prefix).
    pub(super) fn set_aside_call_for_answer(&mut self, reply: &Interpreted) -> bool {
        let record = self.record();
        if !self.decoding.on || self.decoding.bare_answer_asked || wants_call(&record) {
            return false;
        }
        let text = &reply.completion.text;
        let a_call = reply.has_calls()
            || writes_a_call(text)
            || (text.contains('{')
                && vet(text, &self.texts, &self.shown_tail_lines, &self.problem)
                    == Vetted::NotAnAnswer);
        if !a_call {
            return false;
        }
        self.decoding.bare_answer_asked = true;
        self.decoding.bare_answer_next = true;
        self.emit.emit(EventKind::Warning {
            kind: WarningKind::Protocol,
            message: "the model answered with a call where its answer was due: not run; the round is asked again, offering no tools".into(),
        });
        true
    }

    /// A reply with calls: nothing is due any more.
    pub(super) fn call_made(&mut self) {
        self.decoding.call_due = false;
    }

    /// The round's `calls` have run (each with its signature, from the dispatch): what the
    /// open step has done so far.
    pub(super) fn step_calls_ran(&mut self, calls: &[ToolCall], signatures: &[Signature]) {
        let record = self.record();
        self.decoding.note_step_work(&record, calls, signatures);
    }

    /// A step's free round that writes a program in its prose runs it: the first closed
    /// Python block becomes a `code_execution` call, and what followed it is cut. A small
    /// model reaches for code on its own but writes it as text, then makes up what it prints
    /// (the 1.5B model, every step of a turn); kept as reasoning, that program never ran and
    /// its made-up output became the step's summary. The call goes into the context as a
    /// native call, so the model sees its code answered by a real result.
    ///
    /// One program per step: the free round it was written in is the step's one free round,
    /// and the step's later rounds ask for calls (a model writing a program in every free
    /// round was never asked for the step's call: the 1.5B model ran program after program
    /// until the context was full).
    pub(super) fn run_written_program(&mut self, reply: &mut Interpreted) {
        let record = self.record();
        let runs_code = self.specs.iter().any(|s| s.name == CODE_TOOL);
        if reply.has_calls()
            || !runs_code
            || !record.has_plan()
            || !self.decoding.takes_reasoning(&record)
        {
            return;
        }
        let Some(program) = first_program(&reply.completion.text) else {
            return;
        };
        self.decoding.thought_step = open_step(&record);
        if !self.decoding.ran_written_program {
            self.decoding.ran_written_program = true;
            self.emit.emit(EventKind::Warning {
                kind: WarningKind::Protocol,
                message: "the model wrote a program in its reasoning instead of calling code_execution: the program runs as that call".into(),
            });
        }
        if program.followed {
            self.emit.emit(EventKind::Warning {
                kind: WarningKind::InventedToolResponse,
                message: "what the model wrote after its program (its output, made up) was cut; the program runs for real".into(),
            });
        }
        let before = match vet(
            &program.before,
            &self.texts,
            &self.shown_tail_lines,
            &self.problem,
        ) {
            Vetted::Answer(own) => own.trim().to_string(),
            Vetted::NotAnAnswer => String::new(),
        };
        let call = ToolCall {
            id: self.next_call_id(),
            name: CODE_TOOL.to_string(),
            arguments: code_arguments(&program.code),
        };
        let completion = &mut reply.completion;
        completion.text = before;
        completion.tool_calls.push(call);
        completion.finish_reason = FinishReason::ToolCalls;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deepsolve_protocol::SolveStep;

    fn planned(done: bool) -> SolveRecord {
        SolveRecord {
            analysis: "a".into(),
            steps: vec![SolveStep {
                id: "S1".into(),
                goal: "g".into(),
                done,
                summary: None,
            }],
            ..SolveRecord::default()
        }
    }

    #[test]
    fn prompt_rounds_are_auto_and_decoding_follows_the_spine() {
        let off = Decoding::new(false, true);
        assert_eq!(off.choice(&SolveRecord::default()), ToolChoice::Auto);
        let mut unnamed = Decoding::new(true, false);
        unnamed.call_due = true;
        assert_eq!(
            unnamed.choice(&SolveRecord::default()),
            ToolChoice::Required
        );
        let mut on = Decoding::new(true, true);
        let none = SolveRecord::default();
        assert_eq!(on.choice(&none), ToolChoice::Auto);
        on.call_due = true;
        assert_eq!(on.choice(&none), ToolChoice::Named(SOLVE_PLAN.into()));
        assert_eq!(on.choice(&planned(false)), ToolChoice::Required);
        on.call_due = false;
        assert_eq!(on.choice(&planned(false)), ToolChoice::Auto);
        assert_eq!(on.choice(&planned(true)), ToolChoice::None);
    }

    #[test]
    fn auto_enforces_only_what_the_endpoint_honours() {
        let mut honours = Honours::default();
        assert!(!enforced(Enforce::Auto, &honours));
        assert!(enforced(Enforce::Decoding, &honours));
        honours.tool_choice_named = true;
        assert!(!enforced(Enforce::Auto, &honours));
        honours.tool_choice_named = false;
        honours.tool_choice_required = true;
        assert!(enforced(Enforce::Auto, &honours));
        assert!(!enforced(Enforce::Prompt, &honours));
    }
}
