//! The process kubelet: pods run as local processes with real volumes, environment, service
//! account credentials, restarts, probes and graceful termination.

use crate::common;

use std::time::{Duration, Instant};

use anyhow::Result;
use common::{WAIT, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

fn scratch() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("kube-bed-test-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

async fn logs(pods: &Api<Pod>, name: &str) -> String {
    pods.logs(name, &Default::default())
        .await
        .unwrap_or_default()
}

/// Lets the namespace's `default` ServiceAccount read ConfigMaps there (the API server enforces
/// RBAC: without this, kubectl in the pod is refused).
async fn allow_reading_configmaps(client: &kube::Client, ns: &str) -> Result<()> {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let role: Role = serde_json::from_value(json!({"metadata": {"name": "read-cm"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}))?;
    Api::<Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await?;
    let binding: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "read-cm"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-cm"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]}))?;
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

fn pod(v: serde_json::Value) -> Pod {
    serde_json::from_value(v).expect("valid pod")
}

#[tokio::test]
async fn pod_gets_env_volumes_and_service_account() -> Result<()> {
    let dir = scratch();
    let bed = dcs_kube_bed::kubelet_namespace("kubelet").await?;
    let client = bed.client.clone();
    let ns = bed.name.as_str();
    allow_reading_configmaps(&client, ns).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "cfg"}, "data": {"key": "from-configmap"}}),
        )?,
    )
    .await?;
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "sec"}, "stringData": {"pw": "s3cret"}}),
            )?,
        )
        .await?;
    // Mount points live in the test's directory so the host is left as it was; the mounts
    // themselves exist only in the container's mount namespace.
    let mnt = dir.join("mnt");
    let m = mnt.display().to_string();
    let script = r#"echo CM=$(cat MNT/cfg/key); echo SEC=$(cat MNT/sec/pw); echo NS=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace);
echo ENV=$E1,$E2,$E3,$E4; echo IP=$MY_IP; echo API=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; echo DOWN=$(cat MNT/info/name);
touch MNT/scratch/x && echo SCRATCH=ok; (echo x > MNT/sec/pw) 2>/dev/null || echo READONLY=ok; echo PWD=$(pwd);
echo KUBECTL=$(/usr/bin/kubectl get configmap cfg -o jsonpath='{.data.key}' 2>&1); sleep 60"#
        .replace("MNT", &m);
    pods.create(&PostParams::default(), &pod(json!({
        "metadata": {"name": "env", "labels": {"app": "x"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", "command": ["/bin/sh", "-c", script], "workingDir": "/tmp",
                "env": [
                    {"name": "E1", "value": "plain"},
                    {"name": "E2", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "pw"}}},
                    {"name": "E3", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "key"}}},
                    {"name": "E4", "value": "$(E1)-expanded"},
                    {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                ],
                "volumeMounts": [
                    {"name": "cfg", "mountPath": format!("{m}/cfg")}, {"name": "sec", "mountPath": format!("{m}/sec"), "readOnly": true},
                    {"name": "info", "mountPath": format!("{m}/info")}, {"name": "scratch", "mountPath": format!("{m}/scratch")},
                ]}],
            "volumes": [
                {"name": "cfg", "configMap": {"name": "cfg"}}, {"name": "sec", "secret": {"secretName": "sec"}},
                {"name": "info", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                {"name": "scratch", "emptyDir": {}},
            ],
        },
    }))).await?;
    eventually("the script to run", || async {
        logs(&pods, "env").await.contains("KUBECTL=")
    })
    .await?;
    let out = logs(&pods, "env").await;
    let p = pods.get("env").await?;
    let status = p.status.unwrap();
    let ip = status.pod_ip.unwrap();
    assert!(ip.starts_with("127.0.0.") && ip != "127.0.0.1", "{ip}");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    for want in [
        "CM=from-configmap".to_string(),
        "SEC=s3cret".into(),
        format!("NS={ns}"),
        "ENV=plain,s3cret,from-configmap,plain-expanded".into(),
        format!("IP={ip}"),
        format!("API={}", bed.cp.address),
        "DOWN=env".into(),
        "SCRATCH=ok".into(),
        "READONLY=ok".into(),
        "PWD=/tmp".into(),
        "KUBECTL=from-configmap".into(),
    ] {
        assert!(out.contains(&want), "missing {want:?} in:\n{out}");
    }
    assert!(
        !mnt.join("cfg/key").exists(),
        "the mounts are private to the container"
    );
    pods.delete("env", &DeleteParams::default()).await?;
    eventually("the pod to go", || async {
        matches!(pods.get_opt("env").await, Ok(None))
    })
    .await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

