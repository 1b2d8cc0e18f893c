//! `deepsolve serve`: the HTTP server on an embedded SQLite file (or PostgreSQL by URL).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use deepsolve_server::{AuthMode, ServerConfig};
use deepsolve_store::{Store, StoreOptions, redact_url};

use crate::ConfigArgs;
use crate::setup::{build_app, load_settings, report_sandbox};

/// Where the database lives; shared by `serve` and `users`.
#[derive(Args, Clone, Default)]
pub(crate) struct DatabaseArgs {
    /// sqlite://PATH or postgres://USER:PASS@HOST/DB (default: an SQLite file in the user's
    /// data directory, e.g. ~/.local/share/deepsolve/deepsolve.db).
    #[arg(
        long,
        global = true,
        env = "DEEPSOLVE_DATABASE_URL",
        value_name = "URL"
    )]
    pub database: Option<String>,
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Listen address. Without any user (`deepsolve users add`), only loopback is allowed.
    #[arg(long, env = "DEEPSOLVE_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// This instance's stable name: after a crash, its running turns are marked interrupted
    /// on restart (default: the listen address).
    #[arg(long, env = "DEEPSOLVE_INSTANCE_ID")]
    pub instance_id: Option<String>,
    /// Turns this process runs at once.
    #[arg(long, default_value_t = 4096)]
    pub max_turns: usize,
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// The database URL: the flag, or the default SQLite file (its directory created).
pub(crate) fn database_url(args: &DatabaseArgs) -> anyhow::Result<String> {
    if let Some(url) = &args.database {
        return Ok(url.clone());
    }
    let dir = data_dir()?;
    Ok(format!("sqlite://{}", dir.join("deepsolve.db").display()))
}

fn data_dir() -> anyhow::Result<PathBuf> {
    let dir = deepsolve_app::data_dir().context("pass --database")?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

pub(crate) async fn open_store(args: &DatabaseArgs) -> anyhow::Result<Store> {
    let url = database_url(args)?;
    Store::open(&url, StoreOptions::default())
        .await
        .with_context(|| format!("cannot open the database {}", redact_url(&url)))
}

pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    init_logging();
    let loaded = load_settings(&args.config)?;
    let max_turns = args.max_turns.max(1);
    let app = build_app(&loaded, Some(max_turns)).await?;
    report_sandbox(&app);
    let solve = &loaded.settings.solve;
    let store = open_store(&args.database).await?;
    let config = ServerConfig {
        instance_id: args
            .instance_id
            .clone()
            .unwrap_or_else(|| args.addr.to_string()),
        defaults: solve.clone(),
        context_window: loaded
            .settings
            .llm
            .context_window
            .unwrap_or(deepsolve_core::DEFAULT_CONTEXT_WINDOW),
        max_running_turns: max_turns,
        workspace_root: Some(deepsolve_app::default_workspace_root()?),
        workspace_retention: deepsolve_app::gc::days(loaded.settings.sandbox.retention_days),
        settings_path: Some(loaded.path.clone()),
        ..ServerConfig::default()
    };
    let state = deepsolve_server::prepare(store, Arc::new(app), config).await?;
    let listener = deepsolve_server::bind(args.addr, state.auth).await?;
    let local = listener.local_addr()?;
    let mode = match state.auth {
        AuthMode::SingleUser => "single-user mode: no token needed",
        AuthMode::Tokens => "bearer tokens required",
    };
    // The first stdout line is machine-readable: scripts and tests wait for it.
    println!("listening on http://{local}");
    eprintln!("deepsolve: serving on http://{local} ({mode}); Ctrl-C stops");
    let collector = deepsolve_server::gc::spawn_collector(&state);
    deepsolve_server::serve(listener, state, shutdown_signal()).await?;
    collector.stop().await;
    Ok(ExitCode::SUCCESS)
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DEEPSOLVE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
