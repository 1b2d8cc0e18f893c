//! The vision model's reply, read leniently: a JSON object `{constraints, relations,
//! commands}`, possibly in a code fence or with prose around it, with the repairs
//! `parse_lenient` makes to model-written JSON.

use deepsolve_core::{Language, parse_lenient};
use serde_json::Value;

/// What the model said about the figure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FigureReply {
    pub constraints: Vec<String>,
    pub relations: Vec<String>,
    /// One command per entry; a string holding several lines is split into them.
    pub commands: Vec<String>,
}

/// Why a reply could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unreadable {
    NoObject,
    BadJson,
    NoCommands,
}

impl Unreadable {
    pub(crate) fn describe(&self, language: Language) -> &'static str {
        match (self, language) {
            (Unreadable::NoObject, Language::En) => "there is no JSON object in it",
            (Unreadable::NoObject, Language::Zh) => "其中没有 JSON 对象",
            (Unreadable::BadJson, Language::En) => "its JSON cannot be read",
            (Unreadable::BadJson, Language::Zh) => "其中的 JSON 无法解析",
            (Unreadable::NoCommands, Language::En) => "it has no \"commands\" list of strings",
            (Unreadable::NoCommands, Language::Zh) => "其中没有由字符串组成的 \"commands\" 列表",
        }
    }
}

/// Reads the first `{` to the last `}` of `text` as the reply's object.
pub(crate) fn read_reply(text: &str) -> Result<FigureReply, Unreadable> {
    let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) else {
        return Err(Unreadable::NoObject);
    };
    if end < start {
        return Err(Unreadable::NoObject);
    }
    let value = parse_lenient(&text[start..=end]).map_err(|_| Unreadable::BadJson)?;
    let Value::Object(object) = value else {
        return Err(Unreadable::NoObject);
    };
    let commands: Vec<String> = strings(object.get("commands"))
        .iter()
        .flat_map(|c| c.lines().map(str::trim).filter(|l| !l.is_empty()))
        .map(str::to_string)
        .collect();
    if commands.is_empty() {
        return Err(Unreadable::NoCommands);
    }
    Ok(FigureReply {
        constraints: strings(object.get("constraints")),
        relations: strings(object.get("relations")),
        commands,
    })
}

/// A list of strings, a single string, or nothing; other entries and blank ones are left out.
fn strings(value: Option<&Value>) -> Vec<String> {
    let items: Vec<&str> = match value {
        Some(Value::String(s)) => vec![s],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    items
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_object_inside_a_fence_and_prose() {
        let text = "Here it is:\n```json\n{\"constraints\": [\"AB = 4\"], \"relations\": \"find C\", \"commands\": [\"A = (0, 0)\", \"B = (4, 0)\\nC = (0, 3)\", 7, \"\"],}\n```\nDone.";
        let reply = read_reply(text).unwrap();
        assert_eq!(reply.constraints, vec!["AB = 4"]);
        assert_eq!(reply.relations, vec!["find C"]);
        assert_eq!(
            reply.commands,
            vec!["A = (0, 0)", "B = (4, 0)", "C = (0, 3)"]
        );
    }

    #[test]
    fn names_what_is_missing() {
        assert_eq!(read_reply("no json here"), Err(Unreadable::NoObject));
        assert_eq!(read_reply("} {"), Err(Unreadable::NoObject));
        assert_eq!(read_reply("[1, 2]"), Err(Unreadable::NoObject));
        assert_eq!(
            read_reply("{\"relations\": []}"),
            Err(Unreadable::NoCommands)
        );
        assert_eq!(
            read_reply("{\"commands\": [1, 2]}"),
            Err(Unreadable::NoCommands)
        );
    }
}
