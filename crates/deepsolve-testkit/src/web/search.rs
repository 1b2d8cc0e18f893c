//! Search vendors response shapes (TODO(helper search)).
