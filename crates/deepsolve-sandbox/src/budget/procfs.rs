//! Reading a sandbox's processes from the host: their resident memory and their task count,
//! cheaply enough to do every tick. Two views:
//!
//! - **The sandbox's pid namespace**, through the procfs bwrap mounts for it (the host
//!   reaches it as `/proc/<init>/root/proc`): one listing holds every process of the
//!   namespace, zombies and ones being re-parented included. Used once it is mounted.
//! - **The process tree** under the process we spawned (`/proc/<pid>/task/<tid>/children`,
//!   per thread, because a child belongs to the thread that forked it): before bwrap has
//!   mounted that procfs, and without bwrap. The tree is closed — an orphan is re-parented to
//!   the sandbox's init or a subreaper inside it — but a walk can miss, for one tick, the
//!   children of a process that exits mid-walk.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Resident memory and tasks of one sandbox at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TreeSample {
    /// Sum of every process's RSS, bytes (pages shared between the processes count once per
    /// process: an overestimate that [`tree_pss`] corrects).
    pub rss_bytes: u64,
    /// Tasks (threads included; a zombie counts until it is reaped) of the sandboxed code.
    pub tasks: u64,
    /// The `/proc` directory of every process seen.
    pub procs: Vec<String>,
    /// A tree walk's first child of the root: with bwrap, the pid-namespace init.
    pub first_child: Option<i32>,
}

/// Buffers and open procfs files reused from one tick to the next. An open
/// `/proc/<pid>/...` file stays bound to the process it was opened for (reading it fails once
/// that process is gone), so a cached file never reads a recycled pid; re-reading it at
/// offset 0 spares the path lookup that makes opening procfs files the expensive part.
#[derive(Default)]
pub(crate) struct Reader {
    buf: Vec<u8>,
    stack: Vec<i32>,
    open: HashMap<String, Opened>,
    /// Bumped every tick; files of processes no tick met since are closed.
    generation: u64,
}

/// Processes whose files stay open between ticks (two fds each, in the host process, whose
/// own fd limit they must not eat into); beyond that, files are opened and closed per read.
const MAX_OPEN: usize = 128;

/// The files a tick reads of a process.
struct Opened {
    stat: File,
    children: Option<File>,
    seen: u64,
}

/// At most this many processes are read per sandbox and tick, whatever it holds.
const MAX_WALK: usize = 65_536;

impl Reader {
    /// Walk the tree under `root` (counted itself only with `count_root`: with bwrap the
    /// root is bwrap's monitor on the host, not sandboxed code). A process that vanishes
    /// mid-walk is simply not counted.
    pub(crate) fn walk_tree(&mut self, root: i32, count_root: bool) -> TreeSample {
        let page = page_size();
        let mut sample = TreeSample::default();
        self.stack.clear();
        self.stack.push(root);
        while let Some(pid) = self.stack.pop() {
            if sample.procs.len() >= MAX_WALK {
                break;
            }
            let dir = format!("/proc/{pid}");
            let Some(stat) = self.stat(&dir) else {
                continue;
            };
            sample.rss_bytes += stat.rss_pages.saturating_mul(page);
            if pid != root || count_root {
                sample.tasks += tasks_of(&stat);
            }
            let first = self.stack.len();
            self.push_children(&dir, pid, stat.threads);
            if pid == root {
                sample.first_child = self.stack.get(first).copied();
            }
            sample.procs.push(dir);
        }
        sample
    }

    /// Every process of a pid namespace, from its procfs at `proc_dir`; `None` when it cannot
    /// be listed (the namespace is going away).
    pub(crate) fn list_namespace(&mut self, proc_dir: &str) -> Option<TreeSample> {
        let page = page_size();
        let mut sample = TreeSample::default();
        let entries = std::fs::read_dir(proc_dir).ok()?;
        for entry in entries.flatten() {
            if sample.procs.len() >= MAX_WALK {
                break;
            }
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            let dir = format!("{proc_dir}/{pid}");
            if let Some(stat) = self.stat(&dir) {
                sample.rss_bytes += stat.rss_pages.saturating_mul(page);
                sample.tasks += tasks_of(&stat);
                sample.procs.push(dir);
            }
        }
        Some(sample)
    }

    /// Close the files of processes that no tick met lately; call after each tick.
    pub(crate) fn end_tick(&mut self) {
        let current = self.generation;
        self.open.retain(|_, o| current.saturating_sub(o.seen) < 2);
        self.generation += 1;
    }

