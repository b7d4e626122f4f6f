//! The PackageManifest API's icon subresource, certificate renewal and
//! request-header CA reload, on a real control plane: catalog-operator serves
//! the API in-process and the API server reaches it through its aggregator
//! (an `ExternalName` Service naming 127.0.0.1, as in `package_manifests`).
//!
//! - The icon of a package is the default channel head's, with its media
//!   type, through the API server, for a user who may read PackageManifests
//!   through the aggregated `view` role; a package without one gets the
//!   default icon; an unknown package is not found.
//! - A certificate with a short lifetime is renewed twice while the API keeps
//!   answering: first with a new CA (the Secret was written before CA keys
//!   were kept), published beside the old one, then the leaf alone once the
//!   old CA has expired; the running server serves each new certificate.
//! - A second front proxy's CA added to
//!   `kube-system/extension-apiserver-authentication` is trusted without a
//!   restart, and no longer once removed; the API server's own front proxy
//!   goes on being served throughout.
//!
//! The APIService is cluster-wide: the tests take turns.

mod common;

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use base64::Engine;
use catalog_operator::{controllers::Options, run::controllers};
use e2e::{
    api_service::PackageApiService,
    inprocess::{Registry, demo_index},
};
use futures::FutureExt;
use k8s_openapi::{
    ByteString,
    api::{
        core::v1::{ConfigMap, Secret, Service},
        rbac::v1::ClusterRole,
    },
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use olm_api::{packages::PackageManifest, v1alpha1::CatalogSource};
use olm_packageserver::{
    self as packageserver,
    icon::{DEFAULT_ICON, DEFAULT_MEDIA_TYPE},
    tls::{self, ServingCert},
};
use olm_registry::server::RegistryIndex;
use olm_runtime::{Leadership, Parts, apply::FIELD_MANAGER_CATALOG};
use olm_testkit::{
    corpus_dir, install_crds,
    objects::{apply_json, catalog_is_ready},
    repo_root, wait_for, with_namespace,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::*;

/// One test at a time: they share the APIService.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const GROUP_VERSION: &str = "/apis/packages.operators.coreos.com/v1";

/// Polls `check` until it gives a value, failing with `what` and the last
/// reason after `timeout`.
async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match check().await {
            Ok(value) => return value,
            Err(reason) => reason,
        };
        assert!(
            Instant::now() < deadline,
            "{what}: not within {timeout:?}; last: {last}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// catalog-operator's controllers with the package server on a free port.
struct PackageServer {
    parts: Parts,
    task: tokio::task::JoinHandle<()>,
    port: u16,
    /// The APIService catalog-operator registers, removed when the server stops or the test fails.
    api_service: PackageApiService,
}

impl PackageServer {
    async fn start(client: &Client, ns: &str, cert_lifetime: Duration) -> PackageServer {
        install_crds(client).await;
        let port = olm_testkit::process::free_port();
        apply_json(
            &Api::<Service>::namespaced(client.clone(), ns),
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "packageserver"},
                "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
            }),
        )
        .await;
        let options = Options {
            global_catalog_namespace: ns.to_owned(),
            namespace: Some(ns.to_owned()),
            catalog_health_interval: Duration::from_secs(1),
            package_server: Some(packageserver::Config {
                address: format!("127.0.0.1:{port}").parse().unwrap(),
                service: "packageserver".into(),
                namespace: ns.to_owned(),
                service_port: port,
                secret: "packageserver-serving-cert".into(),
                register: true,
                cert_lifetime,
            }),
            ..Options::default()
        };
        let parts = Parts::new(client.clone(), Leadership::standalone(), FIELD_MANAGER_CATALOG).unwrap();
        let api_service = PackageApiService::of(ns);
        let task = tokio::spawn(controllers(&parts, options).unwrap());
        PackageServer {
            parts,
            task,
            port,
            api_service,
        }
    }

    /// Stops the controllers, then removes the APIService they registered.
    async fn stop(self) {
        self.parts.shutdown.trigger();
        let _ = tokio::time::timeout(Duration::from_secs(20), self.task).await;
        drop(self.api_service);
    }
}

/// Creates CatalogSource `name` for `registry` and waits until it is READY.
async fn catalog(client: &Client, ns: &str, name: &str, registry: &Registry) {
    let sources: Api<CatalogSource> = Api::namespaced(client.clone(), ns);
    create(&sources, &catalog_source(name, &registry.addr.to_string())).await;
    wait_for(&sources, name, "the CatalogSource is READY", catalog_is_ready).await;
}

