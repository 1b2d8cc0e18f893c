//! TypeScript definitions from the JSON Schemas in [`super::components`]: the web UI's types
//! come from the very schemas the OpenAPI document publishes, so the two cannot disagree.
//!
//! The converter knows the JSON Schema that schemars writes for these types (objects,
//! arrays, `$ref`, `const`/`enum`, `oneOf`/`anyOf`, type lists with `null`) and nothing
//! more: a schema it cannot read becomes `unknown`, and the drift test shows it.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// The generated file, as committed at `web/src/protocol.ts`.
pub fn typescript() -> String {
    let components = super::components();
    let unions = Unions::of(&components);
    let mut out = String::from(HEADER);
    for (name, schema) in &components {
        out.push('\n');
        out.push_str(&declaration(name, schema, &unions));
    }
    out.push('\n');
    out.push_str(&event_types());
    out
}

/// The SSE event names, from the one list in the protocol ([`crate::EVENT_TYPES`]).
fn event_types() -> String {
    let names: Vec<String> = crate::EVENT_TYPES
        .iter()
        .map(|name| format!("{INDENT}\"{name}\",\n"))
        .collect();
    format!(
        "/** Every event's `type`, in declaration order: the SSE event names (`event: <type>`). */\n\
         export const EVENT_TYPES: readonly EventKind[\"type\"][] = [\n{}];\n",
        names.concat()
    )
}

/// The named unions (`oneOf`/`anyOf` components such as `EventKind`), by their alternatives:
/// a type that flattens one in (`TurnEvent`) is written `{…} & EventKind`, not a second copy.
struct Unions(HashMap<String, String>);

impl Unions {
    fn of(components: &Map<String, Value>) -> Self {
        let named = components
            .iter()
            .filter(|(_, schema)| schema.get("properties").is_none())
            .filter_map(|(name, schema)| Some((alternatives(schema)?.to_string(), name.clone())))
            .collect();
        Unions(named)
    }

    fn name_of(&self, alternatives: &Value) -> Option<&str> {
        self.0.get(&alternatives.to_string()).map(String::as_str)
    }
}

fn alternatives(schema: &Value) -> Option<&Value> {
    schema.get("oneOf").or_else(|| schema.get("anyOf"))
}

const HEADER: &str = "\
// The deepsolve wire types: turn events, the HTTP API, the OpenAI facade.
// Generated from the JSON Schemas of the deepsolve-protocol crate; do not edit. Regenerate with
//   cargo run -q -p deepsolve-protocol --example typescript > web/src/protocol.ts
";

const INDENT: &str = "  ";

/// One `export`: an interface for a plain object, a type alias for anything else.
fn declaration(name: &str, schema: &Value, unions: &Unions) -> String {
    let mut out = doc_comment(schema, "");
    if is_plain_object(schema) {
        out.push_str(&format!(
            "export interface {name} {}\n",
            object_body(schema, 0, unions)
        ));
    } else {
        out.push_str(&format!(
            "export type {name} = {};\n",
            type_of(schema, 0, unions)
        ));
    }
    out
}

fn is_plain_object(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
        && schema.get("properties").is_some()
        && schema.get("oneOf").is_none()
        && schema.get("anyOf").is_none()
}

/// A `/** … */` comment from the schema's `description`, or nothing.
fn doc_comment(schema: &Value, indent: &str) -> String {
    let Some(text) = schema.get("description").and_then(Value::as_str) else {
        return String::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    if let [line] = lines.as_slice() {
        return format!("{indent}/** {} */\n", escape_comment(line));
    }
    let mut out = format!("{indent}/**\n");
    for line in lines {
        out.push_str(&format!("{indent} * {}\n", escape_comment(line)).replace(" * \n", " *\n"));
    }
    out.push_str(&format!("{indent} */\n"));
    out
}

fn escape_comment(line: &str) -> String {
    line.replace("*/", "*\\/")
}

/// The TypeScript type of a schema, at a nesting depth (for multi-line objects).
fn type_of(schema: &Value, depth: usize, unions: &Unions) -> String {
    let Value::Object(map) = schema else {
        // `true`: anything.
        return "unknown".into();
    };
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        return reference
            .rsplit('/')
            .next()
            .unwrap_or("unknown")
            .to_string();
    }
    if let Some(value) = map.get("const") {
        return value.to_string();
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return union(values.iter().map(Value::to_string).collect());
    }
    if let Some(list) = alternatives(schema) {
        let members = list.as_array().map(Vec::as_slice).unwrap_or_default();
        let written = || union(members.iter().map(|s| type_of(s, depth, unions)).collect());
        return match map.get("properties") {
            // Fields shared by every alternative (a flattened enum): `{…} & Named` when the
            // union has a name, else `{…} & (A | B)`.
            Some(_) => {
                let rest = unions
                    .name_of(list)
                    .map_or_else(|| format!("({})", written()), str::to_string);
                format!("{} & {rest}", object_body(schema, depth, unions))
            }
            None => written(),
        };
    }
    match map.get("type") {
        Some(Value::String(t)) => type_named(t, map, depth, unions),
        Some(Value::Array(types)) => union(
            types
                .iter()
                .filter_map(Value::as_str)
                .map(|t| type_named(t, map, depth, unions))
                .collect(),
        ),
        _ => "unknown".into(),
    }
}

