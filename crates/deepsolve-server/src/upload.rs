//! Reading uploaded files: `multipart/form-data` parts and base64 attachments, with the
//! per-file size cap checked while the bytes arrive (an oversize file is refused with 413
//! naming it and the cap before it is held whole) and names reduced to a safe base name.

use axum::extract::Multipart;
use axum::extract::multipart::{Field, MultipartError};
use axum::http::StatusCode;
use base64::Engine as _;
use deepsolve_protocol::api::{ApiErrorCode, TurnAttachment};

use crate::error::{ApiError, ApiResult};

/// Most files in one request.
pub const MAX_FILES: usize = 20;

/// One uploaded file, read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The base name (see [`base_name`]).
    pub name: String,
    pub bytes: Vec<u8>,
}

/// The caps of one request.
#[derive(Debug, Clone, Copy)]
pub struct UploadCaps {
    /// Largest file.
    pub max_file_bytes: u64,
    /// Most files.
    pub max_files: usize,
}

/// What a multipart body held: its files (parts `file`) and, for `POST /api/v1/turns`, the
/// part `request` (the JSON of the turn) and the turn's images (parts `image`).
#[derive(Debug, Default)]
pub struct Parts {
    pub files: Vec<Upload>,
    pub request: Option<Vec<u8>>,
    pub images: Vec<Upload>,
}

/// Longest file name kept, in characters.
const NAME_CHARS: usize = 200;

/// The file's base name: anything up to the last `/` or `\` dropped (`../../x.pdf` is
/// `x.pdf`), control characters removed, at most 200 characters — a longer name loses its
/// middle, keeping its start and its extension (which decides how it is read); `upload` when
/// nothing is left.
pub fn base_name(raw: &str) -> String {
    let base = raw.rsplit(['/', '\\']).next().unwrap_or(raw);
    let clean: String = base.chars().filter(|c| !c.is_control()).collect();
    let clean = clean.trim();
    if clean.is_empty() || clean.chars().all(|c| c == '.') {
        "upload".to_string()
    } else {
        deepsolve_kb::shorten_name(clean, NAME_CHARS)
    }
}

fn mib(bytes: u64) -> String {
    let mib = bytes as f64 / (1024.0 * 1024.0);
    if mib >= 10.0 || mib.fract() == 0.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
}

/// 413 for a file over the cap, naming both.
pub fn too_large(name: &str, max_file_bytes: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ApiErrorCode::PayloadTooLarge,
        format!(
            "{name}: the file is larger than the {} upload cap",
            mib(max_file_bytes)
        ),
    )
}

fn multipart_error(e: MultipartError, during: &str) -> ApiError {
    if crate::body_timeout::is_body_timeout(&e) {
        return ApiError::body_timed_out();
    }
    match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ApiErrorCode::PayloadTooLarge,
            format!("the upload is too large {during}: send fewer files per request"),
        ),
        _ => ApiError::bad_request(format!(
            "a broken multipart body {during}: {}",
            e.body_text()
        )),
    }
}

