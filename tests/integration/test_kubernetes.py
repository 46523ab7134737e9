"""deploy/: the Kubernetes manifests and the container build file, checked
against each other, against the config in the ConfigMap and against the
real binary: every manifest parses; probes hit /readyz and /healthz on the
admin listener the config opens; container, Service and config agree on
ports; every file and environment variable the config names comes from a
mounted Secret/ConfigMap key that exists; the grace period covers preStop,
the drain and the metering flush of gateway/main.c; the binary's --check
accepts the ConfigMap's config; the image installs exactly the packages of
the libraries the binary links, and its smoke test passes."""

import base64
import glob
import json
import os
import re
import subprocess

import pytest

import gwtest

yaml = pytest.importorskip("yaml")  # python3-yaml (tests/lib/deps.sh)

DEPLOY = os.path.join(gwtest.REPO, "deploy")
K8S = os.path.join(DEPLOY, "kubernetes")


def manifests():
    docs = []
    for path in sorted(glob.glob(os.path.join(K8S, "**", "*.yaml"), recursive=True)):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is not None:
                    assert "kind" in doc and "apiVersion" in doc and doc["metadata"]["name"], (path, doc)
                    docs.append(doc)
    return docs


def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, (kind, [d["metadata"]["name"] for d in found])
    return found[0]


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def c_constant(path, name):
    with open(os.path.join(gwtest.REPO, path)) as f:
        m = re.search(r"#define %s (\d+)" % name, f.read())
    assert m, (path, name)
    return int(m.group(1))


@pytest.fixture(scope="module")
def k8s():
    docs = manifests()
    dep = one(docs, "Deployment")
    cm = one(docs, "ConfigMap")
    pod = dep["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    c = pod["containers"][0]
    args = c["args"]
    config_path = args[args.index("-c") + 1]
    volumes = {v["name"]: v for v in pod["volumes"]}
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}

    def source_of(path):
        """(volume, key) of the mount holding `path`."""
        for m in c["volumeMounts"]:
            mp = m["mountPath"].rstrip("/") + "/"
            if path.startswith(mp):
                return volumes[m["name"]], path[len(mp):], m
        raise AssertionError("%s is on no mounted volume" % path)

    vol, key, _ = source_of(config_path)
    assert vol["configMap"]["name"] == cm["metadata"]["name"]
    config = json.loads(cm["data"][key])
    return dict(docs=docs, dep=dep, pod=pod, c=c, cm=cm, config=config, config_path=config_path, secrets=secrets,
                volumes=volumes, source_of=source_of)


def test_probes_hit_the_admin_listener(k8s):
    c, config = k8s["c"], k8s["config"]
    ports = {p["name"]: p for p in c["ports"]}
    admin = config["admin"]["address"]
    assert admin.startswith("0.0.0.0:") or admin.startswith("[::]:"), "kubelet probes the pod IP: %s" % admin
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = c[probe]["httpGet"]
        assert get["path"] == path
        port = ports[get["port"]]["containerPort"] if isinstance(get["port"], str) else get["port"]
        assert port == port_of(admin), (probe, port, admin)


