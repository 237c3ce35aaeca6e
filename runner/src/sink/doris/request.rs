//! What one Stream Load request carries besides its body: the label (`dcs_crds::label`) and the
//! headers.

use dcs_crds::SinkMode;

use crate::settings::{BodyFormat, DorisSinkConfig};
use crate::sink::encode::DELETE_SIGN_COLUMN;
use crate::sink::label::{LabelOwner, LabelScheme, load_label};

/// The label of load `seq` of checkpoint `checkpoint_id` under `scheme`, for the sync in
/// `namespace` whose consumer is `consumer_id`. Without 2PC the run's random `run_tag` is part
/// of it, so a restart never meets a label of the run before.
pub fn label(
    config: &DorisSinkConfig,
    namespace: &str,
    consumer_id: &str,
    run_tag: &str,
    (scheme, checkpoint_id, seq): (LabelScheme, u64, u32),
) -> String {
    let owner = LabelOwner {
        namespace,
        prefix: &config.label_prefix,
        consumer_id,
    };
    let run = (!config.enable_2pc).then_some(run_tag);
    load_label(&owner, scheme, run, checkpoint_id, seq)
}

/// The Stream Load headers for a sink: JSON lines (or CSV when `properties` ask for it), the
/// delete sign in upsert mode, 2PC, the load `timeout` and `strict_mode: true` (a value the sink
/// column cannot hold filters its row, and the load fails, instead of becoming NULL), then the
/// user's `properties` (which win where validation lets them: the headers dcs owns are refused
/// there).
pub fn load_headers(config: &DorisSinkConfig) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = match config.format {
        BodyFormat::JsonLines => vec![
            ("format".into(), "json".into()),
            ("read_json_by_line".into(), "true".into()),
        ],
        BodyFormat::Csv { .. } => vec![("format".into(), "csv".into())],
    };
    if config.policy.mode == SinkMode::Upsert {
        h.push(("hidden_columns".into(), DELETE_SIGN_COLUMN.into()));
    }
    if config.enable_2pc {
        h.push(("two_phase_commit".into(), "true".into()));
    }
    h.push(("timeout".into(), config.load_timeout.as_secs().to_string()));
    h.push(("strict_mode".into(), "true".into()));
    for (k, v) in &config.properties {
        h.retain(|(key, _)| !key.eq_ignore_ascii_case(k));
        h.push((k.clone(), v.clone()));
    }
    h
}

/// The Stream Load headers of a dead-letter load: JSON lines, 2PC, the load `timeout` and
/// `strict_mode: true` as for the sink; not the sink's delete sign nor its `properties`, which
/// describe the sink table's loads.
pub fn dead_letter_headers(config: &DorisSinkConfig) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = vec![
        ("format".into(), "json".into()),
        ("read_json_by_line".into(), "true".into()),
    ];
    if config.enable_2pc {
        h.push(("two_phase_commit".into(), "true".into()));
    }
    h.push(("timeout".into(), config.load_timeout.as_secs().to_string()));
    h.push(("strict_mode".into(), "true".into()));
    h
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::settings::{BatchLimits, EventPolicy};
    use dcs_doris_client::stream_load::Backoff;

    pub(in crate::sink::doris) fn config(two_pc: bool, mode: SinkMode) -> DorisSinkConfig {
        DorisSinkConfig {
            fe_nodes: vec!["fe:8030".into()],
            be_nodes: vec![],
            table: "sink.t".parse().unwrap(),
            user: "u".into(),
            password: "p".into(),
            label_prefix: "dcs".into(),
            enable_2pc: two_pc,
            policy: EventPolicy {
                mode,
                enable_delete: true,
                ignore_update_before: true,
            },
            limits: BatchLimits::default(),
            max_retries: 3,
            backoff: Backoff::default(),
            properties: [
                ("format".to_string(), "json".to_string()),
                ("comment".into(), "nightly".into()),
            ]
            .into_iter()
            .collect(),
            request_timeout: Duration::from_secs(5),
            load_timeout: Duration::from_secs(3600),
            query_port: 9030,
            format: Default::default(),
            create_table: Default::default(),
            schema_change: Default::default(),
            tls: Default::default(),
            dead_letter: None,
        }
    }

    #[test]
    fn headers_follow_mode_and_2pc_and_properties_win() {
        let h = load_headers(&config(true, SinkMode::Upsert));
        let get = |h: &[(String, String)], k: &str| {
            h.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone())
        };
        assert_eq!(get(&h, "two_phase_commit").as_deref(), Some("true"));
        assert_eq!(
            get(&h, "hidden_columns").as_deref(),
            Some(DELETE_SIGN_COLUMN)
        );
        assert_eq!(get(&h, "strict_mode").as_deref(), Some("true"));
        assert_eq!(get(&h, "comment").as_deref(), Some("nightly"));
        assert_eq!(get(&h, "timeout").as_deref(), Some("3600"));
        assert_eq!(h.iter().filter(|(k, _)| k == "format").count(), 1);
        let h = load_headers(&config(false, SinkMode::Changelog));
        assert_eq!(get(&h, "two_phase_commit"), None);
        assert_eq!(get(&h, "hidden_columns"), None);
        assert_eq!(get(&h, "strict_mode").as_deref(), Some("true"));
    }

    #[test]
    fn labels_are_deterministic_with_2pc_and_per_run_without() {
        let two_pc = config(true, SinkMode::Upsert);
        let at = (LabelScheme::V2, 3, 0);
        let l = label(&two_pc, "ns", "c1", "rA", at);
        assert!(l.starts_with("dcs-c1-") && l.ends_with("-3-0"), "{l}");
        assert_eq!(
            l,
            label(&two_pc, "ns", "c1", "rB", at),
            "2PC labels ignore the run"
        );
        assert_eq!(
            label(&two_pc, "ns", "c1", "rA", (LabelScheme::V1, 3, 0)),
            "dcs-c1-3-0"
        );
        assert_ne!(
            label(&two_pc, "ns2", "c1", "rA", at),
            l,
            "another namespace, other labels"
        );
        let plain = config(false, SinkMode::Upsert);
        let r = label(&plain, "ns", "c1", "rA", at);
        assert!(r.contains("-rA-") && r.ends_with("-3-0"), "{r}");
        assert_ne!(
            label(&plain, "ns", "c1", "rB", at),
            r,
            "each run its own labels"
        );
    }
}
