//! SHIM (temporary, never committed)
#[derive(Debug, Clone, Copy)]
pub struct IngestProgress {
    pub pages_done: u32,
    pub pages_total: Option<u32>,
}
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct IngestError(pub String);
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KbError(pub String);
#[derive(Clone)]
pub struct Knowledge;
pub struct Hit {
    pub kb: String,
    pub document_id: String,
    pub title: String,
    pub page: Option<u32>,
    pub heading_path: Vec<String>,
    pub chunk_id: String,
    pub score: f64,
    pub text: String,
}
pub struct Retrieval {
    pub hits: Vec<Hit>,
}
impl Knowledge {
    pub fn ingestor(&self) -> &Self {
        self
    }
    pub async fn add(
        &self,
        _u: &str,
        _k: &str,
        _n: &str,
        _l: u64,
    ) -> Result<deepsolve_store::KbDocument, IngestError> {
        Err(IngestError("shim".into()))
    }
    pub async fn run(
        &self,
        _u: &str,
        _d: &str,
        _b: Vec<u8>,
        _p: &(dyn Fn(IngestProgress) + Send + Sync),
    ) -> Result<deepsolve_store::KbDocument, IngestError> {
        Err(IngestError("shim".into()))
    }
    pub async fn search(
        &self,
        _u: &str,
        _k: &[String],
        _q: &str,
        _t: Option<u32>,
    ) -> Result<Retrieval, KbError> {
        Err(KbError("shim".into()))
    }

    pub async fn resolve_kbs(
        &self,
        _u: &str,
        _n: &[String],
    ) -> Result<Vec<deepsolve_store::KnowledgeBase>, KbError> {
        Err(KbError("shim".into()))
    }
    pub async fn attachments_kb(
        &self,
        _u: &str,
        _t: &str,
    ) -> Result<deepsolve_store::KnowledgeBase, KbError> {
        Err(KbError("shim".into()))
    }
    pub async fn material(
        &self,
        _u: &str,
        _k: &[deepsolve_store::KnowledgeBase],
        _a: Option<&deepsolve_store::KnowledgeBase>,
    ) -> Result<deepsolve_protocol::Material, KbError> {
        Err(KbError("shim".into()))
    }
}
