//! A turn's images on the HTTP side: taken from the request (base64 in the JSON, `image`
//! parts of a multipart body, `image_url` data URLs of the facade), made ready by the app
//! (`deepsolve_app::images`: magic bytes, caps, scaling), checked that something can see
//! them, stored with the turn, read back to resume it, and served to its owner.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use deepsolve_app::images::{ImageError, ImageInput, ImageLimits, check_size, prepare_images};
use deepsolve_app::stored::{TurnImages, stored_images};
use deepsolve_core::{Language, TurnImage};
use deepsolve_protocol::api::{ApiErrorCode, TurnAttachment};
use deepsolve_protocol::{StoredImage, TurnImageView};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::upload::{Upload, base_name};

/// The images of a new turn: the JSON's (base64) first, then the uploaded parts, in order;
/// a bad one is refused naming it (413 over the cap, 422 `invalid_image` otherwise), and a
/// turn whose images nothing can see with 422 `cannot_see_images`.
pub(crate) async fn for_new_turn(
    state: &AppState,
    inline: &[TurnAttachment],
    uploaded: Vec<Upload>,
    offered: &[String],
    language: Language,
) -> ApiResult<TurnImages> {
    let limits = state.config.images;
    let mut inputs = decode_inline(inline, &limits)?;
    inputs.extend(uploaded.into_iter().map(|u| ImageInput {
        name: u.name,
        bytes: u.bytes,
    }));
    if inputs.is_empty() {
        return Ok(TurnImages::default());
    }
    let images = prepare_images(inputs, limits).await.map_err(image_error)?;
    let sees = sight(state, &images, offered, language).await?;
    Ok(TurnImages { images, sees })
}

/// Whether the main model sees `images`; 422 when nothing of the turn can.
async fn sight(
    state: &AppState,
    images: &[TurnImage],
    offered: &[String],
    language: Language,
) -> ApiResult<bool> {
    state
        .app
        .image_sight(images, offered, language)
        .await
        .map_err(|e| ApiError::invalid(ApiErrorCode::CannotSeeImages, e.to_string()))
}

/// Base64 images of the JSON, each checked against the cap before it is decoded.
fn decode_inline(inline: &[TurnAttachment], limits: &ImageLimits) -> ApiResult<Vec<ImageInput>> {
    inline
        .iter()
        .map(|image| {
            let name = base_name(&image.name);
            let data = image.data_base64.trim();
            check_size(&name, (data.len() as u64).saturating_mul(3) / 4, limits)
                .map_err(image_error)?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|e| {
                    ApiError::invalid(
                        ApiErrorCode::InvalidImage,
                        format!("{name}: data_base64 is not base64 ({e})"),
                    )
                })?;
            Ok(ImageInput { name, bytes })
        })
        .collect()
}

/// 413 for an image over the cap, 422 `invalid_request` for too many, 422 `invalid_image`
/// for one that is not a usable image; the message names it.
pub(crate) fn image_error(e: ImageError) -> ApiError {
    match e {
        ImageError::TooLarge { .. } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ApiErrorCode::PayloadTooLarge,
            e.to_string(),
        ),
        ImageError::TooMany { .. } => {
            ApiError::invalid(ApiErrorCode::InvalidRequest, e.to_string())
        }
        _ => ApiError::invalid(ApiErrorCode::InvalidImage, e.to_string()),
    }
}

/// The images of a stored turn, to run it again: the same bytes, and whether the main model
/// sees them now.
pub(crate) async fn for_resumed_turn(
    state: &AppState,
    turn_id: &str,
    offered: &[String],
    language: Language,
) -> ApiResult<TurnImages> {
    let images = stored_images(&state.store, turn_id).await?;
    if images.is_empty() {
        return Ok(TurnImages::default());
    }
    let sees = sight(state, &images, offered, language).await?;
    Ok(TurnImages { images, sees })
}

/// The turn view's list of a turn's images.
pub(crate) fn views(turn_id: &str, stored: &[StoredImage]) -> Vec<TurnImageView> {
    stored
        .iter()
        .map(|i| TurnImageView {
            url: format!("/api/v1/turns/{turn_id}/images/{}", i.id),
            id: i.id.clone(),
            name: i.name.clone(),
            mime: i.mime.clone(),
            width: i.width,
            height: i.height,
            size: i.size,
        })
        .collect()
}

/// `GET /api/v1/turns/{id}/images/{image}`: one image of the caller's turn, shown in the page
/// (`<img src>`) as the raster type its bytes are, with no sniffing and a sandboxing CSP.
pub async fn get_turn_image(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((turn_id, image_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let row = state
        .store
        .turn_image(&turn_id, &image_id, &caller.user_id)
        .await?
        .ok_or_else(|| ApiError::not_found("image"))?;
    // Checked when it was stored; checked again so only an image is ever served inline.
    let Some(kind) = deepsolve_app::images::ImageType::sniff(&row.content) else {
        tracing::error!(turn_id, image_id, "a stored turn image is not an image");
        return Err(ApiError::internal());
    };
    let headers = [
        (header::CONTENT_TYPE, kind.mime().to_string()),
        (
            header::CONTENT_DISPOSITION,
            crate::routes::inline(&row.name),
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
        (
            header::CONTENT_SECURITY_POLICY,
            "sandbox; default-src 'none'".to_string(),
        ),
        (header::CACHE_CONTROL, "private, max-age=86400".to_string()),
    ];
    Ok((headers, row.content).into_response())
}
