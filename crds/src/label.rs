//! Deterministic Stream Load labels (docs/ARCHITECTURE.md §3.6).
//!
//! The runner names its loads with them; the operator finds the loads of a deleted or
//! re-initialised sync by them. The same load always gets the same label, so a retry after a crash
//! or a timeout is deduplicated by Doris (`Label Already Exists`) instead of loading twice.
//!
//! Labels are unique per Doris database, so they must tell syncs apart whatever their names:
//!
//! - [`LabelScheme::V2`] (written today): `<labelPrefix>-<consumerId>-<owner>-<checkpointId>-<seq>`,
//!   where `<owner>` is 12 hex digits of a hash of the sync's namespace, label prefix and consumer
//!   id, each length-delimited. Two syncs of the same name in two namespaces differ in `<owner>`,
//!   and so do prefix `dcs` with consumer `x-1` and prefix `dcs-x` with consumer `1`, whose first
//!   parts read the same. The prefix and consumer id stay in the label for people reading Doris's
//!   transaction list.
//! - [`LabelScheme::V1`] (checkpoints written before it): `<labelPrefix>-<consumerId>-<checkpointId>-<seq>`.
//!   Still produced for the loads a V1 checkpoint's run may have left pre-committed, so they are
//!   found and settled after an upgrade.

/// Longest label Doris accepts.
pub const MAX_LABEL_LEN: usize = 128;

/// How a checkpoint's loads are labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LabelScheme {
    /// `<prefix>-<consumer>-<checkpoint>-<seq>`: ambiguous across namespaces and for prefixes or
    /// consumer ids holding `-`. Read only, for checkpoints written before [`LabelScheme::V2`].
    #[default]
    V1,
    /// `<prefix>-<consumer>-<owner>-<checkpoint>-<seq>`.
    V2,
}

impl LabelScheme {
    /// The scheme a checkpoint's `labelScheme` number names (absent: 1); newer numbers are read as
    /// the newest scheme this build knows.
    pub fn from_number(n: u32) -> Self {
        if n <= 1 { Self::V1 } else { Self::V2 }
    }

    /// The number stored in checkpoints.
    pub fn number(self) -> u32 {
        match self {
            Self::V1 => 1,
            Self::V2 => 2,
        }
    }
}

/// Whose loads a label names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelOwner<'a> {
    /// The sync's namespace (`default` for a standalone manifest without one).
    pub namespace: &'a str,
    /// `spec.sink.doris.labelPrefix`.
    pub prefix: &'a str,
    /// The consumer id.
    pub consumer_id: &'a str,
}

impl LabelOwner<'_> {
    /// 12 hex digits identifying the owner: FNV-1a over the length-delimited parts (stable across
    /// versions: labels in Doris and in stored checkpoints depend on it).
    pub fn tag(&self) -> String {
        let mut bytes = Vec::new();
        for part in [self.namespace, self.prefix, self.consumer_id] {
            bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
            bytes.extend_from_slice(part.as_bytes());
        }
        format!("{:012x}", fnv1a(&bytes) & 0xffff_ffff_ffff)
    }

    /// The part of every label of this owner before the checkpoint id, for `scheme`.
    fn stem(&self, scheme: LabelScheme) -> String {
        match scheme {
            LabelScheme::V1 => format!("{}-{}-", self.prefix, self.consumer_id),
            LabelScheme::V2 => format!("{}-{}-{}-", self.prefix, self.consumer_id, self.tag()),
        }
    }
}

/// The label of load `seq` within checkpoint `checkpoint_id`. `run` (loads without 2PC) adds a
/// tag per run, so a restart's loads of the same rows never collide with the earlier run's.
///
/// Characters Doris does not allow in labels (anything but ASCII letters, digits, `-` and `_`) are
/// replaced by `_`; labels longer than Doris allows keep their tail (which carries the ids) and a
/// short hash of the full text so they stay unique.
pub fn load_label(
    owner: &LabelOwner<'_>,
    scheme: LabelScheme,
    run: Option<&str>,
    checkpoint_id: u64,
    seq: u32,
) -> String {
    let run = run.map(|r| format!("{r}-")).unwrap_or_default();
    let raw = format!("{}{run}{checkpoint_id}-{seq}", owner.stem(scheme));
    let clean = clean(&raw);
    if clean.len() <= MAX_LABEL_LEN {
        return clean;
    }
    let hash = fnv1a(raw.as_bytes());
    let tail_len = MAX_LABEL_LEN - 17;
    format!("{hash:016x}-{}", &clean[clean.len() - tail_len..])
}

/// The labels of checkpoint `checkpoint_id`'s loads without their seq, for messages:
/// `dcs-s-4` ([`load_label`] of seq 0 without its `-0`; a label too long for Doris stays whole).
pub fn checkpoint_label_stem(
    owner: &LabelOwner<'_>,
    scheme: LabelScheme,
    checkpoint_id: u64,
) -> String {
    let first = load_label(owner, scheme, None, checkpoint_id, 0);
    first
        .strip_suffix("-0")
        .map_or_else(|| first.clone(), str::to_owned)
}

