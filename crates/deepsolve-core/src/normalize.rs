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
        let empty = msg.content.trim().is_empty() && msg.tool_calls.is_empty() && !msg.has_images();
        if empty && msg.role != Role::Tool {
            continue;
        }
        if let Some(prev) = out.last_mut()
            && msg.role == Role::User
            && prev.role == Role::User
        {
            merge_user(prev, msg);
            continue;
        }
        if msg.role == Role::System && !out.is_empty() {
            // Only one leading system message: later ones become user context.
            out.push(Message::user(msg.content));
            continue;
        }
        out.push(msg);
    }
    out
}

/// `next` joins the user message before it: its text after a blank line, its images after
/// the earlier ones (the problem's figure survives the progress block merged into it).
fn merge_user(prev: &mut Message, next: Message) {
    if !prev.content.is_empty() && !next.content.is_empty() {
        prev.content.push_str("\n\n");
    }
    prev.content.push_str(&next.content);
    if next.has_images() {
        prev.images = prev
            .images
            .iter()
            .chain(next.images.iter())
            .cloned()
            .collect();
    }
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

    fn figure() -> crate::image::TurnImage {
        crate::image::TurnImage {
            id: "image_1".into(),
            name: "figure.png".into(),
            mime: "image/png".into(),
            width: 4,
            height: 3,
            bytes: std::sync::Arc::from(&b"\x89PNG"[..]),
        }
    }

    #[test]
    fn a_merged_user_message_keeps_the_images_of_both() {
        let problem = Message::user_with_images("Find angle C.", vec![figure()].into());
        let out = normalize(vec![
            Message::system("s"),
            problem,
            Message::user("[deepsolve:progress] round 1"),
            Message::user_with_images("", vec![figure(), figure()].into()),
        ]);
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[1].content,
            "Find angle C.\n\n[deepsolve:progress] round 1"
        );
        assert_eq!(out[1].images.len(), 3);
        // An image alone is content: the message stays.
        let alone = normalize(vec![
            Message::system("s"),
            Message::user_with_images(" ", vec![figure()].into()),
        ]);
        assert_eq!(alone.len(), 2);
        assert_eq!(alone[1].images.len(), 1);
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
