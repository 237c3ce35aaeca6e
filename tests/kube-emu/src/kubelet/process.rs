//! Turning a container spec into a process: program, arguments, environment and mounts.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use parking_lot::RwLock;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::*;

/// A container ready to start.
pub(super) struct Prepared {
    pub(super) program: PathBuf,
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) workdir: Option<String>,
    /// (host path, container path, read-only)
    pub(super) binds: Vec<(PathBuf, String, bool)>,
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

pub(super) fn prepare(ctx: &PodCtx, c: &Value) -> Result<Prepared, (String, String)> {
    let shared = &ctx.shared;
    let pod = &ctx.pod;
    let ns = s(pod, "/metadata/namespace");
    let config_err = |m: String| ("CreateContainerConfigError".to_string(), m);
    let address = shared.cluster.address.read().clone();
    let (host, port) = address.rsplit_once(':').unwrap_or(("127.0.0.1", "443"));
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
                    .get("configmaps", ns, s(r, "/name"))
                    .map(|o| configmap_data(&o)),
                s(r, "/name"),
                r["optional"] == json!(true),
            )
        } else if let Some(r) = ef.get("secretRef") {
            (
                shared
                    .get("secrets", ns, s(r, "/name"))
                    .map(|o| secret_data(&o)),
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
            let sec = shared.get("secrets", ns, s(r, "/name"));
            let v = sec.and_then(|o| {
                o.pointer(&format!("/data/{}", s(r, "/key")))
                    .map(decode_b64)
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
            let cm = shared.get("configmaps", ns, s(r, "/name"));
            let v = cm.and_then(|o| {
                o.pointer(&format!("/data/{}", s(r, "/key")))
                    .and_then(Value::as_str)
                    .map(String::from)
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
    if let Some(sa) = ctx.mounts.get("\0serviceaccount")
        && !binds.iter().any(|(_, p, _)| p == SA_DIR)
    {
        binds.push((sa.clone(), SA_DIR.to_string(), true));
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
    })
}

pub(super) fn spawn(
    ctx: &PodCtx,
    p: &Prepared,
    log_key: &str,
) -> std::io::Result<tokio::process::Child> {
    let command = |program: &Path| {
        let mut cmd = tokio::process::Command::new(program);
        if program != p.program {
            cmd.arg0(&p.program);
        }
        cmd.args(&p.args)
            .env_clear()
            .envs(p.env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // Changed to in the child, so in its mount namespace: a mount there counts.
        if let Some(wd) = &p.workdir {
            cmd.current_dir(wd);
        }
        cmd
    };
    let mut child = if ctx.shared.can_mount && !p.binds.is_empty() {
        let runtime = tokio::runtime::Handle::current();
        with_mounts(&p.binds, &p.program, |program| {
            let _runtime = runtime.enter();
            command(program).spawn()
        })?
    } else {
        command(&p.program).spawn()?
    };
    let buf = log_buffer(&ctx.shared.cluster, log_key);
    if let Some(out) = child.stdout.take() {
        tokio::spawn(pump(out, buf.clone()));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(pump(err, buf));
    }
    Ok(child)
}

pub(super) async fn pump(mut r: impl AsyncRead + Unpin, buf: Arc<RwLock<Vec<u8>>>) {
    let mut chunk = [0u8; 8192];
    while let Ok(n) = r.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        buf.write().extend_from_slice(&chunk[..n]);
    }
}

/// SIGTERM to the container's process group, SIGKILL after `grace`.
pub(super) async fn terminate(child: &mut tokio::process::Child, grace: Duration) -> Option<i32> {
    if let Some(pid) = child.id() {
        let pg = Pid::from_raw(pid as i32);
        if !grace.is_zero() {
            let _ = killpg(pg, Signal::SIGTERM);
            if let Ok(r) = tokio::time::timeout(grace, child.wait()).await {
                return r.ok().map(exit_code);
            }
        }
        let _ = killpg(pg, Signal::SIGKILL);
    }
    child.wait().await.ok().map(exit_code)
}

pub(super) fn exit_code(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9))
}
