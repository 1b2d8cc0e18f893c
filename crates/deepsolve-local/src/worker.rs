//! One worker thread per llama.cpp context (a context is `Send`, not `Sync`, and borrows the
//! model): it takes jobs in order, reuses the longest prefix of its KV cache, decodes the
//! rest of the prompt, samples, and streams text back until a stop, the token limit, the end
//! of the context or cancellation.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use deepsolve_core::{FinishReason, ModelError};

use crate::backend::backend;
use crate::error::LocalError;
use crate::model::{CALL_OPENS, CallStats, Grammar, lock, server_error};

/// Tokens decoded per batch while reading a prompt.
const BATCH: u32 = 512;

/// One request for a worker.
pub(crate) struct Job {
    pub(crate) prompt: Vec<LlamaToken>,
    pub(crate) max_tokens: u32,
    pub(crate) temperature: f32,
    pub(crate) stop: Vec<String>,
    pub(crate) grammar: Option<Grammar>,
    pub(crate) events: mpsc::UnboundedSender<WorkerEvent>,
    pub(crate) cancel: Arc<AtomicBool>,
    /// Held until the context is free again, so the next request in the queue finds it idle.
    pub(crate) permit: OwnedSemaphorePermit,
}

pub(crate) enum WorkerEvent {
    Text(String),
    Done(Outcome),
    Failed(ModelError),
}

pub(crate) struct Outcome {
    pub(crate) finish: FinishReason,
    pub(crate) stats: CallStats,
}

/// Which contexts are busy and which tokens each holds: how a request picks one.
pub(crate) struct SlotBook {
    slots: Mutex<Vec<Slot>>,
    clock: AtomicU64,
}

#[derive(Default)]
struct Slot {
    busy: bool,
    cached: Vec<LlamaToken>,
    last_used: u64,
}

impl SlotBook {
    pub(crate) fn new(count: usize) -> Self {
        SlotBook {
            slots: Mutex::new((0..count).map(|_| Slot::default()).collect()),
            clock: AtomicU64::new(0),
        }
    }

    /// The idle context sharing the longest prefix with `prompt` (the least recently used
    /// among equals), marked busy. The caller holds a queue permit, so one is idle.
    pub(crate) fn take_best(&self, prompt: &[LlamaToken]) -> usize {
        let mut slots = lock(&self.slots);
        let best = slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.busy)
            .max_by_key(|(_, s)| {
                (
                    common_prefix(&s.cached, prompt),
                    std::cmp::Reverse(s.last_used),
                )
            })
            .map(|(i, _)| i)
            .unwrap_or(0);
        if let Some(slot) = slots.get_mut(best) {
            slot.busy = true;
            slot.last_used = self.clock.fetch_add(1, Ordering::Relaxed);
        }
        best
    }

    fn release(&self, index: usize, cached: &[LlamaToken]) {
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.get_mut(index) {
            slot.busy = false;
            slot.cached.clear();
            slot.cached.extend_from_slice(cached);
        }
    }
}

/// How many leading tokens `a` and `b` share.
pub(crate) fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Start worker `index` with its own context; returns once the context exists.
pub(crate) fn spawn_worker(
    index: usize,
    model: Arc<LlamaModel>,
    context: u32,
    threads: u32,
    slots: Arc<SlotBook>,
) -> Result<std::sync::mpsc::Sender<Job>, LocalError> {
    let (jobs, inbox) = std::sync::mpsc::channel::<Job>();
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<(), LocalError>>(1);
    std::thread::Builder::new()
        .name(format!("local-model-{index}"))
        .spawn(move || {
            let backend = match backend() {
                Ok(backend) => backend,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let threads = i32::try_from(threads).unwrap_or(1);
            let params = LlamaContextParams::default()
                .with_n_ctx(NonZeroU32::new(context))
                .with_n_batch(BATCH)
                .with_n_ubatch(BATCH)
                .with_n_threads(threads)
                .with_n_threads_batch(threads);
            let mut ctx = match model.new_context(backend, params) {
                Ok(ctx) => ctx,
                Err(e) => {
                    let _ = ready_tx.send(Err(LocalError::Context {
                        context,
                        message: e.to_string(),
                    }));
                    return;
                }
            };
            let _ = ready_tx.send(Ok(()));
            let mut worker = Worker {
                model: &model,
                cached: Vec::new(),
                batch: LlamaBatch::new(BATCH as usize, 1),
            };
            while let Ok(job) = inbox.recv() {
                let result = worker.run(&mut ctx, &job);
                // The context is free (with what it now caches) before the caller hears the
                // end, so its next round finds it.
                slots.release(index, &worker.cached);
                let Job { events, permit, .. } = job;
                drop(permit);
                let _ = events.send(match result {
                    Ok(outcome) => WorkerEvent::Done(outcome),
                    Err(error) => WorkerEvent::Failed(error),
                });
            }
        })
        .map_err(|e| LocalError::Context {
            context,
            message: format!("cannot start a worker thread: {e}"),
        })?;
    ready_rx.recv().map_err(|_| LocalError::Context {
        context,
        message: "the worker thread ended before its context was ready".into(),
    })??;
    Ok(jobs)
}

struct Worker<'m> {
    model: &'m LlamaModel,
    /// The tokens in the context's KV cache, in order (sequence 0).
    cached: Vec<LlamaToken>,
    batch: LlamaBatch<'static>,
}

