//! What ships beside the binary: the Kubernetes manifests (validated offline against the
//! Kubernetes schemas with `kubernetes-validate`, which `.ci/run` installs under
//! `target/pytools`), the Kustomize base listing them, and the Containerfile, whose
//! flags and environment must mean something to this `wasbox`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::runtime::{run_bounded, text, wasbox};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn manifests() -> Vec<PathBuf> {
    let dir = root().join("deploy/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| !p.ends_with("kustomization.yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn the_kustomize_base_lists_every_manifest() {
    let dir = root().join("deploy/kubernetes");
    let k: serde_json::Value =
        serde_norway::from_str(&std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap())
            .unwrap();
    let mut listed: Vec<PathBuf> = k["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| dir.join(r.as_str().unwrap()))
        .collect();
    listed.sort();
    assert_eq!(listed, manifests());
}

/// The proxy in Kubernetes is the one the fleet tests run: its ConfigMap is made from
/// `proxy/haproxy.cfg`, it names as many nodes as the StatefulSet runs, at their names under
/// the headless Service, and HAProxy itself accepts the configuration with its environment.
#[test]
fn the_proxy_routes_to_the_statefulset_s_nodes() {
    let dir = root().join("deploy/kubernetes");
    let yaml = |name: &str| -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        text.split("\n---\n")
            .map(|doc| serde_norway::from_str(doc).unwrap())
            .collect()
    };
    let k = &yaml("kustomization.yaml")[0];
    let generated = &k["configMapGenerator"][0];
    let cfg_file = generated["files"][0].as_str().unwrap();
    let cfg = std::fs::read_to_string(dir.join(cfg_file)).unwrap();
    let proxy = &yaml("proxy.yaml")[0];
    let pod = &proxy["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["configMap"]["name"], generated["name"]);
    let nodes = &yaml("statefulset.yaml")[0];
    let replicas = nodes["spec"]["replicas"].as_u64().unwrap() as usize;
    let service = nodes["spec"]["serviceName"].as_str().unwrap();
    let headless = yaml("service.yaml")
        .into_iter()
        .find(|s| s["metadata"]["name"] == service)
        .expect("the StatefulSet's Service");
    assert_eq!(headless["spec"]["clusterIP"], "None");
    let env: Vec<(String, String)> = pod["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for i in 0..replicas {
        let name = format!("wasbox-{i}");
        let addr = &env
            .iter()
            .find(|(k, _)| *k == format!("WASBOX_NODE_{i}"))
            .unwrap_or_else(|| panic!("no address for {name}"))
            .1;
        assert!(addr.starts_with(&format!("{name}.{service}.")), "{addr}");
        assert!(cfg.contains(&format!(
            "use_backend {name} if {{ var(txn.id) -m beg {name}- }}"
        )));
        assert!(cfg.contains(&format!("server {name} \"${{WASBOX_NODE_{i}}}\"")));
    }
    assert!(!cfg.contains(&format!("WASBOX_NODE_{replicas}")));
    let Some(haproxy) = crate::fleet::haproxy() else {
        return;
    };
    let mut cmd = std::process::Command::new(haproxy);
    cmd.arg("-c").arg("-f").arg(dir.join(cfg_file)).envs(env);
    let out = run_bounded(cmd, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn kubernetes_manifests_validate_against_the_schemas() {
    let tools = root().join("target/pytools");
    if !tools.join("kubernetes_validate").is_dir() {
        crate::support::skip(&format!(
            "kubernetes-validate is not installed in {} (.ci/run installs it)",
            tools.display()
        ));
        return;
    }
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-m", "kubernetes_validate", "--strict", "--quiet"])
        .args(manifests())
        .env("PYTHONPATH", &tools);
    let out = run_bounded(cmd, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // And the validator does refuse a wrong manifest (it would pass anything otherwise).
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    let nodes = std::fs::read_to_string(root().join("deploy/kubernetes/statefulset.yaml"))
        .unwrap()
        .replace("replicas: 3", "replicas: three");
    std::fs::write(&bad, nodes).unwrap();
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-m", "kubernetes_validate", "--strict", "--quiet"])
        .arg(&bad)
        .env("PYTHONPATH", &tools);
    assert!(!run_bounded(cmd, Duration::from_secs(120)).status.success());
}

/// The ConfigMap's node YAML, the StatefulSet's flags and environment, and the
/// Containerfile's flags and environment are all understood by this binary.
#[test]
fn manifests_and_containerfile_speak_this_wasbox() {
    let dir = tempfile::tempdir().unwrap();
    let cm: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(root().join("deploy/kubernetes/configmap.yaml")).unwrap(),
    )
    .unwrap();
    let yaml = dir.path().join("node.yaml");
    std::fs::write(&yaml, cm["data"]["node.yaml"].as_str().unwrap()).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken\n").unwrap();

    let dep: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(root().join("deploy/kubernetes/statefulset.yaml")).unwrap(),
    )
    .unwrap();
    let container = &dep["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let a = a.as_str().unwrap();
            match a {
                "/etc/wasbox/node.yaml" => yaml.to_string_lossy().into_owned(),
                "/run/secrets/wasbox/token" => token.to_string_lossy().into_owned(),
                other => other.to_string(),
            }
        })
        .collect();
    let mut cmd = wasbox();
    cmd.args(&args).arg("--print-config");
    for e in container["env"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap();
        assert!(
            wasbox::worker::config::KEYS
                .iter()
                .any(|(k, _)| wasbox::worker::config::env_name(k) == name),
            "{name} is no configuration key"
        );
        cmd.env(name, e["value"].as_str().unwrap_or("pod-name"));
    }
    let out = run_bounded(cmd, Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for want in [
        "listen: 0.0.0.0:12090",
        "state_dir: /var/lib/wasbox",
        "format: json",
        "id: pod-name",
        "node: pod-name",
        "drain_delay_seconds: 5",
    ] {
        assert!(shown.contains(want), "{want}: {shown}");
    }

    // The Containerfile: its ENV lines configure the server, its build runs --warm-cache.
    let file = std::fs::read_to_string(root().join("Containerfile")).unwrap();
    assert!(file.contains("wasbox serve --warm-cache"));
    let env_block = file
        .split("ENV ")
        .nth(1)
        .unwrap()
        .split("\nUSER")
        .next()
        .unwrap();
    let mut cmd = wasbox();
    cmd.args(["serve", "--print-config", "--token", "x"]);
    for pair in env_block.split_whitespace().filter(|w| w.contains('=')) {
        let (k, v) = pair.split_once('=').unwrap();
        cmd.env(k, v);
    }
    let out = run_bounded(cmd, Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for want in [
        "listen: 0.0.0.0:12090",
        "state_dir: /var/lib/wasbox",
        "cache_dir: /var/cache/wasbox",
        "format: json",
    ] {
        assert!(shown.contains(want), "{want}: {shown}");
    }
}

/// `--warm-cache` compiles every program into the cache (here the tests' shared cache, so
/// that CI compiles the guests once), pre-initialises the datasci python3 there, and exits
/// 0 saying where. (The shared cache has the snapshot already: the test asks for it first,
/// so that two makers do not race; `datasci_python_starts_from_its_snapshot` checks a
/// snapshot's work.)
#[test]
fn warm_cache_fills_the_cache_and_exits() {
    let cache = crate::support::runtime::datasci_cache_dir();
    let mut cmd = wasbox();
    cmd.args(["serve", "--warm-cache", "--token", "x"]);
    let out = run_bounded(cmd, Duration::from_secs(900));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&cache.display().to_string()),
        "{}",
        text(&out.stdout)
    );
    let compiled = walk(&cache);
    assert!(compiled >= 4, "{compiled} files in the cache");
    let snapshots = std::fs::read_dir(&cache)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("python-sci-preinit-")
        })
        .count();
    assert!(snapshots >= 1, "no pre-initialised python3 in the cache");
}

fn walk(p: &Path) -> usize {
    std::fs::read_dir(p)
        .map(|d| {
            d.map(|e| {
                let p = e.unwrap().path();
                if p.is_dir() { walk(&p) } else { 1 }
            })
            .sum()
        })
        .unwrap_or(0)
}
