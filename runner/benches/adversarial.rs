//! The adversarial suite, long version: many seeded runs of the harness in
//! `tests/integration/adversarial/harness.rs` (random sink kind, checkpoint store and faults,
//! stalls past the client timeouts included), then a summary: runs, faults injected by class,
//! invariant checks, failures (target: 0), and the seed of each failure.
//!
//! `cargo bench -p dcs-runner --bench adversarial` runs `DCS_ADVERSARIAL_RUNS` runs (default 20)
//! of `DCS_ADVERSARIAL_STEPS` fault steps (default 25) from `DCS_TEST_SEED` (default: the clock).
//! `DCS_ADVERSARIAL_REPLAY=<seed>` replays one run of a long run (its seed is in the failure).
//! Without `--bench` (as `cargo test --all-targets` runs it) it does nothing: the short version
//! is in the integration tests.

#[path = "../tests/integration/source_support/mod.rs"]
mod source_support;

#[path = "../tests/integration/adversarial/harness.rs"]
mod harness;

fn knob(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "adversarial: measured only under `cargo bench` (short version: integration tests)"
        );
        return;
    }
    let runs = knob("DCS_ADVERSARIAL_RUNS", 20);
    let steps = knob("DCS_ADVERSARIAL_STEPS", 25);
    let base = source_support::seed("adversarial-long");
    // A failing run of a long run replays alone: `DCS_ADVERSARIAL_REPLAY=<its seed>`.
    let replay: Option<u64> = std::env::var("DCS_ADVERSARIAL_REPLAY")
        .ok()
        .and_then(|s| s.parse().ok());
    let opts = harness::Options {
        steps,
        long_stalls: true,
        sink: None,
        store: None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let mut report = harness::Report::default();
    rt.block_on(async {
        let seeds = match replay {
            Some(seed) => vec![seed],
            None => harness::seeds(base, runs),
        };
        for (i, seed) in seeds.into_iter().enumerate() {
            println!("run {}/{runs}: seed {seed}", i + 1);
            harness::run(seed, &opts, &mut report).await;
        }
    });
    println!(
        "adversarial: {} runs of {steps} steps in {:.0} s",
        report.runs,
        started.elapsed().as_secs_f64()
    );
    println!("{}", report.summary());
    if !report.failures.is_empty() {
        std::process::exit(1);
    }
}
