//! The check that something can see a turn's images: `llm.vision`, the probe asked once per
//! model and remembered, a tool that reads images.

use std::sync::Arc;

use deepsolve_app::images::{ImageLimits, prepare_image};
use deepsolve_app::{AppBuilder, Sight};
use deepsolve_core::{
    ChatModel, Language, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, TurnImage,
};
use deepsolve_settings::{Settings, Vision};
use deepsolve_testkit::images::{encode, see, solid_png};
use deepsolve_testkit::{ScriptedModel, WellBehaved};
use image::{ImageFormat, Rgb, RgbImage};
use serde_json::{Value, json};

fn app_with(vision: Vision, model: Arc<ScriptedModel>) -> deepsolve_app::App {
    let mut settings = Settings::default();
    settings.llm.vision = vision;
    AppBuilder::new(settings, model as Arc<dyn ChatModel>)
        .build()
        .expect("app")
}

fn an_image() -> Vec<TurnImage> {
    let png = solid_png(8, 8, [0, 0, 0]);
    vec![prepare_image("figure.png", png, 1, &ImageLimits::default()).expect("an image")]
}

#[tokio::test]
async fn auto_asks_a_model_once_whether_it_sees() {
    let seeing = Arc::new(ScriptedModel::new(deepsolve_testkit::Vision));
    let app = app_with(Vision::Auto, seeing.clone());
    let none: &[&str] = &[];
    assert_eq!(app.image_sight(&[], none, Language::En).await, Ok(false));
    assert_eq!(seeing.call_count(), 0, "no images, no probe");
    assert_eq!(
        app.image_sight(&an_image(), none, Language::En).await,
        Ok(true)
    );
    assert_eq!(app.main_model_sight(Language::Zh).await, Sight::Sees);
    assert_eq!(seeing.call_count(), 1, "asked once, remembered");

    // A model that answers without looking is blind, and a turn with images is refused.
    let blind = Arc::new(ScriptedModel::new(WellBehaved::new(1)));
    let app = app_with(Vision::Auto, blind.clone());
    let refused = app
        .image_sight(&an_image(), none, Language::En)
        .await
        .expect_err("nothing sees the image");
    let line = refused.to_string();
    assert!(
        line.starts_with("this turn has images, but nothing can see them: the model")
            && line.contains("cannot see images (asked the colour of a green image")
            && line.contains("geogebra_analysis")
            && !line.contains('\n'),
        "{line}"
    );
    assert!(
        app.image_sight(&an_image(), none, Language::En)
            .await
            .is_err()
    );
    assert_eq!(blind.call_count(), 1, "the blind answer is remembered too");
}

#[tokio::test]
async fn the_setting_decides_without_asking() {
    let model = Arc::new(ScriptedModel::new(deepsolve_testkit::Vision));
    let none: &[&str] = &[];
    let sees = app_with(Vision::Sees, model.clone());
    assert_eq!(
        sees.image_sight(&an_image(), none, Language::En).await,
        Ok(true)
    );
    let blind = app_with(Vision::Blind, model.clone());
    let refused = blind.image_sight(&an_image(), none, Language::En).await;
    assert!(
        refused.is_err_and(|e| e.to_string().contains("(llm.vision is false)")),
        "refused by the setting"
    );
    assert_eq!(model.call_count(), 0);
}

/// A tool that reads the turn's images itself.
struct Reader(ToolSpec);

#[async_trait::async_trait]
impl Tool for Reader {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn reads_images(&self) -> bool {
        true
    }

    async fn run(&self, _args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ok("read"))
    }
}

#[tokio::test]
async fn a_tool_that_reads_images_is_a_way_to_see_them() {
    let mut settings = Settings::default();
    settings.llm.vision = Vision::Blind;
    let reader = Arc::new(Reader(ToolSpec {
        name: "figure_reader".into(),
        description: "reads figures".into(),
        parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
    }));
    let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new(WellBehaved::new(1)));
    let app = AppBuilder::new(settings, model)
        .extra_tool(reader)
        .build()
        .expect("app");
    assert_eq!(app.image_readers(), ["figure_reader"]);
    let offered = app.tools_for_turn(&["figure_reader"]).expect("offered");
    assert_eq!(
        app.image_sight(&an_image(), &offered, Language::En).await,
        Ok(false)
    );
    let none: &[&str] = &[];
    assert!(
        app.image_sight(&an_image(), none, Language::En)
            .await
            .is_err()
    );
}

#[test]
fn the_fixture_colours_are_what_the_probe_expects() {
    // The probe paints (30, 180, 30); the scripted vision model must call it green.
    let seen = see(&encode(
        &RgbImage::from_pixel(64, 64, Rgb([30, 180, 30])),
        ImageFormat::Png,
    ));
    assert_eq!(seen.map(|s| s.colour), Some("green"));
}
