//! Extractors whose rejections are JSON API errors (axum's own are plain text).

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use deepsolve_protocol::api::ApiErrorCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// `Json<T>` with API errors: 408 for a body slower than the body timeout, 413 for a body
/// over the limit, 415 without a JSON content type,
/// 400 for broken JSON, 422 naming the field for well-formed JSON of the wrong shape
/// (unknown fields included: request types deny them).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_error(rejection)),
        }
    }
}

fn json_error(rejection: JsonRejection) -> ApiError {
    if crate::body_timeout::is_body_timeout(&rejection) {
        return ApiError::body_timed_out();
    }
    let status = rejection.status();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiErrorCode::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiErrorCode::UnsupportedMediaType,
        StatusCode::UNPROCESSABLE_ENTITY => ApiErrorCode::InvalidRequest,
        _ => ApiErrorCode::BadJson,
    };
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "the request body is too large".to_string(),
        _ => rejection.body_text(),
    };
    ApiError::new(status, code, message)
}

/// `Query<T>` with API errors.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(query_error(rejection)),
        }
    }
}

fn query_error(rejection: QueryRejection) -> ApiError {
    ApiError::bad_request(rejection.body_text())
}