    fn stat(&mut self, dir: &str) -> Option<Stat> {
        if let Some(opened) = self.open.get_mut(dir) {
            opened.seen = self.generation;
            let stat = pread_all(&opened.stat, &mut self.buf).and_then(parse_stat);
            if stat.is_none() {
                self.open.remove(dir);
            }
            return stat;
        }
        let file = File::open(format!("{dir}/stat")).ok()?;
        let stat = pread_all(&file, &mut self.buf).and_then(parse_stat)?;
        if self.open.len() < MAX_OPEN {
            let opened = Opened {
                stat: file,
                children: None,
                seen: self.generation,
            };
            self.open.insert(dir.to_string(), opened);
        }
        Some(stat)
    }

    fn push_children(&mut self, dir: &str, pid: i32, threads: u64) {
        if threads <= 1 {
            self.push_children_of_single(dir, pid);
            return;
        }
        let Ok(tasks) = std::fs::read_dir(format!("{dir}/task")) else {
            return;
        };
        let tids: Vec<i32> = tasks
            .flatten()
            .filter_map(|t| t.file_name().to_str()?.parse().ok())
            .collect();
        for tid in tids {
            self.push_children_of_task(dir, tid);
        }
    }

    /// A single-threaded process's children, from its cached `children` file.
    fn push_children_of_single(&mut self, dir: &str, pid: i32) {
        let Some(opened) = self.open.get_mut(dir) else {
            return self.push_children_of_task(dir, pid);
        };
        if opened.children.is_none() {
            opened.children = File::open(format!("{dir}/task/{pid}/children")).ok();
        }
        if let Some(text) = opened
            .children
            .as_ref()
            .and_then(|f| pread_all(f, &mut self.buf))
        {
            self.stack.extend(parse_pids(text));
        }
    }

    fn push_children_of_task(&mut self, dir: &str, tid: i32) {
        if let Some(text) = File::open(format!("{dir}/task/{tid}/children"))
            .ok()
            .and_then(|f| pread_all(&f, &mut self.buf))
        {
            self.stack.extend(parse_pids(text));
        }
    }
}

/// A zombie reports no threads but holds its slot until it is reaped, as the kernel's
/// process limit counts it.
fn tasks_of(stat: &Stat) -> u64 {
    stat.threads.max(1)
}

/// A small procfs file's whole contents, read from offset 0 (procfs regenerates them on each
/// read), or `None` when its process is gone.
fn pread_all<'a>(file: &File, buf: &'a mut Vec<u8>) -> Option<&'a [u8]> {
    buf.clear();
    buf.resize(4096, 0);
    let mut len = 0;
    loop {
        let n = file.read_at(&mut buf[len..], len as u64).ok()?;
        if n == 0 {
            break;
        }
        len += n;
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
    }
    buf.truncate(len);
    Some(buf)
}

/// The procfs of the pid namespace whose init is `init`, as the host reaches it — once bwrap
/// has mounted it: until then the path leads to the host's own `/proc` (the process's root is
/// still the host's), which must never be taken for the sandbox's.
pub(crate) fn namespace_procfs(init: i32) -> Option<String> {
    let dir = format!("/proc/{init}/root/proc");
    let fs = rustix::fs::statfs(Path::new(&dir)).ok()?;
    if fs.f_type != PROC_SUPER_MAGIC {
        return None;
    }
    let theirs = rustix::fs::stat(Path::new(&dir)).ok()?.st_dev;
    let ours = rustix::fs::stat("/proc").ok()?.st_dev;
    (theirs != ours).then_some(dir)
}

/// `statfs(2)`'s `f_type` of procfs.
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// Proportional set size of the processes, bytes: a page shared by n processes counts 1/n
/// for each, so forked children sharing their parent's pages are not counted n times.
pub(crate) fn tree_pss(procs: &[String]) -> u64 {
    let mut buf = String::new();
    procs
        .iter()
        .filter_map(|dir| {
            buf.clear();
            File::open(format!("{dir}/smaps_rollup"))
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
    let Ok(theirs) = rustix::fs::stat(path).map(|s| s.st_dev) else {
        return 0;
    };
    if rustix::fs::stat(inner).map(|s| s.st_dev).ok() == Some(theirs) {
        return 0;
    }
    fs.f_blocks
        .saturating_sub(fs.f_bfree)
        .saturating_mul(fs.f_bsize as u64)
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
    fn our_own_tree_is_seen_and_our_procfs_is_not_a_namespace_of_its_own() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let mut reader = Reader::default();
        let sample = reader.walk_tree(me, true);
        let child_dir = format!("/proc/{}", child.id());
        assert!(sample.procs.contains(&child_dir), "{sample:?}");
        assert!(sample.rss_bytes > 1 << 20 && sample.tasks >= 2);
        assert!(tree_pss(&sample.procs[..1]) > 0);
        // Read again from the cached files: the same processes.
        reader.end_tick();
        assert!(reader.walk_tree(me, true).procs.contains(&child_dir));
        // Our root's /proc is the host's own: never a sandbox's namespace.
        assert_eq!(namespace_procfs(me), None);
        let _ = child.kill();
        let _ = child.wait();
    }
}