/// Parse a label made by [`load_label`] (without a run tag) back into (checkpoint id, seq), given
/// its owner and scheme; `None` for labels of other owners.
pub fn parse_label(owner: &LabelOwner<'_>, scheme: LabelScheme, label: &str) -> Option<(u64, u32)> {
    let rest = label.strip_prefix(&clean(&owner.stem(scheme)))?;
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

    fn owner<'a>(namespace: &'a str, prefix: &'a str, consumer_id: &'a str) -> LabelOwner<'a> {
        LabelOwner {
            namespace,
            prefix,
            consumer_id,
        }
    }

    #[test]
    fn labels_are_deterministic_and_clean() {
        let o = owner("team-a", "dcs", "student-sync");
        let l = load_label(&o, LabelScheme::V2, None, 42, 3);
        assert_eq!(l, format!("dcs-student-sync-{}-42-3", o.tag()));
        assert_eq!(l, load_label(&o, LabelScheme::V2, None, 42, 3));
        assert_eq!(o.tag().len(), 12);
        assert_eq!(
            load_label(&owner("n", "dcs", "a.b/c"), LabelScheme::V1, None, 1, 0),
            "dcs-a_b_c-1-0"
        );
        assert_eq!(
            load_label(&o, LabelScheme::V1, None, 42, 3),
            "dcs-student-sync-42-3",
            "V1 labels are the ones checkpoints before V2 used"
        );
    }

    #[test]
    fn the_same_name_in_two_namespaces_gets_other_labels() {
        let a = load_label(
            &owner("team-a", "dcs", "orders"),
            LabelScheme::V2,
            None,
            7,
            0,
        );
        let b = load_label(
            &owner("team-b", "dcs", "orders"),
            LabelScheme::V2,
            None,
            7,
            0,
        );
        assert_ne!(a, b);
    }

    #[test]
    fn prefix_and_consumer_that_read_the_same_get_other_labels() {
        let a = owner("ns", "dcs", "x-1");
        let b = owner("ns", "dcs-x", "1");
        // V1 could not tell them apart.
        assert_eq!(
            load_label(&a, LabelScheme::V1, None, 7, 0),
            load_label(&b, LabelScheme::V1, None, 7, 0)
        );
        assert_ne!(
            load_label(&a, LabelScheme::V2, None, 7, 0),
            load_label(&b, LabelScheme::V2, None, 7, 0)
        );
        // Nor does one owner parse the other's labels.
        let la = load_label(&a, LabelScheme::V2, None, 7, 0);
        assert_eq!(parse_label(&a, LabelScheme::V2, &la), Some((7, 0)));
        assert_eq!(parse_label(&b, LabelScheme::V2, &la), None);
        // The hash parts are length-delimited: moving a character between parts changes it.
        assert_ne!(owner("ab", "c", "d").tag(), owner("a", "bc", "d").tag());
    }

    #[test]
    fn run_tags_keep_restarts_apart() {
        let o = owner("ns", "dcs", "c1");
        let r1 = load_label(&o, LabelScheme::V2, Some("r1a"), 3, 0);
        let r2 = load_label(&o, LabelScheme::V2, Some("r2b"), 3, 0);
        assert_ne!(r1, r2);
        assert!(r1.ends_with("-r1a-3-0"), "{r1}");
    }

    #[test]
    fn long_labels_fit_and_stay_unique() {
        let long = "c".repeat(200);
        let o = owner("ns", "dcs", &long);
        let a = load_label(&o, LabelScheme::V2, None, 1, 0);
        let b = load_label(&o, LabelScheme::V2, None, 1, 1);
        assert_eq!(a.len(), MAX_LABEL_LEN);
        assert_ne!(a, b);
        // The longest valid prefix and consumer id with large ids still fit Doris's 128.
        let (prefix, consumer) = ("p".repeat(32), "c".repeat(64));
        let o = owner("ns", &prefix, &consumer);
        let l = load_label(&o, LabelScheme::V2, None, u64::MAX, u32::MAX);
        assert!(l.len() <= MAX_LABEL_LEN);
    }

    #[test]
    fn labels_parse_back_for_their_owner_only() {
        let o = owner("ns", "dcs", "student-sync");
        for scheme in [LabelScheme::V1, LabelScheme::V2] {
            let l = load_label(&o, scheme, None, 42, 3);
            assert_eq!(parse_label(&o, scheme, &l), Some((42, 3)));
            assert_eq!(parse_label(&owner("ns", "dcs", "other"), scheme, &l), None);
            assert_eq!(
                parse_label(&owner("ns", "dcs", "student"), scheme, &l),
                None
            );
        }
    }

    #[test]
    fn the_scheme_is_stored_as_a_number_and_defaults_to_v1() {
        assert_eq!(
            LabelScheme::from_number(LabelScheme::V2.number()),
            LabelScheme::V2
        );
        assert_eq!(LabelScheme::from_number(0), LabelScheme::V1);
        assert_eq!(LabelScheme::from_number(1), LabelScheme::V1);
        assert_eq!(LabelScheme::default(), LabelScheme::V1);
    }
}
