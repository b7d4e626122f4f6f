//! Relations between applications on machines, on the real control plane:
//! olm-operator in-process, and three agents as processes: `db` runs on pool
//! `dbs` (one machine), `web` on pool `webs` (two machines). Relating them
//! runs, on every unit, `-relation-created`, then `-joined` and `-changed`
//! for each remote unit, in Juju's order; what one side sets with
//! `relation-set` in a hook (its units' data, its leader's application data)
//! the other side reads with `relation-get` in its `-changed` hook. An agent
//! restarted with its state directory runs only the hooks it missed (a change
//! of remote data while it was down), never `-created` or `-joined` again.
//! Removing the relation runs `-departed` for each remote unit, then
//! `-broken`, and the web units' status follows (`blocked: needs a database`).
//! `kubectl olm status` shows the relation with its units and leaders.
//!
//! Every hook appends `<hook> <remote unit or ->` to `hooks.log` in its unit's
//! sandbox; the test reads those logs and the Machines' unit status.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    time::Duration,
};

use e2e::inprocess::OlmOperator;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams},
};
use olm_api::{
    model::{Databag, Relation},
    substrate::{Machine, MachinePool, UnitStatus, WorkloadState},
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};
use olm_testkit::{
    eventually, install_crds,
    objects::apply_json,
    process::{Process, binary, free_port},
    random_suffix, wait_for, with_namespace,
};
use serde_json::json;

/// The agents' Lease duration, for their machines and for leadership.
const LEASE_SECONDS: u64 = 30;

/// Appends the hook and its remote unit to hooks.log.
const LOG: &str = "echo \"$OLM_RS_HOOK ${OLM_RS_REMOTE_UNIT:--}\" >> hooks.log";

/// The hooks of `db` (endpoint `db`): each unit publishes where it listens,
/// the leader the database's name; `-changed` logs who uses it.
fn db_hooks() -> BTreeMap<String, String> {
    let created = format!(
        "#!/bin/sh\nset -e\n{LOG}\n\
         machine-agent hook relation-set host=\"$OLM_RS_MACHINE\" port=5432\n\
         echo \"own port $(machine-agent hook relation-get port db/$OLM_RS_MACHINE)\" >> hooks.log\n\
         if [ \"$(machine-agent hook is-leader)\" = True ]; then machine-agent hook relation-set --app database=main; fi\n"
    );
    let changed = format!(
        "#!/bin/sh\nset -e\n{LOG}\n\
         if [ -n \"$OLM_RS_REMOTE_UNIT\" ]; then user=$(machine-agent hook relation-get user); \
         echo \"user of $OLM_RS_REMOTE_UNIT: $user\" >> hooks.log; fi\n"
    );
    hooks("db", created, changed)
}

/// The hooks of `web` (endpoint `database`): each unit says who it is; once a
/// db unit's host and port arrive, the unit is active with them; without the
/// relation it is blocked.
fn web_hooks() -> BTreeMap<String, String> {
    let created = format!(
        "#!/bin/sh\nset -e\n{LOG}\n\
         ids=$(machine-agent hook relation-ids database)\necho \"ids $ids\" >> hooks.log\n\
         machine-agent hook relation-set user=\"$OLM_RS_MACHINE\"\n"
    );
    let changed = format!(
        "#!/bin/sh\nset -e\n{LOG}\n\
         if [ -z \"$OLM_RS_REMOTE_UNIT\" ]; then db=$(machine-agent hook relation-get --app database); \
         echo \"app database=$db\" >> hooks.log; exit 0; fi\n\
         host=$(machine-agent hook relation-get host)\nport=$(machine-agent hook relation-get port)\n\
         units=$(machine-agent hook relation-list | tr '\\n' ' ')\necho \"units $units\" >> hooks.log\n\
         if [ -n \"$host\" ]; then echo \"got $host:$port\" >> hooks.log; \
         machine-agent hook status-set active \"db at $host:$port\"; fi\n"
    );
    let mut hooks = hooks("database", created, changed);
    hooks.insert(
        "database-relation-broken".into(),
        format!("#!/bin/sh\nset -e\n{LOG}\nmachine-agent hook status-set blocked \"needs a database\"\n"),
    );
    hooks
}