#[tokio::test]
async fn killed_child_is_restarted_and_exit_codes_are_reported() -> Result<()> {
    let dir = scratch();
    let bed = dcs_kube_bed::kubelet_namespace("kubelet").await?;
    let client = bed.client.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &bed.name);
    let pidfile = dir.join("pid");
    let script = format!(
        "echo $$ > {}; echo started; exec sleep 1000",
        pidfile.display()
    );
    pods.create(
        &PostParams::default(),
        &pod(
            json!({"metadata": {"name": "victim"}, "spec": {"terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": "x", "command": ["/bin/sh", "-c", script]}]}}),
        ),
    )
    .await?;
    eventually("the first run", || async {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| !s.trim().is_empty())
    })
    .await?;
    let first: i32 = std::fs::read_to_string(&pidfile)?.trim().parse()?;
    std::fs::remove_file(&pidfile)?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first),
        nix::sys::signal::Signal::SIGKILL,
    )?;
    eventually("the restart", || async {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| !s.trim().is_empty())
    })
    .await?;
    let second: i32 = std::fs::read_to_string(&pidfile)?.trim().parse()?;
    assert_ne!(first, second);
    // The status write follows the restart a moment later.
    eventually("restartCount 1 and running again", || async {
        pods.get("victim")
            .await
            .ok()
            .and_then(|p| p.status?.container_statuses)
            .is_some_and(|c| {
                c[0].restart_count == 1 && c[0].state.as_ref().is_some_and(|s| s.running.is_some())
            })
    })
    .await?;
    let p = pods.get("victim").await?;
    let cs = &p.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(cs.restart_count, 1);
    let last = cs
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("last state terminated");
    assert_eq!(last.exit_code, 137);
    assert!(cs.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(pods.clone().into_client(), &bed.name);
    let victim_events = events
        .list(&kube::api::ListParams::default().fields("involvedObject.name=victim"))
        .await?
        .items;
    // Reported as a kubelet does: the component, from its node (the scheduler's Scheduled
    // event is the scheduler's).
    let victim_events: Vec<_> = victim_events
        .into_iter()
        .filter(|e| e.reporting_component.as_deref() != Some("default-scheduler"))
        .collect();
    assert!(!victim_events.is_empty());
    for e in &victim_events {
        let source = e.source.as_ref().expect("event source");
        assert_eq!(source.component.as_deref(), Some("kubelet"), "{e:?}");
        assert_eq!(
            source.host.as_deref(),
            Some(dcs_kube_bed::NODE_NAME),
            "{e:?}"
        );
        assert_eq!(
            e.reporting_instance.as_deref(),
            Some(dcs_kube_bed::NODE_NAME),
            "{e:?}"
        );
    }
    let reasons: Vec<String> = victim_events.into_iter().filter_map(|e| e.reason).collect();
    assert!(
        reasons.iter().any(|r| r == "Started") && reasons.iter().any(|r| r == "BackOff"),
        "{reasons:?}"
    );

    // A container that keeps failing under restartPolicy OnFailure backs off and counts restarts;
    // one that succeeds under Never completes the pod.
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "crash"}, "spec": {"restartPolicy": "OnFailure",
        "containers": [{"name": "main", "image": "x", "command": ["/bin/sh", "-c", "echo boom; exit 3"]}]}}))).await?;
    pods.create(
        &PostParams::default(),
        &pod(
            json!({"metadata": {"name": "once"}, "spec": {"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "x", "command": ["/bin/sh", "-c", "exit 0"]}]}}),
        ),
    )
    .await?;
    eventually("two restarts", || async {
        pods.get("crash")
            .await
            .ok()
            .and_then(|p| {
                p.status?
                    .container_statuses?
                    .first()
                    .map(|c| c.restart_count)
            })
            .is_some_and(|n| n >= 2)
    })
    .await?;
    let p = pods.get("crash").await?;
    let cs = &p
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        cs.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        3
    );
    eventually("the pod to succeed", || async {
        pods.get("once")
            .await
            .ok()
            .and_then(|p| p.status?.phase)
            .is_some_and(|p| p == "Succeeded")
    })
    .await?;
    // Deleting the pod stops its process (the kubelet is shared: it does not stop with the test).
    pods.delete("victim", &DeleteParams::default()).await?;
    eventually("the victim's process to be stopped", || async {
        !alive(second)
    })
    .await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn delete_sends_sigterm_then_sigkill_after_the_grace_period() -> Result<()> {
    let dir = scratch();
    let bed = dcs_kube_bed::kubelet_namespace("kubelet").await?;
    let client = bed.client.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &bed.name);
    let marker = dir.join("term");
    let polite = format!(
        "trap 'echo TERM > {}; exit 0' TERM; echo ready; while :; do sleep 0.1; done",
        marker.display()
    );
    pods.create(
        &PostParams::default(),
        &pod(
            json!({"metadata": {"name": "polite"}, "spec": {"terminationGracePeriodSeconds": 20,
        "containers": [{"name": "main", "image": "x", "command": ["/bin/sh", "-c", polite]}]}}),
        ),
    )
    .await?;
    let pidfile = dir.join("stubborn.pid");
    let stubborn = format!(
        "trap '' TERM; echo $$ > {}; while :; do sleep 0.1; done",
        pidfile.display()
    );
    pods.create(
        &PostParams::default(),
        &pod(
            json!({"metadata": {"name": "stubborn"}, "spec": {"terminationGracePeriodSeconds": 2,
        "containers": [{"name": "main", "image": "x", "command": ["/bin/sh", "-c", stubborn]}]}}),
        ),
    )
    .await?;
    eventually("both running", || async {
        let running = |p: Option<Pod>| {
            p.and_then(|p| p.status?.phase)
                .is_some_and(|p| p == "Running")
        };
        running(pods.get_opt("polite").await.ok().flatten())
            && running(pods.get_opt("stubborn").await.ok().flatten())
            && pidfile.exists()
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;

    // SIGTERM first: the polite one exits at once, well before its 20 s grace period.
    let t = Instant::now();
    pods.delete("polite", &DeleteParams::default()).await?;
    eventually("the polite pod gone", || async {
        matches!(pods.get_opt("polite").await, Ok(None))
    })
    .await?;
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(std::fs::read_to_string(&marker)?.trim(), "TERM");

    // SIGKILL after the grace period for one that ignores SIGTERM.
    let pid: i32 = std::fs::read_to_string(&pidfile)?.trim().parse()?;
    let t = Instant::now();
    let deleted = pods.delete("stubborn", &DeleteParams::default()).await?;
    assert!(
        deleted
            .left()
            .and_then(|p| p.metadata.deletion_timestamp)
            .is_some(),
        "graceful deletion is pending"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(alive(pid), "still inside the grace period");
    eventually("the stubborn pod gone", || async {
        matches!(pods.get_opt("stubborn").await, Ok(None))
    })
    .await?;
    assert!(
        t.elapsed() >= Duration::from_secs(2),
        "not before the grace period"
    );
    assert!(!alive(pid));
    assert!(t.elapsed() < WAIT);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn probes_drive_readiness_and_liveness_restarts() -> Result<()> {
    let dir = scratch();
    let bed = dcs_kube_bed::kubelet_namespace("kubelet").await?;
    let client = bed.client.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &bed.name);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "web"}, "spec": {"terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": "x", "command": ["/usr/bin/python3", "-m", "http.server", port.to_string(), "--bind", "127.0.0.1"],
            "workingDir": dir.to_string_lossy(),
            "readinessProbe": {"httpGet": {"path": "/", "port": port}, "periodSeconds": 1}}]}}))).await?;
    eventually("ready", || async {
        pods.get("web")
            .await
            .ok()
            .and_then(|p| p.status?.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await?;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "sick"}, "spec": {"terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": "x", "command": ["/bin/sleep", "1000"],
            "livenessProbe": {"tcpSocket": {"port": closed}, "periodSeconds": 1, "failureThreshold": 1}}]}}))).await?;
    eventually("a liveness restart", || async {
        pods.get("sick")
            .await
            .ok()
            .and_then(|p| {
                p.status?
                    .container_statuses?
                    .first()
                    .map(|c| c.restart_count)
            })
            .is_some_and(|n| n >= 1)
    })
    .await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

