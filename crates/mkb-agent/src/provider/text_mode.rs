//! Text tool mode, for models without tool calling. The tool list is rendered into the system
//! prompt with a strict plain-text action format,
//!
//! ````text
//! ```action
//! {"tool": "compile", "arguments": {"source": "..."}}
//! ```
//! ````
//!
//! the model's reply is parsed back into `ToolCall`s (robust to surrounding prose and several
//! actions; malformed blocks give a message the agent loop returns to the model), and tool
//! results go back as user messages. The session applies it around any HTTP provider, so the
//! agent loop sees the same `ChatRequest`/`ChatResponse` in both modes.

use super::types::{ChatRequest, ChatResponse, Message, Role, ToolCall, ToolSpec};
use serde_json::{json, Value};
use std::collections::HashMap;

/// The info string that marks an action block.
pub const ACTION_INFO: &str = "action";

/// The tool section appended to the system prompt.
pub fn render_tools(tools: &[ToolSpec]) -> String {
    let mut s = String::from(
        "# Tools\n\n\
         You call tools by writing action blocks in your reply. An action block is a fenced block \
         whose opening line is ```action and whose closing line is ``` alone; it holds exactly one \
         JSON object with the tool's name and its arguments:\n\n\
         ```action\n{\"tool\": \"TOOL_NAME\", \"arguments\": {\"ARGUMENT\": \"VALUE\"}}\n```\n\n\
         Rules:\n\
         - The JSON must be valid: strings in double quotes, a newline inside a string written \
         as \\n, a double quote as \\\", a backslash as \\\\.\n\
         - One action per block. Several blocks in one reply run in order.\n\
         - The results come back in the next user message.\n\
         - A reply without an action block calls no tool.\n\n\
         Available tools:\n",
    );
    for t in tools {
        s.push_str(&format!(
            "\n## {}\n{}\nArguments (JSON schema): {}\n",
            t.name,
            t.description.trim(),
            t.parameters
        ));
    }
    s
}

/// One tool call written as an action block.
pub fn render_action(call: &ToolCall) -> String {
    let body = json!({"tool": call.name, "arguments": call.arguments});
    format!("```{ACTION_INFO}\n{body}\n```")
}

/// The request as a model without tool calling sees it: the tools described in the system
/// prompt and no native tools, assistant tool calls as action blocks in their text, tool
/// results as user messages (consecutive results merged into one).
pub fn to_text_request(req: &ChatRequest) -> ChatRequest {
    let names: HashMap<&str, &str> = req
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter())
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect();
    let rendered = (!req.tools.is_empty()).then(|| render_tools(&req.tools));
    let mut out: Vec<Message> = Vec::with_capacity(req.messages.len() + 1);
    let mut system_done = rendered.is_none();
    let mut last_was_result = false;
    for m in &req.messages {
        let is_result = m.role == Role::Tool;
        match m.role {
            Role::System if !system_done => {
                let tools = rendered.as_deref().unwrap_or("");
                out.push(Message::system(format!(
                    "{}\n\n{tools}",
                    m.content.trim_end()
                )));
                system_done = true;
            }
            Role::System | Role::User => out.push(plain_copy(m)),
            Role::Assistant => {
                let mut content = m.content.clone();
                if !m.tool_calls.is_empty() && find_action_fence(&content).is_none() {
                    for c in &m.tool_calls {
                        if !content.is_empty() {
                            content.push_str("\n\n");
                        }
                        content.push_str(&render_action(c));
                    }
                }
                out.push(Message::assistant(content));
            }
            Role::Tool => {
                let id = m.tool_call_id.as_deref().unwrap_or("?");
                let name = names.get(id).copied().unwrap_or("unknown");
                let text = format!("Result of action `{name}` (id {id}):\n{}", m.content);
                match out.last_mut() {
                    Some(prev) if last_was_result => {
                        prev.content.push_str("\n\n");
                        prev.content.push_str(&text);
                    }
                    _ => out.push(Message::user(text)),
                }
            }
        }
        last_was_result = is_result;
    }
    if !system_done {
        out.insert(0, Message::system(rendered.unwrap_or_default()));
    }
    ChatRequest {
        messages: out,
        tools: Vec::new(),
        sampling: req.sampling.clone(),
    }
}

