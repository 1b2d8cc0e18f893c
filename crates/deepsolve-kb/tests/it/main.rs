//! The crate's one integration-test binary.
