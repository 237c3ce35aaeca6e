//! One container's life: start, watch, probe, restart with back-off, terminate.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::now;

use super::*;

pub(super) fn update_status(ctx: &PodCtx, i: usize, f: impl FnOnce(&mut Value)) {
    {
        let mut st = ctx.state.lock();
        f(&mut st.statuses[i]);
    }
    ctx.publish();
}

pub(super) async fn run_container(
    ctx: Arc<PodCtx>,
    i: usize,
    c: Value,
    mut stop: watch::Receiver<Stop>,
) {
    let (ns, pod_name) = (
        s(&ctx.pod, "/metadata/namespace").to_string(),
        s(&ctx.pod, "/metadata/name").to_string(),
    );
    let cname = s(&c, "/name").to_string();
    let key = format!("{ns}/{pod_name}/{cname}");
    let policy = match s(&ctx.pod, "/spec/restartPolicy") {
        "" => "Always".to_string(),
        p => p.to_string(),
    };
    let grace_default = Duration::from_secs(
        ctx.pod
            .pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(30),
    );
    let ip = s(&ctx.pod, "/status/podIP").to_string();
    let mut restarts = 0i64;
    let mut backoff = Duration::from_secs(1);
    loop {
        if *stop.borrow() != Stop::No {
            break;
        }
        let prepared = match prepare(&ctx, &c).await {
            Ok(p) => p,
            Err((reason, message)) => {
                ctx.event("Warning", "Failed", &format!("Error: {message}"));
                update_status(&ctx, i, |st| {
                    st["state"] = json!({"waiting": {"reason": reason, "message": message}})
                });
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        let started_at = now();
        let mut child = match spawn(&ctx, &prepared, &key) {
            Ok(child) => child,
            Err(e) => {
                ctx.event("Warning", "Failed", &format!("Error: {e}"));
                update_status(
                    &ctx,
                    i,
                    |st| st["state"] = json!({"waiting": {"reason": "RunContainerError", "message": e.to_string()}}),
                );
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        let container_id = format!(
            "process://{}-{cname}-{restarts}",
            s(&ctx.pod, "/metadata/uid")
        );
        ctx.event("Normal", "Started", &format!("Started container {cname}"));
        let has_readiness = c.get("readinessProbe").is_some();
        update_status(&ctx, i, |st| {
            st["state"] = json!({"running": {"startedAt": started_at}});
            st["ready"] = json!(!has_readiness);
            st["started"] = json!(true);
            st["containerID"] = json!(container_id);
            st["imageID"] = json!(prepared.program.to_string_lossy());
        });
        let (ptx, mut prx) = tokio::sync::mpsc::channel(8);
        let mut probes = Vec::new();
        if let Some(p) = c.get("readinessProbe") {
            probes.push(tokio::spawn(probe_loop(
                p.clone(),
                c.clone(),
                ip.clone(),
                ProbeKind::Readiness,
                ptx.clone(),
            )));
        }
        if let Some(p) = c.get("livenessProbe") {
            probes.push(tokio::spawn(probe_loop(
                p.clone(),
                c.clone(),
                ip.clone(),
                ProbeKind::Liveness,
                ptx.clone(),
            )));
        }
        drop(ptx);
        let run_started = tokio::time::Instant::now();
        let (code, stopping) = loop {
            tokio::select! {
                code = child.wait() => break (code, false),
                changed = stop.changed() => {
                    let grace = match (changed, *stop.borrow()) {
                        (Ok(()), Stop::Graceful(g)) => g,
                        _ => Duration::ZERO,
                    };
                    ctx.event("Normal", "Killing", &format!("Stopping container {cname}"));
                    break (terminate(&mut child, grace).await, true);
                }
                Some(ProbeResult { kind, ok, message }) = prx.recv() => match kind {
                    ProbeKind::Readiness => {
                        if !ok {
                            ctx.event("Warning", "Unhealthy", &format!("Readiness probe failed: {message}"));
                        }
                        update_status(&ctx, i, |st| st["ready"] = json!(ok));
                    }
                    ProbeKind::Liveness if !ok => {
                        tracing::info!(pod = %pod_name, container = %cname, %message, "liveness probe failed; restarting");
                        ctx.event("Warning", "Unhealthy", &format!("Liveness probe failed: {message}"));
                        ctx.event("Normal", "Killing", &format!("Container {cname} failed liveness probe, will be restarted"));
                        break (terminate(&mut child, grace_default).await, false);
                    }
                    ProbeKind::Liveness => {}
                },
            }
        };
        for p in probes {
            p.abort();
        }
        let finished_at = now();
        let mut terminated = json!({"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" }, "startedAt": started_at, "finishedAt": finished_at, "containerID": container_id});
        if code != 0 && s(&c, "/terminationMessagePolicy") == "FallbackToLogsOnError" {
            let log = ctx.shared.logs.read().get(&key).cloned();
            if let Some(log) = log {
                terminated["message"] = json!(termination_message(&log.contents()));
            }
        }
        let restart = !stopping && (policy == "Always" || (policy == "OnFailure" && code != 0));
        if !restart {
            {
                let mut st = ctx.state.lock();
                st.finished[i] = true;
                st.statuses[i]["state"] = json!({"terminated": terminated});
                st.statuses[i]["ready"] = json!(false);
                st.statuses[i]["started"] = json!(false);
            }
            ctx.publish();
            // Pods that ran to completion keep their terminal status; deletion is handled by
            // the pod worker.
            break;
        }
        if run_started.elapsed() > Duration::from_secs(10) {
            backoff = Duration::from_secs(1);
        }
        restarts += 1;
        ctx.event(
            "Warning",
            "BackOff",
            &format!("Back-off restarting failed container {cname} in pod {pod_name}"),
        );
        {
            // The run's log becomes the previous one; the next run gets a new buffer.
            let mut logs = ctx.shared.logs.write();
            if let Some(old) = logs.remove(&key) {
                logs.insert(format!("{key}/previous"), old);
            }
        }
        update_status(&ctx, i, |st| {
            st["lastState"] = json!({"terminated": terminated});
            st["restartCount"] = json!(restarts);
            st["ready"] = json!(false);
            st["started"] = json!(false);
            st["state"] = json!({"waiting": {"reason": "CrashLoopBackOff", "message": format!("back-off {}s restarting failed container={cname} pod={pod_name}", backoff.as_secs())}});
        });
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => break,
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
    let mut st = ctx.state.lock();
    st.finished[i] = true;
}

/// A failed container's message from its log, as the kubelet's `FallbackToLogsOnError`: the last
/// 80 lines, at most 2048 bytes.
pub(super) fn termination_message(log: &[u8]) -> String {
    let tail = logs::tail_lines(log, Some(80));
    let start = tail.len().saturating_sub(2048);
    String::from_utf8_lossy(&tail[start..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_termination_message_is_the_end_of_the_log() {
        let log: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let m = termination_message(log.as_bytes());
        assert!(
            m.starts_with("line 20\n") && m.ends_with("line 99\n"),
            "{m}"
        );
        let long = "x".repeat(5000);
        assert_eq!(termination_message(long.as_bytes()).len(), 2048);
    }
}
