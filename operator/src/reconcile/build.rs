//! The pure build: the Kubernetes objects that run one sync's runner.
//!
//! Credentials only ever appear as `secretKeyRef`s, CA bundles as volumes of the Secret or
//! ConfigMap key they are in; no secret value passes through here.

use std::collections::BTreeMap;

use dcs_crds::{Credentials, DorisChangelogSync, DorisChangelogSyncSpec, StartupMode};
use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy},
        batch::v1::{Job, JobSpec},
        core::v1::{
            Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar,
            EnvVarSource, HTTPGetAction, KeyToPath, ObjectFieldSelector, PodSecurityContext,
            PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile,
            SecretKeySelector, SecretVolumeSource, SecurityContext, ServiceAccount, Volume,
            VolumeMount,
        },
        rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{LabelSelector, ObjectMeta},
        util::intstr::IntOrString,
    },
};
use kube::{Resource, ResourceExt};

use dcs_crds::shard::shard_configmap;

use super::names::{self, CONFIG_KEY};
use super::plan::Run;
use super::shards::{BACKOFF_LIMIT_PER_INDEX, ShardRun};

/// Where the config ConfigMap is mounted in the runner container.
pub const CONFIG_DIR: &str = "/etc/dcs";
/// Pod-template annotation with the hash of the effective config: a change rolls the runner.
pub const CONFIG_HASH_ANNOTATION: &str = "dcs.dev/config-hash";
/// Config ConfigMap annotation with the reinitNonce the config was built for.
pub const NONCE_ANNOTATION: &str = "dcs.dev/reinit-nonce";
/// Label naming the sync an object belongs to.
pub const SYNC_LABEL: &str = "dcs.dev/sync";

/// The default runner image: `dcs-runner:<crate version>`.
pub fn default_runner_image() -> String {
    format!("dcs-runner:{}", env!("CARGO_PKG_VERSION"))
}

/// What the operator's flags say about runners, for what a sync's `spec.runner` leaves unset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunnerDefaults {
    /// `--runner-image`.
    pub image: Option<String>,
    /// `--runner-resources` (the chart's `runner.resources`).
    pub resources: Option<ResourceRequirements>,
    /// `--runner-metrics-addr` (the chart's `runner.metricsAddr`).
    pub metrics_addr: RunnerMetricsAddr,
    /// `--allowed-runner-images` and `--allowed-runner-service-accounts` (the chart's
    /// `runner.allowedImages`, `runner.allowedServiceAccounts`).
    pub policy: dcs_crds::access::RunnerPolicy,
}

impl RunnerDefaults {
    /// The image a sync's runner gets when its spec names none.
    pub fn default_image(&self) -> String {
        self.image.clone().unwrap_or_else(default_runner_image)
    }

    /// Whether the operator lets `spec.runner` have its image and service account.
    ///
    /// # Errors
    /// The message to block the sync with, naming the field and the setting.
    pub fn allows(&self, spec: &dcs_crds::DorisChangelogSyncSpec) -> Result<(), String> {
        self.policy.check(spec, &self.default_image())
    }
}

/// The port runners serve `/metrics`, `/healthz` and `/readyz` on unless `--runner-metrics-addr`
/// says otherwise.
pub const RUNNER_METRICS_PORT: u16 = 9464;
/// The name of that container port: the probes and a PodMonitor refer to it.
pub const RUNNER_METRICS_PORT_NAME: &str = "metrics";
/// The host part of `--runner-metrics-addr` that binds each runner to its pod's address.
pub const POD_IP_HOST: &str = "$(POD_IP)";

/// Where a runner container serves its metrics and probes: `DCS_METRICS_ADDR` in its environment
/// and its `metrics` container port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnerMetricsAddr {
    /// An IP address (IPv6 in brackets), or [`POD_IP_HOST`], which Kubernetes expands from the
    /// container's `POD_IP`.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl Default for RunnerMetricsAddr {
    fn default() -> Self {
        Self {
            host: "0.0.0.0".to_owned(),
            port: RUNNER_METRICS_PORT,
        }
    }
}

impl std::fmt::Display for RunnerMetricsAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The built-in requests and limits of a runner container (BENCHMARKS.md, "Runner memory"): the
/// runner peaked at 37–41 MiB in a 1M-row snapshot, a changelog window of 800 000 changes and a
/// sink outage, whatever the table size, because its batches and channels are bounded (73–78 MiB
/// with 64 MiB batches). The memory request is about three times that; the limit leaves room for
/// larger `batch.maxBytes`, wider rows and the allocator's slack before an OOM kill (a restart,
/// not data loss). No CPU limit: CPU is compressible, and a throttled runner answers its probes
/// late and runs fewer async workers.
pub fn default_runner_resources() -> ResourceRequirements {
    let quantities = |pairs: &[(&str, &str)]| {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                .collect(),
        )
    };
    ResourceRequirements {
        requests: quantities(&[("cpu", "100m"), ("memory", "128Mi")]),
        limits: quantities(&[("memory", "512Mi")]),
        claims: None,
    }
}

/// The runner container's resources: the sync's `spec.runner.resources`, else the operator's
/// default, else [`default_runner_resources`]. The first that is set is taken whole (fields are
/// not mixed across levels, so a request never meets a limit it was not chosen with); an empty
/// `resources: {}` in a sync asks for none.
pub fn runner_resources(
    sync: Option<&ResourceRequirements>,
    operator_default: Option<&ResourceRequirements>,
) -> ResourceRequirements {
    sync.or(operator_default)
        .cloned()
        .unwrap_or_else(default_runner_resources)
}

