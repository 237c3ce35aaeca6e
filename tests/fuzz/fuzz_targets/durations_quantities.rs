//! Durations (`30s`, `1h30m`) and quantities (`10Mi`, `500m`) as users write them in a spec:
//! never a panic, and a parsed duration formats to text that parses to the same duration.
#![no_main]

use dcs_crds::duration::{format_duration, parse_duration};
use dcs_crds::quantity::{parse_byte_quantity, parse_resource_quantity};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(d) = parse_duration(text) {
        let written = format_duration(d);
        assert_eq!(
            parse_duration(&written).ok(),
            Some(d),
            "{text:?} -> {written:?}"
        );
    }
    let _ = parse_byte_quantity(text);
    let _ = parse_resource_quantity(text);
});
