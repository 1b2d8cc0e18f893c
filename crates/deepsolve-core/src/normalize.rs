//! History normalisation before every request: every tool call paired with
//! exactly one result, no orphans, no empty messages, one leading system message, and no two
//! consecutive user messages.

use std::collections::HashSet;

use crate::message::{Message, Role};

/// `no_result` is what a call without a result is answered with.
pub(crate) fn normalize(messages: Vec<Message>, no_result: &str) -> Vec<Message> {
    let paired = pair_tool_calls(messages, no_result);
    merge_and_clean(paired)
}

/// Give every assistant tool call exactly one result, right after its assistant message, and
/// drop results that answer no call (or a call already answered).
fn pair_tool_calls(messages: Vec<Message>, no_result: &str) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut iter = messages.into_iter().peekable();
    while let Some(msg) = iter.next() {
        match msg.role {
            Role::Tool => {} // orphan: an answered one is consumed below
            Role::Assistant if !msg.tool_calls.is_empty() => {
                let mut results = Vec::new();
                while iter.peek().is_some_and(|m| m.role == Role::Tool) {
                    results.extend(iter.next());
                }
                let mut answered = HashSet::new();
                let calls = msg.tool_calls.clone();
                out.push(msg);
                for call in &calls {
                    if !answered.insert(call.id.clone()) {
                        continue;
                    }
                    let result = results
                        .iter()
                        .position(|r| r.tool_call_id.as_deref() == Some(&call.id))
                        .map(|i| results.remove(i))
                        .unwrap_or_else(|| Message::tool_result(call, no_result));
                    out.push(result);
                }
            }
            _ => out.push(msg),
        }
    }
    out
}

fn merge_and_clean(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for msg in messages {
        let empty = msg.content.trim().is_empty() && msg.tool_calls.is_empty();
        if empty && msg.role != Role::Tool {
            continue;
        }
        if let Some(prev) = out.last_mut()
            && msg.role == Role::User
            && prev.role == Role::User
        {
            prev.content.push_str("\n\n");
            prev.content.push_str(&msg.content);
            continue;
        }
        if msg.role == Role::System && !out.is_empty() {
            // Only one leading system message: later ones become user context.
            let mut demoted = Message::user(msg.content);
            demoted.role = Role::User;
            out.push(demoted);
            continue;
        }
        out.push(msg);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    const NO_RESULT: &str = "aborted: no result";

    fn normalize(messages: Vec<Message>) -> Vec<Message> {
        super::normalize(messages, NO_RESULT)
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn missing_results_are_synthesised_and_orphans_dropped() {
        let msgs = vec![
            Message::system("s"),
            Message::user("u"),
            Message::tool_result(&call("orphan"), "x"),
            Message::assistant_with_calls("", vec![call("a"), call("b")], None),
            Message::tool_result(&call("b"), "rb"),
            Message::user("next"),
        ];
        let out = normalize(msgs);
        let roles: Vec<Role> = out.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Tool,
                Role::User
            ]
        );
        assert_eq!(out[3].tool_call_id.as_deref(), Some("a"));
        assert_eq!(out[3].content, NO_RESULT);
        assert_eq!(out[4].content, "rb");
    }

    #[test]
    fn consecutive_users_merge_and_empties_go() {
        let out = normalize(vec![
            Message::system("s"),
            Message::user("a"),
            Message::assistant(" "),
            Message::user("b"),
        ]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].content, "a\n\nb");
    }

    #[test]
    fn later_system_messages_are_demoted() {
        let out = normalize(vec![
            Message::system("s"),
            Message::user("a"),
            Message::assistant("x"),
            Message::system("late"),
        ]);
        assert_eq!(out[3].role, Role::User);
    }
}