fn http_probe(path: &str, failure_threshold: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String(RUNNER_METRICS_PORT_NAME.to_owned()),
            ..Default::default()
        }),
        period_seconds: Some(10),
        // A loaded node answers late; a probe's timeout is not the runner's health.
        timeout_seconds: Some(5),
        success_threshold: Some(1),
        failure_threshold: Some(failure_threshold),
        ..Default::default()
    }
}

/// Liveness on `/healthz`, which the runner's metrics server answers from its own task whatever
/// the pipeline is doing: a long snapshot split, a visibility wait or Stream Load retries never
/// fail it. It fails only when the process cannot answer at all (a starved or wedged runtime, a
/// metrics port it could not bind), and six misses in a row (a minute) are needed before the
/// kubelet restarts the container, so a slow node or a garbage-collecting API server never does.
/// No `initialDelaySeconds`: the server is up before the runner first reaches out to Doris.
pub fn liveness_probe() -> Probe {
    http_probe("/healthz", 6)
}

/// Readiness on `/readyz`: 503 until the start point is resolved and the first read from the
/// source succeeded, and after a fatal error. Readiness never restarts anything; it is what
/// `kubectl rollout status`, `kubectl wait --for=condition=Ready` and PodDisruptionBudgets read.
/// Three misses (30 s) keep one late answer from flapping it.
pub fn readiness_probe() -> Probe {
    http_probe("/readyz", 3)
}

/// The runner workload: a Deployment for incremental syncs, a Job for `startup.mode: snapshot`.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// One replica, Recreate.
    Deployment(Box<Deployment>),
    /// A bounded snapshot.
    Job(Box<Job>),
}

/// Everything that runs one sync.
#[derive(Clone, Debug, PartialEq)]
pub struct RunnerObjects {
    /// The effective manifest.
    pub config: ConfigMap,
    /// The empty checkpoint ConfigMap (created once, never overwritten).
    pub checkpoint: ConfigMap,
    /// Identity and least privilege for the runner, unless spec.runner.serviceAccountName is set.
    pub rbac: Option<(ServiceAccount, Role, RoleBinding)>,
    /// The Deployment or Job.
    pub workload: Workload,
}

/// Labels on every object of a sync.
pub fn labels(sync: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "dcs-runner".to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "dcs-operator".to_owned(),
        ),
        (SYNC_LABEL.to_owned(), sync.to_owned()),
    ])
}

/// The manifest the runner reads with `-f`: the sync with the active consumer and startup mode,
/// and after a re-initialisation the annotation naming the consumer it replaces (the runner's
/// directive to rebuild the sink, `dcs_crds::checkpoint::REINITIALIZED_FROM_ANNOTATION`).
///
/// Without an offset table the runner's consumer id is the manifest's name, so the name carries the
/// active consumer id there; with one, `offsets.consumerId` does.
pub fn effective_manifest(sync: &DorisChangelogSync, run: &Run) -> String {
    let mut spec = sync.spec.clone();
    spec.startup.mode = run.startup_mode;
    if run.startup_mode != StartupMode::FromTimestamp {
        spec.startup.timestamp = None;
    }
    let name = match spec.offsets.as_mut() {
        Some(offsets) => {
            offsets.consumer_id = Some(run.consumer_id.clone());
            sync.name_any()
        }
        None => run.consumer_id.clone(),
    };
    spec.runner = Default::default();
    let mut metadata = serde_json::json!({"name": name, "namespace": sync.namespace()});
    let mut annotations = serde_json::Map::new();
    if let Some(previous) = &run.previous_consumer_id {
        // A re-initialised consumer: its runner rebuilds the sink when it starts afresh.
        annotations.insert(
            dcs_crds::checkpoint::REINITIALIZED_FROM_ANNOTATION.to_owned(),
            previous.clone().into(),
        );
    }
    // A snapshot read by shards: their T0 (docs/ARCHITECTURE.md §4.8); else one runner reads it.
    match &run.shards {
        Some(shards) => {
            // The parallelism the snapshot started with (docs/ARCHITECTURE.md §4.8).
            spec.snapshot.parallelism = i32::try_from(shards.count).unwrap_or(1);
            if let Some(t0) = shards.t0_tso {
                annotations.insert(
                    dcs_crds::shard::SNAPSHOT_T0_ANNOTATION.to_owned(),
                    t0.to_string().into(),
                );
            }
        }
        None => spec.snapshot = Default::default(),
    }
    if !annotations.is_empty() {
        metadata["annotations"] = annotations.into();
    }
    let manifest = serde_json::json!({
        "apiVersion": "dcs.dev/v1alpha1",
        "kind": "DorisChangelogSync",
        "metadata": metadata,
        "spec": spec,
    });
    serde_yaml::to_string(&manifest).expect("a manifest always serializes")
}