fn plain_copy(m: &Message) -> Message {
    Message {
        role: m.role,
        content: m.content.clone(),
        tool_calls: Vec::new(),
        tool_call_id: None,
    }
}

/// What a reply's action blocks parse to. When `errors` is not empty, `calls` is empty:
/// running some actions of a reply but not others would confuse the model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedActions {
    pub calls: Vec<ToolCall>,
    pub errors: Vec<String>,
}

/// Parses every action block of `text`. Call ids are `{id_prefix}{index}`.
pub fn parse_actions(text: &str, id_prefix: &str) -> ParsedActions {
    let mut calls = Vec::new();
    let mut errors = Vec::new();
    let mut hints = Vec::new();
    let mut blocks = 0usize;
    let mut pos = 0usize;
    while pos < text.len() {
        let line_end = line_end(text, pos);
        let line = text[pos..line_end].trim();
        let Some(info) = line.strip_prefix("```") else {
            pos = line_end;
            continue;
        };
        let info = info.trim();
        if info == ACTION_INFO {
            blocks += 1;
            match parse_block(text, line_end) {
                (Ok(v), end) => {
                    match to_call(v, format!("{id_prefix}{}", calls.len())) {
                        Ok(c) => calls.push(c),
                        Err(e) => errors.push(format!("action block {blocks}: {e}")),
                    }
                    pos = end;
                }
                (Err(e), end) => {
                    errors.push(format!("action block {blocks}: {e}"));
                    pos = end;
                }
            }
        } else {
            // Some other fenced block (code, an example): skip to its closing fence so that
            // nothing inside it counts as an action.
            let (inner_end, after) =
                closing_fence(text, line_end).unwrap_or((text.len(), text.len()));
            let inner = &text[line_end..inner_end];
            if (info.is_empty() || info.eq_ignore_ascii_case("json")) && looks_like_action(inner) {
                hints.push(format!(
                    "a ```{info} block holds what looks like an action; actions must be fenced as ```{ACTION_INFO}"
                ));
            }
            pos = after;
        }
    }
    if blocks == 0 {
        errors.extend(hints);
    }
    if !errors.is_empty() {
        calls.clear();
    }
    ParsedActions { calls, errors }
}

/// The message for the model when its action blocks could not be parsed.
pub fn format_error_message(errors: &[String]) -> String {
    format!(
        "Your reply could not be run, so no action was run: {}.\n\
         Write each action as a fenced block whose first line is ```{ACTION_INFO} and whose last \
         line is ``` alone, holding one valid JSON object:\n\
         ```{ACTION_INFO}\n{{\"tool\": \"TOOL_NAME\", \"arguments\": {{\"ARGUMENT\": \"VALUE\"}}}}\n```\n\
         Inside JSON strings write a newline as \\n and a double quote as \\\".",
        errors.join("; ")
    )
}

/// Fills `resp.message.tool_calls` from the action blocks of its text, or sets
/// `resp.format_error`. A response that already has tool calls is left alone.
pub fn apply_to_response(resp: &mut ChatResponse, id_prefix: &str) {
    if !resp.message.tool_calls.is_empty() {
        return;
    }
    let parsed = parse_actions(&resp.message.content, id_prefix);
    if parsed.errors.is_empty() {
        resp.message.tool_calls = parsed.calls;
        resp.format_error = None;
    } else {
        resp.format_error = Some(format_error_message(&parsed.errors));
    }
}

fn line_end(text: &str, pos: usize) -> usize {
    text[pos..]
        .find('\n')
        .map(|i| pos + i + 1)
        .unwrap_or(text.len())
}

