//! Probe verdicts kept between processes: one JSON file holding the latest [`Verdict`] per
//! endpoint and model (a CLI run reuses what `doctor` or an earlier run found, without
//! probing). Best effort throughout: a missing, unreadable or foreign file is as good as
//! none, and a write that fails only means the next process probes again.

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::probe::Verdict;

/// The file is a few KiB; anything far larger is not ours.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The most verdicts the file keeps (the oldest go first).
const MAX_VERDICTS: usize = 32;

/// What the file holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Kept {
    version: u32,
    verdicts: Vec<Verdict>,
}

/// 2: the `"required"` check also asks where the model would answer in text (a version-1
/// verdict may have taken a model calling on its own for a server holding the choice), so
/// older verdicts are probed again.
const VERSION: u32 = 2;

/// The verdict kept in `file` for `endpoint` and `model`, stale or not.
pub fn read(file: &Path, endpoint: &str, model: &str) -> Option<Verdict> {
    read_all(file)
        .verdicts
        .into_iter()
        .find(|v| v.endpoint == endpoint && v.model == model)
}

/// Keep `verdict` in `file`, replacing the one for its endpoint and model.
pub fn write(file: &Path, verdict: &Verdict) {
    let mut kept = read_all(file);
    kept.verdicts
        .retain(|v| !(v.endpoint == verdict.endpoint && v.model == verdict.model));
    kept.verdicts.push(verdict.clone());
    kept.verdicts.sort_by_key(|v| std::cmp::Reverse(v.taken_at));
    kept.verdicts.truncate(MAX_VERDICTS);
    kept.version = VERSION;
    // Best effort: a verdict not kept costs the next process one more probe.
    let _ = write_atomically(file, &kept);
}

fn read_all(file: &Path) -> Kept {
    let mut text = String::new();
    let read =
        std::fs::File::open(file).and_then(|f| f.take(MAX_FILE_BYTES).read_to_string(&mut text));
    if read.is_err() {
        return Kept::default();
    }
    match serde_json::from_str::<Kept>(&text) {
        Ok(kept) if kept.version == VERSION => kept,
        _ => Kept::default(),
    }
}

/// A temporary file and a rename, so a reader never sees half of one.
fn write_atomically(file: &Path, kept: &Kept) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = file
        .file_name()
        .map_or_else(|| "probe".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec_pretty(kept)?)?;
    std::fs::rename(&tmp, file).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(endpoint: &str, model: &str, taken_at: u64) -> Verdict {
        Verdict {
            endpoint: endpoint.into(),
            model: model.into(),
            findings: Vec::new(),
            plans_unforced: None,
            context_window: Some(4096),
            window_source: None,
            taken_at,
            stale: None,
        }
    }

    #[test]
    fn one_verdict_per_endpoint_and_model() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("cache").join("probes.json");
        assert_eq!(read(&file, "http://a/v1", "m"), None);
        write(&file, &verdict("http://a/v1", "m", 1));
        write(&file, &verdict("http://a/v1", "n", 2));
        let mut newer = verdict("http://a/v1", "m", 3);
        newer.stale = Some("why".into());
        write(&file, &newer);
        assert_eq!(read(&file, "http://a/v1", "m"), Some(newer));
        assert_eq!(read(&file, "http://a/v1", "n").map(|v| v.taken_at), Some(2));
        assert_eq!(read(&file, "http://b/v1", "m"), None);
        std::fs::write(&file, "not json").expect("write");
        assert_eq!(read(&file, "http://a/v1", "n"), None);
    }
}