/// Every lifecycle hook and relation hook of `endpoint` logs itself; `created`
/// and `changed` are given.
fn hooks(endpoint: &str, created: String, changed: String) -> BTreeMap<String, String> {
    let plain = format!("#!/bin/sh\n{LOG}\n");
    let mut hooks: BTreeMap<String, String> = [
        "install",
        "config-changed",
        "start",
        "leader-elected",
        "stop",
        "remove",
    ]
    .into_iter()
    .map(|h| (h.to_owned(), plain.clone()))
    .collect();
    for event in ["joined", "departed", "broken"] {
        hooks.insert(format!("{endpoint}-relation-{event}"), plain.clone());
    }
    hooks.insert(format!("{endpoint}-relation-created"), created);
    hooks.insert(format!("{endpoint}-relation-changed"), changed);
    hooks
}

/// A machine CSV of package `package` on `pool`, declaring `endpoints`.
fn csv(ns: &str, package: &str, pool: &str, endpoints: &str) -> serde_json::Value {
    json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("{package}.v1.0.0"), "namespace": ns,
                     "labels": {format!("operators.coreos.com/{package}.{ns}"): ""},
                     "annotations": {"olm-rs.dev/endpoints": endpoints}},
        "spec": {"displayName": package, "version": "1.0.0",
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "SingleNamespace", "supported": true},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": true}],
            "install": {"strategy": "machine", "spec": {
                "pool": pool, "hooks": {"configMap": format!("{package}-hooks")},
                "updateStatusIntervalSeconds": 3600}}}})
}

async fn setup(client: &Client, ns: &str) {
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), ns);
    apply_json(
        &groups,
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
               "metadata": {"name": "group", "namespace": ns}, "spec": {"targetNamespaces": [ns]}}),
    )
    .await;
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), ns);
    for pool in ["dbs", "webs"] {
        apply_json(
            &pools,
            json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
                   "metadata": {"name": pool, "namespace": ns},
                   "spec": {"agent": {"image": "olm-rs/machine-agent:dev", "version": "0.1.0"}}}),
        )
        .await;
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for (name, data) in [("db-hooks", db_hooks()), ("web-hooks", web_hooks())] {
        apply_json(
            &config_maps,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}),
        )
        .await;
    }
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    apply_json(&csvs, csv(ns, "db", "dbs", "provides: {db: {interface: pg}}")).await;
    apply_json(
        &csvs,
        csv(ns, "web", "webs", "requires: {database: {interface: pg}}"),
    )
    .await;
}

/// One agent process and where it keeps its state.
struct Agent {
    machine: String,
    csv: &'static str,
    state: PathBuf,
    process: Process,
}

impl Agent {
    fn start(ns: &str, pool: &str, node: &str, csv: &'static str) -> Agent {
        let state = std::env::temp_dir().join(format!("olm-rs-agent-rel-{pool}-{node}-{}", random_suffix()));
        std::fs::create_dir_all(&state).expect("a state directory");
        let process = spawn(ns, pool, node, &state);
        Agent {
            machine: format!("{pool}-{node}"),
            csv,
            state,
            process,
        }
    }

    /// Starts the agent again on its state directory.
    fn restart(&mut self, ns: &str) {
        let (pool, node) = self.machine.split_once('-').expect("<pool>-<node>");
        self.process = spawn(ns, pool, node, &self.state);
    }

    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(
            self.state
                .join("units")
                .join(self.csv)
                .join("sandbox")
                .join("hooks.log"),
        )
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
    }

    fn count(&self, line: &str) -> usize {
        self.log().iter().filter(|l| *l == line).count()
    }

    async fn unit(&self, machines: &Api<Machine>) -> Option<UnitStatus> {
        let machine = machines.get(&self.machine).await.ok()?;
        machine.status?.units?.into_iter().find(|u| u.csv == self.csv)
    }
}

