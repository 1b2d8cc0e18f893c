//! What the server benchmark reads from `/proc`: CPU time and memory of a process and its
//! descendants, and the busy time of the whole machine.

use std::collections::HashMap;

/// Clock ticks per second of `/proc` CPU fields (`USER_HZ`, 100 on every Linux target).
pub(crate) const TICKS_PER_S: f64 = 100.0;

/// The CPU fields of `/proc/<pid>/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProcCpu {
    pub(crate) ppid: u32,
    /// User plus system time of the process itself.
    pub(crate) own: u64,
    /// User plus system time of its children that it has waited for.
    pub(crate) reaped_children: u64,
}

/// Parse `/proc/<pid>/stat`. The command name is in parentheses and may hold spaces or
/// parentheses itself, so fields are counted from the last `)`.
pub(crate) fn parse_stat(stat: &str) -> Option<ProcCpu> {
    let (_, after) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
    let num = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some(ProcCpu {
        ppid: u32::try_from(num(1)?).ok()?,
        own: num(11)? + num(12)?,
        reaped_children: num(13)? + num(14)?,
    })
}

pub(crate) fn proc_cpu(pid: u32) -> Option<ProcCpu> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Busy ticks of the whole machine from the `cpu` line of `/proc/stat`: everything but idle
/// and iowait (guest time is already inside user).
pub(crate) fn parse_system_busy(proc_stat: &str) -> Option<u64> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let total: u64 = v.iter().take(8).sum();
    Some(total - v.get(3)? - v.get(4)?)
}

pub(crate) fn system_busy() -> Option<u64> {
    parse_system_busy(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`).
pub(crate) fn parse_status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub(crate) fn status_kib(pid: u32, field: &str) -> Option<u64> {
    parse_status_kib(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
        field,
    )
}

pub(crate) fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:").unwrap_or(0)
}

/// Reset the peak RSS (`VmHWM`) of `pid` to its current RSS.
pub(crate) fn reset_peak(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// Every process's CPU fields, by pid (zombies included: their times stay readable until
/// they are reaped).
pub(crate) fn scan() -> HashMap<u32, ProcCpu> {
    let mut procs = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some(cpu) = proc_cpu(pid) {
                procs.insert(pid, cpu);
            }
        }
    }
    procs
}

/// CPU ticks of the descendants of `root` (not `root` itself), each counted with the children
/// it reaped; the subtrees of `skip` are left out. A descendant alive at one reading and
/// reaped by the next moves into its parent's reaped time with its whole total, so the
/// difference of two readings is the CPU spent between them.
pub(crate) fn tree_cpu(root: u32, procs: &HashMap<u32, ProcCpu>, skip: &[u32]) -> u64 {
    let mut total = 0;
    let mut stack = vec![root];
    while let Some(parent) = stack.pop() {
        for (&pid, cpu) in procs.iter().filter(|(_, c)| c.ppid == parent) {
            if !skip.contains(&pid) {
                total += cpu.own + cpu.reaped_children;
                stack.push(pid);
            }
        }
    }
    total
}

/// Make this process the reaper of its orphaned descendants: processes that sandboxes
/// detach (bubblewrap forks its sandboxed child away from the server) stay in its tree, so
/// their CPU can be counted.
pub(crate) fn become_subreaper() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    Ok(())
}

/// Reap every exited child of this process (orphans adopted as subreaper, and children whose
/// handles are gone). Call it only when no `std::process::Child` of this process is still to
/// be waited for.
pub(crate) fn reap_exited_children() {
    while let Ok(Some(_)) = rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_count_from_the_last_parenthesis() {
        let stat = "4242 (tokio (rt) x) S 17 4242 4242 0 -1 4194560 1 0 0 0 250 30 7 3 20 0 9 0";
        assert_eq!(
            parse_stat(stat),
            Some(ProcCpu {
                ppid: 17,
                own: 280,
                reaped_children: 10
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn system_busy_leaves_out_idle_and_iowait() {
        let stat = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n";
        assert_eq!(parse_system_busy(stat), Some(161));
    }

    #[test]
    fn status_fields_in_kib() {
        let status = "Name:\tdeepsolve\nVmHWM:\t   70312 kB\nVmRSS:\t   20480 kB\n";
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(20480));
        assert_eq!(parse_status_kib(status, "VmHWM:"), Some(70312));
        assert_eq!(parse_status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn tree_cpu_sums_descendants_outside_skipped_subtrees() {
        let cpu = |ppid, own, reaped_children| ProcCpu {
            ppid,
            own,
            reaped_children,
        };
        let procs = HashMap::from([
            (10, cpu(1, 1000, 40)),
            (11, cpu(10, 5, 0)),
            (12, cpu(11, 7, 2)),
            (13, cpu(1, 99, 99)),
        ]);
        assert_eq!(tree_cpu(10, &procs, &[]), 5 + 7 + 2);
        assert_eq!(tree_cpu(1, &procs, &[11]), 1000 + 40 + 99 + 99);
    }
}
