//! The pages web_fetch meets (TODO(helper net)).
