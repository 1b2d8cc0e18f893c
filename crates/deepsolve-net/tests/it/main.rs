//! deepsolve-net's integration tests: the egress guard and the fetcher against loopback
//! fixtures (`deepsolve_testkit::web`), every search provider in its vendor's response shapes.

mod search;
