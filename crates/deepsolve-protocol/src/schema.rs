//! The JSON Schemas of the protocol types, gathered in one place: the server's OpenAPI
//! document takes them as its `components.schemas`, and [`typescript`] turns the same
//! schemas into the web UI's TypeScript definitions — one source of truth for both.

mod typescript;

pub use schemars::generate::SchemaGenerator;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value};

pub use typescript::typescript;

use crate::api::{self, openai};

/// Where the schemas live in an OpenAPI document; every `$ref` points there.
pub const COMPONENTS_PATH: &str = "/components/schemas";

/// A `$ref` to `T`'s schema under [`COMPONENTS_PATH`].
pub fn reference<T: JsonSchema>() -> Value {
    serde_json::json!({ "$ref": format!("#{COMPONENTS_PATH}/{}", T::schema_name()) })
}

/// Every schema, by type name, with `$ref`s into `#/components/schemas/`. They describe the
/// JSON as the server writes it (the serialize contract); request types serialise exactly
/// what they accept, so the same schema holds for what clients send.
pub fn components() -> Map<String, Value> {
    components_with(|_| {})
}

/// [`components`] with more roots, registered by `extra` (with [`add`]) into the same
/// generator: for a crate above this one (the server) whose API types this crate cannot name.
/// Their `$ref`s point to the same place, and a type both sides use is described once.
pub fn components_with(extra: impl FnOnce(&mut SchemaGenerator)) -> Map<String, Value> {
    let mut generator = generator();
    register(&mut generator);
    extra(&mut generator);
    generator.take_definitions(true)
}

/// Register `T` (and what it refers to) as a root of the components.
pub fn add<T: JsonSchema>(g: &mut SchemaGenerator) {
    let _: Schema = g.subschema_for::<T>();
}

fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = COMPONENTS_PATH.into();
            s.meta_schema = None;
        })
        .for_serialize()
        .into_generator()
}

/// The roots: every request, response and event type (what they refer to comes along).
fn register(g: &mut SchemaGenerator) {
    // The turn's event stream and what a turn leaves behind.
    add::<crate::TurnEvent>(g);
    add::<crate::EventKind>(g);
    add::<crate::TurnOutcome>(g);
    add::<crate::Checkpoint>(g);
    add::<crate::Source>(g);
    add::<crate::Material>(g);
    add::<crate::ContentPart>(g);
    add::<crate::Protocol>(g);
    // The HTTP API.
    add::<api::CreateTurn>(g);
    add::<api::TurnCreated>(g);
    add::<api::TurnView>(g);
    add::<api::SessionView>(g);
    add::<api::SessionList>(g);
    add::<api::EventsQuery>(g);
    add::<api::ListQuery>(g);
    add::<api::CancelAccepted>(g);
    add::<api::SettingsView>(g);
    add::<api::PutSettings>(g);
    add::<api::Health>(g);
    add::<api::AuthSessionView>(g);
    add::<api::LoginRequest>(g);
    add::<api::CapabilitiesView>(g);
    add::<api::ErrorBody>(g);
    // Knowledge bases.
    add::<api::KbList>(g);
    add::<api::CreateKb>(g);
    add::<api::KbDetail>(g);
    add::<api::DocumentsAccepted>(g);
    add::<api::SearchKb>(g);
    add::<api::SearchResults>(g);
    // The OpenAI facade.
    add::<openai::ChatRequest>(g);
    add::<openai::ModelList>(g);
    add::<openai::ChatCompletion>(g);
    add::<openai::ChatCompletionChunk>(g);
    add::<openai::StreamError>(g);
}
