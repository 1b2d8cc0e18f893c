//! The body timeout: a request body must arrive in full within `body_timeout` of its head.
//! The body is not read here (an unauthenticated request is refused before its body is
//! read); a reader that is still waiting at the deadline gets an error instead, which
//! [`crate::extract::ApiJson`] answers with 408 `request_timeout`, closing the connection.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use tokio::time::Sleep;

/// Why a request body stopped: it did not arrive within the body timeout.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimedOut(Duration);

/// Middleware: give the request body its deadline.
pub(crate) async fn limit_body_time(
    State(timeout): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    let request = request.map(|body| Body::new(TimedBody::new(body, timeout)));
    next.run(request).await
}

/// Whether `error` (or what caused it) is a body timeout.
pub(crate) fn is_body_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(error) = current {
        if error.is::<BodyTimedOut>() {
            return true;
        }
        current = error.source();
    }
    false
}

struct TimedBody {
    body: Body,
    timeout: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl TimedBody {
    fn new(body: Body, timeout: Duration) -> Self {
        TimedBody {
            body,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }
    }
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match this.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut(this.timeout))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
