//! The owner of a turn a command-line process runs, and whether that process still lives.
//!
//! A server marks its own turns interrupted when it restarts under the same instance id. A
//! `deepsolve solve` that is killed never restarts, so its turns name the process itself —
//! `cli:<host>:<boot id>:<pid>:<start time>` — and anyone on the same host can tell whether
//! it is gone: another boot, no such process, or another process under the same pid (its
//! start time differs). Such turns are marked interrupted ([`interrupt_dead_cli_turns`]) and
//! can be resumed. Owners on other hosts are left alone: only their own host can judge them.

use deepsolve_store::{Store, StoreError};

/// The user id of single-user mode: the server's caller when no users exist, and the user a
/// command line acts as without `--user`.
pub const LOCAL_USER: &str = "local";

/// The prefix of every command-line owner.
pub const CLI_OWNER_PREFIX: &str = "cli:";

/// What a turn left running by a dead command-line process says about it.
const CLI_DIED: &str = "the command-line process running the turn ended before it (killed or crashed); `deepsolve resume` continues it";

/// This process as the owner of the turns it runs.
pub fn cli_owner() -> String {
    let me = ProcessStamp::current();
    format!(
        "{CLI_OWNER_PREFIX}{}:{}:{}:{}",
        me.host,
        me.boot,
        std::process::id(),
        me.start.as_deref().unwrap_or("-")
    )
}

/// Whether the process an owner names is still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    Gone,
    /// Not a command-line owner, or one of another host (or a system without `/proc`).
    Unknown,
}

/// See [`Liveness`].
pub fn cli_owner_liveness(owner: &str) -> Liveness {
    let Some(rest) = owner.strip_prefix(CLI_OWNER_PREFIX) else {
        return Liveness::Unknown;
    };
    // Host names hold no `:`; the fields are host, boot, pid, start.
    let fields: Vec<&str> = rest.split(':').collect();
    let [host, boot, pid, start] = fields[..] else {
        return Liveness::Unknown;
    };
    let here = ProcessStamp::current();
    if host != here.host || boot == "-" || here.boot == "-" {
        return Liveness::Unknown;
    }
    if boot != here.boot {
        return Liveness::Gone;
    }
    let Ok(pid) = pid.parse::<u32>() else {
        return Liveness::Unknown;
    };
    match start_time(pid) {
        None => Liveness::Gone,
        Some(now) if start != "-" && now != start => Liveness::Gone,
        Some(_) => Liveness::Alive,
    }
}

/// Mark interrupted the running turns of command-line processes that are gone (see the
/// module docs). Returns the turns' ids.
pub async fn interrupt_dead_cli_turns(store: &Store) -> Result<Vec<String>, StoreError> {
    let mut interrupted = Vec::new();
    for owner in store.running_owners(CLI_OWNER_PREFIX).await? {
        if cli_owner_liveness(&owner) == Liveness::Gone {
            interrupted.extend(store.interrupt_owner(&owner, CLI_DIED).await?);
        }
    }
    Ok(interrupted)
}

/// What identifies this process on this machine.
struct ProcessStamp {
    host: String,
    boot: String,
    start: Option<String>,
}

impl ProcessStamp {
    fn current() -> ProcessStamp {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        ProcessStamp {
            host: read("/proc/sys/kernel/hostname")
                .map(|h| h.replace(':', "_"))
                .unwrap_or_else(|| "localhost".into()),
            boot: read("/proc/sys/kernel/random/boot_id").unwrap_or_else(|| "-".into()),
            start: start_time(std::process::id()),
        }
    }
}

/// A process's start time (clock ticks after boot, field 22 of `/proc/<pid>/stat`); `None`
/// when there is no such process. The command name before it is in parentheses and may hold
/// spaces or parentheses itself, so fields are counted from the last `)`.
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    // After the name: state is field 3, so field 22 is the 20th.
    after.split_whitespace().nth(19).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_or_reused_pid_is_gone() {
        let me = cli_owner();
        assert!(me.starts_with(CLI_OWNER_PREFIX), "{me}");
        assert_eq!(cli_owner_liveness(&me), Liveness::Alive);
        let fields: Vec<&str> = me.split(':').collect();
        let other_start = format!("{}:{}:{}:{}:0", fields[0], fields[1], fields[2], fields[3]);
        assert_eq!(
            cli_owner_liveness(&other_start),
            Liveness::Gone,
            "pid reused"
        );
        let no_pid = format!("{}:{}:{}:4194304:1", fields[0], fields[1], fields[2]);
        assert_eq!(cli_owner_liveness(&no_pid), Liveness::Gone);
        let rebooted = format!(
            "{}:{}:another-boot:{}:{}",
            fields[0], fields[1], fields[3], fields[4]
        );
        assert_eq!(cli_owner_liveness(&rebooted), Liveness::Gone);
        let elsewhere = format!(
            "{}:elsewhere:{}:{}:{}",
            fields[0], fields[2], fields[3], fields[4]
        );
        assert_eq!(cli_owner_liveness(&elsewhere), Liveness::Unknown);
        assert_eq!(cli_owner_liveness("127.0.0.1:8080"), Liveness::Unknown);
    }
}
