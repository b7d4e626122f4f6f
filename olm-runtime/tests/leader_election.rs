//! Leader election against a real API server.
//!
//! These tests need a cluster: start the test control plane with
//! `hack/cluster.sh up`, `eval "$(hack/cluster.sh env)"`, then
//! `cargo test -p olm-runtime --test leader_election -- --ignored`.
//! Each test works in a namespace of its own (olm-testkit's `with_namespace`), deleted
//! afterwards, or kept and dumped when the test fails.

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU8, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use http::Request;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, Client,
    api::{DeleteParams, ObjectMeta},
    client::ClientBuilder,
};
use olm_runtime::{
    Leadership,
    leader::{ElectionTask, LeaderElector, LeaderState, LeaseConfig},
};
use olm_testkit::{poll_until, with_namespace};
use tokio::{sync::oneshot, time::Instant};
use tower::{BoxError, Layer, Service};

fn config(ns: &str, identity: &str, lease: u64, renew: u64, retry: u64) -> LeaseConfig {
    LeaseConfig {
        name: "test-lease".into(),
        namespace: ns.into(),
        identity: identity.into(),
        lease_duration: Duration::from_millis(lease),
        renew_deadline: Duration::from_millis(renew),
        retry_period: Duration::from_millis(retry),
    }
}

/// One elector with its stop switch.
struct Replica {
    leadership: Leadership,
    task: ElectionTask,
    stop: Option<oneshot::Sender<()>>,
}

impl Replica {
    fn start(client: Client, config: LeaseConfig) -> Self {
        let (stop, stopped) = oneshot::channel::<()>();
        let (leadership, task) = LeaderElector::new(client, config)
            .expect("valid config")
            .spawn(async {
                let _ = stopped.await;
            });
        Replica {
            leadership,
            task,
            stop: Some(stop),
        }
    }

    /// Stops the elector (it releases the lease) and waits for its task.
    async fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), self.task.finished())
            .await
            .expect("the election task ends after shutdown")
            .expect("the election task ends cleanly");
    }
}

async fn lease(client: &Client, ns: &str) -> Lease {
    Api::<Lease>::namespaced(client.clone(), ns)
        .get("test-lease")
        .await
        .expect("the lease exists")
}

