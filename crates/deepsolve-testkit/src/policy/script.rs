//! A fixed list of replies with an exact expected call count ("sequence mode").

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::lock;
use crate::reply::Reply;

/// Replies served in order, one per call. A call beyond the list is an error the caller
/// records ("unexpected call #N"); fewer calls than scripted fail [`Script::shortfall`].
#[derive(Debug)]
pub struct Script {
    replies: Mutex<VecDeque<Reply>>,
    expected: usize,
    calls: AtomicUsize,
}

impl Script {
    pub fn new(replies: Vec<Reply>) -> Self {
        Script {
            expected: replies.len(),
            replies: Mutex::new(replies.into()),
            calls: AtomicUsize::new(0),
        }
    }

    /// The next reply, or `Err(n)` for the 1-based number of a call beyond the script.
    pub fn next(&self) -> Result<Reply, usize> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        lock(&self.replies).pop_front().ok_or(n)
    }

    /// How many calls the script expects.
    pub fn expected(&self) -> usize {
        self.expected
    }

    /// How many calls arrived (including unexpected ones).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// `Some(message)` when fewer calls arrived than scripted.
    pub fn shortfall(&self) -> Option<String> {
        let calls = self.calls();
        (calls < self.expected).then(|| {
            format!(
                "expected exactly {} calls, got {calls} ({} scripted replies unused)",
                self.expected,
                self.expected - calls
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_calls_both_ways() {
        let s = Script::new(vec![Reply::text("a"), Reply::text("b")]);
        assert!(s.next().is_ok());
        assert!(
            s.shortfall()
                .unwrap()
                .contains("expected exactly 2 calls, got 1")
        );
        assert!(s.next().is_ok());
        assert_eq!(s.shortfall(), None);
        assert_eq!(s.next(), Err(3));
        assert_eq!(s.calls(), 3);
    }
}
