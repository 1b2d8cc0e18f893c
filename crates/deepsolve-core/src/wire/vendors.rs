//! The readers of each vendor's call markup (the insides of the [`super::markup::SECTIONS`]).

use serde_json::{Map, Value};

use super::markup::{MarkupError, ParsedCall, extract_calls};
use crate::json_repair::parse_lenient;

fn malformed(raw: &str, error: MarkupError) -> ParsedCall {
    ParsedCall::Malformed {
        raw: raw.chars().take(500).collect(),
        error,
    }
}

/// `{"name": …, "arguments": {…}}` (also `parameters`/`args`, and arguments as a JSON string).
pub(super) fn read_json_call(body: &str) -> Vec<ParsedCall> {
    let value = match parse_lenient(body) {
        Ok(v) => v,
        Err(e) => return vec![malformed(body, MarkupError::InvalidJson(e))],
    };
    let Value::Object(obj) = value else {
        return vec![malformed(body, MarkupError::NotAnObject)];
    };
    let name = obj
        .get("name")
        .or_else(|| obj.get("function"))
        .or_else(|| obj.get("tool"))
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    if name.is_empty() {
        return vec![malformed(body, MarkupError::NoName)];
    }
    let args = obj
        .get("arguments")
        .or_else(|| obj.get("parameters"))
        .or_else(|| obj.get("args"))
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    let arguments = match args {
        Value::String(s) => s,
        other => other.to_string(),
    };
    vec![ParsedCall::Call {
        name: name.to_string(),
        arguments,
    }]
}

/// DeepSeek DSML: `<｜DSML｜invoke name="N">` with `<｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>`.
pub(super) fn read_dsml(body: &str) -> Vec<ParsedCall> {
    const INVOKE: &str = "<｜DSML｜invoke name=\"";
    const INVOKE_END: &str = "</｜DSML｜invoke>";
    let mut calls = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find(INVOKE) {
        let after = &rest[i + INVOKE.len()..];
        let Some(q) = after.find('"') else {
            calls.push(malformed(after, MarkupError::UnterminatedName));
            break;
        };
        let name = after[..q].trim().to_string();
        let inner_start = after[q..]
            .find('>')
            .map(|j| q + j + 1)
            .unwrap_or(after.len());
        let (inner, next) = match after[inner_start..].find(INVOKE_END) {
            Some(j) => (
                &after[inner_start..inner_start + j],
                &after[inner_start + j + INVOKE_END.len()..],
            ),
            None => (&after[inner_start..], ""),
        };
        calls.push(ParsedCall::Call {
            name,
            arguments: Value::Object(read_dsml_parameters(inner)).to_string(),
        });
        rest = next;
    }
    calls
}

fn read_dsml_parameters(inner: &str) -> Map<String, Value> {
    const PARAM: &str = "<｜DSML｜parameter name=\"";
    const PARAM_END: &str = "</｜DSML｜parameter>";
    let mut args = Map::new();
    let mut rest = inner;
    while let Some(i) = rest.find(PARAM) {
        let after = &rest[i + PARAM.len()..];
        let Some(q) = after.find('"') else { break };
        let key = after[..q].to_string();
        let Some(gt) = after[q..].find('>').map(|j| q + j) else {
            break;
        };
        let is_string = after[q..gt].contains("string=\"true\"");
        let value_start = gt + 1;
        let (raw, next) = match after[value_start..].find(PARAM_END) {
            Some(j) => (
                &after[value_start..value_start + j],
                &after[value_start + j + PARAM_END.len()..],
            ),
            None => (&after[value_start..], ""),
        };
        let value = if is_string {
            Value::String(raw.to_string())
        } else {
            serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.to_string()))
        };
        args.insert(key, value);
        rest = next;
    }
    args
}

pub(super) fn read_kimi_section(body: &str) -> Vec<ParsedCall> {
    extract_calls(body).calls
}

/// `functions.NAME:IDX<|tool_call_argument_begin|>{json}`.
pub(super) fn read_kimi_call(body: &str) -> Vec<ParsedCall> {
    const ARGS: &str = "<|tool_call_argument_begin|>";
    let Some((head, json)) = body.split_once(ARGS) else {
        return vec![malformed(body, MarkupError::NoArgumentBegin)];
    };
    let name = head.trim().trim_start_matches("functions.");
    let name = name.split(':').next().unwrap_or_default().trim();
    if name.is_empty() {
        return vec![malformed(body, MarkupError::NoFunctionName)];
    }
    vec![ParsedCall::Call {
        name: name.to_string(),
        arguments: json.trim().to_string(),
    }]
}

/// `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{…}\n```<｜tool▁call▁end｜>`.
pub(super) fn read_deepseek_v3_section(body: &str) -> Vec<ParsedCall> {
    const BEGIN: &str = "<｜tool▁call▁begin｜>";
    const SEP: &str = "<｜tool▁sep｜>";
    const END: &str = "<｜tool▁call▁end｜>";
    body.split(BEGIN)
        .skip(1)
        .map(|call| {
            let call = call.split(END).next().unwrap_or_default();
            let Some((_, rest)) = call.split_once(SEP) else {
                return malformed(call, MarkupError::NoToolSeparator);
            };
            let (name, args) = rest.split_once('\n').unwrap_or((rest, "{}"));
            let args = args
                .trim()
                .trim_start_matches("```json")
                .trim_start_matches("```");
            let args = args.trim().trim_end_matches("```").trim();
            ParsedCall::Call {
                name: name.trim().to_string(),
                arguments: if args.is_empty() {
                    "{}".into()
                } else {
                    args.to_string()
                },
            }
        })
        .collect()
}
