//! `deepsolve serve`: the HTTP server on an embedded SQLite file (or PostgreSQL by URL).

use crate::exit::Exit;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use deepsolve_app::ArtifactStore;
use deepsolve_protocol::api::PriceView;
use deepsolve_server::{
    AuthMode, ConnectionLimits, CorsOrigins, KbConfig, LinkKey, MetricsToken, PublicUrl,
    ServerConfig,
};
use deepsolve_settings::ServerSettings;

use crate::ConfigArgs;
use crate::database::{DatabaseArgs, open_store};
use crate::output::{errln, outln};
use crate::setup::{build_app_with_knowledge, knowledge, load_settings, report_sandbox};

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Listen address (default: server.addr, else 127.0.0.1:8080). Without any user
    /// (`deepsolve users add`), only loopback is allowed.
    #[arg(long, env = "DEEPSOLVE_ADDR")]
    pub addr: Option<SocketAddr>,
    /// This instance's stable name: after a crash, its running turns are marked interrupted
    /// on restart (default: server.instance_id, else the listen address).
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

/// Where the server listens when neither `--addr` nor `server.addr` says.
const DEFAULT_ADDR: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    8080,
));

pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<Exit> {
    init_logging();
    let loaded = load_settings(&args.config)?;
    let server = &loaded.settings.server;
    let addr = listen_addr(args.addr, server)?;
    let cors_origins =
        CorsOrigins::parse(&server.cors_origins).context("in the setting server.cors_origins")?;
    let max_turns = args.max_turns.max(1);
    let solve = &loaded.settings.solve;
    let config = ServerConfig {
        instance_id: args
            .instance_id
            .clone()
            .or_else(|| server.instance_id.clone())
            .unwrap_or_else(|| addr.to_string()),
        defaults: solve.clone(),
        // Set once the app is built: the server's own window counts when none is configured.
        context_window: deepsolve_core::DEFAULT_CONTEXT_WINDOW,
        max_running_turns: max_turns,
        workspace_root: Some(deepsolve_app::default_workspace_root()?),
        workspace_retention: deepsolve_app::gc::days(loaded.settings.sandbox.retention_days),
        settings_path: Some(loaded.path.clone()),
        limits: connection_limits(server),
        cors_origins,
        session_ttl: Duration::from_secs(server.session_hours.saturating_mul(60 * 60)),
        secure_cookies: server.secure_cookies,
        trust_forwarded_proto: server.trust_forwarded_proto,
        price: loaded.settings.llm.price.as_ref().map(|price| PriceView {
            input_per_mtok: price.input_per_mtok,
            output_per_mtok: price.output_per_mtok,
            currency: price.currency.clone(),
        }),
        kb: KbConfig {
            max_file_bytes: deepsolve_app::kb_limits(&loaded.settings).max_file_bytes,
            ..KbConfig::default()
        },
        public_url: server
            .public_url
            .as_deref()
            .map(PublicUrl::parse)
            .transpose()
            .context("in the setting server.public_url")?,
        link_key: link_key(server)?,
        artifact_link_ttl: Duration::from_secs(server.artifact_link_hours.saturating_mul(60 * 60)),
        metrics_token: metrics_token(server)?,
        prompts: loaded.settings.prompts.clone(),
        shutdown_grace: Duration::from_secs(server.shutdown_grace_s),
        // Evaluation runs started over HTTP, beside the CLI's (`<data dir>/evals/<stamp>`).
        evals: deepsolve_server::evals::EvalConfig {
            root: Some(deepsolve_app::data_dir()?.join("evals").join("server")),
            ..deepsolve_server::evals::EvalConfig::default()
        },
        ..ServerConfig::default()
    };
    let store = open_store(&args.database, server).await?;
    // Turns a killed `deepsolve solve` left running show as interrupted (resumable).
    let dead = deepsolve_app::owner::interrupt_dead_cli_turns(&store).await?;
    if !dead.is_empty() {
        tracing::warn!(
            count = dead.len(),
            "turns left running by command-line processes that ended are now interrupted (resumable)"
        );
    }
    // Artifacts are stored as each call ends, so the web UI can show them while a turn runs.
    let artifacts = ArtifactStore::new(store.clone(), config.max_artifact_bytes);
    let knowledge = knowledge(&loaded, store.clone()).context("cannot set up knowledge bases")?;
    // The in-process model, when it runs here, loads now (before the server listens): a
    // line says so, as it may take seconds.
    crate::setup::report_local_loading(&loaded);
    let app = build_app_with_knowledge(&loaded, Some(max_turns), Some(artifacts), Some(knowledge))
        .await?;
    report_sandbox(&app);
    let mut config = config;
    let honours = app.model().honours();
    config.context_window = deepsolve_app::probe::context_window(&loaded.settings, &honours).0;
    let state = deepsolve_server::prepare(store, Arc::new(app), config).await?;
    let listener = deepsolve_server::bind(addr, state.auth).await?;
    let local = listener.local_addr()?;
    let mode = match state.auth {
        AuthMode::SingleUser => "single-user mode: no token needed",
        AuthMode::Tokens => "bearer tokens required",
    };
    // The first stdout line is machine-readable: scripts and tests wait for it.
    outln!("listening on http://{local}");
    errln!("deepsolve: serving on http://{local} ({mode}); Ctrl-C stops");
    if !deepsolve_server::ui::built() {
        errln!(
            "warning: this binary was built without the web UI (web/dist was missing): run scripts/build-web, then build again"
        );
    }
    let collector = deepsolve_server::gc::spawn_collector(&state);
    deepsolve_server::serve(listener, state, shutdown_signal()).await?;
    collector.stop().await;
    Ok(Exit::Answer)
}

