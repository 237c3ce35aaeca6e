//! Deterministic Stream Load labels (DESIGN.md §3): `<labelPrefix>-<consumerId>-<checkpointId>-<seq>`.
//!
//! The runner names its loads with them; the operator finds the loads of a deleted or
//! re-initialised sync by them.
//!
//! The same load always gets the same label, so a retry after a crash or a timeout is deduplicated
//! by Doris (`Label Already Exists`) instead of loading twice.

/// Longest label Doris accepts.
pub const MAX_LABEL_LEN: usize = 128;

/// The label of load `seq` within checkpoint `checkpoint_id`.
///
/// Characters Doris does not allow in labels (anything but ASCII letters, digits, `-` and `_`) are
/// replaced by `_`; labels longer than Doris allows keep their tail (which carries the ids) and a
/// short hash of the full text so they stay unique.
pub fn load_label(prefix: &str, consumer_id: &str, checkpoint_id: u64, seq: u32) -> String {
    let raw = format!("{prefix}-{consumer_id}-{checkpoint_id}-{seq}");
    let clean = clean(&raw);
    if clean.len() <= MAX_LABEL_LEN {
        return clean;
    }
    let hash = fnv1a(raw.as_bytes());
    let tail_len = MAX_LABEL_LEN - 17;
    format!("{hash:016x}-{}", &clean[clean.len() - tail_len..])
}

/// Parse a label made by [`load_label`] back into (checkpoint id, seq), given its prefix and
/// consumer id; `None` for labels of other consumers.
pub fn parse_label(prefix: &str, consumer_id: &str, label: &str) -> Option<(u64, u32)> {
    let rest = label.strip_prefix(&clean(&format!("{prefix}-{consumer_id}-")))?;
    let (cp, seq) = rest.split_once('-')?;
    Some((cp.parse().ok()?, seq.parse().ok()?))
}

/// Replace characters Doris does not allow in labels with `_`.
fn clean(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_deterministic_and_clean() {
        assert_eq!(
            load_label("dcs", "student-sync", 42, 3),
            "dcs-student-sync-42-3"
        );
        assert_eq!(load_label("dcs", "a.b/c", 1, 0), "dcs-a_b_c-1-0");
        assert_eq!(load_label("dcs", "x", 1, 0), load_label("dcs", "x", 1, 0));
    }

    #[test]
    fn long_labels_fit_and_stay_unique() {
        let long = "c".repeat(200);
        let a = load_label("dcs", &long, 1, 0);
        let b = load_label("dcs", &long, 1, 1);
        assert_eq!(a.len(), MAX_LABEL_LEN);
        assert_ne!(a, b);
    }

    #[test]
    fn labels_parse_back_for_their_consumer_only() {
        let l = load_label("dcs", "student-sync", 42, 3);
        assert_eq!(parse_label("dcs", "student-sync", &l), Some((42, 3)));
        assert_eq!(parse_label("dcs", "other", &l), None);
        assert_eq!(parse_label("dcs", "student", &l), None);
    }
}
