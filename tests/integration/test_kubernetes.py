"""deploy/: the Kubernetes manifests and the container build file, checked
against each other, against the config in the ConfigMap and against the
real binary: every manifest parses; the pods meet Pod Security "restricted"
and carry no service-account token; the spill file is on a per-pod volume
claim, never an emptyDir; the NetworkPolicy opens exactly the listeners'
ports and reaches only Redis and the microVM network; the HPA scales the
StatefulSet and fits the PodDisruptionBudget; Prometheus finds the admin
port; the stop fits the engines' default 10 s; probes hit /readyz and /healthz on the
admin listener the config opens; container, Service and config agree on
ports; every file and environment variable the config names comes from a
mounted Secret/ConfigMap key that exists; the grace period covers preStop,
the drain and the metering flush of gateway/main.c; the binary's --check
accepts the ConfigMap's config; the image installs exactly the packages of
the libraries the binary links, and its smoke test passes; the
proxy-protocol overlay is the base's config with PROXY protocol listeners
and a Service that turns it on at the balancer."""

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
    """Every object of deploy/kubernetes (the kustomize base and secrets/);
    kustomization files and overlays (patches) are not objects."""
    docs = []
    for path in sorted(glob.glob(os.path.join(K8S, "**", "*.yaml"), recursive=True)):
        if os.path.basename(path) == "kustomization.yaml" or os.path.join(K8S, "overlays") in path:
            continue
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
    dep = one(docs, "StatefulSet")
    cm = one(docs, "ConfigMap")
    pod = dep["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    c = pod["containers"][0]
    args = c["args"]
    config_path = args[args.index("-c") + 1]
    volumes = {v["name"]: v for v in pod["volumes"]}
    for claim in dep["spec"].get("volumeClaimTemplates", []):  # a volume claim per pod
        volumes[claim["metadata"]["name"]] = {"name": claim["metadata"]["name"], "persistentVolumeClaim": claim}
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
    svc = one([d for d in docs if d["kind"] == "Service" and d["spec"].get("type") == "LoadBalancer"], "Service")
    assert svc["spec"]["type"] == "LoadBalancer"
    by_port = {p["port"]: p for p in svc["spec"]["ports"]}
    assert set(by_port) == {443, 80}, by_port  # the admin port stays inside the cluster
    assert by_port[443]["targetPort"] == "https" and by_port[80]["targetPort"] == "http"
    assert all(p.get("protocol", "TCP") == "TCP" for p in svc["spec"]["ports"])  # L4: TLS ends in the gateway
    labels = k8s["dep"]["spec"]["template"]["metadata"]["labels"]
    for sel in (svc["spec"]["selector"], one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
                one(docs, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"],
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
    assert "persistentVolumeClaim" in vol  # not an emptyDir: spilled counts outlive the pod
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


def test_pod_security_restricted(k8s):
    """Pod Security Standards, "restricted": what an admission controller
    enforcing it checks, on the pod and on the container."""
    pod, c = k8s["pod"], k8s["c"]
    psc, csc = pod["securityContext"], c["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 10001
    for sc in (psc, csc):
        assert sc.get("seccompProfile", {"type": "RuntimeDefault"})["type"] == "RuntimeDefault"
    assert psc["seccompProfile"]["type"] == "RuntimeDefault"
    assert csc["allowPrivilegeEscalation"] is False
    assert csc["readOnlyRootFilesystem"] is True
    assert csc["capabilities"]["drop"] == ["ALL"] and not csc["capabilities"].get("add")
    assert not csc.get("privileged", False) and "hostNetwork" not in pod and "hostPID" not in pod
    assert all("hostPath" not in v for v in k8s["volumes"].values())
    assert pod["automountServiceAccountToken"] is False  # the gateway never calls the API server
    spread = {t["topologyKey"] for t in pod["topologySpreadConstraints"]}
    assert {"topology.kubernetes.io/zone", "kubernetes.io/hostname"} <= spread, spread


def test_spill_directory_is_a_volume_claim(k8s):
    """Nothing under the spill file's directory is an emptyDir (deleted with
    the pod); the claim is per pod and kept when pods go away."""
    config, c, dep = k8s["config"], k8s["c"], k8s["dep"]
    spill_dir = os.path.dirname(config["metering"]["spill_file"]).rstrip("/") + "/"
    for m in c["volumeMounts"]:
        mp = m["mountPath"].rstrip("/") + "/"
        if spill_dir.startswith(mp) or mp.startswith(spill_dir):
            assert "emptyDir" not in k8s["volumes"][m["name"]], m
    vol, _, _ = k8s["source_of"](config["metering"]["spill_file"])
    claim = vol["persistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert dep["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}


def test_network_policy(k8s):
    """Ingress: exactly the listeners' ports and the admin port. Egress: the
    Redis ports on the network of the sentinels, and the microVM network,
    which equals upstream.allowed_networks (and holds no Redis address)."""
    import ipaddress

    config, docs = k8s["config"], k8s["docs"]
    np_ = one(docs, "NetworkPolicy")["spec"]
    assert set(np_["policyTypes"]) == {"Ingress", "Egress"}
    ingress = {p["port"] for rule in np_["ingress"] for p in rule["ports"]}
    listeners = {port_of(l["address"]) for l in config["listen"]} | {port_of(config["admin"]["address"])}
    assert ingress == listeners, (ingress, listeners)
    admin_rule = [r for r in np_["ingress"] if any(p["port"] == port_of(config["admin"]["address"]) for p in r["ports"])]
    assert len(admin_rule) == 1 and admin_rule[0].get("from"), "the admin port is for the cluster only"
    redis_rules = [r for r in np_["egress"] if r.get("ports")]
    vm_rules = [r for r in np_["egress"] if not r.get("ports")]
    redis_nets = [ipaddress.ip_network(t["ipBlock"]["cidr"]) for r in redis_rules for t in r["to"]]
    for sentinel in config["redis"]["sentinels"]:
        host, port = sentinel.rsplit(":", 1)
        assert any(ipaddress.ip_address(host) in n for n in redis_nets), sentinel
        assert any(p["port"] == int(port) for r in redis_rules for p in r["ports"]), sentinel
    vm_nets = {t["ipBlock"]["cidr"] for r in vm_rules for t in r["to"]}
    assert vm_nets == set(config["upstream"]["allowed_networks"]), (vm_nets, config["upstream"]["allowed_networks"])
    for vm in vm_nets:
        assert not any(ipaddress.ip_network(vm).overlaps(n) for n in redis_nets), vm
        # the microVM network only: not a whole private range that also holds the cluster
        assert ipaddress.ip_network(vm).prefixlen >= 12, vm


def test_hpa_scales_the_statefulset_and_fits_the_pdb(k8s):
    docs, dep, c = k8s["docs"], k8s["dep"], k8s["c"]
    hpa = one(docs, "HorizontalPodAutoscaler")["spec"]
    ref = hpa["scaleTargetRef"]
    assert (ref["kind"], ref["name"]) == ("StatefulSet", dep["metadata"]["name"])
    assert [m["resource"]["name"] for m in hpa["metrics"]] == ["cpu"]
    assert 0 < hpa["metrics"][0]["resource"]["target"]["averageUtilization"] < 100
    assert "cpu" in c["resources"]["requests"], "a CPU utilization target needs a CPU request"
    pdb = one(docs, "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1 and hpa["minReplicas"] >= 2, "a drain must never take the last gateway"
    assert hpa["minReplicas"] <= dep["spec"]["replicas"] <= hpa["maxReplicas"]


def test_prometheus_finds_the_admin_port(k8s):
    docs, pod_meta, c, config = k8s["docs"], k8s["dep"]["spec"]["template"]["metadata"], k8s["c"], k8s["config"]
    ann = pod_meta["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/path"] == "/metrics"
    assert int(ann["prometheus.io/port"]) == port_of(config["admin"]["address"])
    sm = one(docs, "ServiceMonitor")["spec"]
    svc = [d for d in docs if d["kind"] == "Service"
           and all(d["metadata"]["labels"].get(k) == v for k, v in sm["selector"]["matchLabels"].items())]
    assert len(svc) == 1 and svc[0]["spec"].get("clusterIP") == "None", svc
    ports = {p["name"]: p for p in svc[0]["spec"]["ports"]}
    assert [e["port"] for e in sm["endpoints"]] == ["admin"] and "admin" in ports
    assert svc[0]["metadata"]["name"] == k8s["dep"]["spec"]["serviceName"]


def test_stop_fits_the_engines_default_timeout():
    """docker stop, podman stop and compose send SIGKILL 10 s after SIGTERM:
    the drain, the wait for a transaction in flight and the final flush fit
    within it with a second to spare (tests/container/run measures it)."""
    drain = c_constant("gateway/main.c", "DRAIN_MS")
    flush = c_constant("gateway/main.c", "METERING_FINAL_FLUSH_MS")
    exec_wait = c_constant("gateway/worker.c", "METERING_EXEC_WAIT_MS")
    assert drain + exec_wait + flush <= 9000, (drain, exec_wait, flush)


def test_kustomize_base_and_overlay():
    """The base lists every object file of deploy/kubernetes (not the
    Secrets); the overlay builds on it. With kubectl on the machine, both
    build and the overlay's output carries its image and namespace."""
    with open(os.path.join(K8S, "base", "kustomization.yaml")) as f:
        base = yaml.safe_load(f)
    files = {os.path.basename(p) for p in glob.glob(os.path.join(K8S, "base", "*.yaml"))} - {"kustomization.yaml"}
    assert set(base["resources"]) == files, (base["resources"], files)
    overlay_dir = os.path.join(K8S, "overlays", "example")
    with open(os.path.join(overlay_dir, "kustomization.yaml")) as f:
        overlay = yaml.safe_load(f)
    assert overlay["resources"] == ["../../base"]
    images = {i["name"] for i in overlay["images"]}
    with open(os.path.join(K8S, "base", "statefulset.yaml")) as f:
        sts = yaml.safe_load(f)
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"].split(":")[0] in images
    import shutil

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on this machine: the kustomize build itself is not run")
    for d in (os.path.join(K8S, "base"), overlay_dir):
        r = subprocess.run([kubectl, "kustomize", d], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    out = list(yaml.safe_load_all(r.stdout))
    sts = [d for d in out if d["kind"] == "StatefulSet"][0]
    assert sts["metadata"]["namespace"] == overlay["namespace"]
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"].startswith(overlay["images"][0]["newName"])


def test_compose_runs_as_the_manifests_do(k8s):
    """deploy/compose.yaml: the same user, read-only root and dropped
    capabilities as the StatefulSet, the spill directory on a named volume,
    and a stop grace period the stop fits in."""
    with open(os.path.join(DEPLOY, "compose.yaml")) as f:
        svc = yaml.safe_load(f)["services"]["gateway"]
    assert svc["user"] == "%d:%d" % (k8s["pod"]["securityContext"]["runAsUser"], k8s["pod"]["securityContext"]["runAsGroup"])
    assert svc["read_only"] is True and svc["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in svc["security_opt"]
    spill_dir = os.path.dirname(k8s["config"]["metering"]["spill_file"])
    named = [v for v in svc["volumes"] if v.split(":")[1] == spill_dir]
    assert named and not named[0].startswith((".", "/")), "the spill directory must be a named volume: %s" % named
    grace = int(svc["stop_grace_period"].rstrip("s"))
    stop = (c_constant("gateway/main.c", "DRAIN_MS") + c_constant("gateway/main.c", "METERING_FINAL_FLUSH_MS")
            + c_constant("gateway/worker.c", "METERING_EXEC_WAIT_MS")) / 1000
    assert grace >= stop + 1, (grace, stop)


def test_proxy_protocol_overlay(k8s, tmp_path, certs):
    """overlays/proxy-protocol: the base's config with "proxy_protocol": true
    on every listener and nothing else changed, which the binary accepts; its
    Service asks the AWS Load Balancer Controller for PROXY protocol on every
    port. With kubectl the build carries both."""
    overlay_dir = os.path.join(K8S, "overlays", "proxy-protocol")
    with open(os.path.join(overlay_dir, "configmap.yaml")) as f:
        cm = yaml.safe_load(f)
    assert cm["metadata"]["name"] == k8s["cm"]["metadata"]["name"]
    config = json.loads(cm["data"]["gateway.json"])
    assert [listener.pop("proxy_protocol") for listener in config["listen"]] == [True] * len(config["listen"])
    assert config == k8s["config"], "the overlay's config differs from the base's beyond proxy_protocol"
    with open(os.path.join(overlay_dir, "kustomization.yaml")) as f:
        kust = yaml.safe_load(f)
    assert kust["resources"] == ["../../base"]
    service_patch = [p for p in kust["patches"] if p.get("target", {}).get("kind") == "Service"][0]
    ops = yaml.safe_load(service_patch["patch"])
    annotations = [op["value"] for op in ops if op["path"] == "/metadata/annotations"][0]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-proxy-protocol"] == "*"
    # the binary's --check takes the overlay's config (the base's test, on this config)
    full = json.loads(cm["data"]["gateway.json"])
    test_binary_accepts_the_configmap_config(dict(k8s, config=full), tmp_path, certs)

    import shutil

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return  # the checks above hold without kubectl; the build is checked where it is installed
    r = subprocess.run([kubectl, "kustomize", overlay_dir], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = list(yaml.safe_load_all(r.stdout))
    svc = [d for d in out if d["kind"] == "Service" and d["spec"].get("type") == "LoadBalancer"][0]
    assert svc["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-proxy-protocol"] == "*"
    built = json.loads([d for d in out if d["kind"] == "ConfigMap"][0]["data"]["gateway.json"])
    assert all(listener["proxy_protocol"] for listener in built["listen"])