/// Lists PackageManifests through the aggregator until `package` is among them.
async fn served(client: &Client, ns: &str, package: &str) {
    let api: Api<PackageManifest> = Api::namespaced(client.clone(), ns);
    eventually(
        &format!("PackageManifest {ns}/{package} is served"),
        Duration::from_secs(120),
        || async {
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            list.items
                .iter()
                .any(|m| m.metadata.name.as_deref() == Some(package))
                .then_some(())
                .ok_or_else(|| format!("{} PackageManifests", list.items.len()))
        },
    )
    .await;
}

/// A raw GET through the API server: status, Content-Type, ETag and body.
async fn raw_get(client: &Client, path: &str, if_none_match: Option<&str>) -> (u16, String, String, Vec<u8>) {
    let mut request = http::Request::get(path);
    if let Some(tag) = if_none_match {
        request = request.header(http::header::IF_NONE_MATCH, tag);
    }
    let request = request.body(Vec::new()).unwrap().map(kube::client::Body::from);
    let response = client.send(request).await.expect("the API server answers");
    let (content_type, etag) = {
        let header = |name: http::header::HeaderName| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        (header(http::header::CONTENT_TYPE), header(http::header::ETAG))
    };
    let code = response.status().as_u16();
    let body = response.into_body().collect_bytes().await.unwrap().to_vec();
    (code, content_type, etag, body)
}

/// A client acting as `user`.
async fn as_user(user: &str) -> Client {
    let mut config = olm_testkit::config().await;
    config.auth_info.impersonate = Some(user.to_owned());
    Client::try_from(config).unwrap()
}

/// The aggregated ClusterRoles of manifests/packageserver.yaml.
fn aggregated_roles() -> Vec<ClusterRole> {
    let text = std::fs::read_to_string(repo_root().join("manifests/packageserver.yaml")).unwrap();
    let roles: Vec<ClusterRole> = text
        .split("\n---")
        .filter_map(|doc| serde_saphyr::from_str::<Value>(doc).ok())
        .filter(|doc| doc["kind"] == "ClusterRole")
        .map(|doc| serde_json::from_value(doc).unwrap())
        .collect();
    assert!(
        !roles.is_empty(),
        "manifests/packageserver.yaml has an aggregated ClusterRole"
    );
    roles
}

/// The default channel head's first icon in a catalog that carries its CSVs.
fn head_icon(catalog: &olm_catalog::Catalog, package: &str) -> (String, Vec<u8>, String) {
    let default = catalog.package(package).unwrap().default_channel.clone().unwrap();
    let channel = catalog.channels_of(package).find(|c| c.name == default).unwrap();
    let head = olm_packageserver::describe::channel_head(channel).unwrap();
    let bundle = catalog.bundle(package, head).unwrap();
    let csv = bundle
        .properties
        .iter()
        .find_map(|p| match p {
            olm_catalog::Property::BundleObject(o) => {
                o.decode().ok().filter(|v| v["kind"] == "ClusterServiceVersion")
            }
            _ => None,
        })
        .expect("the head carries its CSV");
    let icon = &csv["spec"]["icon"][0];
    let data = base64::engine::general_purpose::STANDARD
        .decode(icon["base64data"].as_str().unwrap())
        .unwrap();
    let etag = format!("\"{package}.{default}.{head}\"");
    (icon["mediatype"].as_str().unwrap().to_owned(), data, etag)
}