/// Byte offset of the first line of `text` that is an action fence.
fn find_action_fence(text: &str) -> Option<usize> {
    let mut pos = 0;
    while pos < text.len() {
        let end = line_end(text, pos);
        if text[pos..end].trim().strip_prefix("```").map(str::trim) == Some(ACTION_INFO) {
            return Some(pos);
        }
        pos = end;
    }
    None
}

/// From `from`, the first line that is ``` alone: (its start, the offset after it).
fn closing_fence(text: &str, from: usize) -> Option<(usize, usize)> {
    let mut pos = from;
    while pos < text.len() {
        let end = line_end(text, pos);
        if text[pos..end].trim() == "```" {
            return Some((pos, end));
        }
        pos = end;
    }
    None
}

/// Parses the body of an action block starting at `start`; returns the value (or an error)
/// and the offset after the block.
fn parse_block(text: &str, start: usize) -> (Result<Value, String>, usize) {
    let rest = &text[start..];
    // A valid JSON value followed by the closing fence: exact, even if a string holds ```.
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    if let Some(Ok(v)) = stream.next() {
        let after = &rest[stream.byte_offset()..];
        let trimmed = after.trim_start();
        let fence_at = start + stream.byte_offset() + (after.len() - trimmed.len());
        if trimmed.is_empty() {
            // The reply ended right after the JSON (e.g. a stop sequence ate the fence).
            return (Ok(v), text.len());
        }
        if let Some(tail) = trimmed.strip_prefix("```") {
            let end = line_end(text, fence_at);
            if tail[..end - fence_at - 3].trim().is_empty() {
                return (Ok(v), end);
            }
        }
    }
    // Otherwise: up to the closing fence, repairing raw newlines inside strings.
    match closing_fence(text, start) {
        None => (
            Err("not closed by a line with ``` alone (was the reply cut off?)".into()),
            text.len(),
        ),
        Some((inner_end, after)) => {
            let body = escape_controls_in_strings(&text[start..inner_end]);
            if body.trim().is_empty() {
                return (Err("the block is empty".into()), after);
            }
            match serde_json::from_str::<Value>(&body) {
                Ok(v) => (Ok(v), after),
                Err(e) => (Err(format!("invalid JSON ({e})")), after),
            }
        }
    }
}