/// A stable content hash (FNV-1a; `DefaultHasher` may change between Rust versions).
pub fn content_hash(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn meta(sync: &DorisChangelogSync, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: sync.namespace(),
        labels: Some(labels(&sync.name_any())),
        owner_references: sync.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

fn secret_env(name: &str, credentials: &Credentials, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: credentials.secret_name.clone(),
                key: key.to_owned(),
                optional: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The runner image's user (distroless `nonroot`, `USER 65532:65532` in docker/runner.Dockerfile),
/// numeric so the kubelet can check `runAsNonRoot` without reading the image.
pub const RUNNER_UID: i64 = 65532;

/// The runner container's securityContext: what Pod Security's `restricted` level demands
/// (the runner keeps its checkpoint in a ConfigMap and writes nothing to disk, so its root
/// filesystem can be read-only).
fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        ..Default::default()
    }
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                api_version: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Where the runner pod finds a side's CA bundle: `{TLS_DIR}/{side}/{CA_FILE}`.
pub const TLS_DIR: &str = "/etc/dcs-tls";
/// The file name a CA bundle's key is mounted as.
pub const CA_FILE: &str = "ca.crt";

/// The CA bundle a side's `tls` names (when TLS is on), as the runner pod gets it: a read-only
/// volume of just that key of the Secret or ConfigMap, mounted at `{TLS_DIR}/{side}`, and the
/// variable naming the file (`DCS_SOURCE_TLS_CA_FILE`, `DCS_SINK_TLS_CA_FILE`). The Secret is
/// referenced only after the operator checked it allows the sync (the plan blocks otherwise).
fn ca_bundle_mount(
    tls: Option<&dcs_crds::TlsSpec>,
    side: &str,
    env: &str,
) -> Option<(Volume, VolumeMount, EnvVar)> {
    let bundle = tls.filter(|t| t.enabled)?.ca_bundle.as_ref()?;
    let name = format!("{side}-ca");
    let items = |key: &str| {
        Some(vec![KeyToPath {
            key: key.to_owned(),
            path: CA_FILE.to_owned(),
            mode: None,
        }])
    };
    let volume = match (&bundle.secret_key_ref, &bundle.config_map_key_ref) {
        (Some(r), _) => Volume {
            name: name.clone(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(r.name.clone()),
                items: items(&r.key),
                ..Default::default()
            }),
            ..Default::default()
        },
        (None, Some(r)) => Volume {
            name: name.clone(),
            config_map: Some(ConfigMapVolumeSource {
                name: r.name.clone(),
                items: items(&r.key),
                ..Default::default()
            }),
            ..Default::default()
        },
        (None, None) => return None,
    };
    let dir = format!("{TLS_DIR}/{side}");
    let mount = VolumeMount {
        name,
        mount_path: dir.clone(),
        read_only: Some(true),
        ..Default::default()
    };
    let var = EnvVar {
        name: env.to_owned(),
        value: Some(format!("{dir}/{CA_FILE}")),
        ..Default::default()
    };
    Some((volume, mount, var))
}

/// Builds every object of the runner for `run`; `defaults` are the operator's runner flags.
pub fn build(sync: &DorisChangelogSync, run: &Run, defaults: &RunnerDefaults) -> RunnerObjects {
    let manifest = effective_manifest(sync, run);
    let hash = content_hash(&manifest);
    let ca_bundles = ca_bundles(&sync.spec);
    let container = runner_container(sync, defaults, &ca_bundles);
    let template =
        |restart_policy: &str| pod_template(sync, &container, &hash, &ca_bundles, restart_policy);
    RunnerObjects {
        config: config_configmap(sync, manifest),
        checkpoint: checkpoint_configmap(sync),
        rbac: rbac(sync),
        workload: workload(sync, run, template),
    }
}

/// The config ConfigMap: the effective manifest, and the reinitNonce it was built for.
fn config_configmap(sync: &DorisChangelogSync, manifest: String) -> ConfigMap {
    let mut config_meta = meta(sync, names::config(&sync.name_any()));
    config_meta.annotations = Some(BTreeMap::from([(
        NONCE_ANNOTATION.to_owned(),
        sync.spec.reinit_nonce.clone(),
    )]));
    ConfigMap {
        metadata: config_meta,
        data: Some(BTreeMap::from([(CONFIG_KEY.to_owned(), manifest)])),
        ..Default::default()
    }
}

/// The checkpoint ConfigMap, empty: the runner writes it.
fn checkpoint_configmap(sync: &DorisChangelogSync) -> ConfigMap {
    ConfigMap {
        metadata: meta(sync, names::checkpoint(&sync.name_any())),
        ..Default::default()
    }
}

/// The runner's ServiceAccount, and a Role and RoleBinding that let it reach its checkpoint
/// ConfigMap only; none when `spec.runner.serviceAccountName` names an account of the user's.
fn rbac(sync: &DorisChangelogSync) -> Option<(ServiceAccount, Role, RoleBinding)> {
    let name = sync.name_any();
    sync.spec.runner.service_account_name.is_none().then(|| {
        let sa = ServiceAccount {
            metadata: meta(sync, names::runner(&name)),
            ..Default::default()
        };
        let role = Role {
            metadata: meta(sync, names::runner(&name)),
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["configmaps".to_owned()]),
                resource_names: Some(vec![names::checkpoint(&name)]),
                verbs: vec!["get".to_owned(), "update".to_owned(), "patch".to_owned()],
                ..Default::default()
            }]),
        };
        let binding = RoleBinding {
            metadata: meta(sync, names::runner(&name)),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_owned(),
                kind: "Role".to_owned(),
                name: names::runner(&name),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: names::runner(&name),
                namespace: sync.namespace(),
                ..Default::default()
            }]),
        };
        (sa, role, binding)
    })
}

