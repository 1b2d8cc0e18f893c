//! cgroup v2, where the host delegates one: a cgroup per turn beneath ours with `memory.max`,
//! `memory.swap.max = 0` and `pids.max`, which every sandbox of the turn joins between `fork`
//! and `exec`, so the kernel enforces the turn's budget over everything it starts.
//!
//! Usable only when a cgroup we create beneath ours gets the `memory` and `pids`
//! controllers, i.e. our cgroup has them and lists them in `cgroup.subtree_control`. We never
//! move our own process to make that possible (the host's layout is the host's business); when
//! it is not so, [`CgroupParent::detect`] says why and the watchdog is used instead.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The controllers a turn's cgroup needs.
const NEEDED: [&str; 2] = ["memory", "pids"];

/// A cgroup v2 directory whose sub-cgroups get the memory and pids controllers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupParent {
    dir: PathBuf,
}

impl CgroupParent {
    /// Our own cgroup, when the host delegates what a turn needs; otherwise the reason, one
    /// line (e.g. "cgroup v2 memory controller not delegated").
    pub(crate) fn detect() -> Result<CgroupParent, String> {
        let own = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("/proc/self/cgroup is unreadable: {e}"))?;
        let mounts = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("/proc/self/mountinfo is unreadable: {e}"))?;
        let dir = locate(&own, &mounts)?;
        CgroupParent::delegated(&dir, &format!("deepsolve-probe-{}", std::process::id()))
    }

    /// Whether `dir` can parent turn cgroups: it offers memory and pids, enables them for its
    /// children, and a child created as `probe` really gets them and takes a limit. The probe
    /// child is removed again.
    pub(crate) fn delegated(dir: &Path, probe: &str) -> Result<CgroupParent, String> {
        let offered = read_list(&dir.join("cgroup.controllers"))
            .map_err(|e| format!("{} is not a cgroup v2 directory ({e})", dir.display()))?;
        if let Some(missing) = first_missing(&offered) {
            return Err(format!(
                "cgroup v2 {missing} controller not delegated: {} offers {}",
                dir.display(),
                shown(&offered)
            ));
        }
        let enabled = read_list(&dir.join("cgroup.subtree_control")).unwrap_or_default();
        if let Some(missing) = first_missing(&enabled) {
            return Err(format!(
                "cgroup v2 {missing} controller not enabled for sub-cgroups of {}: its cgroup.subtree_control lacks it",
                dir.display()
            ));
        }
        let parent = CgroupParent {
            dir: dir.to_path_buf(),
        };
        let child = dir.join(probe);
        let tried = parent.try_child(&child);
        let _ = fs::remove_dir(&child);
        tried.map(|()| parent)
    }

    fn try_child(&self, child: &Path) -> Result<(), String> {
        fs::create_dir(child)
            .map_err(|e| format!("cannot create a cgroup in {}: {e}", self.dir.display()))?;
        let got = read_list(&child.join("cgroup.controllers")).unwrap_or_default();
        if let Some(missing) = first_missing(&got) {
            return Err(format!(
                "a cgroup created in {} lacks the {missing} controller",
                self.dir.display()
            ));
        }
        fs::write(child.join("memory.max"), "max")
            .map_err(|e| format!("cannot set memory.max in {}: {e}", self.dir.display()))
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Our cgroup v2 directory on the host: the `0::` line of `/proc/self/cgroup` under the
/// cgroup2 mount of `/proc/self/mountinfo`.
pub(crate) fn locate(own: &str, mountinfo: &str) -> Result<PathBuf, String> {
    let path = own
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or("no cgroup v2 hierarchy (this host uses cgroup v1 only)")?;
    let (root, mount) = mountinfo
        .lines()
        .find_map(cgroup2_mount)
        .ok_or("cgroup v2 is not mounted")?;
    // Inside a cgroup namespace the mount's root may be below the hierarchy's root.
    let below = path.strip_prefix(root.as_str()).unwrap_or(path);
    let below = below.trim_start_matches('/');
    let mount = PathBuf::from(mount);
    Ok(if below.is_empty() {
        mount
    } else {
        mount.join(below)
    })
}

/// `(root, mount point)` of a cgroup2 line of mountinfo.
fn cgroup2_mount(line: &str) -> Option<(String, String)> {
    let (left, right) = line.split_once(" - ")?;
    if right.split_whitespace().next()? != "cgroup2" {
        return None;
    }
    let fields: Vec<&str> = left.split_whitespace().collect();
    Some((unescape(fields.get(3)?), unescape(fields.get(4)?)))
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest
            .get(at + 1..at + 4)
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match code {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn read_list(path: &Path) -> io::Result<Vec<String>> {
    Ok(fs::read_to_string(path)?
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

fn first_missing(have: &[String]) -> Option<&'static str> {
    NEEDED.into_iter().find(|c| !have.iter().any(|h| h == c))
}

fn shown(list: &[String]) -> String {
    if list.is_empty() {
        "no controllers".into()
    } else {
        format!("only {}", list.join(" "))
    }
}

/// One turn's cgroup. Removed once its processes are gone (see [`TurnCgroup::remove`]).
#[derive(Debug)]
pub(crate) struct TurnCgroup {
    dir: PathBuf,
}

/// What the kernel counted in a turn's cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Events {
    /// Processes the OOM killer killed for the memory limit.
    pub oom_kills: u64,
    /// Forks refused at `pids.max`.
    pub pids_max: u64,
}

impl TurnCgroup {
    pub(crate) fn create(
        parent: &CgroupParent,
        name: &str,
        memory_bytes: u64,
        tasks: u64,
    ) -> io::Result<TurnCgroup> {
        let dir = parent.dir.join(name);
        fs::create_dir(&dir)?;
        let cgroup = TurnCgroup { dir };
        let set = |file: &str, value: String| fs::write(cgroup.dir.join(file), value);
        let configured = set("memory.max", memory_bytes.to_string())
            .and_then(|()| set("memory.swap.max", "0".into()))
            .and_then(|()| set("pids.max", tasks.to_string()))
            // The whole turn goes when the OOM killer acts, not one victim of its choosing.
            .and_then(|()| set("memory.oom.group", "1".into()));
        match configured {
            Ok(()) => Ok(cgroup),
            Err(e) => {
                let _ = fs::remove_dir(&cgroup.dir);
                Err(e)
            }
        }
    }

    /// The file a process writes `0` to in order to join.
    pub(crate) fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    pub(crate) fn events(&self) -> Events {
        let count = |file: &str, key: &str| {
            fs::read_to_string(self.dir.join(file))
                .ok()
                .and_then(|text| event_count(&text, key))
                .unwrap_or(0)
        };
        Events {
            oom_kills: count("memory.events", "oom_kill"),
            pids_max: count("pids.events", "max"),
        }
    }

    /// Kill what is left and remove the directory; `false` while processes still exit (the
    /// caller tries again later).
    pub(crate) fn remove(&self) -> bool {
        let _ = fs::write(self.dir.join("cgroup.kill"), "1");
        match fs::remove_dir(&self.dir) {
            Ok(()) => true,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        }
    }
}

fn event_count(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn our_cgroup_is_found_under_the_cgroup2_mount() {
        let own = "4:memory:/x\n0::/user.slice/app.service\n";
        assert_eq!(
            locate(own, MOUNTS),
            Ok(PathBuf::from(
                "/sys/fs/cgroup/unified/user.slice/app.service"
            ))
        );
        assert_eq!(
            locate("0::/\n", MOUNTS),
            Ok(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert!(locate("4:memory:/x\n", MOUNTS).unwrap_err().contains("v1"));
        let v1_only = "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert!(
            locate("0::/\n", v1_only)
                .unwrap_err()
                .contains("not mounted")
        );
        let spaced = "41 31 0:38 /ns /mnt/cg\\040v2 rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            locate("0::/ns/turns\n", spaced),
            Ok(PathBuf::from("/mnt/cg v2/turns"))
        );
    }

    /// A directory laid out like a cgroup v2 directory (regular files stand in for cgroupfs).
    fn fake_cgroup(controllers: &str, subtree: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("cgroup.controllers"), controllers).unwrap();
        fs::write(dir.path().join("cgroup.subtree_control"), subtree).unwrap();
        dir
    }

    #[test]
    fn a_parent_without_the_memory_controller_says_so() {
        let dir = fake_cgroup("hugetlb\n", "");
        let why = CgroupParent::delegated(dir.path(), "probe").unwrap_err();
        assert!(
            why.starts_with("cgroup v2 memory controller not delegated") && why.contains("hugetlb"),
            "{why}"
        );
        let dir = fake_cgroup("cpu memory\n", "memory\n");
        let why = CgroupParent::delegated(dir.path(), "probe").unwrap_err();
        assert!(why.contains("pids controller not delegated"), "{why}");
        let dir = fake_cgroup("memory pids\n", "memory\n");
        let why = CgroupParent::delegated(dir.path(), "probe").unwrap_err();
        assert!(
            why.contains("pids controller not enabled for sub-cgroups"),
            "{why}"
        );
    }

    #[test]
    fn a_child_without_controllers_is_refused_and_removed() {
        // The controllers are enabled for children, but a plain directory's child has no
        // cgroup.controllers file: the probe must notice and clean up.
        let dir = fake_cgroup("memory pids\n", "memory pids\n");
        let why = CgroupParent::delegated(dir.path(), "probe").unwrap_err();
        assert!(why.contains("lacks the memory controller"), "{why}");
        assert!(!dir.path().join("probe").exists());
    }

    #[test]
    fn a_turn_cgroup_gets_its_limits_and_reports_events() {
        let dir = tempfile::tempdir().unwrap();
        let parent = CgroupParent {
            dir: dir.path().to_path_buf(),
        };
        let turn = TurnCgroup::create(&parent, "turn-1", 256 << 20, 64).unwrap();
        let read = |f: &str| fs::read_to_string(dir.path().join("turn-1").join(f)).unwrap();
        assert_eq!(read("memory.max"), (256u64 << 20).to_string());
        assert_eq!(read("memory.swap.max"), "0");
        assert_eq!(read("pids.max"), "64");
        assert_eq!(read("memory.oom.group"), "1");
        assert_eq!(turn.procs(), dir.path().join("turn-1/cgroup.procs"));
        fs::write(
            dir.path().join("turn-1/memory.events"),
            "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\n",
        )
        .unwrap();
        fs::write(dir.path().join("turn-1/pids.events"), "max 3\n").unwrap();
        assert_eq!(
            turn.events(),
            Events {
                oom_kills: 1,
                pids_max: 3
            }
        );
    }

    #[test]
    fn this_host_reports_a_reason_or_a_parent() {
        // Either outcome is legitimate; what matters is that detection never panics and a
        // refusal is one readable line.
        match CgroupParent::detect() {
            Ok(parent) => assert!(parent.dir().is_absolute()),
            Err(why) => assert!(!why.is_empty() && !why.contains('\n'), "{why}"),
        }
    }
}
