//! Markdown and plain text: UTF-8, one page.

use super::{ExtractError, Extracted, Kind, Markup, Page, stem_title};

pub(super) fn extract(name: &str, bytes: &[u8], kind: Kind) -> Result<Extracted, ExtractError> {
    let text = decode(name, bytes)?;
    let markup = if kind == Kind::Markdown {
        Markup::Markdown
    } else {
        Markup::Plain
    };
    let title = match markup {
        Markup::Markdown => first_heading(&text),
        Markup::Plain => None,
    }
    .unwrap_or_else(|| stem_title(name));
    Ok(Extracted {
        kind,
        title,
        markup,
        pages: vec![Page { number: 1, text }],
    })
}

/// UTF-8 (a byte-order mark dropped, line ends made `\n`). A NUL or an invalid sequence means
/// the file is not text — a binary renamed `.txt` — and is refused where it starts, rather than
/// indexed as replacement characters.
pub(crate) fn decode(name: &str, bytes: &[u8]) -> Result<String, ExtractError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let not_text = |offset| ExtractError::NotText {
        name: name.to_owned(),
        offset,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| not_text(e.valid_up_to()))?;
    if let Some(offset) = text.bytes().position(|b| b == 0) {
        return Err(not_text(offset));
    }
    Ok(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// The text of the first ATX heading of any level.
pub(crate) fn first_heading(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| crate::chunk::atx_heading(line).map(|(_, title)| title.to_owned()))
}
