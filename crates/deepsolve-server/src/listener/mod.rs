//! The accept loop and the connection policy: no client holds a connection without sending.
//!
//! - A request head must arrive within `header_timeout` (from the accept, or from the first
//!   byte of each next request on a kept-alive connection); a kept-alive connection with no
//!   request is closed after `idle_timeout`; a response the client stops reading for
//!   `idle_timeout` closes its connection. A request being answered — an SSE stream, a
//!   running upload — has no other clock: its body has `body_timeout` (see
//!   [`crate::body_timeout`]).
//! - At most `max_connections` are open; one more is answered 503 (best effort, without
//!   waiting) and closed at once, so the open ones keep working.
//! - HTTP/1.1 only: what browsers and clients speak to a plain-HTTP server (HTTP/2 needs TLS
//!   in browsers; TLS, if any, ends in front of this server), and HTTP/1.1 is the protocol
//!   every clock above is defined for.

mod activity;
mod tracked;
mod watched_io;

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::Router;
use deepsolve_protocol::api::{ApiErrorCode, ErrorBody, ErrorDetail};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use activity::Activity;
use tracked::TrackedService;
use watched_io::WatchedIo;

/// How long a client may take, and how many connections may be open (the `server` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A request head (request line and headers) must arrive within this.
    pub header_timeout: Duration,
    /// A request body must arrive in full within this, counted from its head (408 otherwise).
    pub body_timeout: Duration,
    /// A kept-alive connection without a request, or whose client stops reading a response,
    /// is closed after this.
    pub idle_timeout: Duration,
    /// Connections open at once; more are refused.
    pub max_connections: u32,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
        }
    }
}

/// Accept and serve connections until `shutdown` resolves; then stop accepting, let every
/// connection finish its requests (idle ones close at once) and return when all have closed.
pub(crate) async fn serve_connections(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let max_connections = limits.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max_connections as usize));
    let stopping = CancellationToken::new();
    let mut shutdown = pin!(shutdown);
    let mut full = false;
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = accept(&listener) => accepted,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(error) => {
                if pause_after(&error) {
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => {}
                    }
                }
                continue;
            }
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                full = false;
                let connection = Connection {
                    router: router.clone(),
                    limits,
                    stopping: stopping.clone(),
                    slot,
                };
                tokio::spawn(connection.serve(stream));
            }
            Err(_) => {
                if !full {
                    tracing::warn!(
                        max_connections,
                        "connection limit reached; refusing new connections"
                    );
                    full = true;
                }
                refuse(stream);
            }
        }
    }
    stopping.cancel();
    drop(listener);
    // Every connection holds a slot until it closes: all slots back means all closed.
    let _all_closed = slots.acquire_many(max_connections).await;
}

/// The next connection, with Nagle's algorithm off (see [`without_nagle`]).
async fn accept(listener: &TcpListener) -> std::io::Result<TcpStream> {
    let (stream, _peer) = listener.accept().await?;
    Ok(without_nagle(stream))
}

/// The connection with Nagle's algorithm off. Responses go out in several small writes (the
/// head, then each SSE event); with Nagle on, a write waits for the ACK of the one before,
/// which the client's delayed ACK holds back for up to 40 ms.
fn without_nagle(stream: TcpStream) -> TcpStream {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY not set on an accepted connection");
    }
    stream
}

/// After an accept error other than a vanished client (e.g. out of file descriptors), wait
/// a moment instead of spinning: closing connections free descriptors.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

fn pause_after(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    let vanished = matches!(
        error.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    );
    if !vanished {
        tracing::error!(%error, "accept failed");
    }
    !vanished
}

/// Say 503 if the socket takes it right away, then close: a full server spends nothing on
/// connections it cannot serve.
fn refuse(stream: TcpStream) {
    let _ = stream.try_write(&BUSY_RESPONSE);
}

static BUSY_RESPONSE: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let body = ErrorBody {
        error: ErrorDetail {
            code: ApiErrorCode::Busy,
            message: "this server has as many connections open as it may; retry shortly".into(),
        },
    };
    let json = serde_json::to_string(&body).unwrap_or_default();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{json}",
        json.len()
    )
    .into_bytes()
});