#[tokio::test]
#[ignore = "needs a cluster: run with KUBECONFIG set and --ignored"]
async fn exactly_one_of_two_electors_leads() {
    with_namespace("runtime-le", |client, ns| async move {
        // A renew deadline long enough that a slow API server on a loaded machine
        // does not make the leader step down while this test watches.
        let a = Replica::start(client.clone(), config(&ns, "replica-a", 6000, 4000, 250));
        let b = Replica::start(client.clone(), config(&ns, "replica-b", 6000, 4000, 250));
        poll_until(Duration::from_secs(10), || {
            a.leadership.is_leader() || b.leadership.is_leader()
        })
        .await
        .expect("one replica acquires the free lease");

        // Over several renewals, exactly one leads at every instant.
        let until = Instant::now() + Duration::from_secs(3);
        let first = a.leadership.is_leader();
        while Instant::now() < until {
            let (la, lb) = (a.leadership.is_leader(), b.leadership.is_leader());
            assert!(la != lb, "exactly one replica must lead (a: {la}, b: {lb})");
            assert_eq!(la, first, "leadership must not move while the leader renews");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        let (leader, follower) = if first { (&a, &b) } else { (&b, &a) };
        let leader_id = if first { "replica-a" } else { "replica-b" };
        let spec = lease(&client, &ns).await.spec.expect("the lease has a spec");
        assert_eq!(spec.holder_identity.as_deref(), Some(leader_id));
        assert_eq!(spec.lease_duration_seconds, Some(6));
        assert_eq!(spec.lease_transitions, Some(1));
        assert!(spec.renew_time.is_some() && spec.acquire_time.is_some());
        assert_eq!(
            follower.leadership.state(),
            LeaderState::Following {
                holder: Some(leader_id.into())
            }
        );
        assert!(matches!(leader.leadership.state(), LeaderState::Leading { .. }));

        let (mut a, mut b) = (a, b);
        a.shut_down().await;
        b.shut_down().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster: run with KUBECONFIG set and --ignored"]
async fn a_released_lease_is_taken_over_within_a_few_retry_periods() {
    with_namespace("runtime-le", |client, ns| async move {
        // A long lease: a takeover faster than it proves the release, not expiry, did it.
        let retry = Duration::from_millis(500);
        let mut a = Replica::start(client.clone(), config(&ns, "replica-a", 20_000, 10_000, 500));
        poll_until(Duration::from_secs(10), || a.leadership.is_leader())
            .await
            .expect("a acquires the lease");
        let mut b = Replica::start(client.clone(), config(&ns, "replica-b", 20_000, 10_000, 500));
        poll_until(Duration::from_secs(10), || {
            b.leadership.state()
                == LeaderState::Following {
                    holder: Some("replica-a".into()),
                }
        })
        .await
        .expect("b sees a as the holder");

        a.shut_down().await;
        let released = Instant::now();
        assert!(!a.leadership.is_leader(), "a stops leading before it releases");
        let took_over = poll_until(Duration::from_secs(20), || b.leadership.is_leader())
            .await
            .expect("b takes the released lease");
        let delay = took_over - released;
        eprintln!("takeover after release: {delay:?} (retry period {retry:?})");
        assert!(delay <= 3 * retry, "b took {delay:?} to take a released lease");

        let spec = lease(&client, &ns).await.spec.expect("the lease has a spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("replica-b"));
        assert_eq!(spec.lease_transitions, Some(2));
        b.shut_down().await;
        let spec = lease(&client, &ns).await.spec.expect("the lease has a spec");
        assert_eq!(spec.holder_identity, None, "b released the lease on shutdown");
        assert_eq!(spec.lease_duration_seconds, Some(1));
    })
    .await;
}

/// How a [`Partition`] treats requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Link {
    Up = 0,
    /// Every request fails at once (connection refused).
    Failing = 1,
    /// Every request hangs forever (packets dropped).
    Hanging = 2,
}

/// A switch between a client and the API server.
#[derive(Clone, Default)]
struct Partition(Arc<AtomicU8>);

impl Partition {
    fn set(&self, link: Link) {
        self.0.store(link as u8, Ordering::SeqCst);
    }

    fn link(&self) -> Link {
        match self.0.load(Ordering::SeqCst) {
            1 => Link::Failing,
            2 => Link::Hanging,
            _ => Link::Up,
        }
    }
}

impl<S> Layer<S> for Partition {
    type Service = PartitionedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PartitionedService {
            inner,
            partition: self.clone(),
        }
    }
}

struct PartitionedService<S> {
    inner: S,
    partition: Partition,
}

impl<S, B> Service<Request<B>> for PartitionedService<S>
where
    S: Service<Request<B>>,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match self.partition.link() {
            Link::Up => {
                let response = self.inner.call(request);
                Box::pin(async move { response.await.map_err(Into::into) })
            }
            Link::Failing => Box::pin(async { Err("partitioned from the API server".into()) }),
            Link::Hanging => Box::pin(std::future::pending()),
        }
    }
}

async fn partitioned_client(partition: &Partition) -> Client {
    ClientBuilder::try_from(olm_testkit::config().await)
        .expect("a client from KUBECONFIG")
        .with_layer(partition)
        .build()
}

/// A leader cut off from the API server stops leading by its renew deadline, before the
/// standby may take over, and the two never lead at once.
async fn cut_off_leader_is_fenced(link: Link) {
    with_namespace("runtime-le", move |client, ns| async move {
        let (lease_ms, renew_ms, retry_ms) = (4000, 2000, 250);
        let renew_deadline = Duration::from_millis(renew_ms);
        let partition = Partition::default();
        let mut a = Replica::start(
            partitioned_client(&partition).await,
            config(&ns, "replica-a", lease_ms, renew_ms, retry_ms),
        );
        poll_until(Duration::from_secs(10), || a.leadership.is_leader())
            .await
            .expect("a acquires the lease");
        let mut b = Replica::start(
            client.clone(),
            config(&ns, "replica-b", lease_ms, renew_ms, retry_ms),
        );
        poll_until(Duration::from_secs(10), || {
            b.leadership.state()
                == LeaderState::Following {
                    holder: Some("replica-a".into()),
                }
        })
        .await
        .expect("b sees a as the holder");

        // Let a renew a few times, then cut it off.
        tokio::time::sleep(Duration::from_millis(3 * retry_ms)).await;
        assert!(a.leadership.is_leader());
        partition.set(link);
        let cut = Instant::now();

        // Each sample takes the time *before* asking, so that a `true` proves
        // leadership at or after that instant, however late this task runs on a
        // loaded machine: the checks below hold without timing slack.
        let mut a_last_leading = None;
        let mut b_won = None;
        let give_up = cut + Duration::from_secs(30);
        while b_won.is_none() && Instant::now() < give_up {
            let sampled = Instant::now();
            let (la, lb) = (a.leadership.is_leader(), b.leadership.is_leader());
            assert!(!(la && lb), "two leaders at once");
            if la {
                a_last_leading = Some(sampled);
            }
            if lb {
                b_won = Some(sampled);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let a_led = a_last_leading.map_or(Duration::ZERO, |t| t.saturating_duration_since(cut));
        let b_won = b_won.expect("b takes over").saturating_duration_since(cut);
        eprintln!("{link:?}: a was last seen leading {a_led:?} after the cut; b leads from {b_won:?}");
        // a's last renewal started before the cut: it must stop within the deadline.
        assert!(
            a_led < renew_deadline,
            "a still led {a_led:?} after the cut, past its renew deadline"
        );
        assert!(b_won > a_led, "b led while a still did");

        // The election task publishes the loss too, not only the clock.
        let published = poll_until(Duration::from_secs(5), || {
            matches!(a.leadership.state(), LeaderState::Following { .. })
        })
        .await;
        assert!(published.is_some(), "a's election task must publish the loss");

        // Healed, a finds b holding the lease and follows.
        partition.set(Link::Up);
        poll_until(Duration::from_secs(10), || {
            a.leadership.state()
                == LeaderState::Following {
                    holder: Some("replica-b".into()),
                }
        })
        .await
        .expect("a follows b after the partition heals");
        assert!(b.leadership.is_leader());
        a.shut_down().await;
        b.shut_down().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster: run with KUBECONFIG set and --ignored"]
async fn a_leader_whose_requests_hang_stops_leading_by_its_renew_deadline() {
    cut_off_leader_is_fenced(Link::Hanging).await;
}

#[tokio::test]
#[ignore = "needs a cluster: run with KUBECONFIG set and --ignored"]
async fn a_leader_whose_requests_fail_stops_leading_by_its_renew_deadline() {
    cut_off_leader_is_fenced(Link::Failing).await;
}

#[tokio::test]
#[ignore = "needs a cluster: run with KUBECONFIG set and --ignored"]
async fn a_crashed_leader_is_replaced_once_its_lease_expires() {
    with_namespace("runtime-le", |client, ns| async move {
        let lease_duration = Duration::from_secs(3);
        let mut a = Replica::start(client.clone(), config(&ns, "replica-a", 3000, 2000, 250));
        poll_until(Duration::from_secs(10), || a.leadership.is_leader())
            .await
            .expect("a acquires the lease");
        let mut b = Replica::start(client.clone(), config(&ns, "replica-b", 3000, 2000, 250));
        poll_until(Duration::from_secs(10), || {
            b.leadership.state()
                == LeaderState::Following {
                    holder: Some("replica-a".into()),
                }
        })
        .await
        .expect("b sees a as the holder");

        // A crash: the task dies without releasing the lease, and its death is observable.
        a.task.abort();
        let crashed = Instant::now();
        let ended = tokio::time::timeout(Duration::from_secs(5), a.task.finished()).await;
        assert!(
            matches!(ended, Ok(Err(_))),
            "an aborted election task reports an error: {ended:?}"
        );
        let took_over = poll_until(Duration::from_secs(20), || b.leadership.is_leader())
            .await
            .expect("b takes the expired lease");
        let delay = took_over - crashed;
        eprintln!("takeover after crash: {delay:?} (lease duration {lease_duration:?})");
        assert!(
            delay >= lease_duration - Duration::from_millis(250),
            "b took over before the lease expired"
        );
        assert!(
            !a.leadership.is_leader(),
            "a dead election cannot keep a replica leading"
        );
        b.shut_down().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster: run with KUBECONFIG set and --ignored"]
async fn only_the_leader_writes_through_the_fenced_writer() {
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    use olm_runtime::apply::{FIELD_MANAGER_OLM, Writer};

    with_namespace("runtime-le", |client, ns| async move {
        let mut a = Replica::start(client.clone(), config(&ns, "replica-a", 3000, 2000, 250));
        poll_until(Duration::from_secs(10), || a.leadership.is_leader()).await.expect("a acquires the lease");
        let mut b = Replica::start(client.clone(), config(&ns, "replica-b", 3000, 2000, 250));
        poll_until(Duration::from_secs(10), || {
            b.leadership.state() == LeaderState::Following { holder: Some("replica-a".into()) }
        })
        .await
        .expect("b sees a as the holder");
        let leader = Writer::new(a.leadership.clone(), FIELD_MANAGER_OLM);
        let standby = Writer::new(b.leadership.clone(), FIELD_MANAGER_OLM);

        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let desired = |value: &str| ConfigMap {
            metadata: ObjectMeta { name: Some("fenced".into()), ..ObjectMeta::default() },
            data: Some([("writer".to_owned(), value.to_owned())].into()),
            ..ConfigMap::default()
        };
        let written = leader.apply(&config_maps, "fenced", &desired("leader")).await.expect("the leader applies");
        let managers = written.metadata.managed_fields.unwrap_or_default();
        assert!(
            managers.iter().any(|m| m.manager.as_deref() == Some("olm-operator") && m.operation.as_deref() == Some("Apply")),
            "{managers:?}"
        );
        let refused = standby.apply(&config_maps, "fenced", &desired("standby")).await.unwrap_err();
        assert!(refused.is_not_leader(), "{refused}");
        let stored = config_maps.get("fenced").await.expect("the config map exists");
        assert_eq!(stored.data.unwrap_or_default().get("writer").map(String::as_str), Some("leader"));

        // A status apply owns status fields only, on the status subresource.
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let deployment: Deployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "fenced"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "fenced"}},
                "template": {
                    "metadata": {"labels": {"app": "fenced"}},
                    "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
                }
            }
        }))
        .expect("a valid Deployment");
        leader.apply(&deployments, "fenced", &deployment).await.expect("the leader applies the Deployment");
        let status = serde_json::json!({
            "conditions": [{"type": "Fenced", "status": "True", "reason": "Test", "message": "applied by the leader"}]
        });
        let written = leader.apply_status(&deployments, "fenced", &status).await.expect("the leader applies status");
        let managers = written.metadata.managed_fields.unwrap_or_default();
        assert!(
            managers.iter().any(|m| m.manager.as_deref() == Some("olm-operator")
                && m.subresource.as_deref() == Some("status")),
            "{managers:?}"
        );
        assert!(standby.apply_status(&deployments, "fenced", &status).await.unwrap_err().is_not_leader());

        assert!(standby.delete(&config_maps, "fenced", &DeleteParams::default()).await.unwrap_err().is_not_leader());
        assert!(leader.delete(&config_maps, "fenced", &DeleteParams::default()).await.expect("deleted"));
        assert!(!leader.delete(&config_maps, "fenced", &DeleteParams::default()).await.expect("already gone"));

        a.shut_down().await;
        b.shut_down().await;
    })
    .await;
}
