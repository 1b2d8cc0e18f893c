//! `deepsolve solve --image FILE` (repeatable): the problem's pictures. Each file is read
//! (refused unread when it is over the size cap), checked and scaled down by the app
//! (`deepsolve_app::images`), and something must be able to see them — the model
//! (`llm.vision`) or a tool of the turn that reads images — before any model call of the
//! turn. A refusal is one line on stderr naming the file or the reason, and exit 1.

use std::path::{Path, PathBuf};

use deepsolve_app::images::{ImageError, ImageInput, ImageLimits, check_size, prepare_images};
use deepsolve_app::stored::TurnImages;
use deepsolve_app::{App, Sight};
use deepsolve_core::{ChatModel, Language, TurnImage};
use deepsolve_settings::Vision;

use crate::exit::Exit;
use crate::output::errln;

/// The images of `--image` for a turn offered `offered` in `language`; `Err` after the
/// refusal was said on stderr.
pub(crate) async fn for_turn(
    paths: &[PathBuf],
    app: &App,
    offered: &[String],
    language: Language,
) -> Result<TurnImages, Exit> {
    if paths.is_empty() {
        return Ok(TurnImages::default());
    }
    let images = read(paths).await.map_err(refuse)?;
    let sees = app
        .image_sight(&images, offered, language)
        .await
        .map_err(refuse)?;
    Ok(TurnImages { images, sees })
}

fn refuse(why: impl std::fmt::Display) -> Exit {
    errln!("{} {why}", console::style("error:").for_stderr().red());
    Exit::Failure
}

/// Read and prepare every file; errors name the file as it was given.
async fn read(paths: &[PathBuf]) -> Result<Vec<TurnImage>, String> {
    let limits = ImageLimits::default();
    let mut inputs = Vec::with_capacity(paths.len());
    for path in paths {
        let shown = path.display().to_string();
        inputs.push(ImageInput {
            bytes: read_capped(path, &shown, &limits).await?,
            name: shown,
        });
    }
    let mut images = prepare_images(inputs, limits)
        .await
        .map_err(|e: ImageError| e.to_string())?;
    // Errors named the path as given; the turn keeps only the file's name.
    for (image, path) in images.iter_mut().zip(paths) {
        image.name = file_name(path);
    }
    Ok(images)
}

/// The file's bytes, unless its size is over the cap (then it is not read).
async fn read_capped(path: &Path, shown: &str, limits: &ImageLimits) -> Result<Vec<u8>, String> {
    let unreadable = |e: std::io::Error| format!("{shown}: cannot read it: {e}");
    let size = tokio::fs::metadata(path).await.map_err(unreadable)?.len();
    check_size(shown, size, limits).map_err(|e| e.to_string())?;
    tokio::fs::read(path).await.map_err(unreadable)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".to_string())
}

/// `doctor`'s line on images: what `llm.vision` says, or (`auto`) what the probe finds; `Err`
/// for a warning. Never unhealthy: a model that cannot see only needs a tool that reads
/// images.
pub(crate) async fn vision_line(setting: Vision, model: &dyn ChatModel) -> Result<String, String> {
    const NEEDS_A_READER: &str =
        "a turn with images needs a tool that reads them (geogebra_analysis)";
    match setting {
        Vision::Sees => Ok("images go to the model (llm.vision: true, not probed)".into()),
        Vision::Blind => Err(format!(
            "the model is not sent images (llm.vision: false): {NEEDS_A_READER}"
        )),
        Vision::Auto => match deepsolve_app::vision::probe(model, Language::En).await {
            Sight::Sees => Ok("the model sees images (llm.vision: auto)".into()),
            Sight::Blind { detail } => Err(format!(
                "the model does not see images ({detail}): {NEEDS_A_READER}"
            )),
            Sight::Unknown { detail } => Err(format!(
                "could not tell whether the model sees images: {detail} (set llm.vision to \
                 skip the test)"
            )),
        },
    }
}
