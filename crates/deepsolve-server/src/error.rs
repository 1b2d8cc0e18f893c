//! API errors: `{"error": {"code", "message"}}` with the right status. Internal details are
//! logged, never sent: a client learns what *it* did wrong, not how the server is built.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use deepsolve_protocol::api::{ApiErrorCode, ErrorBody, ErrorDetail};
use deepsolve_store::StoreError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ApiErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ApiErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// Missing, or not yours: the same answer, so ids of other users cannot be probed.
    pub fn not_found(what: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ApiErrorCode::NotFound,
            format!("{what} not found"),
        )
    }

    pub fn invalid(code: ApiErrorCode, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, ApiErrorCode::BadRequest, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, ApiErrorCode::Conflict, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            ApiErrorCode::Unauthorized,
            message,
        )
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, ApiErrorCode::Forbidden, message)
    }

    /// The request body did not arrive in time; the connection is closed after this answer
    /// (the rest of the body is not waited for).
    pub fn body_timed_out() -> Self {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            ApiErrorCode::RequestTimeout,
            "the request body did not arrive in time",
        )
    }

    pub fn internal() -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ApiErrorCode::Internal,
            "internal error; the server log has the details",
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(message) => ApiError::conflict(message),
            StoreError::Invalid(message) => ApiError::invalid(ApiErrorCode::Invalid, message),
            StoreError::NotFound(what) => ApiError::not_found(what),
            other => {
                tracing::error!(error = %other, "store error");
                ApiError::internal()
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        // Both may answer before the body is read: the connection cannot carry another
        // request, and a client must not try to reuse it.
        if self.status == StatusCode::REQUEST_TIMEOUT
            || self.status == StatusCode::PAYLOAD_TOO_LARGE
        {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