#[tokio::test]
async fn icons_are_served_through_the_aggregator_to_viewers() {
    let _turn = SERIAL.lock().await;
    with_namespace("pkgicon", |client, ns| async move {
        let server = PackageServer::start(&client, &ns, Duration::from_secs(24 * 3600)).await;
        let demo = Registry::start(demo_index(false), "127.0.0.1:0".parse().unwrap()).await;
        let corpus = olm_catalog::fbc::load_dir(corpus_dir().join("fbc/v4.16-bundle-object/kube-green")).unwrap();
        let corpus_registry = Registry::start(
            Arc::new(RegistryIndex::new(corpus.clone())),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await;
        catalog(&client, &ns, "demo", &demo).await;
        catalog(&client, &ns, "corpus", &corpus_registry).await;
        served(&client, &ns, "kube-green").await;

        // Discovery lists the subresource as the API server lists a connecter's.
        let resources = client.list_api_group_resources("packages.operators.coreos.com/v1").await.unwrap();
        let icon = resources
            .resources
            .iter()
            .find(|r| r.name == "packagemanifests/icon")
            .expect("discovery lists packagemanifests/icon");
        assert_eq!((icon.kind.as_str(), icon.namespaced), ("PackageManifest", true));
        assert_eq!(icon.verbs, ["get"]);

        // The head's icon, its media type and tag; asked again with the tag: 304.
        let (media_type, data, etag) = head_icon(&corpus, "kube-green");
        let path = format!("{GROUP_VERSION}/namespaces/{ns}/packagemanifests/kube-green/icon");
        let (code, content_type, tag, body) = raw_get(&client, &path, None).await;
        assert_eq!((code, content_type.as_str(), tag.as_str()), (200, media_type.as_str(), etag.as_str()));
        assert!(body == data, "the icon's bytes ({} bytes, {} expected)", body.len(), data.len());
        let (code, _, _, body) = raw_get(&client, &path, Some(&etag)).await;
        assert_eq!((code, body.len()), (304, 0));

        // A demo package has no icon: the default one. An unknown package: 404.
        let demo_package = e2e::inprocess::demo_catalog(false).packages[0].name.clone();
        let path = format!("{GROUP_VERSION}/namespaces/{ns}/packagemanifests/{demo_package}/icon");
        let (code, content_type, _, body) = raw_get(&client, &path, None).await;
        assert_eq!((code, content_type.as_str()), (200, DEFAULT_MEDIA_TYPE));
        assert_eq!(body, DEFAULT_ICON.as_bytes());
        let missing = format!("{GROUP_VERSION}/namespaces/{ns}/packagemanifests/no-such-package/icon");
        let (code, _, _, body) = raw_get(&client, &missing, None).await;
        assert_eq!(code, 404);
        let status: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["reason"], "NotFound");

        // A user bound to `view` reads icons (the aggregated role); one bound to nothing does not.
        let roles: Api<ClusterRole> = Api::all(client.clone());
        for role in aggregated_roles() {
            roles
                .patch(
                    role.metadata.name.as_deref().unwrap(),
                    &PatchParams::apply("e2e").force(),
                    &Patch::Apply(&role),
                )
                .await
                .unwrap();
        }
        apply_json(
            &Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), &ns),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "icon-viewer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "icon-viewer"}],
            }),
        )
        .await;
        let viewer = as_user("icon-viewer").await;
        let path = format!("{GROUP_VERSION}/namespaces/{ns}/packagemanifests/kube-green/icon");
        eventually("a viewer reads the icon", Duration::from_secs(60), || async {
            match raw_get(&viewer, &path, None).await {
                (200, _, _, body) if body == data => Ok(()),
                (code, _, _, body) => Err(format!("{code}: {}", String::from_utf8_lossy(&body))),
            }
        })
        .await;
        let (code, _, _, _) = raw_get(&as_user("nobody-in-particular").await, &path, None).await;
        assert_eq!(code, 403, "a user without a binding may not read icons");

        server.stop().await;
        demo.stop().await;
        corpus_registry.stop().await;
    })
    .await;
}

/// The certificate in the package server's Secret.
async fn secret_cert(client: &Client, ns: &str) -> Option<ServingCert> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt("packageserver-serving-cert")
        .await
        .ok()??;
    tls::secret_cert(&secret)
}

/// Waits until the Secret holds a certificate other than `old`'s.
async fn renewed(client: &Client, ns: &str, old: &ServingCert) -> ServingCert {
    eventually("the certificate is renewed", Duration::from_secs(90), || async {
        match secret_cert(client, ns).await {
            Some(cert) if cert.cert_pem != old.cert_pem => Ok(cert),
            _ => Err("the same certificate".to_owned()),
        }
    })
    .await
}

/// Waits until the APIService's caBundle is `ca_pem`.
async fn ca_bundle_is(client: &Client, ca_pem: &str) {
    let services: Api<APIService> = Api::all(client.clone());
    eventually(
        "the APIService trusts the new CA bundle",
        Duration::from_secs(30),
        || async {
            let service = services
                .get(olm_api::packages::API_SERVICE)
                .await
                .map_err(|e| e.to_string())?;
            let bundle = service
                .spec
                .and_then(|s| s.ca_bundle)
                .unwrap_or(ByteString(Vec::new()));
            (bundle.0 == ca_pem.as_bytes())
                .then_some(())
                .ok_or_else(|| "another caBundle".to_owned())
        },
    )
    .await;
}

