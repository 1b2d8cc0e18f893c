//! The turn's budgets — rounds, tokens, wall-clock time, context — and their thresholds.

use std::time::Duration;

use tokio::time::Instant;

use super::turn::TurnRun;
use crate::config::SolveConfig;
use crate::event::EventKind;
use crate::model::Usage;
use crate::outcome::{Checkpoint, StopReason};
use crate::progress::Position;

/// The context window assumed when the model's is not known.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// A smaller window than this is taken to be this.
const MIN_CONTEXT_WINDOW: u64 = 1024;
/// Context fraction above which old tool outputs are snipped.
const COMPACT_AT: f64 = 0.8;
/// Snipping passes per round; past them the ultimatum threshold decides.
const MAX_COMPACTIONS_PER_ROUND: u32 = 2;
/// The output reserve is at most this fraction of the window (1/4).
const RESERVE_DIVISOR: u64 = 4;
/// A forced answer after the turn deadline still gets this long.
pub(super) const FORCED_ANSWER_GRACE: Duration = Duration::from_secs(60);
/// The forced answer's output budget is at least this.
pub(super) const MIN_FORCED_ANSWER_TOKENS: u64 = 256;
/// A reply that spent its output budget without visible text is retried once with this
/// many times the budget…
const OUTPUT_RETRY_FACTOR: u32 = 2;
/// …but never more than the largest output a model gives.
const MAX_OUTPUT_TOKENS: u32 = 200_000;
/// Rounds in a row with unreadable text-protocol calls before a forced answer.
pub(super) const MAX_FORMAT_ERRORS: u32 = 3;
/// Rounds in a row without visible output before a forced answer.
pub(super) const MAX_EMPTY_ROUNDS: u32 = 2;
/// The token notice appears once this fraction of the token budget is spent (2/3).
const TOKEN_NOTICE_AT: (u64, u64) = (2, 3);

/// The largest prompt a turn's window takes: the window less the room kept free for the
/// reply. A problem estimated past it (with its session's earlier turns) cannot be solved, so
/// a front end can refuse it before any model call.
pub fn prompt_room(config: &SolveConfig, context_window: u64) -> u64 {
    let window = context_window.max(MIN_CONTEXT_WINDOW);
    window - reply_room(config.max_tokens, window)
}

/// Room kept free in a window for the reply.
fn reply_room(max_tokens: u32, window: u64) -> u64 {
    u64::from(max_tokens).min(window / RESERVE_DIVISOR)
}

/// The limits a turn runs under and what it has spent so far.
pub(super) struct Budget {
    window: u64,
    max_rounds: u32,
    settlement_rounds: u32,
    token_budget: u64,
    max_tokens: u32,
    ultimatum_at: f64,
    started: Instant,
    deadline: Instant,
    /// Wall-clock time spent before a resume.
    spent_before: Duration,
    pub(super) usage: Usage,
    pub(super) rounds: u32,
    /// Rounds that do not take from the round budget: the call a round's reasoning owed,
    /// asked for on its own (the spine held at decoding time; the second half of that round),
    /// and every draft after the first (`solve.drafts`). A checkpoint keeps only `rounds`, so
    /// a resumed turn counts them again.
    free_rounds: u32,
}

impl Budget {
    /// The budget of a turn, continuing from `resume`'s spending when there is one.
    pub(super) fn new(cfg: &SolveConfig, context_window: u64, resume: Option<&Checkpoint>) -> Self {
        let started = Instant::now();
        let spent_before = Duration::from_millis(resume.map_or(0, |r| r.elapsed_ms));
        Budget {
            window: context_window.max(MIN_CONTEXT_WINDOW),
            max_rounds: cfg.max_rounds,
            settlement_rounds: cfg.settlement_rounds,
            token_budget: cfg.token_budget,
            max_tokens: cfg.max_tokens,
            ultimatum_at: cfg.ultimatum_at,
            started,
            deadline: started + cfg.turn_timeout().saturating_sub(spent_before),
            spent_before,
            usage: resume.map(|r| r.usage).unwrap_or_default(),
            rounds: resume.map_or(0, |r| r.rounds),
            free_rounds: 0,
        }
    }

    pub(super) fn window(&self) -> u64 {
        self.window
    }

    /// The last round before the settlement rounds: the configured budget, moved on by one
    /// for every free round.
    pub(super) fn max_rounds(&self) -> u32 {
        self.max_rounds + self.free_rounds
    }

