//! `parse_lenient` on arbitrary text: never panics; strict JSON objects come back unchanged;
//! whatever it returns reads back as itself (repairing is idempotent).
#![no_main]

use deepsolve_core::parse_lenient;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let result = parse_lenient(text);
    if let Ok(strict @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
        assert_eq!(result.as_ref(), Ok(&strict), "a valid object was changed");
    }
    if let Ok(value) = result {
        let again = parse_lenient(&value.to_string());
        assert_eq!(again, Ok(value), "not idempotent");
    }
});