/// One accepted connection and what it needs.
struct Connection {
    router: Router,
    limits: ConnectionLimits,
    stopping: CancellationToken,
    /// Returned to the pool when the connection closes.
    slot: OwnedSemaphorePermit,
}

impl Connection {
    /// Serve HTTP/1.1 on `stream` until the client closes it, it falls silent past its
    /// deadline, or the server stops (then in-flight requests finish first).
    async fn serve<S>(self, stream: S)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let Connection {
            router,
            limits,
            stopping,
            slot,
        } = self;
        let activity = Arc::new(Activity::accepted());
        let io = TokioIo::new(WatchedIo::new(stream, activity.clone()));
        let service = TrackedService::new(router, activity.clone());
        let mut builder = http1::Builder::new();
        // The connection's own clocks (`Activity`) replace hyper's header timeout, which would
        // also run while a kept-alive connection waits for its next request.
        builder.header_read_timeout(None);
        let mut connection = pin!(builder.serve_connection(io, service));
        // Declared after the connection, so dropped before it: the slot is free again by the
        // time the client sees the socket close.
        let _slot = slot;
        let mut draining = false;
        loop {
            let deadline = activity.deadline(&limits);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "connection ended with an error");
                    }
                    return;
                }
                () = sleep_until(deadline) => {
                    if activity.expired(&limits) {
                        tracing::debug!("closing a connection that stayed silent too long");
                        return;
                    }
                }
                () = activity.moved() => {}
                () = stopping.cancelled(), if !draining => {
                    draining = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Sleep until `deadline`; without one, forever.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use axum::body::{Body, Bytes};
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio::task::JoinHandle;

    use super::*;

    /// `/endless`: a response that never ends, in 64 KiB chunks.
    fn routes() -> Router {
        Router::new().route(
            "/endless",
            get(|| async {
                let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
                Body::from_stream(futures::stream::repeat_with(move || {
                    Ok::<_, Infallible>(chunk.clone())
                }))
            }),
        )
    }

    /// A connection over an in-memory pipe of 4 KiB with `idle` as its idle timeout.
    fn connection(idle: Duration) -> (DuplexStream, JoinHandle<()>) {
        let limits = ConnectionLimits {
            idle_timeout: idle,
            ..ConnectionLimits::default()
        };
        let slot = Arc::new(Semaphore::new(1))
            .try_acquire_owned()
            .expect("a free slot");
        let connection = Connection {
            router: routes(),
            limits,
            stopping: CancellationToken::new(),
            slot,
        };
        let (client, server) = tokio::io::duplex(4096);
        (client, tokio::spawn(connection.serve(server)))
    }

    /// [`connection`] with `GET /endless` sent and the response begun.
    async fn endless_response(idle: Duration) -> (DuplexStream, JoinHandle<()>) {
        let (mut client, served) = connection(idle);
        client
            .write_all(b"GET /endless HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .expect("send");
        let mut status = [0u8; 12];
        client.read_exact(&mut status).await.expect("a response");
        assert_eq!(&status, b"HTTP/1.1 200");
        (client, served)
    }

    #[tokio::test]
    async fn accepted_connections_have_nagle_off() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = tokio::spawn(TcpStream::connect(addr));
        let accepted = accept(&listener).await.expect("accepted");
        assert!(accepted.nodelay().expect("TCP_NODELAY readable"));
        let client = client.await.expect("joined").expect("connected");
        // The default, for contrast: the option is off unless someone sets it.
        assert!(!client.nodelay().expect("TCP_NODELAY readable"));
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_a_streamed_response_is_cut_at_the_idle_timeout() {
        let (_client, served) = endless_response(Duration::from_millis(300)).await;
        tokio::time::timeout(Duration::from_secs(10), served)
            .await
            .expect("the connection is closed")
            .expect("the connection task");
    }

    #[tokio::test]
    async fn a_client_that_keeps_reading_a_long_response_is_not_cut() {
        let idle = Duration::from_millis(300);
        let (mut client, served) = endless_response(idle).await;
        let reading = async {
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = client.read(&mut chunk).await.expect("read");
                assert!(n > 0, "the response was cut");
            }
        };
        let _ = tokio::time::timeout(4 * idle, reading).await;
        assert!(!served.is_finished(), "a reading client was cut");
    }
}
