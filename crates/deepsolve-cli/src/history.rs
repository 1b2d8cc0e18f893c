//! `deepsolve history`, `show` and `resume`: the turns recorded in the store (this command
//! line's and the server's alike, for the same user).

use clap::Args;
use deepsolve_app::default_workspace_root;
use deepsolve_app::life::{Recorder, hold_workspace_for};
use deepsolve_app::owner::{cli_owner, interrupt_dead_cli_turns};
use deepsolve_app::stored::{StoredTurnError, TurnImages, resume_spec, stored_images};
use deepsolve_protocol::{StopReason, TurnStatus, Usage};
use deepsolve_store::{Store, TurnRecord};
use serde::Serialize;

use crate::answer::AnswerTarget;
use crate::database::{DatabaseArgs, open_store};
use crate::exit::{Exit, UsageError};
use crate::kb_cmd::print_json;
use crate::output::{errln, outln};
use crate::recorded::{self, Recorded};
use crate::render::{Display, printable};
use crate::setup::{build_recording_app, knowledge, load_settings, report_sandbox, user_id};
use crate::solve::protocol;
use crate::{ConfigArgs, RunArgs};

/// Events read from the log per query while replaying a turn.
const PAGE: u32 = 1000;

/// Who looks, in which store.
#[derive(Args)]
pub(crate) struct StoreArgs {
    /// Act as this user of the server (default: the single-user identity).
    #[arg(long, value_name = "NAME")]
    pub(crate) user: Option<String>,
    #[command(flatten)]
    pub(crate) database: DatabaseArgs,
    #[command(flatten)]
    pub(crate) config: ConfigArgs,
}