/// Why generation ended early.
enum Halt {
    Cancelled,
    Failed(ModelError),
}

impl Worker<'_> {
    fn run(&mut self, ctx: &mut LlamaContext<'_>, job: &Job) -> Result<Outcome, ModelError> {
        let started = Instant::now();
        let cached = self.reuse_prefix(ctx, &job.prompt);
        let mut stats = CallStats {
            prompt_tokens: count(job.prompt.len()),
            cached_tokens: count(cached),
            ..CallStats::default()
        };
        match self.decode_prompt(ctx, &job.prompt[cached..], &job.cancel) {
            Ok(()) => {}
            Err(Halt::Cancelled) => return Err(cancelled()),
            Err(Halt::Failed(e)) => return Err(e),
        }
        stats.prompt_time = started.elapsed();
        let mut sampler = sampler(self.model, job)?;
        let mut text = TextOut::new(&job.stop);
        let mut generated = 0u32;
        let mut first_token_at = None;
        let n_ctx = ctx.n_ctx() as usize;
        let finish = loop {
            if generated >= job.max_tokens || self.cached.len() >= n_ctx {
                break FinishReason::Length;
            }
            if job.cancel.load(Ordering::Relaxed) {
                return Err(cancelled());
            }
            let token = next_token(&mut sampler, ctx, self.batch.n_tokens() - 1)?;
            generated += 1;
            if first_token_at.is_none() {
                first_token_at = Some(Instant::now());
                stats.first_token = started.elapsed();
            }
            if self.model.vocab().is_eog(token) {
                break FinishReason::Stop;
            }
            let piece = self.model.vocab().token_to_piece(token, false, None);
            let stopped = text.push(&piece, |delta| {
                job.events.send(WorkerEvent::Text(delta)).is_ok()
            });
            match stopped {
                Pushed::Stop => break FinishReason::Stop,
                Pushed::Gone => return Err(cancelled()),
                Pushed::More => {}
            }
            if let Err(halt) = self.decode(ctx, &[token], true) {
                return Err(match halt {
                    Halt::Cancelled => cancelled(),
                    Halt::Failed(e) => e,
                });
            }
        };
        text.finish(|delta| job.events.send(WorkerEvent::Text(delta)).is_ok());
        stats.completion_tokens = generated;
        stats.generation_time = first_token_at.map(|t| t.elapsed()).unwrap_or_default();
        Ok(Outcome { finish, stats })
    }

    /// Keep the longest cached prefix of `prompt` (at least one prompt token is decoded
    /// again, for the logits of the next one) and drop the rest of the cache.
    fn reuse_prefix(&mut self, ctx: &mut LlamaContext<'_>, prompt: &[LlamaToken]) -> usize {
        let keep = common_prefix(&self.cached, prompt).min(prompt.len().saturating_sub(1));
        if keep < self.cached.len() {
            let from = u32::try_from(keep).unwrap_or(u32::MAX);
            let removed = ctx
                .clear_kv_cache_seq(Some(0), Some(from), None)
                .unwrap_or(false);
            if !removed {
                ctx.clear_kv_cache();
                self.cached.clear();
                return 0;
            }
            self.cached.truncate(keep);
        }
        keep
    }

    /// Decode the new part of a prompt in batches; logits only for its last token.
    fn decode_prompt(
        &mut self,
        ctx: &mut LlamaContext<'_>,
        tokens: &[LlamaToken],
        cancel: &AtomicBool,
    ) -> Result<(), Halt> {
        let chunks: Vec<&[LlamaToken]> = tokens.chunks(BATCH as usize).collect();
        let last = chunks.len().saturating_sub(1);
        for (i, chunk) in chunks.into_iter().enumerate() {
            if cancel.load(Ordering::Relaxed) {
                return Err(Halt::Cancelled);
            }
            self.decode(ctx, chunk, i == last)?;
        }
        Ok(())
    }

    /// Decode `tokens` after the cache; `logits_last`: the last one's logits are kept.
    fn decode(
        &mut self,
        ctx: &mut LlamaContext<'_>,
        tokens: &[LlamaToken],
        logits_last: bool,
    ) -> Result<(), Halt> {
        self.batch.clear();
        let start = self.cached.len();
        for (i, token) in tokens.iter().enumerate() {
            let pos = i32::try_from(start + i).unwrap_or(i32::MAX);
            let logits = logits_last && i + 1 == tokens.len();
            self.batch
                .add(*token, pos, &[0], logits)
                .map_err(|e| Halt::Failed(server_error(&format!("batch: {e}"))))?;
        }
        if let Err(e) = ctx.decode(&mut self.batch) {
            // The cache may hold part of the batch: start clean next time.
            ctx.clear_kv_cache();
            self.cached.clear();
            return Err(Halt::Failed(server_error(&format!(
                "llama.cpp decode failed: {e}"
            ))));
        }
        self.cached.extend_from_slice(tokens);
        Ok(())
    }
}

