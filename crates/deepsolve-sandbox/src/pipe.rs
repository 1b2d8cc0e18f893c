//! Non-blocking pipe ends read through tokio's reactor, plus a synchronous drain.
//!
//! The drain matters for the interpreter: when its reply frame arrives, every byte the cell
//! wrote to stdout/stderr is already in the kernel's pipe buffers (the driver flushed before
//! replying), so reading until `EAGAIN` collects exactly the cell's output — no markers that
//! user code could forge or split. The drain reads the fd directly because tokio's `try_read`
//! answers from its cached readiness and could report "nothing" while data is waiting.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;

use crate::capture::Capture;

const CHUNK: usize = 64 * 1024;

/// Where read bytes go.
pub(crate) trait Sink {
    fn push(&mut self, bytes: &[u8]);
}

impl Sink for Capture {
    fn push(&mut self, bytes: &[u8]) {
        Capture::push(self, bytes);
    }
}

impl Sink for Vec<u8> {
    fn push(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

pub(crate) struct InPipe {
    fd: AsyncFd<OwnedFd>,
    buf: Vec<u8>,
    eof: bool,
}

impl InPipe {
    pub(crate) fn new(fd: impl Into<OwnedFd>) -> io::Result<Self> {
        let fd: OwnedFd = fd.into();
        set_nonblocking(&fd)?;
        // SAFETY: the `OwnedFd` moves into the `AsyncFd`, which owns it from here on; nothing
        // else can close or replace it while it is registered.
        let fd = unsafe { AsyncFd::register(fd)? };
        Ok(InPipe {
            fd,
            buf: vec![0; CHUNK],
            eof: false,
        })
    }

    pub(crate) fn is_eof(&self) -> bool {
        self.eof
    }

    /// Wait for bytes and append them to `sink`; `Ok(0)` at end of file. Cancel-safe: bytes
    /// are only taken from the pipe in the same poll that hands them to `sink`.
    pub(crate) async fn read_into(&mut self, sink: &mut impl Sink) -> io::Result<usize> {
        if self.eof {
            return Ok(0);
        }
        loop {
            let mut guard = self.fd.readable().await?;
            let buf = &mut self.buf;
            match guard.try_io(|inner| raw_read(inner.get_ref(), buf)) {
                Ok(Ok(0)) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(Ok(n)) => {
                    sink.push(&self.buf[..n]);
                    return Ok(n);
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    /// Read what is in the pipe right now (up to `max` bytes) into `sink`, without waiting.
    pub(crate) fn drain_into(&mut self, sink: &mut impl Sink, max: usize) -> io::Result<usize> {
        let mut taken = 0;
        while !self.eof && taken < max {
            match raw_read(self.fd.get_ref(), &mut self.buf) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    sink.push(&self.buf[..n]);
                    taken += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(taken)
    }
}

fn raw_read(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reading into a buffer we own, from an fd we own.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL on an fd we own.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Length-prefixed frames (4-byte big-endian length, then the body) from an `InPipe`.
pub(crate) struct FrameReader {
    pipe: InPipe,
    pending: Vec<u8>,
    max_frame: usize,
}

impl FrameReader {
    pub(crate) fn new(pipe: InPipe, max_frame: usize) -> Self {
        FrameReader {
            pipe,
            pending: Vec::new(),
            max_frame,
        }
    }

    /// The next frame's body; `Ok(None)` at end of file. Cancel-safe: partial frames stay
    /// buffered for the next call.
    pub(crate) async fn next_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(frame) = self.take_frame()? {
                return Ok(Some(frame));
            }
            if self.pipe.read_into(&mut self.pending).await? == 0 {
                return Ok(None);
            }
        }
    }

    fn take_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        let Some(header) = self.pending.first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*header) as usize;
        if len > self.max_frame {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a {len}-byte frame (the limit is {})", self.max_frame),
            ));
        }
        if self.pending.len() < 4 + len {
            return Ok(None);
        }
        let body = self.pending[4..4 + len].to_vec();
        self.pending.drain(..4 + len);
        Ok(Some(body))
    }
}

/// A frame for the other side.
pub(crate) fn encode_frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[tokio::test]
    async fn frames_survive_arbitrary_splits() {
        let (r, mut w) = std::io::pipe().unwrap();
        let mut reader = FrameReader::new(InPipe::new(r).unwrap(), 1024);
        let mut bytes = encode_frame(b"{\"a\":1}");
        bytes.extend(encode_frame(b"second"));
        let rest = bytes.split_off(3);
        w.write_all(&bytes).unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            w.write_all(&rest).unwrap();
        });
        assert_eq!(reader.next_frame().await.unwrap().unwrap(), b"{\"a\":1}");
        assert_eq!(reader.next_frame().await.unwrap().unwrap(), b"second");
        writer.join().unwrap();
        assert_eq!(reader.next_frame().await.unwrap(), None);
    }

    #[tokio::test]
    async fn oversized_frames_are_refused() {
        let (r, mut w) = std::io::pipe().unwrap();
        let mut reader = FrameReader::new(InPipe::new(r).unwrap(), 8);
        w.write_all(&encode_frame(&[b'x'; 64])).unwrap();
        assert!(reader.next_frame().await.is_err());
    }

    #[tokio::test]
    async fn drain_takes_what_is_buffered_without_waiting() {
        let (r, mut w) = std::io::pipe().unwrap();
        let mut pipe = InPipe::new(r).unwrap();
        w.write_all(b"hello").unwrap();
        let mut cap = Capture::new(64);
        assert_eq!(pipe.drain_into(&mut cap, 1 << 20).unwrap(), 5);
        assert_eq!(pipe.drain_into(&mut cap, 1 << 20).unwrap(), 0);
        drop(w);
        pipe.drain_into(&mut cap, 1 << 20).unwrap();
        assert!(pipe.is_eof());
        assert_eq!(cap.finish().text, "hello");
    }
}
