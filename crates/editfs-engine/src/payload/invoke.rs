//! XML function calls (`<invoke name="...">` with `<parameter>` elements), the
//! form models write tool calls in as text: each read as the JSON tool call it
//! stands for (json.rs), with the XML tools' reading of values (tools.rs).

use super::tools::{char_data, value_end};
use super::{Payload, PayloadError, json, markers};

/// How a function call opens in the XML form models write tool calls in as
/// text (`<invoke name="str_replace_based_edit_tool">`, its arguments each a
/// `<parameter name="old_str">` element).
const INVOKE: &str = "<invoke name=\"";
const INVOKE_END: &str = "</invoke>";
const PARAMETER: &str = "<parameter name=\"";
const PARAMETER_END: &str = "</parameter>";

/// Reads the payload as XML function calls if it is some: a line opening one
/// comes before any marker block. Each call is read as the JSON tool call it
/// stands for (its name and its parameters as `input`), so every tool JSON
/// calls are read for works in this form too.
pub fn parse_invoke(text: &str) -> Option<Result<Payload, PayloadError>> {
    // At the start of its line: a diff's context line may show one.
    let first = text
        .lines()
        .find(|l| markers::opens_block(l.trim_start()) || l.starts_with(INVOKE))?;
    if !first.starts_with(INVOKE) {
        return None;
    }
    let mut calls = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find(INVOKE) {
        let start = at + i + INVOKE.len();
        let Some(name_end) = text[start..].find('"') else {
            break;
        };
        let body = start + name_end;
        let end = text[body..]
            .find(INVOKE_END)
            .map_or(text.len(), |e| body + e);
        let input = invoke_params(&text[body..end]);
        calls.push(serde_json::json!({"name": &text[start..body], "input": input}));
        at = (end + INVOKE_END.len()).min(text.len());
    }
    let mut payload = match json::from_values(calls) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    payload
        .notes
        .push("read each <invoke> XML function call as the JSON tool call it stands for".into());
    Some(Ok(payload))
}

/// The parameters of one `<invoke>` call, by name: CDATA sections unwrapped and
/// the line breaks around a value dropped (models put a value on lines of its
/// own), its indentation kept; `edits` (MultiEdit's list) read as JSON.
fn invoke_params(body: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut params = serde_json::Map::new();
    let mut at = 0;
    while let Some(i) = body[at..].find(PARAMETER) {
        let start = at + i + PARAMETER.len();
        let Some(name_end) = body[start..].find("\">") else {
            break;
        };
        let name = &body[start..start + name_end];
        let from = start + name_end + 2;
        let stop = value_end(body, from, PARAMETER_END);
        let raw = char_data(&body[from..stop]);
        let value = raw.trim_matches(|c| c == '\n' || c == '\r');
        let parsed = match name {
            "edits" => serde_json::from_str(value).ok(),
            _ => None,
        };
        params.insert(
            name.to_owned(),
            parsed.unwrap_or_else(|| serde_json::Value::String(value.to_owned())),
        );
        at = (stop + PARAMETER_END.len()).min(body.len());
    }
    params
}