async fn is_ready(pods: &Api<Pod>, name: &str) -> bool {
    pods.get(name)
        .await
        .ok()
        .and_then(|p| p.status?.conditions)
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn restarts(pods: &Api<Pod>, name: &str) -> i32 {
    pods.get(name)
        .await
        .ok()
        .and_then(|p| {
            p.status?
                .container_statuses?
                .first()
                .map(|c| c.restart_count)
        })
        .unwrap_or(-1)
}

#[tokio::test]
async fn probes_resolve_named_ports_against_the_container_ports() -> Result<()> {
    let dir = scratch();
    let bed = dcs_kube_bed::kubelet_namespace("kubelet").await?;
    let client = bed.client.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &bed.name);
    // HTTP readiness + TCP liveness on one pod, TCP readiness + HTTP liveness on the other, all
    // through the name of the port; a liveness probe on port 80 would fail and restart them.
    let server = |name: &str,
                  port: u16,
                  readiness: serde_json::Value,
                  liveness: serde_json::Value| {
        pod(
            json!({"metadata": {"name": name}, "spec": {"terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "x",
                "command": ["/usr/bin/python3", "-m", "http.server", port.to_string(), "--bind", "127.0.0.1"],
                "workingDir": dir.to_string_lossy(),
                "ports": [{"name": "other", "containerPort": 1}, {"name": "web", "containerPort": port}],
                "readinessProbe": readiness, "livenessProbe": liveness}]}}),
        )
    };
    let fast = |p: serde_json::Value| {
        let mut p = p;
        p["periodSeconds"] = json!(1);
        p["failureThreshold"] = json!(1);
        p
    };
    // Liveness tolerates a slow start (python on a loaded machine) but not a port that never
    // answers: five failures in a row, a second apart.
    let patient = |p: serde_json::Value| {
        let mut p = p;
        p["periodSeconds"] = json!(1);
        p["failureThreshold"] = json!(5);
        p
    };
    pods.create(
        &PostParams::default(),
        &server(
            "http-ready",
            free_port()?,
            fast(json!({"httpGet": {"path": "/", "port": "web"}})),
            patient(json!({"tcpSocket": {"port": "web"}, "initialDelaySeconds": 1})),
        ),
    )
    .await?;
    pods.create(
        &PostParams::default(),
        &server(
            "tcp-ready",
            free_port()?,
            fast(json!({"tcpSocket": {"port": "web"}})),
            patient(json!({"httpGet": {"path": "/", "port": "web"}, "initialDelaySeconds": 1})),
        ),
    )
    .await?;
    // A name the container does not declare fails the probe, with the reason in an event.
    pods.create(
        &PostParams::default(),
        &server(
            "unknown-port",
            free_port()?,
            fast(json!({"httpGet": {"path": "/", "port": "metrics"}})),
            json!(null),
        ),
    )
    .await?;
    eventually("both servers ready", || async {
        is_ready(&pods, "http-ready").await && is_ready(&pods, "tcp-ready").await
    })
    .await?;
    // More liveness periods than the failure threshold: no restart, still ready.
    tokio::time::sleep(Duration::from_secs(8)).await;
    for name in ["http-ready", "tcp-ready"] {
        assert_eq!(restarts(&pods, name).await, 0, "{name} restarted");
        assert!(is_ready(&pods, name).await, "{name} not ready");
    }
    assert!(!is_ready(&pods, "unknown-port").await);
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &bed.name);
    eventually("an Unhealthy event naming the missing port", || async {
        events
            .list(&kube::api::ListParams::default().fields("involvedObject.name=unknown-port"))
            .await
            .is_ok_and(|l| {
                l.items.iter().any(|e| {
                    e.reason.as_deref() == Some("Unhealthy")
                        && e.message.as_deref().is_some_and(|m| {
                            m.starts_with("Readiness probe failed:") && m.contains("\"metrics\"")
                        })
                })
            })
    })
    .await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn an_empty_dir_over_tmp_hides_neither_volume_sources_nor_the_program() -> Result<()> {
    // The kubelet's work directory under /tmp (the shared bed's is), the program a binary under
    // it too: a pod mounting an emptyDir at /tmp (before its other mounts) must still get them.
    let dir = std::path::Path::new("/tmp")
        .join(format!("kube-bed-test-{}", uuid::Uuid::new_v4().simple()));
    let shell = dir.join("bin/sh");
    std::fs::create_dir_all(shell.parent().expect("parent"))?;
    std::fs::copy("/bin/sh", &shell)?;
    let bed = dcs_kube_bed::kubelet_namespace("kubelet").await?;
    let client = bed.client.clone();
    allow_reading_configmaps(&client, &bed.name).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &bed.name);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "cfg"}, "data": {"key": "from-configmap"}}),
        )?,
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &bed.name);
    let script = r#"echo ARG0=$0; echo TOKEN=$(wc -c < /var/run/secrets/kubernetes.io/serviceaccount/token);
