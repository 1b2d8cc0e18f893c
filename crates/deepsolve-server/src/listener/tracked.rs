//! The router as hyper's service, marking on the connection's [`Activity`] when a request is
//! being answered: from the call until its response body is sent in full or dropped.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, Response};
use futures::future::BoxFuture;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use tower::ServiceExt;

use super::activity::Activity;

pub(super) struct TrackedService {
    router: Router,
    activity: Arc<Activity>,
}

impl TrackedService {
    pub(super) fn new(router: Router, activity: Arc<Activity>) -> Self {
        TrackedService { router, activity }
    }
}

impl hyper::service::Service<Request<Incoming>> for TrackedService {
    type Response = Response<AnsweringBody>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let answering = Answering::begin(self.activity.clone());
        let router = self.router.clone();
        Box::pin(async move {
            let response = router.oneshot(request.map(Body::new)).await?;
            Ok(response.map(|body| AnsweringBody {
                body,
                _answering: answering,
            }))
        })
    }
}

/// One request in flight; dropping it ends the request.
struct Answering(Arc<Activity>);

impl Answering {
    fn begin(activity: Arc<Activity>) -> Self {
        activity.request_started();
        Answering(activity)
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// A response body that keeps its request in flight until hyper drops it (sent or abandoned).
pub(super) struct AnsweringBody {
    body: Body,
    _answering: Answering,
}

impl http_body::Body for AnsweringBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
