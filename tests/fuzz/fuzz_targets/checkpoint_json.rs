//! The checkpoint JSON both binaries read back from a ConfigMap anyone with access may edit:
//! parsing never panics, and what parses writes back to the same checkpoint.
#![no_main]

use dcs_crds::checkpoint::Checkpoint;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(cp) = serde_json::from_slice::<Checkpoint>(data) else {
        return;
    };
    let _ = cp.labels();
    let _ = cp.tablets_done_count();
    let text = serde_json::to_string(&cp).expect("a parsed checkpoint serialises");
    let again: Checkpoint = serde_json::from_str(&text).expect("a written checkpoint parses");
    assert_eq!(again, cp);
});
