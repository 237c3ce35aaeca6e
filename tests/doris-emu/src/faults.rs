//! Fault injection and request counters, driven by the `/_emu` control API.
//!
//! Every front end consults [`Faults`] at the points named below and bumps [`Counters`] once per
//! request it receives, so tests can both provoke failures and assert what a client did.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// A Stream Load failure to inject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamLoadFault {
    /// How many of the next stream loads (BE `_stream_load` PUTs) fail.
    pub count: u32,
    /// Answer with this HTTP status code and an empty body (e.g. 500, 503) ...
    #[serde(default)]
    pub http_status: Option<u16>,
    /// ... or with HTTP 200 and this `Status` in the JSON body (e.g. `Fail`, `Publish Timeout`).
    #[serde(default)]
    pub status: Option<String>,
    /// `Message` to put in the body.
    #[serde(default)]
    pub message: Option<String>,
}

/// The set of armed faults. All methods are cheap and thread-safe.
#[derive(Debug, Default)]
pub struct Faults {
    inner: Mutex<FaultState>,
    /// When `refuse_connections_ms` was armed, the moment it disarms.
    refuse_until: Mutex<Option<Instant>>,
}

/// Faults as the control API shows them (`GET /_emu/faults`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultState {
    /// Pending Stream Load failures.
    pub stream_load: Option<StreamLoadFault>,
    /// Pending failures of 2PC commits (BE `_stream_load_2pc` with `txn_operation: commit`;
    /// aborts are not affected): `count` commits answer `http_status`, or 200 with `status`
    /// (default `Fail`) and `message`, without committing.
    #[serde(default)]
    pub commit: Option<StreamLoadFault>,
    /// Only commits of transactions whose label contains this text meet [`FaultState::commit`]
    /// (one writer's loads, e.g. one shard's `-s3-of-4-`); all of them when unset.
    #[serde(default)]
    pub commit_label_contains: Option<String>,
    /// Delay every HTTP response (FE and BE) by this many milliseconds.
    pub http_delay_ms: u64,
    /// Cut the next Flight DoGet stream after this many batches (then the fault disarms).
    pub flight_cut_after_batches: Option<u32>,
    /// Stall the next Flight DoGet stream after this many batches: the connection stays open and
    /// nothing more is sent, ever (then the fault disarms).
    #[serde(default)]
    pub flight_stall_after_batches: Option<u32>,
    /// Make the next `count` @incr queries fail with this MySQL code (5100 or 5101).
    pub incr_error: Option<IncrFault>,
    /// Refuse (accept and immediately close) new connections on every port, until disarmed.
    /// This includes the control API, which shares the FE HTTP port.
    pub refuse_connections: bool,
    /// Refuse new connections on every port for this many milliseconds, then disarm by itself
    /// (for tests that drive the emulator from another process through the control API).
    #[serde(default)]
    pub refuse_connections_ms: Option<u64>,
    /// Hold SQL statements (any protocol) that contain a text, until the fault is disarmed.
    #[serde(default)]
    pub sql_stall: Option<SqlStall>,
    /// A rogue FE: its 307s (Stream Load and 2PC) point at this `host:port` instead of the BE,
    /// with the credentials in the `Location` as always. `/api/backends` still lists the BE.
    #[serde(default)]
    pub redirect_to: Option<String>,
    /// A rogue FE: the Arrow Flight endpoint locations it hands out point at this `host:port`
    /// instead of the BE (or itself). A client following them sends its bearer token there.
    #[serde(default)]
    pub flight_location_to: Option<String>,
}

/// SQL statements to hold: a client waits for the answer while the test does something (kills
/// it, for instance) at a known point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SqlStall {
    /// Held statements contain this text (compared case-insensitively).
    pub contains: String,
    /// `false`: held before running; once disarmed the statement fails with
    /// `statement held by the sql_stall fault and not run`, never applied. `true`: run first,
    /// then the answer is held (the client cannot know it was applied).
    #[serde(default)]
    pub applied: bool,
}

/// An injected @incr window error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncrFault {
    /// 5100 (`ERR_INCR_WINDOW_NOT_READY`) or 5101 (`ERR_INCR_VISIBLE_WAIT_TIMEOUT`).
    pub code: u16,
    /// How many @incr queries fail.
    pub count: u32,
}

impl Faults {
    /// Replace the whole fault state.
    pub fn set(&self, state: FaultState) {
        self.arm_refusal(&state);
        *self.inner.lock() = state;
    }

    fn arm_refusal(&self, state: &FaultState) {
        *self.refuse_until.lock() = state
            .refuse_connections_ms
            .map(|ms| Instant::now() + Duration::from_millis(ms));
    }

