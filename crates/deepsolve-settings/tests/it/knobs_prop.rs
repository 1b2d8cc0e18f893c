//! Any number, in any spelling, for any solve knob via `--set`: the load either lands inside the
//! knob's clamp or fails with a message naming the key. Never a panic.

use deepsolve_core::config::KNOBS;
use deepsolve_settings::{LoadOptions, get, load};
use proptest::prelude::*;

fn spellings() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<f64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| format!("{v:e}")),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        Just(".nan".to_string()),
        Just("-.inf".to_string()),
        Just("0x7f".to_string()),
        Just("1_000".to_string()),
        "[-+0-9.eE_]{0,24}",
        "\\PC{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn any_value_for_any_knob_is_clamped_or_clearly_refused(idx in 0..KNOBS.len(), raw in spellings()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.yaml");
        std::fs::write(&path, "").unwrap();
        let knob = &KNOBS[idx];
        let key = format!("solve.{}", knob.key);
        let opts = LoadOptions {
            config_path: Some(path),
            sets: vec![format!("{key}={raw}")],
            ..LoadOptions::default()
        };
        match load(&opts) {
            Ok(loaded) => {
                let value = get(&loaded, Some(&key)).unwrap();
                let n = value.as_f64().unwrap();
                prop_assert!(n >= knob.min && n <= knob.max, "{key}={raw} loaded as {n}");
            }
            Err(e) => {
                let text = e.to_string();
                prop_assert!(text.contains(&format!("'{key}'")), "{key}={raw}: {text}");
                prop_assert!(!text.contains('\n'), "{text}");
            }
        }
    }
}
