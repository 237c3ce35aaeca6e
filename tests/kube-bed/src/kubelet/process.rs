//! Turning a container spec into a process: program, arguments, environment and mounts.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::security::{self, Security};
use super::*;
use crate::lifeline;

/// A container ready to start.
pub(super) struct Prepared {
    pub(super) program: PathBuf,
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) workdir: Option<String>,
    /// (host path, container path, read-only)
    pub(super) binds: Vec<(PathBuf, String, bool)>,
    pub(super) security: Security,
}

/// A running container process: its child, the tasks copying its output into its log, and the
/// thread it is tied to.
pub(super) struct Proc {
    child: tokio::process::Child,
    /// The process (and process group) id, kept: the child forgets it once it has exited.
    pid: Option<u32>,
    pumps: Vec<tokio::task::JoinHandle<()>>,
    log: Arc<LogBuf>,
    _tie: Tie,
}

impl Proc {
    /// Waits for the process to exit and its output to be in the log; the exit code (128 +
    /// signal when killed).
    pub(super) async fn wait(&mut self) -> i32 {
        let code = self.child.wait().await.map(exit_code).unwrap_or(1);
        // As when a container's first process ends, nothing else of it lives on (and what did
        // would hold the log pipes open).
        if let Some(pid) = self.pid {
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
        for p in self.pumps.drain(..) {
            let _ = p.await;
        }
        self.log.close();
        if let Some(pid) = self.pid {
            lifeline::forget_group(pid);
        }
        code
    }
}

pub(super) fn expand(s: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("$(") {
        out.push_str(&rest[..i]);
        if i > 0 && rest.as_bytes()[i - 1] == b'$' {
            out.pop();
            out.push_str("$(");
            rest = &rest[i + 2..];
            continue;
        }
        let after = &rest[i + 2..];
        match after.find(')') {
            Some(j) => {
                let name = &after[..j];
                match env.iter().rev().find(|(k, _)| k == name) {
                    Some((_, v)) => out.push_str(v),
                    None => out.push_str(&rest[i..i + 3 + j]),
                }
                rest = &after[j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

pub(super) fn image_name(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    last.split(':').next().unwrap_or(last)
}

pub(super) async fn prepare(ctx: &PodCtx, c: &Value) -> Result<Prepared, (String, String)> {
    let shared = &ctx.shared;
    let pod = &ctx.pod;
    let ns = s(pod, "/metadata/namespace");
    let config_err = |m: String| ("CreateContainerConfigError".to_string(), m);
    let security =
        security::resolve(pod, c, nix::unistd::geteuid().as_raw()).map_err(config_err)?;
    // The real API server's address: nothing routes the `kubernetes` Service's cluster IP here.
    // Pods of the namespaces given to the fault proxy reach it through the proxy.
    let (host, port) = match &shared.api_via {
        Some((namespaces, via)) if namespaces.iter().any(|n| n == ns) => {
            (via.ip().to_string(), via.port().to_string())
        }
        _ => (shared.api_host.clone(), shared.api_port.to_string()),
    };
    let host = host.as_str();
    let port = port.as_str();
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            std::env::var("PATH").unwrap_or_else(|_| {
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
            }),
        ),
        ("HOSTNAME".into(), s(pod, "/metadata/name").into()),
        ("KUBERNETES_SERVICE_HOST".into(), host.into()),
        ("KUBERNETES_SERVICE_PORT".into(), port.into()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".into(), port.into()),
        ("KUBERNETES_PORT".into(), format!("tcp://{host}:{port}")),
    ];
    if let Ok(home) = std::env::var("HOME") {
        env.push(("HOME".into(), home));
    }
    for ef in c["envFrom"].as_array().into_iter().flatten() {
        let prefix = s(ef, "/prefix");
        let (data, name, optional) = if let Some(r) = ef.get("configMapRef") {
            (
                shared
                    .configmap(ns, s(r, "/name"))
                    .await
                    .map_err(config_err)?,
                s(r, "/name"),
                r["optional"] == json!(true),
            )
        } else if let Some(r) = ef.get("secretRef") {
            (
                shared.secret(ns, s(r, "/name")).await.map_err(config_err)?,
                s(r, "/name"),
                r["optional"] == json!(true),
            )
        } else {
            continue;
        };
        match data {
            Some(d) => env.extend(d.into_iter().map(|(k, v)| {
                (
                    format!("{prefix}{k}"),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })),
            None if optional => {}
            None => return Err(config_err(format!("envFrom source \"{name}\" not found"))),
        }
    }
    for e in c["env"].as_array().into_iter().flatten() {
        let name = s(e, "/name").to_string();
        let value = if let Some(v) = e.get("value").and_then(Value::as_str) {
            Some(expand(v, &env))
        } else if let Some(r) = e.pointer("/valueFrom/secretKeyRef") {
            let sec = shared.secret(ns, s(r, "/name")).await.map_err(config_err)?;
            let v = sec.and_then(|d| {
                d.into_iter()
                    .find(|(k, _)| k == s(r, "/key"))
                    .map(|(_, v)| v)
            });
            match (v, r["optional"] == json!(true)) {
                (Some(v), _) => Some(String::from_utf8_lossy(&v).into_owned()),
                (None, true) => None,
                (None, false) => {
                    return Err(config_err(format!(
                        "secret key {}/{} not found",
                        s(r, "/name"),
                        s(r, "/key")
                    )));
                }
            }
        } else if let Some(r) = e.pointer("/valueFrom/configMapKeyRef") {
            let cm = shared
                .configmap(ns, s(r, "/name"))
                .await
                .map_err(config_err)?;
            let v = cm.and_then(|d| {
                d.into_iter()
                    .find(|(k, _)| k == s(r, "/key"))
                    .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
            });
            match (v, r["optional"] == json!(true)) {
                (Some(v), _) => Some(v),
                (None, true) => None,
                (None, false) => {
                    return Err(config_err(format!(
                        "configmap key {}/{} not found",
                        s(r, "/name"),
                        s(r, "/key")
                    )));
                }
            }
        } else if let Some(fp) = e
            .pointer("/valueFrom/fieldRef/fieldPath")
            .and_then(Value::as_str)
        {
            Some(
                field_ref(pod, fp)
                    .ok_or_else(|| config_err(format!("unsupported fieldPath {fp}")))?,
            )
        } else if e.pointer("/valueFrom/resourceFieldRef").is_some() {
            Some("0".into())
        } else {
            Some(String::new())
        };
        if let Some(v) = value {
            env.retain(|(k, _)| *k != name);
            env.push((name, v));
        }
    }
    let strings = |k: &str| -> Vec<String> {
        c[k].as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|a| expand(a, &env))
            .collect()
    };
    let command = strings("command");
    let args = strings("args");
    let image = s(c, "/image");
    let mapped = shared
        .image_map
        .iter()
        .find(|(n, _)| image_name(n) == image_name(image))
        .map(|(_, p)| p.clone());
    let (program, argv) = match command.first() {
        Some(first) if first.starts_with('/') && Path::new(first).exists() => (
            PathBuf::from(first),
            command[1..].iter().chain(&args).cloned().collect(),
        ),
        Some(_) if mapped.is_some() => (
            mapped.clone().expect("checked"),
            command[1..].iter().chain(&args).cloned().collect(),
        ),
        None if mapped.is_some() => (mapped.clone().expect("checked"), args.clone()),
        _ => {
            return Err((
                "ErrImagePull".into(),
                format!(
                    "image {image:?} is not mapped to a local binary (--image-map {}=PATH) and command[0] is not an existing absolute path",
                    image_name(image)
                ),
            ));
        }
    };
    let mut binds = Vec::new();
    for m in c["volumeMounts"].as_array().into_iter().flatten() {
        let Some(host) = ctx.mounts.get(s(m, "/name")) else {
            return Err(config_err(format!("volume {} not found", s(m, "/name"))));
        };
        let mut src = host.clone();
        if let Some(sub) = m
            .get("subPath")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            src = src.join(sub);
            // As the kubelet: a subPath that does not exist yet is created as a directory.
            if !src.exists() {
                std::fs::create_dir_all(&src)
                    .map_err(|e| config_err(format!("subPath {sub}: {e}")))?;
            }
        }
        binds.push((
            src,
            s(m, "/mountPath").to_string(),
            m["readOnly"] == json!(true),
        ));
    }
    let workdir = c
        .get("workingDir")
        .and_then(Value::as_str)
        .map(String::from);
    Ok(Prepared {
        program,
        args: argv,
        env,
        workdir,
        binds,
        security,
    })
}

/// Starts the container's process in its own process group (see [`start_tied`]), as the
/// container's user, with its output going to the log buffer `log_key`.
pub(super) fn spawn(ctx: &PodCtx, p: &Prepared, log_key: &str) -> std::io::Result<Proc> {
    let program = p.program.clone();
    let args = p.args.clone();
    let env = p.env.clone();
    let workdir = p.workdir.clone();
    let security = p.security.clone();
    let runtime = tokio::runtime::Handle::current();
    let start = move |path: &Path| {
        let _runtime = runtime.enter();
        let mut cmd = tokio::process::Command::new(path);
        if path != program {
            cmd.arg0(&program);
        }
        cmd.args(&args)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // Changed to in the child, so in its mount namespace: a mount there counts.
        if let Some(wd) = &workdir {
            cmd.current_dir(wd);
        }
        if let Some((uid, gid)) = security.user {
            cmd.uid(uid).gid(gid);
        }
        let no_new_privs = security.no_new_privs;
        // SAFETY: between fork and exec only async-signal-safe prctl(2) calls run.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
                if no_new_privs {
                    nix::sys::prctl::set_no_new_privs().map_err(std::io::Error::from)?;
                }
                Ok(())
            });
        }
        cmd.spawn()
    };
    let (mut child, tie) = start_tied(
        p.binds.clone(),
        p.security.read_only_root,
        ctx.shared.can_mount,
        p.program.clone(),
        start,
    )?;
    let pid = child.id();
    if let Some(pid) = pid {
        lifeline::kill_group_at_exit(pid);
    }
    let log = Arc::new(LogBuf::default());
    ctx.shared
        .logs
        .write()
        .insert(log_key.to_string(), log.clone());
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        pumps.push(tokio::spawn(pump(out, log.clone())));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(tokio::spawn(pump(err, log.clone())));
    }
    Ok(Proc {
        child,
        pid,
        pumps,
        log,
        _tie: tie,
    })
}

pub(super) async fn pump(mut r: impl AsyncRead + Unpin, buf: Arc<LogBuf>) {
    let mut chunk = [0u8; 8192];
    while let Ok(n) = r.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        buf.append(&chunk[..n]);
    }
}

/// SIGTERM to the container's process group, SIGKILL after `grace`.
pub(super) async fn terminate(proc: &mut Proc, grace: Duration) -> i32 {
    if let Some(pid) = proc.pid {
        let pg = Pid::from_raw(pid as i32);
        if !grace.is_zero() {
            let _ = killpg(pg, Signal::SIGTERM);
            if let Ok(code) = tokio::time::timeout(grace, proc.wait()).await {
                return code;
            }
        }
        let _ = killpg(pg, Signal::SIGKILL);
    }
    proc.wait().await
}

pub(super) fn exit_code(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9))
}
