//! The processes the chaos campaign runs and hurts: two leader-elected replicas of each operator
//! and the registry serving `catalogs/demo-bundles`.

use std::time::Duration;

use super::pressure::Meter;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use olm_testkit::{
    objects::{STEP, lease_holder},
    process::{Process, free_port},
    repo_root,
};

/// Which operator a replica runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// olm-operator.
    Olm,
    /// catalog-operator.
    Catalog,
}

impl Operator {
    /// Its binary's name, which is also its Lease's.
    pub fn name(self) -> &'static str {
        match self {
            Operator::Olm => "olm-operator",
            Operator::Catalog => "catalog-operator",
        }
    }
}

/// One replica: its operator, its letter, how often it was started, and its process.
pub struct Replica {
    /// The operator it runs.
    pub operator: Operator,
    letter: char,
    starts: u32,
    process: Option<Process>,
}

impl Replica {
    /// Its leader identity, new at each start, as a restarted pod's is.
    pub fn identity(&self) -> String {
        format!("{}-{}-{}", self.operator.name(), self.letter, self.starts)
    }
}

/// The operators' replicas and the registry, all in the namespace `home`.
pub struct Fleet {
    /// The campaign's namespace: Leases and the CatalogSource.
    pub home: String,
    /// Two replicas of each operator.
    pub replicas: Vec<Replica>,
    registry: Option<Process>,
    registry_port: u16,
    /// Log lines of requests the API server refused the replicas that were stopped.
    refusals: usize,
    /// The replicas' requests, as the API server's flow control counts them.
    pub pressure: Meter,
}

impl Fleet {
    /// Starts the registry and two replicas of each operator, and waits until they are ready.
    pub async fn start(home: &str) -> Fleet {
        let mut fleet = Fleet {
            home: home.to_owned(),
            replicas: Vec::new(),
            registry: None,
            registry_port: free_port(),
            refusals: 0,
            pressure: Meter::default(),
        };
        fleet.start_registry();
        for operator in [Operator::Catalog, Operator::Olm] {
            for letter in ['a', 'b'] {
                fleet.replicas.push(Replica {
                    operator,
                    letter,
                    starts: 0,
                    process: None,
                });
            }
        }
        for index in 0..fleet.replicas.len() {
            fleet.restart(index).await;
        }
        fleet
    }

    /// Where the registry listens.
    pub fn registry_address(&self) -> String {
        format!("127.0.0.1:{}", self.registry_port)
    }

    /// Starts the registry (again) on its port.
    pub fn start_registry(&mut self) {
        let catalog = repo_root().join("catalogs/demo-bundles");
        self.registry = Some(Process::registry("chaos-registry", &catalog, self.registry_port));
    }

    /// The registry's process id, while it runs.
    pub fn registry_pid(&self) -> Option<u32> {
        self.registry.as_ref().map(Process::pid)
    }

    /// Kills the registry outright.
    pub fn kill_registry(&mut self) {
        if let Some(mut registry) = self.registry.take() {
            registry.kill();
        }
    }

    /// Replica `index`'s process, while it runs.
    pub fn process(&mut self, index: usize) -> Option<&mut Process> {
        self.replicas[index].process.as_mut()
    }

    /// Stops replica `index`'s process (already killed or stopped), counting its refusals.
    pub fn forget(&mut self, index: usize) {
        if let Some(mut process) = self.replicas[index].process.take() {
            self.refusals += process.take_refusals().len();
        }
    }

    /// Starts replica `index` anew, and waits until it is ready.
    pub async fn restart(&mut self, index: usize) {
        self.forget(index);
        let home = self.home.clone();
        let replica = &mut self.replicas[index];
        replica.starts += 1;
        let identity = replica.identity();
        let operator = replica.operator;
        let process = match operator {
            Operator::Olm => Process::olm_operator(&identity, operator.name(), &home),
            Operator::Catalog => Process::catalog_operator(&identity, operator.name(), &home, None, &home),
        };
        if !process.wait_ready(STEP).await {
            println!(
                "  note: {identity} was not ready within {STEP:?}: {}",
                process.log_tail(5)
            );
        }
        replica.process = Some(process);
    }

    /// After an API server restart, whose authorizer refuses what RBAC grants until its caches
    /// fill: the refusals so far are counted, and no longer checked.
    pub fn count_refusals(&mut self) {
        let refused: usize = self
            .replicas
            .iter_mut()
            .filter_map(|r| r.process.as_mut())
            .map(|p| p.take_refusals().len())
            .sum();
        self.refusals += refused;
    }

    /// Whether replica `index` holds its operator's Lease now.
    pub async fn leads(&self, client: &Client, index: usize) -> bool {
        let leases: Api<Lease> = Api::namespaced(client.clone(), &self.home);
        let lease = leases
            .get_opt(self.replicas[index].operator.name())
            .await
            .ok()
            .flatten();
        lease_holder(lease.as_ref()) == Some(self.replicas[index].identity().as_str())
    }

    /// Stops everything; returns the log lines of requests the API server refused the replicas.
    pub fn stop(&mut self) -> usize {
        for index in 0..self.replicas.len() {
            self.forget(index);
        }
        self.kill_registry();
        self.refusals
    }
}

/// How long a stopped replica stays down before it is started again, at most.
pub const MAX_DOWN: Duration = Duration::from_secs(3);