echo CM=$(cat /tmp/cfg/key); echo PWD=$(pwd); echo x > marker && echo MARKER=ok;
echo KUBECTL=$(/usr/bin/kubectl get configmap cfg -o jsonpath='{.data.key}' 2>&1); sleep 60"#;
    pods.create(&PostParams::default(), &pod(json!({
        "metadata": {"name": "tmp"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "registry.example/shell:1", "command": [shell], "args": ["-c", script], "workingDir": "/tmp",
                "volumeMounts": [
                    {"name": "tmp", "mountPath": "/tmp"},
                    {"name": "cfg", "mountPath": "/tmp/cfg", "readOnly": true},
                ]}],
            "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg"}}],
        },
    }))).await?;
    eventually("the script to run", || async {
        logs(&pods, "tmp").await.contains("KUBECTL=")
    })
    .await?;
    let out = logs(&pods, "tmp").await;
    let p = pods.get("tmp").await?;
    let status = p.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Running"), "{out}");
    for want in [
        format!("ARG0={}", shell.display()),
        "CM=from-configmap".into(),
        "PWD=/tmp".into(),
        "MARKER=ok".into(),
        "KUBECTL=from-configmap".into(),
    ] {
        assert!(out.contains(&want), "missing {want:?} in:\n{out}");
    }
    let token_len: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("TOKEN="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(token_len > 0, "no token in:\n{out}");
    // The working directory was the emptyDir, not the host's /tmp.
    let uid = p.metadata.uid.expect("uid");
    let volume = bed
        .cp
        .dir
        .join("kubelet/pods")
        .join(&uid)
        .join("volumes/tmp");
    assert_eq!(std::fs::read_to_string(volume.join("marker"))?, "x\n");
    assert!(
        volume.join("cfg").is_dir(),
        "the nested mount point is made inside the emptyDir"
    );
    pods.delete("tmp", &DeleteParams::default()).await?;
    eventually("the pod to go", || async {
        matches!(pods.get_opt("tmp").await, Ok(None))
    })
    .await?;

    // A source that cannot be mounted leaves the container waiting, saying which and why.
    let missing = dir.join("missing");
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "bad-mount"},
            "spec": {"terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": "shell", "command": [shell], "args": ["-c", "sleep 60"],
                    "volumeMounts": [{"name": "host", "mountPath": "/tmp/host"}]}],
                "volumes": [{"name": "host", "hostPath": {"path": missing}}]},
        })),
    )
    .await?;
    let want = format!("volume source {}", missing.display());
    eventually("a RunContainerError naming the source", || async {
        pods.get("bad-mount")
            .await
            .ok()
            .and_then(|p| {
                p.status?
                    .container_statuses?
                    .first()?
                    .state
                    .clone()?
                    .waiting
            })
            .is_some_and(|w| {
                w.reason.as_deref() == Some("RunContainerError")
                    && w.message.as_deref().is_some_and(|m| m.contains(&want))
            })
    })
    .await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
