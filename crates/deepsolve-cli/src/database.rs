//! Which database the commands that read or record turns use (`--database`, else
//! `server.database`, else an SQLite file in the data directory), and opening it.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use deepsolve_settings::ServerSettings;
use deepsolve_store::{Store, StoreOptions, redact_url};
use secrecy::ExposeSecret;

/// Where the database lives; shared by `serve` and `users`.
#[derive(Args, Clone, Default)]
pub(crate) struct DatabaseArgs {
    /// sqlite://PATH or postgres://USER:PASS@HOST/DB (default: server.database, else an SQLite
    /// file in the user's data directory, e.g. ~/.local/share/deepsolve/deepsolve.db).
    #[arg(
        long,
        global = true,
        env = "DEEPSOLVE_DATABASE_URL",
        value_name = "URL"
    )]
    pub database: Option<String>,
}

/// The database URL: the flag (or `DEEPSOLVE_DATABASE_URL`), else `server.database`, else
/// the default SQLite file (its directory created).
pub(crate) fn database_url(
    args: &DatabaseArgs,
    settings: &ServerSettings,
) -> anyhow::Result<String> {
    if let Some(url) = configured_database(args, settings) {
        return Ok(url);
    }
    let file = default_database_file()?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(sqlite_url(&file))
}

/// The database named by the flag (or `DEEPSOLVE_DATABASE_URL`), else by `server.database`.
pub(crate) fn configured_database(
    args: &DatabaseArgs,
    settings: &ServerSettings,
) -> Option<String> {
    args.database.clone().or_else(|| {
        settings
            .database
            .as_ref()
            .map(|url| url.expose_secret().to_string())
    })
}

/// The embedded store's default file, in the data directory (not created here).
pub(crate) fn default_database_file() -> anyhow::Result<PathBuf> {
    let dir = deepsolve_app::data_dir().context("no data directory: pass --database")?;
    Ok(dir.join("deepsolve.db"))
}

pub(crate) fn sqlite_url(file: &Path) -> String {
    format!("sqlite://{}", file.display())
}

pub(crate) async fn open_store(
    args: &DatabaseArgs,
    settings: &ServerSettings,
) -> anyhow::Result<Store> {
    let url = database_url(args, settings)?;
    Store::open(&url, StoreOptions::default())
        .await
        .with_context(|| format!("cannot open the database {}", redact_url(&url)))
}
