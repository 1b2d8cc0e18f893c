//! A model's own chat template (`tokenizer.chat_template` in the GGUF), rendered with
//! minijinja the way Hugging Face's `apply_chat_template` renders it: `messages` in the OpenAI
//! shape, `tools` as `{"type": "function", "function": …}`, `add_generation_prompt`, and the
//! helpers templates expect (`tojson` with Python's separators, `raise_exception`, Python
//! string methods, `strftime_now`). llama.cpp's own `llama_chat_apply_template` knows only
//! built-in templates and takes no tools, hence this.

use minijinja::value::{Kwargs, Value as JinjaValue};
use minijinja::{Environment, Error as JinjaError, ErrorKind as JinjaErrorKind};
use serde::Serialize;
use serde_json::Value;

use deepsolve_core::{Message, Role, ToolSpec, parse_lenient};

/// Why a template could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("the chat template does not compile: {0}")]
    Compile(String),
    #[error("the chat template failed to render: {0}")]
    Render(String),
}

/// A compiled chat template and the special tokens it may print.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

const TEMPLATE_NAME: &str = "chat";

impl ChatTemplate {
    /// Compile `source` (the GGUF's `tokenizer.chat_template`).
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        // Hugging Face renders with `trim_blocks` and `lstrip_blocks`.
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(|e| TemplateError::Compile(describe(&e)))?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// The prompt for `messages` with `tools` offered, ending where the assistant's reply
    /// begins.
    pub fn render(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<String, TemplateError> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| TemplateError::Render(describe(&e)))?;
        let messages: Vec<MessageJson<'_>> = messages.iter().map(message_json).collect();
        let tools: Vec<ToolJson<'_>> = tools.iter().map(tool_json).collect();
        let context = minijinja::context! {
            messages => JinjaValue::from_serialize(&messages),
            // An empty list is falsy in Jinja: templates then take their tool-less branch.
            tools => if tools.is_empty() { JinjaValue::from(()) } else { JinjaValue::from_serialize(&tools) },
            add_generation_prompt => true,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        };
        template
            .render(context)
            .map_err(|e| TemplateError::Render(describe(&e)))
    }
}

/// A minijinja error with its cause chain and line, in one line.
fn describe(error: &JinjaError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// A message in the OpenAI shape templates are written for, its keys in OpenAI's order (a
/// template that prints a message with `tojson` prints them so). A call's arguments become a
/// JSON value (templates print them with `tojson`); arguments that are not JSON stay a string.
#[derive(Serialize)]
struct MessageJson<'m> {
    role: &'static str,
    content: &'m str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<CallJson<'m>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'m str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'m str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'m str>,
}

#[derive(Serialize)]
struct CallJson<'m> {
    id: &'m str,
    r#type: &'static str,
    function: FunctionJson<'m>,
}

#[derive(Serialize)]
struct FunctionJson<'m> {
    name: &'m str,
    arguments: Value,
}

/// A tool as templates expect it: `{"type": "function", "function": {…}}`, in that order.
#[derive(Serialize)]
struct ToolJson<'t> {
    r#type: &'static str,
    function: ToolFunctionJson<'t>,
}

#[derive(Serialize)]
struct ToolFunctionJson<'t> {
    name: &'t str,
    description: &'t str,
    parameters: &'t Value,
}

fn message_json(message: &Message) -> MessageJson<'_> {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let tool_calls = message
        .tool_calls
        .iter()
        .map(|call| CallJson {
            id: &call.id,
            r#type: "function",
            function: FunctionJson {
                name: &call.name,
                arguments: parse_lenient(&call.arguments)
                    .unwrap_or_else(|_| Value::String(call.arguments.clone())),
            },
        })
        .collect();
    MessageJson {
        role,
        content: &message.content,
        tool_calls,
        tool_call_id: message.tool_call_id.as_deref(),
        name: message.name.as_deref(),
        reasoning_content: message.reasoning_content.as_deref(),
    }
}

fn tool_json(tool: &ToolSpec) -> ToolJson<'_> {
    ToolJson {
        r#type: "function",
        function: ToolFunctionJson {
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.parameters,
        },
    }
}

/// Python's `json.dumps` (what Hugging Face's `tojson` is): `", "` and `": "` separators, keys
/// in their order, non-ASCII kept; `indent=n` pretty-prints. (minijinja's own `tojson` escapes
/// `<`, `>`, `&` and `'` for HTML and drops the spaces: not the text the model was trained on.)
fn tojson(value: JinjaValue, kwargs: Kwargs) -> Result<String, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    // Accepted and ignored: Python's defaults are what we print.
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let _: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let mut out = Vec::new();
    let result = match indent {
        Some(n) => {
            let indent = " ".repeat(n);
            let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
            value.serialize(&mut serde_json::Serializer::with_formatter(
                &mut out, formatter,
            ))
        }
        None => value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            PythonFormatter,
        )),
    };
    result.map_err(|e| JinjaError::new(JinjaErrorKind::InvalidOperation, e.to_string()))?;
    String::from_utf8(out)
        .map_err(|e| JinjaError::new(JinjaErrorKind::InvalidOperation, e.to_string()))
}

/// `json.dumps`' default separators.
struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

fn raise_exception(message: String) -> Result<String, JinjaError> {
    Err(JinjaError::new(JinjaErrorKind::InvalidOperation, message))
}

/// The current UTC time formatted with the common `strftime` fields (Llama 3's templates
/// print today's date).
fn strftime_now(format: String) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (year, month, day) = civil_from_days(secs / 86_400);
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let month_name = MONTHS.get(month as usize - 1).copied().unwrap_or("January");
    format
        .replace("%Y", &year.to_string())
        .replace("%m", &format!("{month:02}"))
        .replace("%d", &format!("{day:02}"))
        .replace("%B", month_name)
        .replace("%b", &month_name[..3])
}

/// (year, month 1–12, day 1–31) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (i64, u32, u32) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