fn spawn(ns: &str, pool: &str, node: &str, state: &Path) -> Process {
    let admin = free_port();
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG names the test cluster's kubeconfig");
    let args: Vec<String> = [
        "run",
        "--state-dir",
        &state.display().to_string(),
        "--namespace",
        ns,
        "--pool",
        pool,
        "--node-name",
        node,
        "--kubeconfig",
        &kubeconfig,
        "--admin-addr",
        &format!("127.0.0.1:{admin}"),
        "--lease-duration-seconds",
        &LEASE_SECONDS.to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    Process::spawn(
        &format!("machine-agent-{pool}-{node}"),
        &binary("machine-agent"),
        &args,
        Some(admin),
    )
}

/// Checks that the relation hooks in `log` follow Juju's order: none before
/// `start`; `-created` once before the others; each remote unit `-joined`
/// once, followed at once by its `-changed`; `-changed` of a unit only while
/// it is joined; `-departed` of joined units only; `-broken` last, once every
/// joined unit departed.
fn check_order(who: &str, log: &[String]) {
    let mut started = false;
    let mut created = false;
    let mut joined: BTreeSet<String> = BTreeSet::new();
    let mut expect_changed: Option<String> = None;
    for line in log
        .iter()
        .filter(|l| !l.contains(':') && !l.starts_with("units ") && !l.starts_with("ids "))
    {
        let (hook, unit) = line.split_once(' ').unwrap_or((line, "-"));
        let Some((_, event)) = hook.split_once("-relation-") else {
            started |= hook == "start";
            continue;
        };
        let ok = match event {
            _ if expect_changed.is_some() => event == "changed" && Some(unit) == expect_changed.as_deref(),
            "created" => started && !created,
            "joined" => created && joined.insert(unit.to_owned()),
            "changed" => created && (unit == "-" || joined.contains(unit)),
            "departed" => joined.remove(unit),
            "broken" => created && joined.is_empty(),
            _ => false,
        };
        assert!(ok, "{who}: {line} is out of Juju's order in {log:#?}");
        expect_changed = None;
        match event {
            "joined" => expect_changed = Some(unit.to_owned()),
            "created" => created = true,
            "broken" => created = false,
            _ => {}
        }
    }
}

/// `kubectl olm status` shows the relation, its units and each side's leader.
async fn status_shows_the_relation(client: &Client, ns: &str, db: &Agent, webs: &[Agent]) {
    let argv = ["status", "-n", ns, "--global-catalog-namespace", ns];
    let out = e2e::kubectl::kubectl_olm(client, &argv).await.ok();
    let line = out
        .lines()
        .find(|l| l.starts_with("r "))
        .unwrap_or_else(|| panic!("no relation r in {out}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        words[..5],
        ["r", "db:db", "web:database", "pg", "Related"],
        "{out}"
    );
    // One leader on each side, marked as `juju status` marks it.
    let mut units: Vec<String> = words[5..]
        .iter()
        .map(|u| u.trim_end_matches('*').to_owned())
        .collect();
    units.sort();
    let mut wanted: Vec<String> = webs.iter().map(|w| format!("web/{}", w.machine)).collect();
    wanted.push(format!("db/{}", db.machine));
    wanted.sort();
    assert_eq!(units, wanted, "{out}");
    assert!(words.contains(&format!("db/{}*", db.machine).as_str()), "{out}");
    assert_eq!(
        words
            .iter()
            .filter(|w| w.starts_with("web/") && w.ends_with('*'))
            .count(),
        1,
        "{out}"
    );
}

async fn csv_succeeded(client: &Client, ns: &str, name: &str) {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    wait_for(&csvs, name, "Succeeded", |c: Option<&ClusterServiceVersion>| {
        c.and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.phase == Some(CsvPhase::Succeeded))
    })
    .await;
}

#[tokio::test]
async fn related_units_run_relation_hooks_in_order_and_exchange_data() {
    let client = olm_testkit::client().await;
    install_crds(&client).await;
    with_namespace("relations", |client, ns| async move {
        let operator = OlmOperator::start(&client).await;
        setup(&client, &ns).await;
        let db = Agent::start(&ns, "dbs", "node-a", "db.v1.0.0");
        let mut webs = vec![
            Agent::start(&ns, "webs", "node-a", "web.v1.0.0"),
            Agent::start(&ns, "webs", "node-b", "web.v1.0.0"),
        ];
        csv_succeeded(&client, &ns, "db.v1.0.0").await;
        csv_succeeded(&client, &ns, "web.v1.0.0").await;

        // Related: every unit runs its relation hooks, and data crosses.
        let relations: Api<Relation> = Api::namespaced(client.clone(), &ns);
        apply_json(
            &relations,
            json!({"apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Relation",
                   "metadata": {"name": "r", "namespace": ns},
                   "spec": {"endpoints": [{"application": "web"}, {"application": "db"}]}}),
        )
        .await;
        let db_unit = format!("db/{}", db.machine);
        let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
        for web in &webs {
            eventually(
                &format!(
                    "{} got the db unit's host and port, and the db leader's database",
                    web.machine
                ),
                || async {
                    let log = web.log();
                    log.iter().any(|l| *l == format!("got {}:5432", db.machine))
                        && log.iter().any(|l| l == "app database=main")
                },
            )
            .await;
            let unit = web.unit(&machines).await.expect("the web unit");
            assert_eq!(unit.state, WorkloadState::Active);
            assert_eq!(unit.message, Some(format!("db at {}:5432", db.machine)));
            assert!(
                web.log().contains(&"ids database:r".to_owned()),
                "{:?}",
                web.log()
            );
            assert!(
                web.log().contains(&format!("units {db_unit} ")),
                "{:?}",
                web.log()
            );
        }
        eventually("the db unit read each web unit's user", || async {
            webs.iter().all(|web| {
                db.log()
                    .contains(&format!("user of web/{}: {}", web.machine, web.machine))
            })
        })
        .await;
        check_order(&db.machine, &db.log());
        for web in &webs {
            check_order(&web.machine, &web.log());
            assert_eq!(web.count("database-relation-created -"), 1, "{:?}", web.log());
            assert_eq!(web.count(&format!("database-relation-joined {db_unit}")), 1);
        }
        assert_eq!(db.count("db-relation-created -"), 1, "{:?}", db.log());
        assert_eq!(
            db.count("own port 5432"),
            1,
            "relation-get reads the unit's own write at once: {:?}",
            db.log()
        );
        status_shows_the_relation(&client, &ns, &db, &webs).await;

        // An agent restarted after the remote data changed while it was down
        // runs -changed, and neither -created nor -joined again.
        let restarted = &mut webs[1];
        restarted.process.terminate(Duration::from_secs(10));
        let bags: Api<Databag> = Api::namespaced(client.clone(), &ns);
        bags.patch_status(
            &format!("r.db.{}", db.machine),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"data": {"port": "6543"}}})),
        )
        .await
        .expect("the db unit's data changes");
        restarted.restart(&ns);
        let restarted = &webs[1];
        eventually(
            &format!("{} ran -changed for what it missed", restarted.machine),
            || async {
                restarted
                    .log()
                    .iter()
                    .any(|l| *l == format!("got {}:6543", db.machine))
            },
        )
        .await;
        assert_eq!(
            restarted.count("database-relation-created -"),
            1,
            "{:?}",
            restarted.log()
        );
        assert_eq!(restarted.count(&format!("database-relation-joined {db_unit}")), 1);

        // Removed: each remote unit departs, then the relation breaks.
        relations
            .delete("r", &DeleteParams::default())
            .await
            .expect("delete the Relation");
        eventually("every unit ran -broken", || async {
            db.count("db-relation-broken -") == 1
                && webs.iter().all(|w| w.count("database-relation-broken -") == 1)
        })
        .await;
        check_order(&db.machine, &db.log());
        for web in &webs {
            check_order(&web.machine, &web.log());
            assert_eq!(
                web.log().last().map(String::as_str),
                Some("database-relation-broken -")
            );
            assert_eq!(web.count(&format!("database-relation-departed {db_unit}")), 1);
            eventually(
                &format!("{} is blocked without a database", web.machine),
                || async {
                    web.unit(&machines).await.is_some_and(|u| {
                        u.state == WorkloadState::Blocked && u.message.as_deref() == Some("needs a database")
                    })
                },
            )
            .await;
        }
        for web in &webs {
            let departed = format!("db-relation-departed web/{}", web.machine);
            assert_eq!(db.count(&departed), 1, "{:?}", db.log());
        }
        for mut agent in webs.into_iter().chain([db]) {
            agent.process.terminate(Duration::from_secs(10));
        }
        operator.stop().await;
    })
    .await;
}
