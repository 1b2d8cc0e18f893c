//! Reading a sandbox's process tree from the host's `/proc`: every descendant of the process
//! we spawned, its resident memory and its task count, cheaply enough to do every tick.
//!
//! The tree is closed: an orphan inside a sandbox is re-parented to the sandbox's pid-namespace
//! init (or to a subreaper inside it), both descendants of the root, so `setsid` or a double
//! fork does not take a process out of it. Children are listed per thread
//! (`/proc/<pid>/task/<tid>/children`), because a child belongs to the thread that forked it.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Resident memory and tasks of one process tree at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TreeSample {
    /// Sum of every process's RSS, bytes (pages shared between the processes count once per
    /// process: an overestimate that [`tree_pss`] corrects).
    pub rss_bytes: u64,
    /// Tasks (threads included) of every process but the root, which is bwrap's monitor on
    /// the host, not sandboxed code (without bwrap the root is counted: it is the code).
    pub tasks: u64,
    /// Every pid seen, the root first.
    pub pids: Vec<i32>,
}

/// Buffers reused from one tick to the next.
#[derive(Default)]
pub(crate) struct Reader {
    buf: Vec<u8>,
    stack: Vec<i32>,
}

/// Tasks in the tree may not exceed this many processes for one walk: a fork storm past the
/// kernel's cap is already stopped, and the walk must stay bounded whatever the tree holds.
const MAX_WALK: usize = 65_536;

impl Reader {
    /// Walk the tree under `root`. A process that vanishes mid-walk is simply not counted.
    pub(crate) fn sample(&mut self, root: i32, count_root: bool) -> TreeSample {
        let page = page_size();
        let mut sample = TreeSample::default();
        self.stack.clear();
        self.stack.push(root);
        while let Some(pid) = self.stack.pop() {
            if sample.pids.len() >= MAX_WALK {
                break;
            }
            let Some(stat) = read(&mut self.buf, &format!("/proc/{pid}/stat")).and_then(parse_stat)
            else {
                continue;
            };
            sample.pids.push(pid);
            sample.rss_bytes += stat.rss_pages.saturating_mul(page);
            if pid != root || count_root {
                sample.tasks += stat.threads;
            }
            self.push_children(pid, stat.threads);
        }
        sample
    }

    fn push_children(&mut self, pid: i32, threads: u64) {
        if threads <= 1 {
            self.push_children_of_task(pid, pid);
            return;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return;
        };
        let tids: Vec<i32> = tasks
            .flatten()
            .filter_map(|t| t.file_name().to_str()?.parse().ok())
            .collect();
        for tid in tids {
            self.push_children_of_task(pid, tid);
        }
    }

    fn push_children_of_task(&mut self, pid: i32, tid: i32) {
        if let Some(text) = read(&mut self.buf, &format!("/proc/{pid}/task/{tid}/children")) {
            self.stack.extend(parse_pids(text));
        }
    }
}

/// A small procfs file's contents, or `None` when the process is gone.
fn read<'a>(buf: &'a mut Vec<u8>, path: &str) -> Option<&'a [u8]> {
    buf.clear();
    let mut file = File::open(path).ok()?;
    file.read_to_end(buf).ok()?;
    Some(buf)
}

/// Proportional set size of the processes, bytes: a page shared by n processes counts 1/n
/// for each, so forked children sharing their parent's pages are not counted n times.
pub(crate) fn tree_pss(pids: &[i32]) -> u64 {
    let mut buf = String::new();
    pids.iter()
        .filter_map(|pid| {
            buf.clear();
            File::open(format!("/proc/{pid}/smaps_rollup"))
                .ok()?
                .read_to_string(&mut buf)
                .ok()?;
            parse_pss_kb(&buf)
        })
        .sum::<u64>()
        .saturating_mul(1024)
}

/// Bytes used on the tmpfs mounted at `inner` inside the sandbox whose process is `pid`
/// (seen through that process's root). Zero unless it is a tmpfs other than the host's own at
/// that path: while bwrap is still setting up, the process's root is the host's.
pub(crate) fn tmpfs_used(pid: i32, inner: &str) -> u64 {
    let path = format!("/proc/{pid}/root{inner}");
    let path = Path::new(&path);
    let Ok(fs) = rustix::fs::statfs(path) else {
        return 0;
    };
    if fs.f_type != TMPFS_MAGIC {
        return 0;
    }
    let theirs = rustix::fs::stat(path).map(|s| s.st_dev);
    let ours = rustix::fs::stat(inner).map(|s| s.st_dev);
    match (theirs, ours) {
        (Ok(theirs), Ok(ours)) if theirs == ours => 0,
        (Ok(_), _) => fs
            .f_blocks
            .saturating_sub(fs.f_bfree)
            .saturating_mul(fs.f_bsize as u64),
        (Err(_), _) => 0,
    }
}

/// `statfs(2)`'s `f_type` of a tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub threads: u64,
    pub rss_pages: u64,
}

/// `/proc/<pid>/stat`: the command name is in parentheses and may itself hold spaces and
/// parentheses, so the fields are counted from the last `)`.
pub(crate) fn parse_stat(text: &[u8]) -> Option<Stat> {
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&text[close + 1..]).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After the name: state is field 3 of the file, num_threads field 20, rss field 24.
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        threads: field(20)?,
        rss_pages: field(24)?,
    })
}

/// The parent pid (field 4) of `/proc/<pid>/stat`.
pub(crate) fn parse_ppid(text: &[u8]) -> Option<i32> {
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&text[close + 1..]).ok()?;
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

pub(crate) fn parse_pids(text: &[u8]) -> impl Iterator<Item = i32> + '_ {
    text.split(|b| b.is_ascii_whitespace())
        .filter_map(|word| std::str::from_utf8(word).ok()?.parse().ok())
}

/// The `Pss:` line of `smaps_rollup`, in kB.
pub(crate) fn parse_pss_kb(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("Pss:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = b"4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 1 0 0 20 0 3 0 123 45678 900 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                threads: 3,
                rss_pages: 900
            })
        );
        assert_eq!(parse_stat(b"12 (x"), None);
        assert_eq!(parse_ppid(line), Some(1));
    }

    #[test]
    fn children_and_pss_parse() {
        assert_eq!(parse_pids(b"12 13 140 ").collect::<Vec<_>>(), [12, 13, 140]);
        assert_eq!(parse_pids(b"").count(), 0);
        let rollup = "55d0-7ffc ---p 00000000 00:00 0 [rollup]\nRss:   10240 kB\nPss:    4096 kB\nPss_Anon: 100 kB\n";
        assert_eq!(parse_pss_kb(rollup), Some(4096));
    }

    #[test]
    fn our_own_tree_is_seen() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let sample = Reader::default().sample(me, true);
        assert!(sample.pids.contains(&(child.id() as i32)), "{sample:?}");
        assert!(sample.rss_bytes > 1 << 20 && sample.tasks >= 2);
        assert!(tree_pss(&sample.pids[..1]) > 0);
        let _ = child.kill();
        let _ = child.wait();
    }
}