/// A TLS connection to the package server, trusting `ca_pem`, with an
/// optional client certificate (PEM certificate and key).
async fn connect(
    port: u16,
    ns: &str,
    ca_pem: &str,
    client_cert: Option<(&str, &str)>,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(ca.unwrap()).unwrap();
    }
    let builder =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
    let config = match client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from(format!("packageserver.{ns}.svc")).unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())
}

/// Waits until the server presents `cert`'s certificate (trusted by its CA bundle).
async fn serves(port: u16, ns: &str, cert: &ServingCert) {
    let expected = CertificateDer::from_pem_slice(cert.cert_pem.as_bytes()).unwrap();
    eventually(
        "the server presents the new certificate",
        Duration::from_secs(30),
        || async {
            let stream = connect(port, ns, &cert.ca_pem, None).await?;
            let presented = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first().cloned());
            (presented.as_ref() == Some(&expected))
                .then_some(())
                .ok_or_else(|| "the previous certificate".to_owned())
        },
    )
    .await;
}

/// A CA and a serving certificate valid for the same `lifetime`, without the
/// CA's key: what catalog-operator wrote before it kept CA keys.
fn old_format_cert(hosts: &[String], lifetime: Duration) -> ServingCert {
    let now = time::OffsetDateTime::now_utc();
    let (not_before, not_after) = (now - time::Duration::seconds(3), now + lifetime);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, tls::CA_NAME);
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    (ca.not_before, ca.not_after) = (not_before, not_after);
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(hosts.to_vec()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, hosts[0].as_str());
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    (params.not_before, params.not_after) = (not_before, not_after);
    let cert = params.signed_by(&key, &issuer).unwrap();
    ServingCert {
        ca_pem,
        ca_key_pem: None,
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

#[tokio::test]
async fn the_serving_certificate_is_renewed_while_the_api_answers() {
    let _turn = SERIAL.lock().await;
    with_namespace("pkgcert", |client, ns| async move {
        // A 30-second certificate in a Secret of the format written before CA
        // keys were kept: its renewal needs a new CA.
        let lifetime = Duration::from_secs(30);
        let old = old_format_cert(&tls::service_hosts("packageserver", &ns), lifetime);
        let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
        let secret = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("packageserver-serving-cert".into()),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(
                [
                    ("ca.crt".to_owned(), bytes(&old.ca_pem)),
                    ("tls.crt".to_owned(), bytes(&old.cert_pem)),
                    ("tls.key".to_owned(), bytes(&old.key_pem)),
                ]
                .into(),
            ),
            ..Secret::default()
        };
        Api::<Secret>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        let server = PackageServer::start(&client, &ns, lifetime).await;
        let demo = Registry::start(demo_index(false), "127.0.0.1:0".parse().unwrap()).await;
        catalog(&client, &ns, "demo", &demo).await;
        let package = e2e::inprocess::demo_catalog(false).packages[0].name.clone();
        served(&client, &ns, &package).await;

        // First renewal: a new CA with its key kept, the old CA trusted beside it.
        let first = renewed(&client, &ns, &old).await;
        assert!(first.ca_key_pem.is_some(), "the new CA's key is kept");
        let cas: Vec<String> = olm_certs::bundle_validities(&first.ca_pem)
            .into_iter()
            .map(|(pem, _)| pem)
            .collect();
        let old_ca = olm_certs::bundle_validities(&old.ca_pem).remove(0).0;
        assert_eq!(cas.len(), 2, "the new CA and the old one");
        assert_eq!(cas[1], old_ca);
        ca_bundle_is(&client, &first.ca_pem).await;
        serves(server.port, &ns, &first).await;
        served(&client, &ns, &package).await;

        // Second renewal: the leaf alone, signed by the kept CA; the old CA,
        // expired with the first certificate, leaves the bundle.
        let second = renewed(&client, &ns, &first).await;
        let cas_now: Vec<String> = olm_certs::bundle_validities(&second.ca_pem)
            .into_iter()
            .map(|(pem, _)| pem)
            .collect();
        assert_eq!(cas_now, [cas[0].clone()], "only the kept CA");
        assert_eq!(second.ca_key_pem, first.ca_key_pem);
        let old_leaf = olm_certs::bundle_validities(&old.cert_pem)[0].1.unwrap();
        assert!(
            time::OffsetDateTime::now_utc() > old_leaf.not_after,
            "the first certificate has expired"
        );
        ca_bundle_is(&client, &second.ca_pem).await;
        serves(server.port, &ns, &second).await;
        served(&client, &ns, &package).await;

        server.stop().await;
        demo.stop().await;
    })
    .await;
}

