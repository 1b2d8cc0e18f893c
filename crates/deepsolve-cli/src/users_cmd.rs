//! `deepsolve users add|token|revoke|list`: manage who may use the server. Once any user exists the
//! server requires bearer tokens (and may listen beyond loopback).

use crate::exit::Exit;

use anyhow::{Context, bail};
use clap::Subcommand;
use deepsolve_store::Role;

use crate::ConfigArgs;
use crate::database::{DatabaseArgs, open_store};
use crate::output::{errln, outln};
use crate::setup::load_settings;

#[derive(Subcommand)]
pub(crate) enum UsersAction {
    /// Create a user and print its first token (shown once; only its hash is stored).
    Add {
        name: String,
        /// May change server settings.
        #[arg(long)]
        admin: bool,
    },
    /// Issue a new token for a user and print it.
    Token {
        name: String,
        /// Revoke the user's existing tokens first.
        #[arg(long)]
        revoke_others: bool,
    },
    /// Revoke every token and end every web UI session of a user (it can no longer sign in
    /// until given a new token: deepsolve users token NAME).
    Revoke { name: String },
    /// List users.
    List,
}

/// `database` (the flag or `DEEPSOLVE_DATABASE_URL`) wins over `server.database` in the
/// settings, as for `serve`.
pub(crate) async fn run(
    action: UsersAction,
    database: &DatabaseArgs,
    config: &ConfigArgs,
) -> anyhow::Result<Exit> {
    let loaded = load_settings(config)?;
    let store = open_store(database, &loaded.settings.server).await?;
    match action {
        UsersAction::Add { name, admin } => {
            let role = if admin { Role::Admin } else { Role::User };
            let user = store.create_user(&name, role).await?;
            let token = store.issue_token(&user.id, "created with the user").await?;
            outln!("{}", token.token);
            errln!(
                "created {} '{}'; the token above is shown once",
                role.as_str(),
                user.name
            );
        }
        UsersAction::Token {
            name,
            revoke_others,
        } => {
            let Some(user) = store.user_by_name(&name).await? else {
                bail!("no user named '{name}' (deepsolve users add {name})");
            };
            if revoke_others {
                let n = store.revoke_tokens(&user.id).await?;
                errln!("revoked {n} token(s)");
            }
            let token = store
                .issue_token(&user.id, "issued by deepsolve users token")
                .await
                .context("cannot issue a token")?;
            outln!("{}", token.token);
        }
        UsersAction::Revoke { name } => {
            let Some(user) = store.user_by_name(&name).await? else {
                bail!("no user named '{name}' (deepsolve users list shows them)");
            };
            let tokens = store.revoke_tokens(&user.id).await?;
            let sessions = store.revoke_browser_sessions(&user.id).await?;
            errln!("revoked {tokens} token(s) and ended {sessions} browser session(s) of '{name}'");
        }
        UsersAction::List => {
            for user in store.list_users().await? {
                outln!("{}\t{}", user.name, user.role.as_str());
            }
        }
    }
    store.close().await;
    Ok(Exit::Answer)
}
