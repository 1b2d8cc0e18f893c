//! A round of tool calls: the calls recorded, the batch dispatched, unreadable calls answered,
//! results into the context, and after a finished step the fold and a checkpoint.

use std::sync::Mutex;

use serde_json::Value;

use super::UNREADABLE_CALL;
use super::reply::{Interpreted, Unreadable};
use super::turn::{Ending, TurnRun};
use crate::dispatch::{BatchInput, BatchOutput, CallResult, run_batch};
use crate::event::EventKind;
use crate::message::{Message, ToolCall};
use crate::outcome::{Checkpoint, StopReason};
use crate::solve::SpineEffect;
use crate::texts::Text;
use crate::tool::{Progress, ToolContext};
use crate::truncate::{MAX_BYTES, MAX_LINES, head_tail};

/// An unreadable call, as recorded: its call and the error it is answered with.
struct Answered {
    call: ToolCall,
    error: String,
}

impl TurnRun<'_> {
    /// Run one round's calls. `Some` ends the loop (cancelled, or the repetition guard).
    pub(super) async fn work_round(&mut self, mut reply: Interpreted) -> Option<Ending> {
        self.clean_summaries(&mut reply.completion.tool_calls);
        let unreadable = self.name_unreadable(reply.unreadable);
        let batch = self.dispatch(&reply.completion.tool_calls).await?;
        // Recorded after the run so the calls move into the context instead of being copied:
        // a reply's arguments may be megabytes. Nothing reads the context while calls run.
        self.step_calls_ran(&reply.completion.tool_calls, &batch.signatures);
        self.record_calls(reply.completion, &unreadable);
        self.call_made();
        self.answer_unreadable(unreadable);
        let step_done = self.take_results(batch.results);
        if step_done {
            self.after_step();
        }
        batch
            .force_answer
            .then_some(Ending::Force(StopReason::Repetition))
    }

    /// Unreadable calls get an id and a name, so they are paired with a result like any call.
    fn name_unreadable(&mut self, unreadable: Vec<Unreadable>) -> Vec<Answered> {
        unreadable
            .into_iter()
            .map(|u| Answered {
                call: ToolCall {
                    id: self.next_call_id(),
                    name: UNREADABLE_CALL.into(),
                    arguments: u.raw,
                },
                error: u.error.describe(&self.texts),
            })
            .collect()
    }

    /// The assistant message with every call of the round (unreadable ones last).
    fn record_calls(&mut self, c: crate::model::Completion, unreadable: &[Answered]) {
        let reasoning = (!c.reasoning.is_empty()).then_some(c.reasoning);
        let mut calls = c.tool_calls;
        calls.extend(unreadable.iter().map(|u| u.call.clone()));
        let text = match c.text.trim() {
            trimmed if trimmed.len() == c.text.len() => c.text,
            trimmed => trimmed.to_string(),
        };
        let (text, kept) = self.joined_to_reasoning(text);
        let message = Message::assistant_with_calls(text, calls, reasoning);
        if kept {
            self.ctx.push_kept(message);
        } else {
            self.ctx.push(message);
        }
    }

    /// The batch, with an event as each call starts, reports progress and ends; `None` when
    /// cancelled.
    async fn dispatch(&mut self, calls: &[ToolCall]) -> Option<BatchOutput> {
        let (progress, received) = Progress::channel();
        let received = Mutex::new(received);
        let base_ctx = ToolContext {
            progress,
            ..self.tool_ctx.clone()
        };
        let emit = &self.emit;
        let emit_progress = |(call_id, message): (String, String)| {
            emit.emit(EventKind::ToolProgress { call_id, message });
        };
        // Everything reported so far goes out before a result, so a call's progress never
        // follows its `tool_result`.
        let flush_progress = || {
            let mut received = received.lock().unwrap_or_else(|e| e.into_inner());
            while let Ok(report) = received.try_recv() {
                emit_progress(report);
            }
        };
        let toolbox = &self.toolbox;
        let on_start = |call: &ToolCall, args: Value| {
            emit.emit(EventKind::ToolCall {
                call_id: call.id.clone(),
                name: call.name.clone(),
                args,
                shown: toolbox.shown_argument(&call.name),
            })
        };
        let on_done = |r: &CallResult| {
            flush_progress();
            emit.emit(EventKind::ToolResult {
                call_id: r.call.id.clone(),
                name: r.call.name.clone(),
                ok: r.output.ok,
                content: r.output.content.clone(),
                artifacts: r.output.artifacts.clone(),
                sources: r.output.sources.clone(),
                duration_ms: r.duration_ms,
            })
        };
        let input = BatchInput {
            calls,
            toolbox: &self.toolbox,
            session: &self.session,
            config: &self.cfg,
            guard: &mut self.guard,
            deadline: self.budget.deadline(),
            base_ctx: &base_ctx,
            texts: &self.texts,
        };
        let forward = async {
            let next = || {
                std::future::poll_fn(|cx| {
                    (received.lock().unwrap_or_else(|e| e.into_inner())).poll_recv(cx)
                })
            };
            while let Some(report) = next().await {
                emit_progress(report);
            }
            // Every reporter is gone; the batch ends on its own.
            std::future::pending::<()>().await;
        };
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => None,
            batch = run_batch(input, &on_start, &on_done) => {
                flush_progress();
                Some(batch)
            }
            _ = forward => None,
        }
    }

    /// Each unreadable call answered with how to write it, in events and in the context.
    fn answer_unreadable(&mut self, unreadable: Vec<Answered>) {
        for Answered { call, error } in unreadable {
            let content = self
                .texts
                .render(Text::UnreadableCall, &[("error", &error)]);
            self.emit.emit(EventKind::ToolCall {
                call_id: call.id.clone(),
                name: call.name.clone(),
                args: Value::String(call.arguments.clone()),
                shown: None,
            });
            self.emit.emit(EventKind::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                ok: false,
                content: content.clone(),
                artifacts: Vec::new(),
                sources: Vec::new(),
                duration_ms: 0,
            });
            self.ctx.push(Message::tool_result(&call, content));
        }
    }

    /// Results into the context (truncated for the model), artifacts kept, spine effects
    /// announced. True when a step was finished.
    fn take_results(&mut self, results: Vec<CallResult>) -> bool {
        let mut step_done = false;
        for result in results {
            let visible = head_tail(result.model_content(), MAX_BYTES, MAX_LINES, &self.texts);
            self.ctx.push(Message::tool_result(&result.call, visible));
            self.artifacts
                .extend(result.output.artifacts.iter().cloned());
            step_done |= self.announce(&result.effect);
        }
        step_done
    }

    /// Events for a spine effect; true when a step was finished.
    fn announce(&self, effect: &SpineEffect) -> bool {
        let step_done = match effect {
            SpineEffect::None => return false,
            SpineEffect::Planned => false,
            SpineEffect::StepDone {
                step_id, summary, ..
            } => {
                self.emit.emit(EventKind::StepFinished {
                    step_id: step_id.clone(),
                    summary: summary.clone(),
                });
                true
            }
            SpineEffect::Replanned { reason } => {
                self.emit.emit(EventKind::Replanned {
                    reason: reason.clone(),
                });
                false
            }
        };
        self.emit_plan(&self.record());
        step_done
    }

    /// A step is done: its chatter folded out (if folding is on) and a checkpoint to resume
    /// from.
    fn after_step(&mut self) {
        if self.cfg.fold {
            self.fold();
        }
        self.emit.emit(EventKind::Checkpoint {
            checkpoint: Checkpoint {
                record: self.record(),
                rounds: self.budget.rounds,
                usage: self.budget.usage,
                elapsed_ms: self.budget.elapsed_ms(),
                sources: self.tool_ctx.citations.all(),
            },
        });
    }

    /// Fold the finished step's messages out of the context; the progress block, rendered
    /// before every request, carries the plan and the summaries. The sizes reported are the
    /// prompt's with the last request's tail (the next one is not rendered yet).
    fn fold(&mut self) {
        let before = self.ctx.estimate_with_sent_tail();
        self.ctx.fold();
        let after = self.ctx.estimate_with_sent_tail();
        self.emit.emit(EventKind::ContextFolded {
            tokens_before: before,
            tokens_after: after,
        });
    }
}
