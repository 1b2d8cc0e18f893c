//! Running a recorded turn from the command line (`solve`, `resume`): `deepsolve_app::life`
//! runs it — every event to the store through the same event writer a server uses, so the
//! turn's log and its end are written exactly as a served turn's are, and a later `deepsolve
//! serve` shows it in its history — while every event is also drawn here. Ctrl-C cancels it
//! (recorded `cancelled`); a second Ctrl-C quits at once and leaves it `interrupted`,
//! resumable.

use std::sync::Arc;
use std::time::Duration;

use deepsolve_app::App;
use deepsolve_app::life::{Recorder, TurnFailure, TurnRun};
use deepsolve_app::turn::HeldWorkspace;
use deepsolve_core::{ChatModel, EventSink, TurnSpec};
use deepsolve_protocol::{StopReason, TurnEvent};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::answer::{AnswerTarget, deliver};
use crate::exit::Exit;
use crate::hints::{self, Watched};
use crate::output::{errln, stdout_closed};
use crate::render::{Display, closing_reason};

/// How often the live view's spinners and clocks move.
const TICK: Duration = Duration::from_millis(80);

/// What a recorded turn runs on, where it is recorded and where its answer goes.
pub(crate) struct Recorded<'a> {
    pub(crate) app: &'a App,
    pub(crate) recorder: &'a Recorder,
    /// The turn's workspace, held until its end is recorded.
    pub(crate) workspace: Option<HeldWorkspace>,
    pub(crate) display: Display,
    pub(crate) answer: AnswerTarget,
    /// The endpoint, for hints about its errors.
    pub(crate) base_url: String,
}

/// Every event to the display, through a channel: drawn on the command's task.
struct Show(mpsc::UnboundedSender<TurnEvent>);

impl EventSink for Show {
    fn send(&self, event: TurnEvent) {
        let _ = self.0.send(event);
    }
}

/// Run `spec` (recorded already) to its end, show it, deliver its answer; the exit it
/// deserves.
pub(crate) async fn run(mut run: Recorded<'_>, spec: TurnSpec) -> anyhow::Result<Exit> {
    let (show, mut shown) = mpsc::unbounded_channel();
    let model = Arc::new(Watched::new(run.app.model().clone()));
    let cancel = CancellationToken::new();
    let turn = TurnRun::new(run.app, spec)
        .model(model.clone())
        .workspace(run.workspace.take())
        .watcher(Arc::new(Show(show)))
        .cancel(cancel.clone());
    let result = {
        let turn = run.recorder.run(turn);
        tokio::pin!(turn);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut interrupts = Interrupts::new();
        let mut count = 0;
        loop {
            tokio::select! {
                Some(event) = shown.recv() => {
                    run.display.event(&event);
                    if stdout_closed() && !cancel.is_cancelled() {
                        // Nobody reads the events any more (`--json | head`): stop paying.
                        cancel.cancel();
                    }
                }
                result = &mut turn => break result,
                _ = tick.tick() => run.display.tick(),
                () = interrupts.next() => {
                    count += 1;
                    if count > 1 {
                        run.display.finish();
                        errln!("deepsolve: quit; the turn is interrupted (`deepsolve resume` continues it)");
                        std::process::exit(i32::from(Exit::Cancelled.code()));
                    }
                    cancel.cancel();
                    run.display.note("cancelling… (Ctrl-C again quits at once)");
                }
            }
        }
    };
    // The turn's end is recorded; what the display has not drawn yet is waiting here (the
    // sender went with the turn).
    while let Some(event) = shown.recv().await {
        run.display.event(&event);
    }
    let outcome = match result {
        Ok(outcome) => outcome,
        // The engine refused the turn before it started: its log says why, and so does this.
        Err(TurnFailure::NotStarted(e)) => return Err(e.into()),
        Err(crashed) => return Err(crashed.into()),
    };

    run.display.finish();
    deliver(&run.display.view, &run.answer)?;
    run.display.footer();
    let exit = match (outcome.stop_reason, &outcome.answer) {
        (_, Some(_)) => Exit::Answer,
        (StopReason::Cancelled, None) => Exit::Cancelled,
        (StopReason::ModelError, None) => run
            .display
            .view
            .error
            .as_ref()
            .map_or(Exit::Failure, |(kind, _)| Exit::for_model_error(*kind)),
        (_, None) => Exit::Failure,
    };
    // Nobody reads on (`--json | head`): the turn was stopped for that, nothing to say.
    let reason = closing_reason(&run.display.view).filter(|_| !stdout_closed());
    if let Some(reason) = reason {
        let hint = model
            .last_error()
            .filter(|_| outcome.stop_reason == StopReason::ModelError)
            .and_then(|e| hints::for_model_error(&e, &run.base_url, model.name()));
        match hint {
            Some(hint) => errln!("deepsolve: {reason}\n  hint: {hint}"),
            None => errln!("deepsolve: {reason}"),
        }
    }
    Ok(exit)
}

/// Ctrl-C (SIGINT) and SIGTERM, listened to for the whole turn (a listener made afresh for
/// each wait could miss a signal between two).
struct Interrupts {
    signals: Vec<tokio::signal::unix::Signal>,
}

impl Interrupts {
    fn new() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let signals = [SignalKind::interrupt(), SignalKind::terminate()]
            .into_iter()
            .filter_map(|kind| signal(kind).ok())
            .collect();
        Interrupts { signals }
    }

    /// The next one (never, if none could be listened to).
    async fn next(&mut self) {
        if self.signals.is_empty() {
            return std::future::pending().await;
        }
        let waits = self.signals.iter_mut().map(|s| Box::pin(s.recv()));
        match futures::future::select_all(waits).await {
            (Some(()), _, _) => {}
            (None, _, _) => std::future::pending().await,
        }
    }
}