/// The key that signs artifact links: from the variable `server.link_secret_env` names (the
/// same on every replica), else kept in the data directory (made on first use).
fn link_key(settings: &ServerSettings) -> anyhow::Result<LinkKey> {
    if let Some(name) = &settings.link_secret_env {
        let secret = std::env::var(name)
            .with_context(|| format!("server.link_secret_env names {name}, which is not set"))?;
        return LinkKey::from_secret(&secret)
            .with_context(|| format!("in the variable {name} (server.link_secret_env)"));
    }
    let dir = deepsolve_app::data_dir().context("no data directory for the link key")?;
    Ok(LinkKey::load_or_create(&dir.join("link.key"))?)
}

/// The `/metrics` scrape token, from the variable `server.metrics_token_env` names.
fn metrics_token(settings: &ServerSettings) -> anyhow::Result<Option<MetricsToken>> {
    let Some(name) = &settings.metrics_token_env else {
        return Ok(None);
    };
    let token = std::env::var(name)
        .ok()
        .as_deref()
        .and_then(MetricsToken::new)
        .with_context(|| {
            format!("server.metrics_token_env names {name}, which is not set or blank")
        })?;
    Ok(Some(token))
}

/// `--addr` (or `DEEPSOLVE_ADDR`), else `server.addr`, else the default.
fn listen_addr(flag: Option<SocketAddr>, settings: &ServerSettings) -> anyhow::Result<SocketAddr> {
    if let Some(addr) = flag {
        return Ok(addr);
    }
    match &settings.addr {
        Some(text) => text.trim().parse().with_context(|| {
            format!("the setting server.addr is `{text}`, not a listen address like 127.0.0.1:8080")
        }),
        None => Ok(DEFAULT_ADDR),
    }
}

/// The `server` settings' timeouts and connection cap (already clamped by the loader).
fn connection_limits(settings: &ServerSettings) -> ConnectionLimits {
    ConnectionLimits {
        header_timeout: Duration::from_secs(settings.header_timeout_s),
        body_timeout: Duration::from_secs(settings.body_timeout_s),
        idle_timeout: Duration::from_secs(settings.idle_timeout_s),
        max_connections: u32::try_from(settings.max_connections).unwrap_or(u32::MAX),
    }
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
