//! Can the main model see images? `llm.vision` says so, or (`auto`) a probe asks it once —
//! one request with one small image of a single colour and the question which colour it is —
//! and the answer is remembered per model for the process, as the engine remembers a model
//! found without native tool calling.
//!
//! Before a turn with images starts, [`crate::App::image_sight`] decides whether anything can
//! see them: the main model, or a tool of the turn that reads images itself. When nothing
//! can, the turn is refused up front with one line ([`CannotSeeImages`]).

use std::collections::HashMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deepsolve_core::{
    ChatModel, ChatRequest, Language, Message, ModelError, Text, Texts, ToolChoice, TurnImage,
};
use deepsolve_settings::Vision;

/// How long the probe may take before its answer counts as unknown.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// The probe image's side: small, but above the minimum some providers require.
const PROBE_SIDE: u32 = 64;

/// The probe image's colour, and the words that name it in an answer (en and zh).
const PROBE_RGB: [u8; 3] = [30, 180, 30];
const PROBE_WORDS: [&str; 3] = ["green", "绿", "綠"];

/// What the probe found out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sight {
    /// The model named the image's colour.
    Sees,
    /// The model answered without seeing it, or the provider refused the image.
    Blind { detail: String },
    /// The probe failed for another reason (network, auth, timeout): nothing is remembered.
    Unknown { detail: String },
}

/// Ask `model` which colour a small image is, in `language`.
pub async fn probe(model: &dyn ChatModel, language: Language) -> Sight {
    let image = match probe_image() {
        Ok(image) => image,
        Err(e) => {
            return Sight::Unknown {
                detail: format!("the test image could not be made: {e}"),
            };
        }
    };
    let request = ChatRequest {
        messages: vec![
            Message::system(Texts::builtin(language).get(Text::VisionProbe)),
            Message::user_with_images("", vec![image].into()),
        ],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: 64,
        temperature: 0.0,
        stop: Vec::new(),
        response_format: None,
    };
    let answer = tokio::time::timeout(PROBE_TIMEOUT, model.complete(&request, &mut |_| {})).await;
    match answer {
        Err(_) => Sight::Unknown {
            detail: format!("no answer within {}s", PROBE_TIMEOUT.as_secs()),
        },
        Ok(Ok(completion)) => judge(&completion.text),
        // A refused request without tools is a refused image.
        Ok(Err(ModelError::BadRequest { status, message })) => Sight::Blind {
            detail: format!("the provider refused the image ({status}): {message}"),
        },
        Ok(Err(e)) => Sight::Unknown {
            detail: e.to_string(),
        },
    }
}

/// Does the answer name the probe's colour?
fn judge(answer: &str) -> Sight {
    let lower = answer.to_lowercase();
    if PROBE_WORDS.iter().any(|w| lower.contains(w)) {
        Sight::Sees
    } else {
        let shown: String = answer.trim().chars().take(80).collect();
        Sight::Blind {
            detail: format!("asked the colour of a green image, it answered {shown:?}"),
        }
    }
}

fn probe_image() -> Result<TurnImage, image::ImageError> {
    let pixels = image::RgbImage::from_pixel(PROBE_SIDE, PROBE_SIDE, image::Rgb(PROBE_RGB));
    let mut png = Cursor::new(Vec::new());
    pixels.write_to(&mut png, image::ImageFormat::Png)?;
    Ok(TurnImage {
        id: "image_1".into(),
        name: "probe.png".into(),
        mime: "image/png".into(),
        width: PROBE_SIDE,
        height: PROBE_SIDE,
        bytes: Arc::from(png.into_inner()),
    })
}

/// The probe's answers, per model, for the process: `true` = sees. Unknown answers are not
/// kept (the next turn asks again).
#[derive(Debug, Default)]
pub(crate) struct Remembered(Mutex<HashMap<String, bool>>);

impl Remembered {
    fn get(&self, model: &str) -> Option<bool> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(model)
            .copied()
    }

    fn keep(&self, model: &str, sees: bool) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(model.to_string(), sees);
    }
}

/// Whether `model` sees images by `setting`; with `auto`, the remembered probe or a new one.
pub(crate) async fn main_sight(
    setting: Vision,
    model: &dyn ChatModel,
    remembered: &Remembered,
    language: Language,
) -> Sight {
    match setting {
        Vision::Sees => Sight::Sees,
        Vision::Blind => Sight::Blind {
            detail: "llm.vision is false".into(),
        },
        Vision::Auto => {
            if let Some(sees) = remembered.get(model.name()) {
                return if sees {
                    Sight::Sees
                } else {
                    Sight::Blind {
                        detail: "it did not see the test image earlier".into(),
                    }
                };
            }
            let sight = probe(model, language).await;
            match &sight {
                Sight::Sees => remembered.keep(model.name(), true),
                Sight::Blind { .. } => remembered.keep(model.name(), false),
                Sight::Unknown { .. } => {}
            }
            sight
        }
    }
}

/// A turn with images that nothing can see: refused before any model call of the turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this turn has images, but nothing can see them: the model '{model}' {why}, and no tool of \
     the turn reads images (use a model that sees images — llm.vision — or offer \
     geogebra_analysis with a vision model, models.vision)"
)]
pub struct CannotSeeImages {
    pub model: String,
    /// Why the main model does not count: `cannot see images (llm.vision is false)`, …
    pub why: String,
}

impl CannotSeeImages {
    pub(crate) fn new(model: &str, sight: &Sight) -> Self {
        let why = match sight {
            Sight::Sees => "sees images".to_string(),
            Sight::Blind { detail } => format!("cannot see images ({detail})"),
            Sight::Unknown { detail } => format!(
                "may or may not see images (the test image failed: {detail}; set llm.vision to \
                 true or false to skip the test)"
            ),
        };
        CannotSeeImages {
            model: model.to_string(),
            why,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_must_name_the_colour() {
        assert_eq!(judge("Green."), Sight::Sees);
        assert_eq!(judge("绿色"), Sight::Sees);
        assert!(matches!(judge("I cannot see images."), Sight::Blind { .. }));
        assert!(matches!(judge(""), Sight::Blind { .. }));
    }
}
