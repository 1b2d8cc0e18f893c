//! The web tools, opt-in per turn: `web_search` asks the operator's search providers (a chain
//! that falls through to DuckDuckGo), `web_fetch` reads one page through the egress guard.
//! Both number what they return through the turn's citations, with its URL, like `rag`; what
//! they return is quoted material, never instructions.

pub mod fetch;
pub mod search;

pub use fetch::WEB_FETCH;
pub use search::WEB_SEARCH;