/// The CA bundles of the source and the sink: each a volume, its mount and the variable naming
/// the file.
fn ca_bundles(spec: &DorisChangelogSyncSpec) -> Vec<(Volume, VolumeMount, EnvVar)> {
    [
        ca_bundle_mount(
            spec.source.tls.as_ref(),
            "source",
            dcs_crds::spec::SOURCE_CA_FILE_ENV,
        ),
        ca_bundle_mount(
            spec.sink.doris.as_ref().and_then(|d| d.tls.as_ref()),
            "sink",
            dcs_crds::spec::SINK_CA_FILE_ENV,
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The runner container's environment: credentials as Secret references, the CA bundles'
/// files, the checkpoint ConfigMap, the pod's namespace and address, the metrics address, then
/// `spec.runner.env`.
fn runner_env(
    sync: &DorisChangelogSync,
    defaults: &RunnerDefaults,
    ca_bundles: &[(Volume, VolumeMount, EnvVar)],
) -> Vec<EnvVar> {
    let spec = &sync.spec;
    let mut env = vec![
        secret_env(
            "DCS_SOURCE_USERNAME",
            &spec.source.credentials,
            &spec.source.credentials.username_key,
        ),
        secret_env(
            "DCS_SOURCE_PASSWORD",
            &spec.source.credentials,
            &spec.source.credentials.password_key,
        ),
    ];
    if let Some(doris) = &spec.sink.doris {
        env.push(secret_env(
            "DCS_SINK_USERNAME",
            &doris.credentials,
            &doris.credentials.username_key,
        ));
        env.push(secret_env(
            "DCS_SINK_PASSWORD",
            &doris.credentials,
            &doris.credentials.password_key,
        ));
    }
    env.extend(ca_bundles.iter().map(|(_, _, var)| var.clone()));
    env.push(EnvVar {
        name: "DCS_CHECKPOINT_CONFIGMAP".to_owned(),
        value: Some(names::checkpoint(&sync.name_any())),
        ..Default::default()
    });
    env.push(field_env("POD_NAMESPACE", "metadata.namespace"));
    env.push(field_env("POD_IP", "status.podIP"));
    // After POD_IP, which it may name; validation keeps spec.runner.env from setting it again.
    env.push(EnvVar {
        name: dcs_crds::validate::METRICS_ADDR_ENV.to_owned(),
        value: Some(defaults.metrics_addr.to_string()),
        ..Default::default()
    });
    env.extend(spec.runner.env.clone().unwrap_or_default());
    env
}

/// The runner container: its image, `run -f` the mounted manifest, its environment, its
/// metrics port and probes, its resources, restricted.
fn runner_container(
    sync: &DorisChangelogSync,
    defaults: &RunnerDefaults,
    ca_bundles: &[(Volume, VolumeMount, EnvVar)],
) -> Container {
    let spec = &sync.spec;
    let image = spec
        .runner
        .image
        .clone()
        .or_else(|| defaults.image.clone())
        .unwrap_or_else(default_runner_image);
    Container {
        name: "runner".to_owned(),
        image: Some(image),
        args: Some(vec![
            "run".to_owned(),
            "-f".to_owned(),
            format!("{CONFIG_DIR}/{CONFIG_KEY}"),
        ]),
        env: Some(runner_env(sync, defaults, ca_bundles)),
        ports: Some(vec![ContainerPort {
            name: Some(RUNNER_METRICS_PORT_NAME.to_owned()),
            container_port: i32::from(defaults.metrics_addr.port),
            protocol: Some("TCP".to_owned()),
            ..Default::default()
        }]),
        liveness_probe: Some(liveness_probe()),
        readiness_probe: Some(readiness_probe()),
        resources: Some(runner_resources(
            spec.runner.resources.as_ref(),
            defaults.resources.as_ref(),
        )),
        security_context: Some(restricted_container()),
        volume_mounts: Some(
            std::iter::once(VolumeMount {
                name: "config".to_owned(),
                mount_path: CONFIG_DIR.to_owned(),
                read_only: Some(true),
                ..Default::default()
            })
            .chain(ca_bundles.iter().map(|(_, mount, _)| mount.clone()))
            .collect(),
        ),
        ..Default::default()
    }
}

/// The runner's pod: `container`, the config hash that rolls it when the manifest changes, its
/// service account, placement, a restricted security context, the config and CA volumes.
fn pod_template(
    sync: &DorisChangelogSync,
    container: &Container,
    config_hash: &str,
    ca_bundles: &[(Volume, VolumeMount, EnvVar)],
    restart_policy: &str,
) -> PodTemplateSpec {
    let name = sync.name_any();
    let spec = &sync.spec;
    let mut annotations = spec.runner.pod_annotations.clone().unwrap_or_default();
    annotations.insert(CONFIG_HASH_ANNOTATION.to_owned(), config_hash.to_owned());
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&name)),
            annotations: Some(annotations),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container.clone()],
            restart_policy: Some(restart_policy.to_owned()),
            service_account_name: Some(
                spec.runner
                    .service_account_name
                    .clone()
                    .unwrap_or_else(|| names::runner(&name)),
            ),
            node_selector: spec.runner.node_selector.clone(),
            tolerations: spec.runner.tolerations.clone(),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(RUNNER_UID),
                run_as_group: Some(RUNNER_UID),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_owned(),
                    localhost_profile: None,
                }),
                ..Default::default()
            }),
            volumes: Some(
                std::iter::once(Volume {
                    name: "config".to_owned(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: names::config(&name),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .chain(ca_bundles.iter().map(|(volume, _, _)| volume.clone()))
                .collect(),
            ),
            ..Default::default()
        }),
    }
}

