//! The bounded, true-LRU store of live solve sessions, keyed by the server-resolved turn id.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use super::session::SolveSession;

pub(crate) type SessionHandle = Arc<Mutex<SolveSession>>;

pub(super) const DEFAULT_CAPACITY: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error(
        "too many turns are running at once ({capacity} live solve sessions); wait for one to finish or raise the limit"
    )]
    Full { capacity: usize },
    #[error("a turn with id '{0}' is already running")]
    Duplicate(String),
    #[error("invalid turn id '{0}': use letters, digits, '-' and '_' only (1-128 characters)")]
    InvalidId(String),
}

/// Sanitise an id to `[A-Za-z0-9_-]` so it can never be used as anything but a key.
pub(crate) fn sanitize_id(raw: &str) -> Result<String, StoreError> {
    let ok = !raw.is_empty()
        && raw.len() <= 128
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(raw.to_string())
    } else {
        Err(StoreError::InvalidId(raw.chars().take(64).collect()))
    }
}

#[derive(Default)]
struct Lru {
    tick: u64,
    entries: HashMap<String, (SessionHandle, u64)>,
    order: BTreeMap<u64, String>,
}

impl Lru {
    fn touch(&mut self, key: &str) -> Option<SessionHandle> {
        self.tick += 1;
        let tick = self.tick;
        let (handle, old) = self.entries.get_mut(key)?;
        self.order.remove(old);
        *old = tick;
        self.order.insert(tick, key.to_string());
        Some(handle.clone())
    }

    fn remove(&mut self, key: &str) -> Option<SessionHandle> {
        let (handle, tick) = self.entries.remove(key)?;
        self.order.remove(&tick);
        Some(handle)
    }

    /// The least recently used entry nobody else holds (its turn is gone without closing it).
    fn evictable(&self) -> Option<String> {
        self.order
            .values()
            .find(|key| {
                self.entries
                    .get(*key)
                    .is_some_and(|(h, _)| Arc::strong_count(h) == 1)
            })
            .cloned()
    }
}

/// Live sessions. A running turn holds its session's handle, so it can never be evicted
/// silently; when the store is full of running turns, a new turn is refused with a clear error.
pub struct SolveSessionStore {
    capacity: usize,
    lru: Mutex<Lru>,
}

impl Default for SolveSessionStore {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl SolveSessionStore {
    pub fn new(capacity: usize) -> Self {
        SolveSessionStore {
            capacity: capacity.max(1),
            lru: Mutex::new(Lru::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn open(&self, turn_id: &str, session: SolveSession) -> Result<SessionHandle, StoreError> {
        let key = sanitize_id(turn_id)?;
        let mut lru = self.lock();
        if lru.entries.contains_key(&key) {
            return Err(StoreError::Duplicate(key));
        }
        if lru.entries.len() >= self.capacity {
            let victim = lru.evictable().ok_or(StoreError::Full {
                capacity: self.capacity,
            })?;
            lru.remove(&victim);
        }
        let handle = Arc::new(Mutex::new(session));
        lru.entries.insert(key.clone(), (handle.clone(), 0));
        lru.touch(&key);
        Ok(handle)
    }

    /// Look a session up; refreshes its recency.
    pub fn get(&self, turn_id: &str) -> Option<SessionHandle> {
        self.lock().touch(turn_id)
    }

    pub fn close(&self, turn_id: &str) -> Option<SessionHandle> {
        self.lock().remove(turn_id)
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys from least to most recently used.
    pub fn keys_by_recency(&self) -> Vec<String> {
        self.lock().order.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> SolveSession {
        SolveSession::new("s", 2, 12)
    }

    #[test]
    fn get_refreshes_recency() {
        let store = SolveSessionStore::new(3);
        for id in ["a", "b", "c"] {
            drop(store.open(id, session()).unwrap());
        }
        store.get("a");
        assert_eq!(store.keys_by_recency(), ["b", "c", "a"]);
        // Full: the least recently used unheld entry ("b") goes.
        drop(store.open("d", session()).unwrap());
        assert_eq!(store.keys_by_recency(), ["c", "a", "d"]);
    }

    #[test]
    fn running_turns_are_never_evicted() {
        let store = SolveSessionStore::new(2);
        let _a = store.open("a", session()).unwrap();
        let _b = store.open("b", session()).unwrap();
        let err = store.open("c", session()).unwrap_err();
        assert_eq!(err, StoreError::Full { capacity: 2 });
        assert!(err.to_string().contains("too many turns"));
        assert_eq!(store.len(), 2);
    }

    #[test]
    fn ids_are_sanitised() {
        let store = SolveSessionStore::new(2);
        assert!(matches!(
            store.open("../etc", session()),
            Err(StoreError::InvalidId(_))
        ));
        assert!(store.open("turn_01-ab", session()).is_ok());
        assert!(matches!(
            store.open("turn_01-ab", session()),
            Err(StoreError::Duplicate(_))
        ));
    }
}