#[derive(Args)]
pub(crate) struct HistoryArgs {
    /// How many turns, newest first.
    #[arg(short = 'n', long = "limit", value_name = "N", default_value_t = 20)]
    limit: u32,
    /// Print JSON on stdout instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args)]
pub(crate) struct ShowArgs {
    /// The turn's id (default: the most recent turn).
    turn: Option<String>,
    /// Print the turn's stored events on stdout, one JSON object per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args)]
pub(crate) struct ResumeArgs {
    /// The interrupted turn's id (default: the most recent turn).
    turn: Option<String>,
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    store: StoreArgs,
}

/// A turn as `history --json` lists it.
#[derive(Serialize)]
struct HistoryItem {
    id: String,
    session_id: String,
    status: TurnStatus,
    stop_reason: Option<StopReason>,
    problem: String,
    answer: Option<String>,
    error: Option<String>,
    rounds: u32,
    elapsed_ms: u64,
    usage: Option<Usage>,
    /// Milliseconds since the Unix epoch.
    created_at: i64,
    finished_at: Option<i64>,
}

/// The store of `args`, with the turns of command-line processes that died marked
/// interrupted, and the user acting on it.
async fn open(args: &StoreArgs) -> anyhow::Result<(Store, String, deepsolve_settings::Loaded)> {
    let loaded = load_settings(&args.config)?;
    let store = open_store(&args.database, &loaded.settings.server).await?;
    interrupt_dead_cli_turns(&store).await?;
    let user = user_id(&store, args.user.as_deref()).await?;
    Ok((store, user, loaded))
}

pub(crate) async fn history(args: HistoryArgs) -> anyhow::Result<Exit> {
    let (store, user, _) = open(&args.store).await?;
    let turns = store.user_turns(&user, args.limit.max(1)).await;
    store.close().await;
    let turns = turns?;
    if args.json {
        let items: Vec<HistoryItem> = turns.into_iter().map(history_item).collect();
        print_json(&items)?;
        return Ok(Exit::Answer);
    }
    if turns.is_empty() {
        errln!("no turns yet: `deepsolve solve \"…\"` solves one");
    }
    for (i, turn) in turns.iter().enumerate() {
        // A turn with an older one of its session below it follows up on that one.
        let follows = turns[i + 1..]
            .iter()
            .any(|older| older.session_id == turn.session_id);
        outln!(
            "{}  {}  {:<14} {}{}",
            turn.id,
            utc_minute(turn.created_at),
            status_text(turn),
            printable(&title(&turn.problem)),
            console::style(if follows { "  (follow-up)" } else { "" }).dim()
        );
    }
    Ok(Exit::Answer)
}

pub(crate) async fn show(args: ShowArgs) -> anyhow::Result<Exit> {
    let (store, user, _) = open(&args.store).await?;
    let result = show_turn(&store, &user, args.turn.as_deref(), args.json).await;
    store.close().await;
    result
}

async fn show_turn(
    store: &Store,
    user: &str,
    turn: Option<&str>,
    json: bool,
) -> anyhow::Result<Exit> {
    let turn = find_turn(store, user, turn).await?;
    if json {
        replay(store, &turn.id, |event| outln!("{}", event.data)).await?;
        return Ok(Exit::Answer);
    }
    errln!(
        "{}",
        console::style(format!(
            "{} · {} · session {} · {}",
            turn.id,
            utc_minute(turn.created_at),
            turn.session_id,
            status_text(&turn)
        ))
        .for_stderr()
        .dim()
    );
    errln!(
        "{} {}",
        console::style("Problem:").for_stderr().bold(),
        printable(&title(&turn.problem))
    );
    let workspace = default_workspace_root()
        .ok()
        .map(|root| root.join(&turn.id));
    let mut display = Display::new(false, workspace.filter(|w| w.is_dir()));
    replay(store, &turn.id, |stored| match stored.decode() {
        Ok(event) => display.event(&event),
        Err(e) => errln!(
            "warning: event {} of the turn is unreadable: {e}",
            stored.seq
        ),
    })
    .await?;
    display.finish();
    crate::answer::deliver(&display.view, &AnswerTarget::default())?;
    display.footer();
    if turn.status == TurnStatus::Interrupted {
        errln!("interrupted: `deepsolve resume {}` continues it", turn.id);
    } else if let Some(reason) = crate::render::closing_reason(&display.view) {
        errln!("{reason}");
    }
    Ok(Exit::Answer)
}

pub(crate) async fn resume(args: ResumeArgs) -> anyhow::Result<Exit> {
    let (store, user, loaded) = open(&args.store).await?;
    let result = resume_turn(&args, &store, &user, &loaded).await;
    store.close().await;
    result
}

async fn resume_turn(
    args: &ResumeArgs,
    store: &Store,
    user: &str,
    loaded: &deepsolve_settings::Loaded,
) -> anyhow::Result<Exit> {
    let turn = find_turn(store, user, args.turn.as_deref()).await?;
    if turn.status != TurnStatus::Interrupted {
        return Err(UsageError::error(format!(
            "turn {} is {}: only an interrupted turn can be resumed",
            turn.id,
            turn.status.as_str()
        )));
    }
    let knowledge = match turn.spec.material {
        Some(_) => Some(knowledge(loaded, store.clone())?),
        None => None,
    };
    let (builder, recheck) = crate::solve::app_builder(loaded).await?;
    let recorder = Recorder::spawn(store.clone(), cli_owner());
    let app = build_recording_app(builder, &recorder, knowledge)?;
    report_sandbox(&app);
    let mut spec = resume_spec(store, &turn, &app.tools().available())
        .await
        .map_err(|e| refused(&turn.id, e))?;
    // The same images, from the store; whether the model sees them is asked again.
    let images = stored_images(store, &turn.id).await?;
    if !images.is_empty() {
        let sees = app
            .image_sight(&images, &spec.tools, spec.language)
            .await
            .map_err(|e| anyhow::anyhow!("cannot resume turn {}: {e}", turn.id))?;
        TurnImages { images, sees }.put_on(&mut spec);
    }
    let held = hold_workspace_for(&app, &spec.tools, &turn.id, default_workspace_root)?;
    let workspace = held.as_ref().map(|h| h.path().to_path_buf());
    spec.protocol = protocol(args.run.protocol, loaded.settings.llm.protocol);
    if !recorder.reclaim(&turn.id).await? {
        anyhow::bail!(
            "turn {} is no longer interrupted: it was resumed elsewhere",
            turn.id
        );
    }
    // What the turn did before, then what it does now.
    let mut display = Display::new(args.run.json, workspace);
    if !args.run.json {
        replay(store, &turn.id, |stored| {
            if let Ok(event) = stored.decode() {
                display.event(&event);
            }
        })
        .await?;
    }
    let run = Recorded {
        app: &app,
        recorder: &recorder,
        workspace: held,
        display,
        answer: AnswerTarget {
            json: args.run.json,
            file: args.run.output.clone(),
        },
        base_url: crate::setup::base_url(loaded),
    };
    crate::solve::rechecking(recheck, recorded::run(run, spec)).await
}

/// A resume refused: the turn is not resumable here and now (exit 1), or named wrongly.
fn refused(turn_id: &str, e: StoredTurnError) -> anyhow::Error {
    match e {
        StoredTurnError::NotInterrupted(_) => UsageError::error(format!("turn {turn_id}: {e}")),
        other => anyhow::Error::new(other).context(format!("cannot resume turn {turn_id}")),
    }
}

/// The turn `id` of this user, else (no id) their most recent one.
async fn find_turn(store: &Store, user: &str, id: Option<&str>) -> anyhow::Result<TurnRecord> {
    let found = match id {
        Some(id) => store.turn(id, user).await?,
        None => store.user_turns(user, 1).await?.into_iter().next(),
    };
    found.ok_or_else(|| {
        UsageError::error(match id {
            Some(id) => format!("no turn '{id}' (`deepsolve history` lists them)"),
            None => "no turns yet: `deepsolve solve \"…\"` solves one".into(),
        })
    })
}

/// Every stored event of a turn, in order, to `each`.
async fn replay(
    store: &Store,
    turn_id: &str,
    mut each: impl FnMut(&deepsolve_store::StoredEvent),
) -> anyhow::Result<()> {
    let mut after = None;
    loop {
        let page = store.events_after(turn_id, after, PAGE).await?;
        for event in &page {
            each(event);
        }
        match page.last() {
            Some(last) if page.len() == PAGE as usize => after = Some(last.seq),
            _ => return Ok(()),
        }
    }
}

fn history_item(t: TurnRecord) -> HistoryItem {
    HistoryItem {
        id: t.id,
        session_id: t.session_id,
        status: t.status,
        stop_reason: t.stop_reason,
        problem: t.problem,
        answer: t.answer,
        error: t.error,
        rounds: t.rounds,
        elapsed_ms: t.elapsed_ms,
        usage: t.usage,
        created_at: t.created_at,
        finished_at: t.finished_at,
    }
}

/// `answered`, `max_rounds`, `interrupted`, `running`…: how the turn stands or ended.
fn status_text(turn: &TurnRecord) -> String {
    match (turn.status, turn.stop_reason) {
        (TurnStatus::Finished, Some(reason)) => reason.to_string(),
        (status, _) => status.as_str().to_string(),
    }
}

/// The problem's first line, shortened.
fn title(problem: &str) -> String {
    const CHARS: usize = 72;
    let line = problem.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= CHARS {
        line
    } else {
        format!("{}…", line.chars().take(CHARS - 1).collect::<String>())
    }
}

/// `2026-12-04 16:55Z` from milliseconds since the Unix epoch.
pub(crate) fn utc_minute(ms: i64) -> String {
    let minutes = ms.div_euclid(60_000);
    let (days, minute_of_day) = (minutes.div_euclid(1440), minutes.rem_euclid(1440));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}Z",
        minute_of_day / 60,
        minute_of_day % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_minutes() {
        assert_eq!(utc_minute(0), "1970-01-01 00:00Z");
        assert_eq!(utc_minute(1_796_403_300_000), "2026-12-04 16:55Z");
        assert_eq!(utc_minute(951_782_400_000), "2000-02-29 00:00Z");
    }

    #[test]
    fn titles_are_one_short_line() {
        assert_eq!(title("Solve\n x + 1 = 2"), "Solve x + 1 = 2");
        assert_eq!(title(&"a ".repeat(100)).chars().count(), 72);
    }
}