/// Read one field whole, refusing it once it passes the cap.
async fn read_field(mut field: Field<'_>, name: &str, max_bytes: u64) -> ApiResult<Vec<u8>> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|e| multipart_error(e, &format!("while reading {name}")))?
    {
        if (bytes.len() + chunk.len()) as u64 > max_bytes {
            return Err(too_large(name, max_bytes));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Read every part. Parts other than `file` (and `request` and `image` when `turn` gives the
/// images' caps) are refused by name; so are more than `caps.max_files` files (or
/// `max_files` images) and a file without a name.
pub async fn read_parts(
    mut multipart: Multipart,
    caps: UploadCaps,
    turn: Option<UploadCaps>,
) -> ApiResult<Parts> {
    let with_request = turn.is_some();
    let mut parts = Parts::default();
    loop {
        let field = multipart
            .next_field()
            .await
            .map_err(|e| multipart_error(e, "between parts"))?;
        let Some(field) = field else { break };
        let part = field.name().unwrap_or("").to_string();
        match part.as_str() {
            "file" => {
                if parts.files.len() >= caps.max_files {
                    return Err(invalid(format!(
                        "at most {} files per request",
                        caps.max_files
                    )));
                }
                let Some(raw) = field.file_name().map(str::to_string) else {
                    return Err(invalid("a part 'file' without a filename"));
                };
                let name = base_name(&raw);
                let bytes = read_field(field, &name, caps.max_file_bytes).await?;
                parts.files.push(Upload { name, bytes });
            }
            "image" if with_request => {
                let images = turn.unwrap_or(caps);
                if parts.images.len() >= images.max_files {
                    return Err(invalid(format!(
                        "at most {} images per turn",
                        images.max_files
                    )));
                }
                let name = base_name(field.file_name().unwrap_or("image"));
                let bytes = read_field(field, &name, images.max_file_bytes).await?;
                parts.images.push(Upload { name, bytes });
            }
            "request" if with_request => {
                if parts.request.is_some() {
                    return Err(invalid("more than one part 'request'"));
                }
                // The turn's JSON: the problem and its options, never large.
                let bytes = read_field(field, "request", 1024 * 1024).await?;
                parts.request = Some(bytes);
            }
            other => {
                let expected = if with_request {
                    "'request', 'file' and 'image'"
                } else {
                    "'file'"
                };
                return Err(invalid(format!(
                    "unexpected part '{other}': the parts are {expected}"
                )));
            }
        }
    }
    Ok(parts)
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::invalid(ApiErrorCode::InvalidRequest, message)
}

/// Decode JSON attachments, with the same caps as uploaded files.
pub fn decode_attachments(
    attachments: &[TurnAttachment],
    caps: UploadCaps,
) -> ApiResult<Vec<Upload>> {
    if attachments.len() > caps.max_files {
        return Err(invalid(format!(
            "at most {} attachments per turn",
            caps.max_files
        )));
    }
    attachments
        .iter()
        .map(|a| {
            let name = base_name(&a.name);
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(a.data_base64.trim())
                .map_err(|e| invalid(format!("{name}: data_base64 is not base64 ({e})")))?;
            if bytes.len() as u64 > caps.max_file_bytes {
                return Err(too_large(&name, caps.max_file_bytes));
            }
            Ok(Upload { name, bytes })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_only_a_safe_base_name() {
        assert_eq!(base_name("../../x.pdf"), "x.pdf");
        assert_eq!(base_name("..\\..\\windows\\x.pdf"), "x.pdf");
        assert_eq!(base_name("/etc/passwd"), "passwd");
        assert_eq!(base_name("a\r\nb.txt"), "ab.txt");
        assert_eq!(base_name(".."), "upload");
        assert_eq!(base_name("dir/"), "upload");
        assert_eq!(base_name("讲义.pdf"), "讲义.pdf");
        assert_eq!(base_name(&"x".repeat(500)).chars().count(), 200);
        let long = base_name(&format!("notes-{}.md", "n".repeat(5_000)));
        assert_eq!(long.chars().count(), 200);
        assert!(
            long.starts_with("notes-nnn") && long.ends_with("nnn.md"),
            "{long}"
        );
    }

    #[test]
    fn an_oversize_attachment_names_the_file_and_the_cap() {
        let caps = UploadCaps {
            max_file_bytes: 4,
            max_files: 2,
        };
        let ok = TurnAttachment {
            name: "a.txt".into(),
            data_base64: "aGk=".into(),
        };
        assert_eq!(
            decode_attachments(std::slice::from_ref(&ok), caps).expect("decoded")[0].bytes,
            b"hi"
        );
        let big = TurnAttachment {
            name: "../big.txt".into(),
            data_base64: "aGVsbG8gd29ybGQ=".into(),
        };
        let err = decode_attachments(&[big], caps).expect_err("too large");
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(
            err.message.contains("big.txt") && err.message.contains("MiB"),
            "{}",
            err.message
        );
        let bad = TurnAttachment {
            name: "b.txt".into(),
            data_base64: "%%%".into(),
        };
        let err = decode_attachments(&[bad], caps).expect_err("not base64");
        assert!(err.message.contains("b.txt"), "{}", err.message);
        let err = decode_attachments(&[ok.clone(), ok.clone(), ok], caps).expect_err("too many");
        assert!(err.message.contains("at most 2"), "{}", err.message);
    }
}