def test_ports_agree(k8s):
    c, config, docs = k8s["c"], k8s["config"], k8s["docs"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    tls = [port_of(l["address"]) for l in config["listen"] if l.get("tls", True)]
    plain = [port_of(l["address"]) for l in config["listen"] if not l.get("tls", True)]
    assert ports["https"] in tls and ports["http"] in plain, (ports, config["listen"])
    svc = one(docs, "Service")
    assert svc["spec"]["type"] == "LoadBalancer"
    by_port = {p["port"]: p for p in svc["spec"]["ports"]}
    assert set(by_port) == {443, 80}, by_port  # the admin port stays inside the cluster
    assert by_port[443]["targetPort"] == "https" and by_port[80]["targetPort"] == "http"
    assert all(p.get("protocol", "TCP") == "TCP" for p in svc["spec"]["ports"])  # L4: TLS ends in the gateway
    labels = k8s["dep"]["spec"]["template"]["metadata"]["labels"]
    for sel in (svc["spec"]["selector"], one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
                k8s["dep"]["spec"]["selector"]["matchLabels"]):
        assert all(labels.get(k) == v for k, v in sel.items()), (sel, labels)


def test_secrets_and_files_come_from_the_manifests(k8s):
    c, config, secrets, source_of = k8s["c"], k8s["config"], k8s["secrets"], k8s["source_of"]
    env = {e["name"]: e for e in c.get("env", [])}
    named_env = [v for section in config.values() if isinstance(section, dict)
                 for k, v in section.items() if k.endswith("_env")]
    assert named_env, "the config names no environment variable"
    for var in named_env:
        ref = env[var]["valueFrom"]["secretKeyRef"]
        assert ref["key"] in secrets[ref["name"]]["data"], (var, ref)
    files = [cert[k] for cert in config.get("tls", {}).get("certificates", []) for k in ("cert", "key")]
    files += [v for section in ("auth", "tls") for k, v in config.get(section, {}).items() if k.endswith("_file")]
    assert config["tls"]["ticket_keys_file"] in files  # TLS resumption across the fleet
    for path in files:
        vol, key, mount = source_of(path)
        assert mount.get("readOnly") is True
        secret = secrets[vol["secret"]["secretName"]]
        assert key in secret["data"], (path, secret["metadata"]["name"])
        assert vol["secret"].get("defaultMode", 0o644) & 0o007 == 0, "others must not read %s" % path
    # the keys the fleet shares: cookie secrets, share-link keys, TLS ticket keys
    keys = [vol["secret"]["secretName"] for vol in k8s["volumes"].values() if "secret" in vol]
    held = set().union(*(secrets[n]["data"] for n in keys))
    assert {"cookie-secrets", "link-keys", "ticket-keys", "tls.crt", "tls.key"} <= held, held
    # a read-only root: whatever the gateway writes is on a writable volume
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    vol, _, mount = source_of(config["metering"]["spill_file"])
    assert "emptyDir" in vol or "persistentVolumeClaim" in vol
    assert not mount.get("readOnly", False)
    assert config.get("log", {}).get("access") in (None, "-")


def test_grace_period_covers_the_drain(k8s):
    pod, c = k8s["pod"], k8s["c"]
    cmd = c["lifecycle"]["preStop"]["exec"]["command"]
    assert os.path.basename(cmd[0]) == "sleep"
    pre_stop = float(cmd[1])
    drain = c_constant("gateway/main.c", "DRAIN_MS") / 1000
    flush = c_constant("gateway/main.c", "METERING_FINAL_FLUSH_MS") / 1000
    exec_wait = c_constant("gateway/worker.c", "METERING_EXEC_WAIT_MS") / 1000
    need = pre_stop + drain + exec_wait + flush
    assert pod["terminationGracePeriodSeconds"] >= need, (pod["terminationGracePeriodSeconds"], need)
    assert pod["terminationGracePeriodSeconds"] <= need + 15  # no slack that would only slow rollouts


def test_runs_as_the_image_user(k8s):
    sc = k8s["pod"]["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0
    with open(os.path.join(DEPLOY, "Containerfile")) as f:
        text = f.read()
    user = re.findall(r"^USER (\d+)", text, re.M)
    assert user and int(user[-1].split(":")[0]) == sc["runAsUser"]
    assert k8s["c"]["securityContext"]["allowPrivilegeEscalation"] is False


def test_binary_accepts_the_configmap_config(k8s, tmp_path, certs):
    """The ConfigMap's config with its mounted paths moved into a temporary
    directory (test certificate, a cookie secrets file) and the Secrets'
    variables set: --check of the real binary accepts it."""
    config = json.loads(json.dumps(k8s["config"]))
    for cert in config["tls"]["certificates"]:
        cert["cert"], cert["key"] = certs["cert"], certs["key"]
    secrets_file = tmp_path / "cookie-secrets"
    secrets_file.write_text("a" * 64 + "\n")
    os.chmod(secrets_file, 0o600)
    config["auth"]["cookie_secrets_file"] = str(secrets_file)
    if "ticket_keys_file" in config["tls"]:
        ticket_keys = tmp_path / "ticket-keys"
        ticket_keys.write_text(base64.b64encode(os.urandom(80)).decode() + "\n")
        os.chmod(ticket_keys, 0o600)
        config["tls"]["ticket_keys_file"] = str(ticket_keys)
    config["metering"]["spill_file"] = str(tmp_path / "egress.spill")
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps(config))
    env = dict(os.environ)
    for section in config.values():
        if isinstance(section, dict):
            for k, v in section.items():
                if k.endswith("_env"):
                    env[v] = "x" * 32
    r = subprocess.run([gwtest.gateway_binary(), "-c", str(path), "--check"], capture_output=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr.decode()


def test_image_holds_the_binary_and_its_libraries(tmp_path):
    """Debian 12 both stages, non-root, and the runtime stage installs
    exactly the Debian packages of the shared libraries the binary links.
    The image itself cannot be built here (no container engine): its smoke
    test, deploy/container/smoke.sh, runs against the built binary."""
    with open(os.path.join(DEPLOY, "Containerfile")) as f:
        text = f.read()
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert len(froms) == 2 and re.search(r"^ARG DEBIAN=debian:12", text, re.M), froms
    runtime = text[list(re.finditer(r"^FROM .*$", text, re.M))[1].end():]
    installed = set(re.search(r"apt-get install -y -qq --no-install-recommends ([^;]+);", runtime).group(1).split())
    ldd = subprocess.run(["ldd", gwtest.gateway_binary()], capture_output=True, text=True, check=True).stdout
    needed = set()
    for line in ldd.splitlines():
        m = re.search(r"=> (/\S+)", line)
        if not m or re.search(r"/(libc|libm|libpthread|libdl|ld-linux[^/]*)\.so", m.group(1)):
            continue
        real = os.path.realpath(m.group(1))
        # usrmerge: dpkg knows each file under one of /lib and /usr/lib
        candidates = [m.group(1), real, re.sub(r"^/usr/lib/", "/lib/", real), re.sub(r"^/lib/", "/usr/lib/", real)]
        for path in candidates:
            pkg = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
            if pkg.returncode == 0:
                break
        assert pkg.returncode == 0, (candidates, pkg.stderr)
        needed.add(pkg.stdout.split(":")[0])
    if "libasan" in ldd:  # tests/run also runs this against the ASan+UBSan build: its runtimes are not the image's
        needed = {p for p in needed if not re.match(r"lib(asan|ubsan|lsan|gcc-s|stdc\+\+)", p)}
    assert needed == installed, (needed, installed)
    assert "COPY --from=build /build/gateway/lizard-gateway" in runtime
    assert re.search(r"^RUN .*--check", runtime, re.M)

    smoke = tmp_path / "smoke.json"
    with open(os.path.join(DEPLOY, "container", "smoke.json")) as f:
        cfg = json.load(f)
    cfg["metering"]["spill_file"] = str(tmp_path / "egress.spill")  # /var/lib/lizard-gateway in the image
    smoke.write_text(json.dumps(cfg))
    r = subprocess.run([os.path.join(DEPLOY, "container", "smoke.sh"), gwtest.gateway_binary()], capture_output=True,
                       env=dict(os.environ, SMOKE_CONFIG=str(smoke)), timeout=30)
    assert r.returncode == 0 and b": ok" in r.stdout, (r.stdout, r.stderr)