    /// The round about to start does not take from the round budget.
    pub(super) fn count_free_round(&mut self) {
        self.free_rounds += 1;
    }

    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The deadline of the forced answer: the turn's, or a grace period from now.
    pub(super) fn forced_answer_deadline(&self) -> Instant {
        self.deadline.max(Instant::now() + FORCED_ANSWER_GRACE)
    }

    pub(super) fn elapsed_ms(&self) -> u64 {
        (self.spent_before + self.started.elapsed()).as_millis() as u64
    }

    /// Rounds including the settlement rounds after the budget.
    pub(super) fn max_total_rounds(&self) -> u32 {
        self.max_rounds() + self.settlement_rounds
    }

    pub(super) fn rounds_left(&self) -> bool {
        self.rounds < self.max_total_rounds()
    }

    /// Why no further round may start (in the order they are checked), if one may not.
    pub(super) fn exhausted(&self) -> Option<StopReason> {
        if Instant::now() >= self.deadline {
            return Some(StopReason::TurnTimeout);
        }
        if self.token_budget > 0 && self.usage.total() >= self.token_budget {
            return Some(StopReason::Budget);
        }
        (!self.rounds_left()).then_some(StopReason::MaxRounds)
    }

    /// Where round `round` stands, for the progress block.
    pub(super) fn position(&self, round: u32) -> Position {
        Position {
            round,
            max_rounds: self.max_rounds(),
            settlement_rounds: self.settlement_rounds,
        }
    }

    /// The round budget is spent: settlement rounds only.
    pub(super) fn in_settlement(&self, round: u32) -> bool {
        round > self.max_rounds()
    }

    /// The token notice is due (two thirds of the token budget spent).
    pub(super) fn token_notice_due(&self) -> bool {
        let (num, den) = TOKEN_NOTICE_AT;
        self.token_budget > 0 && self.usage.total() * den >= self.token_budget * num
    }

    pub(super) fn token_budget(&self) -> u64 {
        self.token_budget
    }

    /// Room kept free in the window for the reply.
    pub(super) fn reserve(&self) -> u64 {
        reply_room(self.max_tokens, self.window)
    }

    /// The output budget of the forced answer.
    pub(super) fn forced_answer_tokens(&self) -> u32 {
        self.reserve().max(MIN_FORCED_ANSWER_TOKENS) as u32
    }

    /// The prompt size at which the forced answer drops tool outputs.
    pub(super) fn forced_answer_limit(&self) -> u64 {
        (self.window as f64 * self.ultimatum_at) as u64
    }

    /// The prompt size past which no round starts (a forced answer instead).
    pub(super) fn ultimatum_limit(&self) -> u64 {
        self.forced_answer_limit().saturating_sub(self.reserve())
    }

    /// The prompt size past which old tool outputs are snipped.
    fn compaction_threshold(&self) -> u64 {
        ((self.window as f64 * COMPACT_AT) as u64).min(self.ultimatum_limit())
    }

    pub(super) fn max_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// The larger output budget for the one retry, given the prompt's size.
    pub(super) fn retry_max_tokens(&self, prompt_tokens: u64) -> u32 {
        let room = self.window.saturating_sub(prompt_tokens);
        self.max_tokens
            .saturating_mul(OUTPUT_RETRY_FACTOR)
            .min(MAX_OUTPUT_TOKENS)
            .min(room.max(u64::from(self.max_tokens)) as u32)
    }
}

impl TurnRun<'_> {
    /// Snip old tool outputs while over the compaction threshold. Returns the prompt estimate.
    pub(super) fn compact_if_needed(&mut self, tail_tokens: u64) -> u64 {
        let threshold = self.budget.compaction_threshold();
        let mut estimate = self.ctx.estimate(tail_tokens);
        let mut passes = 0;
        while estimate > threshold && passes < MAX_COMPACTIONS_PER_ROUND {
            passes += 1;
            let before = estimate;
            if !self.snip_down_to(threshold, tail_tokens) {
                break;
            }
            estimate = self.ctx.estimate(tail_tokens);
            self.emit.emit(EventKind::ContextFolded {
                tokens_before: before,
                tokens_after: estimate,
            });
        }
        estimate
    }

    /// Snip the oldest outputs until the prompt fits `threshold`; false when none was snipped.
    fn snip_down_to(&mut self, threshold: u64, tail_tokens: u64) -> bool {
        let mut snipped = false;
        while self.ctx.estimate(tail_tokens) > threshold && self.ctx.snip_oldest_tool_output() {
            snipped = true;
        }
        snipped
    }
}