fn cancelled() -> ModelError {
    server_error("cancelled")
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The next token from the logits of batch position `at`, taken in by the sampler.
///
/// Not `LlamaSampler::sample`: its C call lets a C++ exception through, and a grammar
/// throws when it cannot take a token (a lazy grammar is handed the text of its trigger
/// back). `try_accept` catches it, and the reply fails with a message instead.
fn next_token(
    sampler: &mut LlamaSampler,
    ctx: &LlamaContext<'_>,
    at: i32,
) -> Result<LlamaToken, ModelError> {
    let mut candidates = ctx.token_data_array_ith(at);
    candidates.apply_sampler(sampler);
    let token = candidates
        .selected_token()
        .ok_or_else(|| server_error("the sampler chose no token"))?;
    sampler.try_accept(token).map_err(|e| {
        server_error(&format!(
            "the sampler could not take the token it chose: {e}"
        ))
    })?;
    Ok(token)
}

/// The sampler chain for a job: the grammar first (it masks what may not come next), then
/// greedy at temperature 0, else top-k, top-p, min-p and temperature.
fn sampler(model: &LlamaModel, job: &Job) -> Result<LlamaSampler, ModelError> {
    let mut chain = Vec::new();
    if let Some(grammar) = &job.grammar {
        let sampler = if grammar.lazy {
            let opens = [CALL_OPENS.to_string()];
            LlamaSampler::grammar_lazy_patterns(model, &grammar.rules, "root", &opens, &[])
        } else {
            LlamaSampler::grammar(model, &grammar.rules, "root")
        };
        chain.push(sampler.map_err(|e| ModelError::BadRequest {
            status: 400,
            message: format!("llama.cpp refused the grammar: {e}"),
        })?);
    }
    if job.temperature <= 0.0 {
        chain.push(LlamaSampler::greedy());
    } else {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        chain.extend([
            LlamaSampler::top_k(40),
            LlamaSampler::top_p(0.95, 1),
            LlamaSampler::min_p(0.05, 1),
            LlamaSampler::temp(job.temperature),
            LlamaSampler::dist(seed),
        ]);
    }
    Ok(LlamaSampler::chain_simple(chain))
}

/// What [`TextOut::push`] found.
enum Pushed {
    More,
    /// A stop sequence: the reply ends before it.
    Stop,
    /// The receiver is gone (the call was dropped).
    Gone,
}

/// Generated bytes → UTF-8 text, cut at the first stop sequence; what may still become a
/// stop sequence (or the rest of a multi-byte character) is held back.
struct TextOut<'s> {
    stop: &'s [String],
    pending: Vec<u8>,
    text: String,
    sent: usize,
}

impl<'s> TextOut<'s> {
    fn new(stop: &'s [String]) -> Self {
        TextOut {
            stop,
            pending: Vec::new(),
            text: String::new(),
            sent: 0,
        }
    }

    fn push(&mut self, bytes: &[u8], mut send: impl FnMut(String) -> bool) -> Pushed {
        self.pending.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(s) => s.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            // Invalid bytes (not a split character): shown as U+FFFD.
            Err(_) => self.pending.len(),
        };
        let chunk: Vec<u8> = self.pending.drain(..valid).collect();
        let search_from = self.text.len().saturating_sub(self.longest_stop());
        self.text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(at) = self.first_stop(search_from) {
            self.text.truncate(at);
            return if self.flush(self.text.len(), &mut send) {
                Pushed::Stop
            } else {
                Pushed::Gone
            };
        }
        let ready = self.text.len() - self.partial_stop_suffix();
        if self.flush(ready, &mut send) {
            Pushed::More
        } else {
            Pushed::Gone
        }
    }

    fn finish(&mut self, mut send: impl FnMut(String) -> bool) {
        self.flush(self.text.len(), &mut send);
    }

    /// Send `text[sent..upto]`; false when the receiver is gone.
    fn flush(&mut self, upto: usize, send: &mut impl FnMut(String) -> bool) -> bool {
        if upto <= self.sent {
            return true;
        }
        let delta = self.text[self.sent..upto].to_string();
        self.sent = upto;
        send(delta)
    }

    fn longest_stop(&self) -> usize {
        self.stop.iter().map(String::len).max().unwrap_or(0)
    }

    fn first_stop(&self, from: usize) -> Option<usize> {
        let from = (0..=from)
            .rev()
            .find(|i| self.text.is_char_boundary(*i))
            .unwrap_or(0);
        self.stop
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| self.text[from..].find(s.as_str()).map(|i| i + from))
            .min()
    }

    /// The longest tail of the text that is a proper prefix of a stop sequence.
    fn partial_stop_suffix(&self) -> usize {
        self.stop
            .iter()
            .flat_map(|s| {
                (1..s.len())
                    .filter(|n| s.is_char_boundary(*n))
                    .map(move |n| &s[..n])
            })
            .filter(|prefix| self.text[self.sent..].ends_with(prefix))
            .map(str::len)
            .max()
            .unwrap_or(0)
    }
}