    /// The armed faults.
    pub fn get(&self) -> FaultState {
        self.inner.lock().clone()
    }

    /// Disarm everything.
    pub fn clear(&self) {
        self.set(FaultState::default());
    }

    /// Mutate the state in place.
    pub fn update(&self, f: impl FnOnce(&mut FaultState)) {
        let mut state = self.inner.lock();
        let before = state.refuse_connections_ms;
        f(&mut state);
        if state.refuse_connections_ms != before {
            self.arm_refusal(&state);
        }
    }

    /// Called by the BE for every stream load: the fault to apply to this one, if any.
    pub fn take_stream_load(&self) -> Option<StreamLoadFault> {
        let mut s = self.inner.lock();
        let fault = s.stream_load.as_mut()?;
        if fault.count == 0 {
            s.stream_load = None;
            return None;
        }
        fault.count -= 1;
        let out = fault.clone();
        if fault.count == 0 {
            s.stream_load = None;
        }
        Some(out)
    }

    /// Called by the BE for every 2PC commit of a transaction labelled `label`: the fault to
    /// apply to this one, if any.
    pub fn take_commit(&self, label: Option<&str>) -> Option<StreamLoadFault> {
        let mut s = self.inner.lock();
        if let Some(part) = &s.commit_label_contains
            && !label.is_some_and(|l| l.contains(part.as_str()))
        {
            return None;
        }
        let fault = s.commit.as_mut()?;
        if fault.count == 0 {
            s.commit = None;
            return None;
        }
        fault.count -= 1;
        let out = fault.clone();
        if fault.count == 0 {
            s.commit = None;
        }
        Some(out)
    }

    /// Called by the FE for every 307: where to point it instead of the BE, if armed.
    pub fn redirect_to(&self) -> Option<String> {
        self.inner.lock().redirect_to.clone()
    }

    /// Called by the Flight FE for every endpoint location: where to point it instead, if armed.
    pub fn flight_location_to(&self) -> Option<String> {
        self.inner.lock().flight_location_to.clone()
    }

    /// Called by every HTTP handler before answering.
    pub fn http_delay(&self) -> Option<Duration> {
        let ms = self.inner.lock().http_delay_ms;
        (ms > 0).then(|| Duration::from_millis(ms))
    }

    /// Called by the BE at the start of each DoGet: cut after this many batches, if armed (disarms).
    pub fn take_flight_cut(&self) -> Option<u32> {
        self.inner.lock().flight_cut_after_batches.take()
    }

    /// Called by the BE at the start of each DoGet: stall after this many batches, if armed
    /// (disarms).
    pub fn take_flight_stall(&self) -> Option<u32> {
        self.inner.lock().flight_stall_after_batches.take()
    }

    /// Called before each @incr query: the error code to fail it with, if armed.
    pub fn take_incr_error(&self) -> Option<u16> {
        let mut s = self.inner.lock();
        let fault = s.incr_error.as_mut()?;
        let code = fault.code;
        fault.count = fault.count.saturating_sub(1);
        if fault.count == 0 {
            s.incr_error = None;
        }
        Some(code)
    }

    /// The armed stall that holds `sql`, if any.
    pub fn sql_stall(&self, sql: &str) -> Option<SqlStall> {
        let state = self.inner.lock();
        let stall = state.sql_stall.as_ref()?;
        sql.to_ascii_lowercase()
            .contains(&stall.contains.to_ascii_lowercase())
            .then(|| stall.clone())
    }

    /// Waits while `stall` is still the armed stall (polling: stalls are rare and short-lived).
    pub async fn hold(&self, stall: &SqlStall) {
        while self.inner.lock().sql_stall.as_ref() == Some(stall) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Called by every listener on accept: close the connection at once when true.
    pub fn refuse_connections(&self) -> bool {
        let mut until = self.refuse_until.lock();
        if let Some(t) = *until {
            if Instant::now() < t {
                return true;
            }
            *until = None;
            self.inner.lock().refuse_connections_ms = None;
        }
        self.inner.lock().refuse_connections
    }
}

/// Requests received, per endpoint name (`fe_stream_load`, `be_stream_load`, `flight_get_flight_info`, ...).
#[derive(Debug, Default)]
pub struct Counters {
    inner: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    /// Count one request to `endpoint`.
    pub fn hit(&self, endpoint: &str) {
        *self.inner.lock().entry(endpoint.to_string()).or_default() += 1;
    }

    /// All counts.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.inner.lock().clone()
    }

    /// Count for one endpoint.
    pub fn get(&self, endpoint: &str) -> u64 {
        self.inner.lock().get(endpoint).copied().unwrap_or(0)
    }

    /// Reset all counts to zero.
    pub fn reset(&self) {
        self.inner.lock().clear();
    }
}