/// Escapes raw control characters (newlines, tabs) inside JSON strings: the most common way a
/// model breaks the JSON of an action that carries source code.
fn escape_controls_in_strings(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    for c in s.chars() {
        if in_string {
            if escaped {
                escaped = false;
                out.push(c);
                continue;
            }
            match c {
                '\\' => {
                    escaped = true;
                    out.push(c);
                }
                '"' => {
                    in_string = false;
                    out.push(c);
                }
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        } else {
            if c == '"' {
                in_string = true;
            }
            out.push(c);
        }
    }
    out
}

fn looks_like_action(inner: &str) -> bool {
    let body = escape_controls_in_strings(inner);
    matches!(serde_json::from_str::<Value>(&body), Ok(Value::Object(o)) if o.contains_key("tool"))
}

fn to_call(v: Value, id: String) -> Result<ToolCall, String> {
    let Value::Object(obj) = v else {
        return Err(
            "the block must hold one JSON object {\"tool\": ..., \"arguments\": {...}}".into(),
        );
    };
    let name = ["tool", "name"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .filter(|n| !n.trim().is_empty())
        .ok_or("the object has no \"tool\" (the tool's name as a string)")?;
    let args = ["arguments", "args", "parameters", "input"]
        .iter()
        .find_map(|k| obj.get(*k));
    let arguments = match args {
        None | Some(Value::Null) => json!({}),
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(o)) => Value::Object(o),
            _ => return Err("\"arguments\" must be a JSON object".into()),
        },
        Some(_) => return Err("\"arguments\" must be a JSON object".into()),
    };
    Ok(ToolCall {
        id,
        name: name.trim().to_string(),
        arguments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::types::{Sampling, Usage};

    fn tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "compile".into(),
            description: "Compile the kernel.".into(),
            parameters: json!({"type": "object", "properties": {"source": {"type": "string"}}}),
        }]
    }

    #[test]
    fn render_lists_tools_and_the_format() {
        let r = render_tools(&tools());
        assert!(r.contains("## compile\nCompile the kernel."), "{r}");
        assert!(r.contains(r#""source""#));
        assert!(r.contains("```action\n{\"tool\""));
        // The example in the prompt parses with our own parser.
        let p = parse_actions(&r, "x");
        assert_eq!(p.errors, Vec::<String>::new());
        assert_eq!(p.calls.len(), 1);
        assert_eq!(p.calls[0].name, "TOOL_NAME");
    }

    #[test]
    fn parses_actions_among_prose() {
        let text = "I'll compile first.\n\n```action\n{\"tool\": \"compile\", \"arguments\": {\"source\": \"x = 1\\n```\\ny\"}}\n```\nThen test:\n  ```action  \n{\"tool\": \"test\"}\n```\nDone.";
        let p = parse_actions(text, "t3_");
        assert_eq!(p.errors, Vec::<String>::new());
        assert_eq!(p.calls.len(), 2);
        assert_eq!(
            p.calls[0],
            ToolCall {
                id: "t3_0".into(),
                name: "compile".into(),
                arguments: json!({"source": "x = 1\n```\ny"})
            }
        );
        assert_eq!(
            p.calls[1],
            ToolCall {
                id: "t3_1".into(),
                name: "test".into(),
                arguments: json!({})
            }
        );
    }

    #[test]
    fn no_action_is_no_call_and_no_error() {
        let p = parse_actions(
            "Final answer: the kernel is done.\n```python\nprint(1)\n```\n",
            "a",
        );
        assert_eq!(p, ParsedActions::default());
        // An inline mention is not a fence.
        assert_eq!(
            parse_actions("I could write ```action here", "a"),
            ParsedActions::default()
        );
    }

    #[test]
    fn repairs_raw_newlines_in_strings() {
        let text = "```action\n{\"tool\": \"compile\", \"arguments\": {\"source\": \"def f():\n\treturn 1\"}}\n```";
        let p = parse_actions(text, "a");
        assert_eq!(p.errors, Vec::<String>::new());
        assert_eq!(p.calls[0].arguments["source"], "def f():\n\treturn 1");
    }

    #[test]
    fn malformed_blocks_give_clear_errors_and_no_calls() {
        let text = "```action\n{\"tool\": \"compile\"}\n```\n```action\n{\"tool\": \"test\", \"arguments\": {oops}}\n```\n";
        let p = parse_actions(text, "a");
        assert!(p.calls.is_empty());
        assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
        assert!(
            p.errors[0].starts_with("action block 2: invalid JSON"),
            "{:?}",
            p.errors
        );

        let cut = parse_actions(
            "```action\n{\"tool\": \"compile\", \"arguments\": {\"source\": \"abc",
            "a",
        );
        assert!(cut.errors[0].contains("not closed"), "{:?}", cut.errors);

        let no_tool = parse_actions("```action\n{\"arguments\": {}}\n```", "a");
        assert!(
            no_tool.errors[0].contains("no \"tool\""),
            "{:?}",
            no_tool.errors
        );

        let bad_args = parse_actions("```action\n{\"tool\": \"t\", \"arguments\": [1]}\n```", "a");
        assert!(
            bad_args.errors[0].contains("must be a JSON object"),
            "{:?}",
            bad_args.errors
        );

        let json_fence = parse_actions(
            "```json\n{\"tool\": \"compile\", \"arguments\": {}}\n```",
            "a",
        );
        assert!(
            json_fence.errors[0].contains("must be fenced as ```action"),
            "{:?}",
            json_fence.errors
        );

        let msg = format_error_message(&p.errors);
        assert!(
            msg.contains("action block 2") && msg.contains("```action"),
            "{msg}"
        );
    }

    #[test]
    fn lenient_keys_and_stringified_arguments() {
        let p = parse_actions(
            "```action\n{\"name\": \"t\", \"arguments\": \"{\\\"a\\\": 2}\"}\n```",
            "a",
        );
        assert_eq!(p.calls[0].name, "t");
        assert_eq!(p.calls[0].arguments, json!({"a": 2}));
        // The reply ends right after the JSON (a stop sequence ate the fence).
        let p = parse_actions("```action\n{\"tool\": \"t\", \"arguments\": {}}\n", "a");
        assert_eq!(p.calls.len(), 1, "{:?}", p.errors);
    }

    #[test]
    fn request_is_rewritten_for_text_models() {
        let call = ToolCall {
            id: "c1".into(),
            name: "compile".into(),
            arguments: json!({"source": "s"}),
        };
        let req = ChatRequest {
            messages: vec![
                Message::system("You write kernels."),
                Message::user("Go."),
                Message {
                    role: Role::Assistant,
                    content: "Compiling.".into(),
                    tool_calls: vec![call.clone()],
                    tool_call_id: None,
                },
                Message::tool_result("c1", "ok"),
                Message::tool_result("zz", "second"),
                Message::user("more"),
            ],
            tools: tools(),
            sampling: Sampling::default(),
        };
        let t = to_text_request(&req);
        assert!(t.tools.is_empty());
        assert_eq!(t.messages.len(), 5);
        assert!(t.messages[0]
            .content
            .starts_with("You write kernels.\n\n# Tools"));
        assert_eq!(
            t.messages[2].content,
            format!("Compiling.\n\n{}", render_action(&call))
        );
        assert!(t.messages[2].tool_calls.is_empty());
        assert_eq!(t.messages[3].role, Role::User);
        assert_eq!(
            t.messages[3].content,
            "Result of action `compile` (id c1):\nok\n\nResult of action `unknown` (id zz):\nsecond"
        );
        assert_eq!(t.messages[4].content, "more");
        assert!(t.messages.iter().all(|m| m.role != Role::Tool));
        // Re-parsing the rendered assistant turn gives the call back.
        assert_eq!(
            parse_actions(&t.messages[2].content, "c").calls[0].arguments,
            call.arguments
        );

        // Without a system message one is added; an assistant text that already has its
        // action blocks is not doubled.
        let req2 = ChatRequest {
            messages: vec![
                Message::user("Go."),
                Message {
                    role: Role::Assistant,
                    content: render_action(&call),
                    tool_calls: vec![call.clone()],
                    tool_call_id: None,
                },
            ],
            tools: tools(),
            sampling: Sampling::default(),
        };
        let t2 = to_text_request(&req2);
        assert_eq!(t2.messages[0].role, Role::System);
        assert!(t2.messages[0].content.starts_with("# Tools"));
        assert_eq!(t2.messages[2].content, render_action(&call));
    }

    #[test]
    fn apply_sets_calls_or_format_error() {
        let mut r = ChatResponse {
            message: Message::assistant(
                "```action\n{\"tool\": \"compile\", \"arguments\": {}}\n```",
            ),
            usage: Usage::default(),
            stop_reason: "stop".into(),
            model: "m".into(),
            latency_ms: 0,
            retries: 0,
            format_error: None,
        };
        apply_to_response(&mut r, "act0_");
        assert_eq!(r.message.tool_calls[0].id, "act0_0");
        assert!(r.format_error.is_none());
        let mut bad = r.clone();
        bad.message = Message::assistant("```action\n{nope}\n```");
        apply_to_response(&mut bad, "act1_");
        assert!(bad.message.tool_calls.is_empty());
        assert!(bad
            .format_error
            .as_deref()
            .unwrap()
            .contains("invalid JSON"));
    }
}
