//! A GGUF file checked before llama.cpp loads it: present, GGUF, whole (its tensors end
//! within the file), and what its header says (chat template, trained context, the shape
//! the KV cache is sized from). llama.cpp's loader fails on all of these with a bare null;
//! here each is a named error.

use std::ffi::{CStr, CString};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::LocalError;

/// What the header of a whole GGUF file says.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufInfo {
    pub path: PathBuf,
    pub file_bytes: u64,
    pub architecture: String,
    pub chat_template: Option<String>,
    /// `<arch>.context_length`: the context the model was trained for.
    pub trained_context: Option<u32>,
    /// Bytes of K and V per token of context, all layers (f16), when the header says.
    pub kv_bytes_per_token: Option<u64>,
}

const MAGIC: &[u8; 4] = b"GGUF";

/// Check `path` and read its header.
pub fn inspect(path: &Path) -> Result<GgufInfo, LocalError> {
    let unreadable = |e: std::io::Error| LocalError::Unreadable {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => {
            return Err(LocalError::Unreadable {
                path: path.to_path_buf(),
                message: "not a regular file".into(),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LocalError::Missing {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(unreadable(e)),
    };
    let mut head = Vec::with_capacity(4);
    std::fs::File::open(path)
        .map_err(unreadable)?
        .take(4)
        .read_to_end(&mut head)
        .map_err(unreadable)?;
    if head.as_slice() != MAGIC {
        return Err(LocalError::NotGguf {
            path: path.to_path_buf(),
            found: describe_bytes(&head),
        });
    }
    let header = Header::open(path)?;
    let expected = header.data_end();
    if meta.len() < expected {
        return Err(LocalError::Truncated {
            path: path.to_path_buf(),
            actual: meta.len(),
            expected,
        });
    }
    let architecture = header.string("general.architecture").unwrap_or_default();
    let arch_u64 = |key: &str| header.unsigned(&format!("{architecture}.{key}"));
    let kv_bytes_per_token = (|| {
        let layers = arch_u64("block_count")?;
        let heads = arch_u64("attention.head_count")?;
        let kv_heads = arch_u64("attention.head_count_kv").unwrap_or(heads);
        let embedding = arch_u64("embedding_length")?;
        let head_dim = embedding.checked_div(heads)?;
        // K and V, f16.
        Some(2 * layers * kv_heads * head_dim * 2)
    })();
    Ok(GgufInfo {
        path: path.to_path_buf(),
        file_bytes: meta.len(),
        chat_template: header.string("tokenizer.chat_template"),
        trained_context: arch_u64("context_length").and_then(|n| u32::try_from(n).ok()),
        architecture,
        kv_bytes_per_token,
    })
}

/// The first bytes of a file that is not GGUF, for the error.
fn describe_bytes(head: &[u8]) -> String {
    if head.is_empty() {
        return "nothing (the file is empty)".to_string();
    }
    if head.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        return format!("{:?}", String::from_utf8_lossy(head));
    }
    let hex: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
    format!("the bytes {}", hex.join(" "))
}

/// ggml's header reader over a file, metadata only (`no_alloc`: no tensor data is read).
struct Header {
    ctx: *mut llama_cpp_sys_2::gguf_context,
}

impl Header {
    fn open(path: &Path) -> Result<Self, LocalError> {
        let bad = || LocalError::BadHeader {
            path: path.to_path_buf(),
        };
        let c_path = path
            .to_str()
            .and_then(|p| CString::new(p).ok())
            .ok_or_else(bad)?;
        let params = llama_cpp_sys_2::gguf_init_params {
            no_alloc: true,
            ctx: std::ptr::null_mut(),
        };
        // SAFETY: `c_path` is a NUL-terminated string that outlives the call; with `no_alloc`
        // and a null `ctx` ggml only reads the header and returns an owned context or null.
        let ctx = unsafe { llama_cpp_sys_2::gguf_init_from_file(c_path.as_ptr(), params) };
        if ctx.is_null() {
            return Err(bad());
        }
        Ok(Header { ctx })
    }

    /// Where the last tensor's data ends: the least size of a whole file.
    fn data_end(&self) -> u64 {
        // SAFETY: `self.ctx` is a live context from `gguf_init_from_file` (freed only in
        // Drop); tensor ids are taken below `gguf_get_n_tensors`.
        unsafe {
            let base = llama_cpp_sys_2::gguf_get_data_offset(self.ctx) as u64;
            let tensors = llama_cpp_sys_2::gguf_get_n_tensors(self.ctx);
            (0..tensors)
                .map(|i| {
                    let offset = llama_cpp_sys_2::gguf_get_tensor_offset(self.ctx, i) as u64;
                    let size = llama_cpp_sys_2::gguf_get_tensor_size(self.ctx, i) as u64;
                    base.saturating_add(offset).saturating_add(size)
                })
                .max()
                .unwrap_or(base)
        }
    }

    fn key(&self, key: &str) -> Option<i64> {
        let c_key = CString::new(key).ok()?;
        // SAFETY: live context; `c_key` is NUL-terminated and outlives the call.
        let id = unsafe { llama_cpp_sys_2::gguf_find_key(self.ctx, c_key.as_ptr()) };
        (id >= 0).then_some(id)
    }

    fn string(&self, key: &str) -> Option<String> {
        let id = self.key(key)?;
        // SAFETY: live context and an id from `gguf_find_key`; the value is read only when
        // its type is a string (ggml aborts on a type mismatch), and copied before return.
        unsafe {
            if llama_cpp_sys_2::gguf_get_kv_type(self.ctx, id) != llama_cpp_sys_2::GGUF_TYPE_STRING
            {
                return None;
            }
            let ptr = llama_cpp_sys_2::gguf_get_val_str(self.ctx, id);
            if ptr.is_null() {
                return None;
            }
            Some(CStr::from_ptr(ptr).to_string_lossy().into_owned())
        }
    }

    /// An integer value of any unsigned or non-negative signed width.
    fn unsigned(&self, key: &str) -> Option<u64> {
        let id = self.key(key)?;
        // SAFETY: live context and an id from `gguf_find_key`; each getter is called only for
        // the type `gguf_get_kv_type` reports (ggml aborts on a mismatch).
        unsafe {
            let kind = llama_cpp_sys_2::gguf_get_kv_type(self.ctx, id);
            match kind {
                llama_cpp_sys_2::GGUF_TYPE_UINT8 => {
                    Some(u64::from(llama_cpp_sys_2::gguf_get_val_u8(self.ctx, id)))
                }
                llama_cpp_sys_2::GGUF_TYPE_UINT16 => {
                    Some(u64::from(llama_cpp_sys_2::gguf_get_val_u16(self.ctx, id)))
                }
                llama_cpp_sys_2::GGUF_TYPE_UINT32 => {
                    Some(u64::from(llama_cpp_sys_2::gguf_get_val_u32(self.ctx, id)))
                }
                llama_cpp_sys_2::GGUF_TYPE_UINT64 => {
                    Some(llama_cpp_sys_2::gguf_get_val_u64(self.ctx, id))
                }
                llama_cpp_sys_2::GGUF_TYPE_INT32 => {
                    u64::try_from(llama_cpp_sys_2::gguf_get_val_i32(self.ctx, id)).ok()
                }
                llama_cpp_sys_2::GGUF_TYPE_INT64 => {
                    u64::try_from(llama_cpp_sys_2::gguf_get_val_i64(self.ctx, id)).ok()
                }
                _ => None,
            }
        }
    }
}

impl Drop for Header {
    fn drop(&mut self) {
        // SAFETY: `self.ctx` came from `gguf_init_from_file`, is non-null, and is freed once.
        unsafe { llama_cpp_sys_2::gguf_free(self.ctx) }
    }
}

/// Bytes of memory this process may still use: the kernel's `MemAvailable`, lowered to
/// the cgroup's headroom when a limit is set. `None` when neither can be read.
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let system = meminfo.as_deref().and_then(|text| {
        text.lines()
            .find_map(|line| line.strip_prefix("MemAvailable:"))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
    });
    let read_u64 = |file: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{file}"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let cgroup = match (read_u64("memory.max"), read_u64("memory.current")) {
        (Some(max), Some(current)) => Some(max.saturating_sub(current)),
        _ => None,
    };
    match (system, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