/// The workload: a Job for a bounded run (one runner at a time), else a Deployment of one
/// replica that never runs two (Recreate); `template` gives the pod for a restart policy.
fn workload(
    sync: &DorisChangelogSync,
    run: &Run,
    template: impl Fn(&str) -> PodTemplateSpec,
) -> Workload {
    let name = sync.name_any();
    if run.bounded {
        Workload::Job(Box::new(Job {
            metadata: meta(sync, names::runner(&name)),
            spec: Some(JobSpec {
                backoff_limit: Some(6),
                // One runner at a time: a Job's pods never overlap with parallelism 1.
                parallelism: Some(1),
                completions: Some(1),
                template: template("OnFailure"),
                ..Default::default()
            }),
            ..Default::default()
        }))
    } else {
        Workload::Deployment(Box::new(Deployment {
            metadata: meta(sync, names::runner(&name)),
            spec: Some(DeploymentSpec {
                replicas: Some(1),
                // Never two runners: the old pod is gone before the new one starts.
                strategy: Some(DeploymentStrategy {
                    type_: Some("Recreate".to_owned()),
                    rolling_update: None,
                }),
                selector: LabelSelector {
                    match_labels: Some(labels(&name)),
                    match_expressions: None,
                },
                template: template("Always"),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }
}

/// The Indexed Job of the shards and the Role that reaches their ConfigMaps (pure): the built
/// Job becomes `completionMode: Indexed` with `completions` and `parallelism` N and a back-off
/// per index (a shard restarts alone; the others run on); the runner's Role gets the shards'
/// ConfigMaps, which the shards write and the changelog runner reads.
pub fn adapt(objects: &mut RunnerObjects, sync_name: &str, run: Option<&ShardRun>) {
    let Some(run) = run else {
        return;
    };
    let n = i32::try_from(run.count).unwrap_or(1);
    if let Some((_, role, _)) = objects.rbac.as_mut()
        && let Some(rule) = role.rules.as_mut().and_then(|r| r.first_mut())
    {
        let checkpoint = names::checkpoint(sync_name);
        rule.resource_names
            .get_or_insert_default()
            .extend((0..run.count).map(|i| shard_configmap(&checkpoint, i)));
    }
    if let Workload::Job(job) = &mut objects.workload
        && let Some(spec) = job.spec.as_mut()
    {
        spec.completion_mode = Some("Indexed".to_owned());
        spec.completions = Some(n);
        spec.parallelism = Some(n);
        spec.backoff_limit = None;
        spec.backoff_limit_per_index = Some(BACKOFF_LIMIT_PER_INDEX);
    }
}

/// The shards' checkpoint ConfigMaps, empty, as the checkpoint ConfigMap is built (pure).
pub fn shard_configmaps(objects: &RunnerObjects, count: u32) -> Vec<ConfigMap> {
    let base = objects.checkpoint.name_any();
    (0..count)
        .map(|i| {
            let mut cm = objects.checkpoint.clone();
            cm.metadata.name = Some(shard_configmap(&base, i));
            cm
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::{plan::Plan, plan::plan, testing::observed};

    fn sync() -> DorisChangelogSync {
        let mut sync = DorisChangelogSync::new("orders", observed().spec);
        sync.metadata.namespace = Some("team".into());
        sync.metadata.uid = Some("uid-1".into());
        sync
    }

    fn run_for(sync: &DorisChangelogSync, generation: i64) -> Run {
        let mut o = observed();
        o.spec = sync.spec.clone();
        o.status.consumer_generation = Some(generation);
        match plan(&o) {
            Plan::Run(run) => run,
            other => panic!("{other:?}"),
        }
    }

    fn rr(yaml: &str) -> ResourceRequirements {
        serde_yaml::from_str(yaml).unwrap()
    }

    /// The operator's flags as the chart passes them.
    fn ops_defaults() -> RunnerDefaults {
        RunnerDefaults {
            image: Some("ops/runner:2".into()),
            resources: Some(rr(
                "{requests: {cpu: 1, memory: 1Gi}, limits: {memory: 2Gi}}",
            )),
            ..RunnerDefaults::default()
        }
    }

    fn runner_container(objects: &RunnerObjects) -> Container {
        let template = match &objects.workload {
            Workload::Deployment(d) => &d.spec.as_ref().unwrap().template,
            Workload::Job(j) => &j.spec.as_ref().unwrap().template,
        };
        template.spec.as_ref().unwrap().containers[0].clone()
    }

    fn deployment(objects: &RunnerObjects) -> &Deployment {
        match &objects.workload {
            Workload::Deployment(d) => d,
            Workload::Job(_) => panic!("expected a Deployment"),
        }
    }

    #[test]
    fn runner_pods_meet_pod_security_restricted() {
        let s = sync();
        for run in [run_for(&s, 0), {
            let mut r = run_for(&s, 0);
            r.bounded = true;
            r
        }] {
            let o = build(&s, &run, &RunnerDefaults::default());
            let template = match &o.workload {
                Workload::Deployment(d) => d.spec.as_ref().unwrap().template.clone(),
                Workload::Job(j) => j.spec.as_ref().unwrap().template.clone(),
            };
            let pod = template.spec.unwrap();
            let psc = pod.security_context.unwrap();
            assert_eq!(psc.run_as_non_root, Some(true));
            assert_eq!(psc.run_as_user, Some(65532));
            assert_eq!(psc.seccomp_profile.unwrap().type_, "RuntimeDefault");
            let sc = pod.containers[0].security_context.clone().unwrap();
            assert_eq!(sc.allow_privilege_escalation, Some(false));
            assert_eq!(sc.capabilities.unwrap().drop, Some(vec!["ALL".to_owned()]));
            assert_eq!(sc.read_only_root_filesystem, Some(true));
            assert_eq!(sc.privileged, None);
            // restricted allows only these volume types.
            for v in pod.volumes.unwrap() {
                assert!(
                    v.config_map.is_some()
                        || v.empty_dir.is_some()
                        || v.secret.is_some()
                        || v.projected.is_some(),
                    "{v:?}"
                );
            }
        }
    }

    #[test]
    fn resources_come_from_the_sync_then_the_operator_then_the_built_in_default() {
        let own = rr("{limits: {memory: 3Gi}}");
        let chart = rr("{requests: {cpu: 1, memory: 1Gi}, limits: {memory: 2Gi}}");
        assert_eq!(runner_resources(Some(&own), Some(&chart)), own);
        assert_eq!(runner_resources(Some(&own), None), own);
        assert_eq!(runner_resources(None, Some(&chart)), chart);
        assert_eq!(runner_resources(None, None), default_runner_resources());
        // Taken whole: the chart's requests do not join a sync's own limits.
        assert_eq!(runner_resources(Some(&own), Some(&chart)).requests, None);
        // `resources: {}` in a sync asks for none.
        let none = rr("{}");
        assert_eq!(runner_resources(Some(&none), Some(&chart)), none);
        assert_eq!(
            default_runner_resources(),
            rr("{requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 512Mi}}")
        );
        assert_eq!(
            dcs_crds::validate::validate_resources("default", &default_runner_resources()),
            vec![]
        );
    }

    #[test]
    fn the_built_pod_carries_the_chosen_resources() {
        let mut s = sync();
        let built = |s: &DorisChangelogSync, d: &RunnerDefaults| {
            runner_container(&build(s, &run_for(s, 0), d)).resources
        };
        assert_eq!(
            built(&s, &RunnerDefaults::default()),
            Some(default_runner_resources())
        );
        assert_eq!(built(&s, &ops_defaults()), ops_defaults().resources);
        s.spec.runner.resources = Some(rr("{requests: {memory: 300Mi}}"));
        assert_eq!(
            built(&s, &ops_defaults()),
            Some(rr("{requests: {memory: 300Mi}}"))
        );
        s.spec.startup.mode = StartupMode::Snapshot;
        let job = build(&s, &run_for(&s, 0), &ops_defaults());
        assert!(matches!(job.workload, Workload::Job(_)));
        assert_eq!(
            runner_container(&job).resources,
            Some(rr("{requests: {memory: 300Mi}}"))
        );
    }

    #[test]
    fn runners_are_probed_on_their_metrics_port() {
        let s = sync();
        let mut snapshot = s.clone();
        snapshot.spec.startup.mode = StartupMode::Snapshot;
        for (sync, objects) in [
            (&s, build(&s, &run_for(&s, 0), &RunnerDefaults::default())),
            (
                &snapshot,
                build(
                    &snapshot,
                    &run_for(&snapshot, 0),
                    &RunnerDefaults::default(),
                ),
            ),
        ] {
            let c = runner_container(&objects);
            let ports = c.ports.clone().unwrap();
            assert_eq!(ports.len(), 1, "{}", sync.name_any());
            assert_eq!(
                (
                    ports[0].name.as_deref(),
                    ports[0].container_port,
                    ports[0].protocol.as_deref()
                ),
                (Some("metrics"), 9464, Some("TCP"))
            );
            let describe = |p: &Probe| {
                let get = p.http_get.as_ref().unwrap();
                (
                    get.path.clone().unwrap(),
                    get.port.clone(),
                    p.initial_delay_seconds,
                    p.period_seconds,
                    p.timeout_seconds,
                    p.success_threshold,
                    p.failure_threshold,
                )
            };
            let port = IntOrString::String("metrics".into());
            assert_eq!(
                describe(c.liveness_probe.as_ref().unwrap()),
                (
                    "/healthz".into(),
                    port.clone(),
                    None,
                    Some(10),
                    Some(5),
                    Some(1),
                    Some(6)
                )
            );
            assert_eq!(
                describe(c.readiness_probe.as_ref().unwrap()),
                (
                    "/readyz".into(),
                    port,
                    None,
                    Some(10),
                    Some(5),
                    Some(1),
                    Some(3)
                )
            );
            // No startup probe: it would only delay liveness, which does not depend on Doris.
            assert_eq!(c.startup_probe, None);
        }
    }

    #[test]
    fn a_deployment_with_one_replica_recreate_and_owner() {
        let s = sync();
        let o = build(&s, &run_for(&s, 0), &RunnerDefaults::default());
        let d = deployment(&o);
        let spec = d.spec.as_ref().unwrap();
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(
            spec.strategy.as_ref().unwrap().type_.as_deref(),
            Some("Recreate")
        );
        let owner = &d.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("DorisChangelogSync", "orders", Some(true))
        );
        assert_eq!(
            d.metadata.labels.as_ref().unwrap()["dcs.dev/sync"],
            "orders"
        );
        assert_eq!(
            d.metadata.labels.as_ref().unwrap()["app.kubernetes.io/name"],
            "dcs-runner"
        );
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some("orders-runner"));
        let c = &pod.containers[0];
        assert_eq!(
            c.image.as_deref(),
            Some(format!("dcs-runner:{}", env!("CARGO_PKG_VERSION")).as_str())
        );
        assert_eq!(
            c.args.as_ref().unwrap(),
            &["run", "-f", "/etc/dcs/sync.yaml"]
        );
    }

    #[test]
    fn env_holds_only_references() {
        let s = sync();
        let o = build(&s, &run_for(&s, 0), &RunnerDefaults::default());
        let env = deployment(&o)
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .env
            .clone()
            .unwrap();
        let describe: Vec<String> = env
            .iter()
            .map(|e| match (&e.value, &e.value_from) {
                (Some(v), None) => format!("{}={v}", e.name),
                (None, Some(src)) => match (&src.secret_key_ref, &src.field_ref) {
                    (Some(s), None) => format!("{}<-secret {}/{}", e.name, s.name, s.key),
                    (None, Some(f)) => format!("{}<-field {}", e.name, f.field_path),
                    _ => panic!("{e:?}"),
                },
                _ => panic!("{e:?}"),
            })
            .collect();
        assert_eq!(
            describe,
            [
                "DCS_SOURCE_USERNAME<-secret src-creds/username",
                "DCS_SOURCE_PASSWORD<-secret src-creds/password",
                "DCS_SINK_USERNAME<-secret sink-creds/username",
                "DCS_SINK_PASSWORD<-secret sink-creds/password",
                "DCS_CHECKPOINT_CONFIGMAP=orders-checkpoint",
                "POD_NAMESPACE<-field metadata.namespace",
                "POD_IP<-field status.podIP",
                "DCS_METRICS_ADDR=0.0.0.0:9464",
            ]
        );
    }

    #[test]
    fn the_metrics_address_sets_the_env_and_the_container_port() {
        let s = sync();
        let defaults = RunnerDefaults {
            metrics_addr: RunnerMetricsAddr {
                host: "$(POD_IP)".into(),
                port: 19464,
            },
            ..RunnerDefaults::default()
        };
        let c = runner_container(&build(&s, &run_for(&s, 0), &defaults));
        let env = c.env.unwrap();
        let at = |name: &str| env.iter().position(|e| e.name == name).unwrap();
        assert_eq!(
            env[at("DCS_METRICS_ADDR")].value.as_deref(),
            Some("$(POD_IP):19464")
        );
        // Kubernetes expands $(POD_IP) only from variables defined before it.
        assert!(at("POD_IP") < at("DCS_METRICS_ADDR"));
        let ports = c.ports.unwrap();
        assert_eq!(
            (ports[0].name.as_deref(), ports[0].container_port),
            (Some("metrics"), 19464)
        );
        // The probes name the port, so they follow it.
        assert_eq!(
            c.liveness_probe.unwrap().http_get.unwrap().port,
            IntOrString::String("metrics".into())
        );
        // Whole: the objects with the default address, but for that variable and that port.
        let mut want = build(&s, &run_for(&s, 0), &RunnerDefaults::default());
        let Workload::Deployment(d) = &mut want.workload else {
            panic!("expected a Deployment")
        };
        let container = &mut d
            .spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0];
        for var in container.env.as_mut().unwrap() {
            if var.name == "DCS_METRICS_ADDR" {
                var.value = Some("$(POD_IP):19464".into());
            }
        }
        container.ports.as_mut().unwrap()[0].container_port = 19464;
        assert_eq!(build(&s, &run_for(&s, 0), &defaults), want);
    }

    #[test]
    fn the_role_allows_only_the_checkpoint_configmap() {
        let s = sync();
        let o = build(&s, &run_for(&s, 0), &RunnerDefaults::default());
        let (sa, role, binding) = o.rbac.unwrap();
        assert_eq!(sa.metadata.name.as_deref(), Some("orders-runner"));
        let rules = role.rules.unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["configmaps".to_owned()][..])
        );
        assert_eq!(
            rules[0].resource_names.as_deref(),
            Some(&["orders-checkpoint".to_owned()][..])
        );
        assert_eq!(rules[0].verbs, ["get", "update", "patch"]);
        assert_eq!(binding.subjects.unwrap()[0].name, "orders-runner");
        assert_eq!(o.checkpoint.data, None);
        assert_eq!(
            o.checkpoint.metadata.name.as_deref(),
            Some("orders-checkpoint")
        );
    }

    #[test]
    fn runner_overrides_are_applied() {
        let mut s = sync();
        s.spec.runner = serde_yaml::from_str(
            r#"
image: my/runner:1
serviceAccountName: custom
nodeSelector: {pool: data}
podAnnotations: {a: b}
env: [{name: RUST_LOG, value: debug}]
resources: {limits: {memory: 512Mi}}
"#,
        )
        .unwrap();
        let o = build(&s, &run_for(&s, 0), &ops_defaults());
        assert!(o.rbac.is_none());
        let t = &deployment(&o).spec.as_ref().unwrap().template;
        let pod = t.spec.as_ref().unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some("custom"));
        assert_eq!(pod.node_selector.as_ref().unwrap()["pool"], "data");
        assert_eq!(
            t.metadata.as_ref().unwrap().annotations.as_ref().unwrap()["a"],
            "b"
        );
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("my/runner:1"));
        assert_eq!(c.env.as_ref().unwrap().last().unwrap().name, "RUST_LOG");
        assert_eq!(c.resources.as_ref(), Some(&rr("{limits: {memory: 512Mi}}")));
        s.spec.runner.image = None;
        let o = build(&s, &run_for(&s, 0), &ops_defaults());
        let pod = deployment(&o)
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .clone()
            .unwrap();
        assert_eq!(pod.containers[0].image.as_deref(), Some("ops/runner:2"));
    }

    #[test]
    fn the_manifest_carries_the_active_consumer_and_a_change_rolls_the_runner() {
        let s = sync();
        let first = build(&s, &run_for(&s, 0), &RunnerDefaults::default());
        let manifest = &first.config.data.as_ref().unwrap()[CONFIG_KEY];
        let parsed = dcs_crds::from_manifest(manifest).unwrap();
        assert_eq!(parsed.consumer_id(), "orders");
        assert_eq!(parsed.spec.startup.mode, StartupMode::Initial);
        assert_eq!(parsed.metadata.annotations, None);
        let mut later = s.clone();
        later.spec.startup.mode = StartupMode::Latest;
        let reinit = build(&later, &run_for(&later, 1), &RunnerDefaults::default());
        let parsed =
            dcs_crds::from_manifest(&reinit.config.data.as_ref().unwrap()[CONFIG_KEY]).unwrap();
        assert_eq!(parsed.consumer_id(), "orders-r1");
        assert_eq!(parsed.spec.startup.mode, StartupMode::Initial);
        // The runner's directive to rebuild the sink, naming the consumer it replaces.
        assert_eq!(
            parsed.metadata.annotations,
            Some(std::collections::BTreeMap::from([(
                "dcs.dev/reinitialized-from".to_owned(),
                "orders".to_owned()
            )]))
        );
        let hash = |o: &RunnerObjects| {
            deployment(o)
                .spec
                .as_ref()
                .unwrap()
                .template
                .metadata
                .as_ref()
                .unwrap()
                .annotations
                .as_ref()
                .unwrap()[CONFIG_HASH_ANNOTATION]
                .clone()
        };
        assert_ne!(hash(&first), hash(&reinit));
        assert_eq!(
            hash(&first),
            hash(&build(&s, &run_for(&s, 0), &RunnerDefaults::default()))
        );
        // No secret name's value, only its name, anywhere in the config.
        assert!(!manifest.contains("password:"), "{manifest}");
    }

    #[test]
    fn offsets_consumer_id_is_rewritten_when_an_offset_table_is_used() {
        let mut s = sync();
        s.spec.offsets = Some(dcs_crds::OffsetsSpec {
            table: Some("ops.offsets".into()),
            consumer_id: Some("student".into()),
        });
        let o = build(&s, &run_for(&s, 2), &RunnerDefaults::default());
        let parsed = dcs_crds::from_manifest(&o.config.data.as_ref().unwrap()[CONFIG_KEY]).unwrap();
        assert_eq!(parsed.consumer_id(), "student-r2");
        assert_eq!(parsed.metadata.name.as_deref(), Some("orders"));
    }

    #[test]
    fn snapshot_mode_is_a_job() {
        let mut s = sync();
        s.spec.startup.mode = StartupMode::Snapshot;
        let o = build(&s, &run_for(&s, 0), &RunnerDefaults::default());
        let Workload::Job(job) = &o.workload else {
            panic!("expected a Job")
        };
        let spec = job.spec.as_ref().unwrap();
        assert_eq!(spec.parallelism, Some(1));
        assert_eq!(
            spec.template
                .spec
                .as_ref()
                .unwrap()
                .restart_policy
                .as_deref(),
            Some("OnFailure")
        );
        // Whole: the objects of the same run unbounded, with a Job of their pod (restarted on
        // failure) in place of the Deployment; nothing else differs.
        let unbounded = build(
            &s,
            &Run {
                bounded: false,
                ..run_for(&s, 0)
            },
            &RunnerDefaults::default(),
        );
        let Workload::Deployment(d) = &unbounded.workload else {
            panic!("expected a Deployment")
        };
        let mut template = d.spec.as_ref().unwrap().template.clone();
        template.spec.as_mut().unwrap().restart_policy = Some("OnFailure".into());
        let want = RunnerObjects {
            workload: Workload::Job(Box::new(Job {
                metadata: d.metadata.clone(),
                spec: Some(JobSpec {
                    backoff_limit: Some(6),
                    parallelism: Some(1),
                    completions: Some(1),
                    template,
                    ..Default::default()
                }),
                ..Default::default()
            })),
            ..unbounded.clone()
        };
        assert_eq!(o, want);
    }
}
