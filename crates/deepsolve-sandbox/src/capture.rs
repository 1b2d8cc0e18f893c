//! Output kept with a cap while it streams: the first half of the budget and a rolling last
//! half; everything in between is counted and dropped, so 100 MB of output costs at most the
//! budget in memory.

use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl Capture {
    /// Keep at most `budget` bytes (at least 2).
    pub fn new(budget: usize) -> Self {
        let budget = budget.max(2);
        let head_cap = budget / 2;
        Capture {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: budget - head_cap,
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < self.head_cap {
            let take = bytes.len().min(self.head_cap - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend(bytes[bytes.len() - self.tail_cap..].iter().copied());
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(bytes.iter().copied());
    }

    /// Bytes seen, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes kept in memory.
    pub fn kept(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The kept text (lossy UTF-8), with a marker saying how much was left out.
    pub fn finish(&self) -> Captured {
        let omitted = self.total - self.kept() as u64;
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if omitted > 0 {
            text.push_str(&format!(
                "\n… [{omitted} bytes of output omitted; {} bytes in total] …\n",
                self.total
            ));
        }
        let (a, b) = self.tail.as_slices();
        let mut tail = Vec::with_capacity(a.len() + b.len());
        tail.extend_from_slice(a);
        tail.extend_from_slice(b);
        text.push_str(&String::from_utf8_lossy(&tail));
        Captured {
            text,
            total_bytes: self.total,
            truncated: omitted > 0,
        }
    }
}

/// One stream's output after the process (or the cell) is done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub text: String,
    pub total_bytes: u64,
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut c = Capture::new(16);
        c.push(b"hello ");
        c.push(b"world");
        let out = c.finish();
        assert_eq!(out.text, "hello world");
        assert!(!out.truncated);
        assert_eq!(out.total_bytes, 11);
    }

    #[test]
    fn large_output_keeps_head_and_tail() {
        let mut c = Capture::new(8);
        for chunk in [&b"abcdef"[..], b"ghij", b"klmnopqrst", b"uvwxyz"] {
            c.push(chunk);
        }
        assert_eq!(c.kept(), 8);
        let out = c.finish();
        assert!(out.text.starts_with("abcd"), "{}", out.text);
        assert!(out.text.ends_with("wxyz"), "{}", out.text);
        assert!(
            out.text
                .contains("18 bytes of output omitted; 26 bytes in total")
        );
        assert!(out.truncated);
    }

    #[test]
    fn memory_stays_at_the_budget() {
        let mut c = Capture::new(1024);
        let chunk = vec![b'x'; 4096];
        for _ in 0..1000 {
            c.push(&chunk);
        }
        assert_eq!(c.kept(), 1024);
        assert_eq!(c.total(), 4_096_000);
    }
}
