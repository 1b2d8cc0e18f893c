//! A small byte-level Server-Sent-Events parser.
//!
//! We parse SSE ourselves instead of using `eventsource-stream` because we need two limits it
//! lacks (total bytes and one event's size) and full control over partial input: the parser is
//! fed raw network chunks, which may end anywhere — mid-line, between `\r` and `\n`, or inside a
//! multi-byte UTF-8 sequence. Lines are split on bytes (`\n`, `\r\n`, or a lone `\r`, per the SSE
//! spec) and decoded only when complete, so a split UTF-8 character is never broken.

/// Cap on the bytes of one response stream (a runaway server must not exhaust memory).
pub const MAX_STREAM_BYTES: usize = 64 * 1024 * 1024;
/// Cap on the size of one event: any one line (a comment too) plus the `data` accumulated
/// before it.
pub const MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

/// One dispatched event: the `event:` type (if any) and its `data:` lines joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("the event stream exceeded {limit} bytes")]
    StreamTooLarge { limit: usize },
    #[error("one stream event exceeded {limit} bytes")]
    EventTooLarge { limit: usize },
}

/// Incremental SSE parser: feed it chunks, collect complete events, call [`SseParser::finish`]
/// at end of stream.
#[derive(Debug)]
pub struct SseParser {
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a leading `\n` in the next chunk belongs to it.
    pending_cr: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    total: usize,
    max_total: usize,
    max_event: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser with the default caps ([`MAX_STREAM_BYTES`], [`MAX_EVENT_BYTES`]).
    pub fn new() -> Self {
        Self::with_limits(MAX_STREAM_BYTES, MAX_EVENT_BYTES)
    }

    /// A parser with explicit caps (tests use small ones).
    pub fn with_limits(max_total: usize, max_event: usize) -> Self {
        SseParser {
            line: Vec::new(),
            pending_cr: false,
            data: String::new(),
            has_data: false,
            event: None,
            total: 0,
            max_total,
            max_event,
        }
    }

    /// Consumes one chunk of the byte stream and returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        self.total = self.total.saturating_add(chunk.len());
        if self.total > self.max_total {
            return Err(SseError::StreamTooLarge {
                limit: self.max_total,
            });
        }
        let mut rest = chunk;
        if let Some(&first) = rest.first()
            && std::mem::take(&mut self.pending_cr)
            && first == b'\n'
        {
            rest = &rest[1..];
        }
        let mut events = Vec::new();
        while let Some(pos) = rest.iter().position(|b| matches!(b, b'\n' | b'\r')) {
            self.line.extend_from_slice(&rest[..pos]);
            let was_cr = rest[pos] == b'\r';
            rest = &rest[pos + 1..];
            if was_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.pending_cr = true,
                    Some(_) => {}
                }
            }
            // A complete line is held to the cap like an incomplete one, so whether a stream
            // passes never depends on where the network split it.
            self.check_event_size()?;
            let line = std::mem::take(&mut self.line);
            events.extend(self.process_line(&line));
            self.check_event_size()?;
        }
        self.line.extend_from_slice(rest);
        self.check_event_size()?;
        Ok(events)
    }

    /// Ends the stream: an unterminated last line and a pending event without its blank line
    /// are dispatched, because several servers close the connection right after
    /// `data: [DONE]`. The caller must treat an unparseable final event as truncated.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.process_line(&line) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    fn check_event_size(&self) -> Result<(), SseError> {
        if self.line.len().saturating_add(self.data.len()) > self.max_event {
            return Err(SseError::EventTooLarge {
                limit: self.max_event,
            });
        }
        Ok(())
    }

    fn process_line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        let text = String::from_utf8_lossy(line);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        if text.starts_with(':') {
            return None;
        }
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        let data = std::mem::take(&mut self.data);
        if data.is_empty() {
            return None;
        }
        Some(SseEvent { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    fn feed_all(parser: &mut SseParser, chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(parser.feed(chunk).expect("within limits"));
        }
        out.extend(parser.finish());
        out
    }

    #[test]
    fn parses_lf_crlf_and_lone_cr() {
        let mut p = SseParser::new();
        let events = feed_all(
            &mut p,
            &[b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\n"],
        );
        assert_eq!(data(&events), ["a", "b", "c", "d"]);
    }

    #[test]
    fn joins_multi_line_data_and_ignores_comments_and_other_fields() {
        let mut p = SseParser::new();
        let events = feed_all(
            &mut p,
            &[b": keep-alive\nid: 7\nretry: 10\nevent: error\ndata: one\ndata:two\n\n"],
        );
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "one\ntwo");
        assert_eq!(events[0].event.as_deref(), Some("error"));
    }

    #[test]
    fn every_split_point_gives_the_same_events_even_inside_utf8_and_crlf() {
        let body = "data: {\"x\":\"héllo 世界 🦀\"}\r\ndata: 2\r\n\r\n: c\r\ndata: [DONE]\r\n\r\n"
            .as_bytes();
        let mut whole = SseParser::new();
        let expected = feed_all(&mut whole, &[body]);
        assert_eq!(data(&expected), ["{\"x\":\"héllo 世界 🦀\"}\n2", "[DONE]"]);
        for i in 0..body.len() {
            for j in i..body.len() {
                let mut p = SseParser::new();
                let got = feed_all(&mut p, &[&body[..i], &body[i..j], &body[j..]]);
                assert_eq!(got, expected, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn finish_flushes_an_unterminated_last_event() {
        let mut p = SseParser::new();
        assert!(p.feed(b"data: [DONE]").expect("ok").is_empty());
        assert_eq!(p.finish().map(|e| e.data), Some("[DONE]".to_string()));
        assert_eq!(p.finish(), None);
    }

    /// Found by fuzzing: a long line that is not `data` (a comment, an unknown field) counted
    /// against the cap only while incomplete, so the same stream passed in one network chunk
    /// and failed in several.
    #[test]
    fn the_event_cap_does_not_depend_on_where_the_bytes_split() {
        let body = b": a comment longer than the cap\ndata: x\n\n";
        let whole = SseParser::with_limits(1024, 16).feed(body);
        let mut split = SseParser::with_limits(1024, 16);
        let split = split
            .feed(&body[..20])
            .and_then(|_| split.feed(&body[20..]));
        assert_eq!(whole, Err(SseError::EventTooLarge { limit: 16 }));
        assert_eq!(split, whole);
    }

    #[test]
    fn caps_total_bytes_and_event_size() {
        let mut p = SseParser::with_limits(16, 1024);
        assert!(p.feed(b"data: 12345\n\n").is_ok());
        assert_eq!(
            p.feed(b"data: 6\n\n"),
            Err(SseError::StreamTooLarge { limit: 16 })
        );
        let mut p = SseParser::with_limits(1024, 8);
        assert_eq!(
            p.feed(b"data: 123456789"),
            Err(SseError::EventTooLarge { limit: 8 })
        );
        // Each 10-byte line fits; the second one on top of the first one's data does not.
        let mut p = SseParser::with_limits(1024, 12);
        assert!(p.feed(b"data: 1234\n").is_ok());
        assert_eq!(
            p.feed(b"data: 5678\n"),
            Err(SseError::EventTooLarge { limit: 12 })
        );
    }
}