/// A CA and a client certificate it signed for `name`: (CA, certificate, key), PEM.
fn second_front_proxy(name: &str) -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "e2e-second-front-proxy-ca");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).unwrap();
    (ca_pem, cert.pem(), key.serialize_pem())
}

/// The status code of a list asked directly of the server with a client
/// certificate, or why there is none.
async fn direct_list(port: u16, ns: &str, trust: &str, cert: &str, key: &str) -> Result<u16, String> {
    let mut stream = connect(port, ns, trust, Some((cert, key))).await?;
    let request = format!(
        "GET {GROUP_VERSION}/namespaces/{ns}/packagemanifests HTTP/1.1\r\nHost: packageserver\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&response);
    text.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status line in {text:?}"))
}

/// Sets the request-header CA bundle the cluster publishes.
async fn set_request_header_ca(client: &Client, bundle: String) {
    Api::<ConfigMap>::namespaced(client.clone(), tls::AUTHENTICATION_NAMESPACE)
        .patch(
            tls::AUTHENTICATION_CONFIGMAP,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"requestheader-client-ca-file": bundle}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_new_request_header_ca_is_read_without_a_restart() {
    let _turn = SERIAL.lock().await;
    with_namespace("pkgfront", |client, ns| async move {
        let server = PackageServer::start(&client, &ns, Duration::from_secs(24 * 3600)).await;
        let demo = Registry::start(demo_index(false), "127.0.0.1:0".parse().unwrap()).await;
        catalog(&client, &ns, "demo", &demo).await;
        let package = e2e::inprocess::demo_catalog(false).packages[0].name.clone();
        served(&client, &ns, &package).await;
        let trust = secret_cert(&client, &ns)
            .await
            .expect("the serving certificate")
            .ca_pem;

        let original = Api::<ConfigMap>::namespaced(client.clone(), tls::AUTHENTICATION_NAMESPACE)
            .get(tls::AUTHENTICATION_CONFIGMAP)
            .await
            .unwrap();
        let front_proxy = tls::front_proxy_of(&original).unwrap();
        let name = front_proxy
            .allowed_names
            .first()
            .cloned()
            .unwrap_or_else(|| "front-proxy-client".into());
        let (second_ca, cert, key) = second_front_proxy(&name);
        let refused = direct_list(server.port, &ns, &trust, &cert, &key).await;
        assert!(
            refused != Ok(200),
            "a CA the cluster does not publish is refused: {refused:?}"
        );

        // The cluster publishes a second front proxy's CA beside its own; the
        // ConfigMap is put back whatever happens.
        let added = format!("{}\n{second_ca}", front_proxy.ca_pem.trim_end());
        let port = server.port;
        let (ns2, trust2, cert2, key2, client2, package2) = (
            ns.clone(),
            trust.clone(),
            cert.clone(),
            key.clone(),
            client.clone(),
            package.clone(),
        );
        let outcome = tokio::spawn(async move {
            set_request_header_ca(&client2, added).await;
            eventually(
                "the second front proxy is trusted",
                Duration::from_secs(30),
                || {
                    direct_list(port, &ns2, &trust2, &cert2, &key2).map(|r| match r {
                        Ok(200) => Ok(()),
                        other => Err(format!("{other:?}")),
                    })
                },
            )
            .await;
            served(&client2, &ns2, &package2).await;
        })
        .await;
        set_request_header_ca(&client, front_proxy.ca_pem.clone()).await;
        if let Err(e) = outcome {
            std::panic::resume_unwind(e.into_panic());
        }

        // And no longer once the cluster drops it.
        eventually(
            "the second front proxy is refused again",
            Duration::from_secs(30),
            || {
                direct_list(port, &ns, &trust, &cert, &key).map(|r| match r {
                    Ok(200) => Err("200".to_owned()),
                    _ => Ok(()),
                })
            },
        )
        .await;
        served(&client, &ns, &package).await;

        server.stop().await;
        demo.stop().await;
    })
    .await;
}
