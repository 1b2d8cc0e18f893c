//! The internet, guarded. Everything deepsolve fetches from an address a model chose goes
//! through [`egress`] (the address classifier and the URL check, every hop) and [`fetch`] (a
//! client pinned to the addresses the guard vetted, no proxy, capped); [`search`] is
//! `web_search`'s provider chain, whose hosts are the operator's choice, not the model's.

pub mod egress;
pub mod fetch;
mod lazy;
pub mod search;
