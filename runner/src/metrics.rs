//! `/metrics`, `/healthz` and `/readyz` on `--metrics-addr` (default `0.0.0.0:9464`).
//!
//! Everything is read from the pipeline's [`Progress`] watch channel when a request comes in; the
//! text is rendered by [`render`] (pure), in the Prometheus text exposition format, every sample
//! labelled with the sync name and the consumer id. Values that are not known yet (the lag before
//! the first changelog window, the checkpoint age before the first checkpoint) are left out.
//!
//! - `/healthz`: 200 while the process runs the loop.
//! - `/readyz`: 200 once the start point is resolved and the first read from the source succeeded
//!   ([`Progress::ready`]), 503 before that and after a fatal error ([`Health::mark_failed`]).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::progress::{Phase, Progress};

/// The labels every sample carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    /// `metadata.name` of the sync.
    pub sync: String,
    /// The consumer id.
    pub consumer: String,
}

/// What the endpoints know beyond the progress: whether the run failed.
#[derive(Debug, Default)]
pub struct Health {
    failed: AtomicBool,
}

impl Health {
    /// A healthy run.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The run stopped with a fatal error: `/readyz` answers 503 from now on.
    pub fn mark_failed(&self) {
        self.failed.store(true, Ordering::Relaxed);
    }

    /// Whether [`Health::mark_failed`] was called.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }
}

/// Whether `/readyz` answers 200. Pure.
pub fn is_ready(progress: &Progress, failed: bool) -> bool {
    !failed && (progress.ready || progress.phase == Phase::Done)
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The `/metrics` text for `progress` at `now_ms` (epoch ms). Pure.
pub fn render(progress: &Progress, labels: &Labels, now_ms: i64) -> String {
    let l = format!(
        "sync=\"{}\",consumer=\"{}\"",
        escape(&labels.sync),
        escape(&labels.consumer)
    );
    let c = &progress.counters;
    let secs = |ms: i64| (now_ms - ms).max(0) as f64 / 1000.0;
    let samples: [(&str, &str, &str, Option<f64>); 12] = [
        (
            "dcs_rows_read_total",
            "counter",
            "Rows read from the source (snapshot and changelog).",
            Some(c.rows_read as f64),
        ),
        (
            "dcs_rows_written_total",
            "counter",
            "Rows written (upserted) to the sink.",
            Some(c.rows_written as f64),
        ),
        (
            "dcs_rows_deleted_total",
            "counter",
            "Rows deleted in the sink.",
            Some(c.rows_deleted as f64),
        ),
        (
            "dcs_rows_rejected_total",
            "counter",
            "Rows the sink refused, written into the dead-letter table instead.",
            Some(c.rows_rejected as f64),
        ),
        (
            "dcs_load_bytes_total",
            "counter",
            "Bytes of Stream Load bodies sent.",
            Some(c.bytes as f64),
        ),
        (
            "dcs_loads_total",
            "counter",
            "Stream Loads that succeeded.",
            Some(c.loads as f64),
        ),
        (
            "dcs_load_retries_total",
            "counter",
            "Stream Load attempts retried after a transient failure, in this run.",
            Some(progress.load_retries as f64),
        ),
        (
            "dcs_offset_table_write_failures_total",
            "counter",
            "Failed offset-table write attempts, in this run.",
            Some(progress.offset_table_write_failures as f64),
        ),
        (
            "dcs_lag_seconds",
            "gauge",
            "Time from the end of the last changelog window handed to the sink until now.",
            progress.window_end.as_ref().map(|w| secs(w.epoch_ms)),
        ),
        (
            "dcs_window_duration_seconds",
            "gauge",
            "Span of the last changelog window (end - start).",
            progress.last_window_seconds,
        ),
        (
            "dcs_checkpoint_age_seconds",
            "gauge",
            "Time since the last checkpoint was saved.",
            progress.last_checkpoint_ms.map(secs),
        ),
        (
            "dcs_ready",
            "gauge",
            "1 once the start point is resolved and the first read succeeded.",
            Some(if is_ready(progress, false) { 1.0 } else { 0.0 }),
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, value) in samples {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        if let Some(v) = value {
            let _ = writeln!(out, "{name}{{{l}}} {v}");
        }
    }
    out
}

#[derive(Clone)]
struct AppState {
    progress: watch::Receiver<Progress>,
    labels: Arc<Labels>,
    health: Arc<Health>,
}

async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    let progress = s.progress.borrow().clone();
    let body = render(
        &progress,
        &s.labels,
        jiff::Timestamp::now().as_millisecond(),
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<AppState>) -> (StatusCode, &'static str) {
    if is_ready(&s.progress.borrow(), s.health.failed()) {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}

/// The three endpoints over `progress`.
pub fn router(labels: Labels, progress: watch::Receiver<Progress>, health: Arc<Health>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AppState {
            progress,
            labels: Arc::new(labels),
            health,
        })
}

/// Bind `addr` and serve the endpoints in a background task; returns the bound address.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    labels: Labels,
    progress: watch::Receiver<Progress>,
    health: Arc<Health>,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(labels, progress, health);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("the metrics server stopped: {e}");
        }
    });
    Ok((bound, task))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::tso::offset_at;

    fn labels() -> Labels {
        Labels {
            sync: "s\"1".into(),
            consumer: "c".into(),
        }
    }

    #[test]
    fn renders_every_known_value_with_labels() {
        let mut p = Progress::default();
        p.counters.rows_read = 7;
        p.counters.bytes = 1024;
        p.load_retries = 2;
        p.window_end = Some(offset_at(10_000));
        p.last_window_seconds = Some(1.0);
        p.last_checkpoint_ms = Some(11_000);
        let text = render(&p, &labels(), 12_500);
        assert!(
            text.contains("dcs_rows_read_total{sync=\"s\\\"1\",consumer=\"c\"} 7\n"),
            "{text}"
        );
        assert!(text.contains("dcs_load_bytes_total{sync=\"s\\\"1\",consumer=\"c\"} 1024\n"));
        assert!(text.contains("dcs_load_retries_total{sync=\"s\\\"1\",consumer=\"c\"} 2\n"));
        assert!(text.contains("dcs_lag_seconds{sync=\"s\\\"1\",consumer=\"c\"} 2.5\n"));
        assert!(text.contains("dcs_checkpoint_age_seconds{sync=\"s\\\"1\",consumer=\"c\"} 1.5\n"));
        assert!(text.contains("dcs_ready{sync=\"s\\\"1\",consumer=\"c\"} 0\n"));
        assert!(text.contains("# TYPE dcs_lag_seconds gauge\n"));
    }

    #[test]
    fn unknown_gauges_are_left_out() {
        let text = render(&Progress::default(), &labels(), 0);
        assert!(!text.contains("dcs_lag_seconds{"), "{text}");
        assert!(!text.contains("dcs_checkpoint_age_seconds{"), "{text}");
        assert!(text.contains("dcs_loads_total{"), "{text}");
    }

    #[test]
    fn readiness_needs_a_read_and_no_failure() {
        let mut p = Progress::default();
        assert!(!is_ready(&p, false));
        p.ready = true;
        assert!(is_ready(&p, false));
        assert!(!is_ready(&p, true));
    }
}