fn type_named(name: &str, schema: &Map<String, Value>, depth: usize, unions: &Unions) -> String {
    match name {
        "string" => "string".into(),
        "integer" | "number" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => {
            let item = schema
                .get("items")
                .map_or("unknown".into(), |s| type_of(s, depth, unions));
            if item.contains(' ') {
                format!("Array<{item}>")
            } else {
                format!("{item}[]")
            }
        }
        "object" => object_type(schema, depth, unions),
        _ => "unknown".into(),
    }
}

fn object_type(schema: &Map<String, Value>, depth: usize, unions: &Unions) -> String {
    if schema.contains_key("properties") {
        return object_body(&Value::Object(schema.clone()), depth, unions);
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => "Record<string, never>".into(),
        Some(s @ Value::Object(_)) => format!("Record<string, {}>", type_of(s, depth, unions)),
        _ => "Record<string, unknown>".into(),
    }
}

/// `{ key: T; other?: U; }` over several lines, with each field's description.
fn object_body(schema: &Value, depth: usize, unions: &Unions) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "{}".into();
    };
    let inner = INDENT.repeat(depth + 1);
    let mut out = String::from("{\n");
    for (key, property) in properties {
        out.push_str(&doc_comment(property, &inner));
        let optional = if required.contains(&key.as_str()) {
            ""
        } else {
            "?"
        };
        out.push_str(&format!(
            "{inner}{}{optional}: {};\n",
            property_name(key),
            type_of(property, depth + 1, unions)
        ));
    }
    out.push_str(&INDENT.repeat(depth));
    out.push('}');
    out
}

/// A key as a TypeScript property name: bare when it is an identifier, quoted otherwise.
fn property_name(key: &str) -> String {
    let identifier = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if identifier {
        key.to_string()
    } else {
        Value::String(key.to_string()).to_string()
    }
}

fn union(mut members: Vec<String>) -> String {
    members.dedup();
    match members.len() {
        0 => "never".into(),
        1 => members.remove(0),
        _ => members.join(" | "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn type_of(schema: &Value, depth: usize) -> String {
        super::type_of(schema, depth, &Unions(HashMap::new()))
    }

    #[test]
    fn schemas_become_the_matching_typescript() {
        assert_eq!(
            type_of(&json!({"type": ["string", "null"]}), 0),
            "string | null"
        );
        assert_eq!(
            type_of(
                &json!({"type": "array", "items": {"$ref": "#/components/schemas/Usage"}}),
                0
            ),
            "Usage[]"
        );
        assert_eq!(
            type_of(&json!({"oneOf": [{"const": "a"}, {"const": "b"}]}), 0),
            "\"a\" | \"b\""
        );
        assert_eq!(
            type_of(&json!({"type": "object", "additionalProperties": true}), 0),
            "Record<string, unknown>"
        );
        assert_eq!(type_of(&json!(true), 0), "unknown");
        assert_eq!(
            type_of(
                &json!({"type": "object", "required": ["a"],
                        "properties": {"a": {"type": "integer"}, "b-c": {"type": "boolean"}}}),
                0
            ),
            "{\n  a: number;\n  \"b-c\"?: boolean;\n}"
        );
    }

    #[test]
    fn a_flattened_named_union_is_referenced_not_copied() {
        let kind = json!({"oneOf": [{"type": "object", "required": ["type"],
            "properties": {"type": {"const": "a"}}}]});
        let event = json!({"type": "object", "required": ["seq"],
            "properties": {"seq": {"type": "integer"}}, "oneOf": kind["oneOf"].clone()});
        let components = Map::from_iter([
            ("Kind".to_string(), kind),
            ("Event".to_string(), event.clone()),
        ]);
        let unions = Unions::of(&components);
        assert_eq!(
            super::type_of(&event, 0, &unions),
            "{\n  seq: number;\n} & Kind"
        );
    }
}
