//! Stream Load labels from any namespace, prefix and consumer id: only the characters Doris
//! allows, at most 128 of them, and (without a run tag, when not shortened) read back to the same
//! checkpoint id and sequence number. Any text read as a label never panics.
#![no_main]

use arbitrary::Arbitrary;
use dcs_crds::label::{LabelOwner, LabelScheme, load_label, parse_label};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    namespace: &'a str,
    prefix: &'a str,
    consumer_id: &'a str,
    run: Option<&'a str>,
    v2: bool,
    checkpoint_id: u64,
    seq: u32,
    other: &'a str,
}

fuzz_target!(|input: Input<'_>| {
    let owner = LabelOwner {
        namespace: input.namespace,
        prefix: input.prefix,
        consumer_id: input.consumer_id,
    };
    let scheme = if input.v2 {
        LabelScheme::V2
    } else {
        LabelScheme::V1
    };
    let label = load_label(&owner, scheme, input.run, input.checkpoint_id, input.seq);
    assert!(label.len() <= 128, "{label}");
    assert!(
        label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{label}"
    );
    let plain = load_label(&owner, scheme, None, input.checkpoint_id, input.seq);
    let _ = parse_label(&owner, scheme, input.other);
    // Shortened labels (a hash and the tail) are exactly 128 long; every shorter one reads back.
    if plain.len() < 128 {
        assert_eq!(
            parse_label(&owner, scheme, &plain),
            Some((input.checkpoint_id, input.seq)),
            "{plain}"
        );
    }
});
