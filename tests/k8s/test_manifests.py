#!/usr/bin/env python3
"""Checks of deploy/k8s, offline: every manifest against the Kubernetes API schemas
(kubernetes-validate's bundled ones, strict: an unknown or misspelled field fails), the
Prometheus Operator's resources (PodMonitor, PrometheusRule) by the fields the operator
requires and by what they must agree with, the PrometheusRule against a fresh generation
from deploy/alerts.yml, the DaemonSet's security settings one by one, the reloader's
SIGHUP on a ConfigMap-style swap (busybox, as in the image), and the config, web config
and health probe against the daemon itself.

    python3 tests/k8s/test_manifests.py [--bin target/release/edgesight]
"""
import argparse
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import kubernetes_validate
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
sys.path.insert(0, str(ROOT / "scripts" / "k8s"))
import prometheusrule  # noqa: E402  (scripts/k8s/prometheusrule.py)

BIN = ROOT / "target" / "release" / "edgesight"
# The oldest Kubernetes the manifests are meant for and the newest schemas bundled.
VERSIONS = ("1.28", kubernetes_validate.latest_version())
OPERATOR_KINDS = {"PodMonitor", "PrometheusRule"}
# bcrypt's test vector: the password "U*U" at cost 5.
HASH = "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"
PASSWORD = "U*U"


def manifests():
    """(file, document) for every YAML document under deploy/k8s, examples included."""
    files = sorted(K8S.glob("*.yaml")) + sorted((K8S / "examples").glob("*.yaml"))
    return [(f, d) for f in files for d in yaml.safe_load_all(f.read_text()) if d is not None]


def find(kind, name):
    hits = [d for _, d in manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(hits) == 1, f"{kind}/{name}: {len(hits)} in deploy/k8s"
    return hits[0]


def daemonset():
    return find("DaemonSet", "edgesight")


def container(name):
    [c] = [c for c in daemonset()["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return c


def kubernetes_bytes(text):
    """A Kubernetes memory quantity in bytes: Ki, Mi, Gi are powers of 1024, k, M, G of 1000."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|k|M|G)?", text)
    assert m, f"Kubernetes memory quantity {text!r}"
    return int(m[1]) * {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 10**3,
                        "M": 10**6, "G": 10**9}[m[2]]


def systemd_bytes(text):
    """A systemd size in bytes: K, M, G are powers of 1024 (systemd.resource-control)."""
    m = re.fullmatch(r"(\d+)([KMG])?", text)
    assert m, f"systemd size {text!r}"
    return int(m[1]) * {None: 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m[2]]


class Schemas(unittest.TestCase):
    def test_every_manifest_against_the_kubernetes_schemas(self):
        docs = manifests()
        self.assertGreaterEqual({d["kind"] for _, d in docs}, {
            "Namespace", "ConfigMap", "DaemonSet", "Service", "Secret", "PodMonitor",
            "PrometheusRule"})
        for path, doc in docs:
            if doc["kind"] in OPERATOR_KINDS:
                continue
            for version in VERSIONS:
                with self.subTest(file=path.name, kind=doc["kind"], version=version):
                    try:
                        kubernetes_validate.validate(doc, version, strict=True)
                    except kubernetes_validate.ValidationError as e:
                        self.fail(f"{path.relative_to(ROOT)}: {doc['kind']} "
                                  f"{doc['metadata']['name']}: {e.message} at "
                                  f"{'.'.join(map(str, e.path))} (Kubernetes {version})")

    def test_the_validation_refuses_a_misspelled_field(self):
        ds = daemonset()
        ds["spec"]["template"]["spec"]["securityContext"]["runAsNonroot"] = True
        with self.assertRaises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(ds, VERSIONS[0], strict=True)

    def test_every_namespaced_manifest_is_in_edgesight_but_the_device_plugin(self):
        for path, doc in manifests():
            if doc["kind"] == "Namespace":
                continue
            want = "kube-system" if path.name == "generic-device-plugin.yaml" else "edgesight"
            self.assertEqual(doc["metadata"].get("namespace"), want, f"{path.name}")


class Operator(unittest.TestCase):
    """What the operator's CRDs require (apiVersion, kind, metadata, the required fields of
    spec and their types) and what these two must agree with; not its whole schema."""

    def test_podmonitor(self):
        pm = find("PodMonitor", "edgesight")
        self.assertEqual(pm["apiVersion"], "monitoring.coreos.com/v1")
        self.assertEqual(pm["metadata"]["namespace"], "edgesight")
        spec = pm["spec"]
        pod = daemonset()["spec"]["template"]
        labels = pod["metadata"]["labels"]
        self.assertLessEqual(spec["selector"]["matchLabels"].items(), labels.items())
        # The alerts select job="edgesight": jobLabel must give the pods' label of that value.
        jobs = set(re.findall(r'job="([^"]+)"', (ROOT / "deploy" / "alerts.yml").read_text()))
        self.assertEqual(jobs, {labels[spec["jobLabel"]]})
        ports = {p["name"] for p in container("edgesight")["ports"]}
        scrape = find("Secret", "edgesight-scrape")
        self.assertTrue(spec["podMetricsEndpoints"])
        for ep in spec["podMetricsEndpoints"]:
            self.assertIn(ep["port"], ports)
            self.assertEqual(ep["path"], "/metrics")
            for part in ("username", "password"):
                ref = ep["basicAuth"][part]
                self.assertEqual(ref["name"], scrape["metadata"]["name"])
                self.assertIn(ref["key"], scrape["stringData"])

    def test_prometheusrule(self):
        pr = find("PrometheusRule", "edgesight")
        self.assertEqual(pr["apiVersion"], "monitoring.coreos.com/v1")
        self.assertEqual(pr["metadata"]["namespace"], "edgesight")
        groups = pr["spec"]["groups"]
        self.assertTrue(groups)
        for group in groups:
            self.assertIsInstance(group["name"], str)
            self.assertTrue(group["rules"])
            for rule in group["rules"]:
                self.assertEqual(len({"alert", "record"} & rule.keys()), 1, rule)
                self.assertIsInstance(rule["expr"], str)
                self.assertLessEqual(rule.keys(), {
                    "alert", "record", "expr", "for", "keep_firing_for", "labels",
                    "annotations"})

    def test_prometheusrule_is_a_fresh_generation_from_alerts_yml(self):
        source = (ROOT / "deploy" / "alerts.yml").read_text()
        committed = (K8S / "prometheusrule.yaml").read_text()
        self.assertEqual(committed, prometheusrule.generate(source),
                         "deploy/k8s/prometheusrule.yaml is stale: run "
                         "scripts/k8s/prometheusrule.py --write")
        self.assertEqual(yaml.safe_load(committed)["spec"], yaml.safe_load(source))

    def test_generation_wraps_any_rule_file(self):
        source = "# about this file\ngroups:\n  - name: g\n    rules:\n      - alert: A\n" \
            "        # why\n        expr: |\n          up\n            == 0\n"
        text = prometheusrule.generate(source)
        self.assertTrue(text.endswith("spec:\n  groups:\n    - name: g\n      rules:\n"
                                      "        - alert: A\n          # why\n"
                                      "          expr: |\n            up\n              == 0\n"))
        self.assertEqual(yaml.safe_load(text)["spec"], yaml.safe_load(source))
        with self.assertRaisesRegex(ValueError, "alerts.yml: no top-level `groups:` key"):
            prometheusrule.generate("# nothing\nrules: []\n")


class DaemonSet(unittest.TestCase):
    def test_pod_security(self):
        pod = daemonset()["spec"]["template"]["spec"]
        sc = pod["securityContext"]
        self.assertEqual(sc["runAsUser"], 10001)
        self.assertTrue(sc["runAsNonRoot"])
        self.assertEqual(sc["seccompProfile"], {"type": "RuntimeDefault"})
        self.assertEqual(sc["supplementalGroups"][0], 44)
        self.assertEqual(len(sc["supplementalGroups"]), 2)
        self.assertFalse(pod.get("hostNetwork", False))
        self.assertFalse(pod.get("hostPID", False))
        self.assertFalse(pod["automountServiceAccountToken"])
        self.assertEqual(pod["nodeSelector"], {"edgesight/camera": "true"})

    def test_container_security(self):
        for c in daemonset()["spec"]["template"]["spec"]["containers"]:
            with self.subTest(container=c["name"]):
                sc = c["securityContext"]
                self.assertIs(sc["privileged"], False)
                self.assertIs(sc["allowPrivilegeEscalation"], False)
                self.assertIs(sc["readOnlyRootFilesystem"], True)
                self.assertEqual(sc["capabilities"], {"drop": ["ALL"]})
                self.assertNotIn("runAsUser", sc)  # the pod's 10001 holds

    def test_devices_come_from_the_device_plugin(self):
        c = container("edgesight")
        self.assertEqual(c["resources"]["limits"]["squat.ai/video"], 1)
        self.assertEqual(c["resources"]["limits"]["squat.ai/gpu"], 1)
        pod = daemonset()["spec"]["template"]["spec"]
        host_paths = [v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v]
        self.assertFalse([p for p in host_paths if p.startswith("/dev")], host_paths)
        # The plugin's example advertises exactly the resources asked for.
        plugin = find("DaemonSet", "generic-device-plugin")
        args = plugin["spec"]["template"]["spec"]["containers"][0]["args"]
        devices = {d["name"]: d for d in map(yaml.safe_load, args[1::2])}
        self.assertEqual(args[0::2], ["--device"] * len(devices))
        self.assertEqual({f"squat.ai/{n}" for n in devices},
                         {k for k in c["resources"]["limits"] if k.startswith("squat.ai/")})
        paths = {n: [p["path"] for g in d["groups"] for p in g["paths"]]
                 for n, d in devices.items()}
        self.assertEqual(paths, {"video": ["/dev/video0"],
                                 "gpu": ["/dev/mali0", "/dev/dri/renderD*"]})

    def test_libmali_comes_read_only_from_the_host(self):
        pod = daemonset()["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["name"]: m for m in container("edgesight")["volumeMounts"]}
        for name in ("libmali", "libmali-icd"):
            self.assertTrue(mounts[name]["readOnly"])
            self.assertEqual(volumes[name]["hostPath"]["type"], "File")
            self.assertEqual(volumes[name]["hostPath"]["path"], mounts[name]["mountPath"])
        env = {e["name"]: e["value"] for e in container("edgesight")["env"]}
        self.assertEqual(env["OPENCL_DYLIB_PATH"], mounts["libmali"]["mountPath"])
        for m in mounts.values():
            if m["name"] not in ("cache", "tmp"):
                self.assertTrue(m.get("readOnly"), m["name"])

    def test_memory_limit_is_the_units_memory_max(self):
        unit = (ROOT / "systemd" / "edgesight.service").read_text()
        [memory_max] = re.findall(r"^MemoryMax=(\S+)$", unit, re.M)
        limit = container("edgesight")["resources"]["limits"]["memory"]
        self.assertEqual(kubernetes_bytes(limit), systemd_bytes(memory_max))
        self.assertEqual(kubernetes_bytes(limit), 512 << 20)
        self.assertEqual(kubernetes_bytes("512M"), 512 * 10**6)

    def test_listens_on_every_address_with_the_web_config(self):
        c = container("edgesight")
        args = c["args"]
        self.assertEqual(args[args.index("--web.listen-address") + 1], ":8947")
        web = args[args.index("--web.config.file") + 1]
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        self.assertEqual(str(pathlib.PurePath(mounts["web-config"], "web-config.yml")), web)
        self.assertEqual([p["containerPort"] for p in c["ports"]], [8947])
        self.assertEqual(args[args.index("--config") + 1],
                         mounts["config"] + "/edgesight.toml")
        svc = find("Service", "edgesight")
        self.assertEqual(svc["spec"]["clusterIP"], "None")
        self.assertEqual(svc["spec"]["ports"][0]["targetPort"], c["ports"][0]["name"])
        self.assertEqual(svc["spec"]["selector"],
                         daemonset()["spec"]["template"]["metadata"]["labels"])

    def test_image_is_this_version(self):
        version = subprocess.run([ROOT / "scripts/version.sh"], check=True, text=True,
                                 capture_output=True).stdout.strip()
        for c in daemonset()["spec"]["template"]["spec"]["containers"]:
            self.assertTrue(c["image"].endswith(f"/edgesight:{version}"), c["image"])

    def test_probes_ask_healthz_with_the_scrape_credentials(self):
        c = container("edgesight")
        for probe in ("livenessProbe", "startupProbe"):
            script = c[probe]["exec"]["command"][-1]
            self.assertIn("http://127.0.0.1:8947/healthz", script)
            for key in ("username", "password"):
                self.assertIn(f"/etc/edgesight-scrape/{key}", script)


def busybox():
    path = shutil.which("busybox")
    assert path, "busybox missing: scripts/install-deps.sh test installs it (busybox-static)"
    return path


class Reloader(unittest.TestCase):
    """The reloader's own script, run by the host's busybox on a directory laid out as the
    kubelet lays out a ConfigMap volume (files are links through ..data, swapped at once)."""

    def setUp(self):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="edgesight-k8s-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.volume = self.dir / "volume"
        self.volume.mkdir()
        self.publish("v1", 'level = "info"\n')
        (self.volume / "edgesight.toml").symlink_to("..data/edgesight.toml")
        # A stand-in for the daemon under a name of its own (comm), which no other process
        # on this machine has, so that the reloader signals nothing else.
        self.name = f"esreload{os.getpid() % 100000}"
        self.hups = self.dir / "hups"
        daemon = self.dir / self.name
        # Python, not sh: a shell cannot trap a signal ignored when it started, and a
        # test run under nohup starts everything with SIGHUP ignored.
        daemon.write_text(
            f"#!{sys.executable}\n"
            "import signal, time\n"
            f"def hup(*_):\n    open({str(self.hups)!r}, 'a').write('HUP\\n')\n"
            "signal.signal(signal.SIGHUP, hup)\n"
            "while True:\n    time.sleep(0.05)\n")
        daemon.chmod(0o755)
        self.daemon = subprocess.Popen([str(daemon)])
        self.addCleanup(self.stop, self.daemon)
        script = container("reloader")["command"][-1]
        self.log = self.dir / "reloader.log"
        with self.log.open("w") as log:
            self.reloader = subprocess.Popen(
                [busybox(), "sh", "-c", script], stdout=log,
                env={"PATH": f"{pathlib.Path(busybox()).parent}:/usr/bin:/bin",
                     "CONFIG_FILE": str(self.volume / "edgesight.toml"),
                     "PROCESS_NAME": self.name, "POLL_SECONDS": "0.1"})
        self.addCleanup(self.stop, self.reloader)
        # Changes count from the checksum the reloader took at its start: a change made
        # before it went unseen on a slow first start (a fresh machine's cold caches).
        self.watching = f"reloader: watching {self.volume}/edgesight.toml for {self.name}"
        deadline = time.monotonic() + 30
        while self.log.read_text().splitlines()[:1] != [self.watching]:
            self.assertLess(time.monotonic(), deadline, "the reloader never started")
            self.assertIsNone(self.reloader.poll(), self.log.read_text())
            time.sleep(0.02)

    @staticmethod
    def stop(proc):
        proc.kill()
        proc.wait()

    def publish(self, version, text):
        """The kubelet's atomic update: a new timestamped directory, ..data swapped to it."""
        stamp = self.volume / f"..{version}"
        stamp.mkdir()
        (stamp / "edgesight.toml").write_text(text)
        tmp = self.volume / "..data_tmp"
        tmp.symlink_to(stamp.name)
        os.replace(tmp, self.volume / "..data")

    def hup_count(self):
        return len(self.hups.read_text().splitlines()) if self.hups.exists() else 0

    def wait_for(self, count, seconds=5.0):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.hup_count() < count:
            time.sleep(0.05)
        return self.hup_count()

    def test_a_changed_config_gets_one_sighup(self):
        time.sleep(0.5)
        self.assertEqual(self.hup_count(), 0, "SIGHUP with no change")
        self.publish("v2", 'level = "debug"\n')
        self.assertEqual(self.wait_for(1), 1)
        time.sleep(0.5)
        self.assertEqual(self.hup_count(), 1, "more than one SIGHUP for one change")
        self.publish("v3", 'level = "info"\n')
        self.assertEqual(self.wait_for(2), 2)
        self.assertIsNone(self.reloader.poll())
        self.assertIsNone(self.daemon.poll())
        line = f"reloader: {self.volume}/edgesight.toml changed: SIGHUP to {self.name} " \
            f"(pid {self.daemon.pid})"
        self.assertEqual(self.log.read_text().splitlines(), [self.watching, line, line])

    def test_a_rewrite_with_the_same_content_sends_none(self):
        self.publish("v2", 'level = "info"\n')
        time.sleep(0.6)
        self.assertEqual(self.hup_count(), 0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon(unittest.TestCase):
    """The ConfigMap's config, the example web config and the health probe against the
    daemon (--bin): what the pod would run, but for the paths."""

    def setUp(self):
        self.assertTrue(BIN.exists(), f"{BIN} missing: build it or give --bin")
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="edgesight-k8s-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.config = self.dir / "edgesight.toml"
        self.config.write_text(find("ConfigMap", "edgesight-config")["data"]["edgesight.toml"])
        self.web_template = find("Secret", "edgesight-web-config")["stringData"]["web-config.yml"]

    def web_config(self, text):
        path = self.dir / "web-config.yml"
        path.write_text(text)
        return path

    def check(self, config, web):
        return subprocess.run([str(BIN), "check-config", str(config), "--web.config.file",
                               str(web)], capture_output=True, text=True, timeout=60)

    def test_config_and_web_config_pass_check_config(self):
        web = self.web_config(self.web_template.replace("REPLACE-WITH-BCRYPT-HASH", HASH))
        r = self.check(self.config, web)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_placeholder_hash_is_refused(self):
        r = self.check(self.config, self.web_config(self.web_template))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("basic_auth_users.prometheus", r.stderr)

    def test_health_probe_passes_with_the_credentials_and_fails_without(self):
        port = free_port()
        web = self.web_config(self.web_template.replace("REPLACE-WITH-BCRYPT-HASH", HASH))
        config = self.dir / "pattern.toml"
        config.write_text(re.sub(r'(?s)\[camera\.source\].*', '[camera.source]\nkind = '
                                 '"pattern"\nsize = "64x48"\nfps = 10\n',
                                 self.config.read_text()))
        daemon = subprocess.Popen(
            [str(BIN), "run", "--config", str(config), "--web.listen-address",
             f"127.0.0.1:{port}", "--web.config.file", str(web)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

        def stop():
            daemon.send_signal(signal.SIGTERM)
            daemon.communicate(timeout=10)
        self.addCleanup(stop)
        creds = self.dir / "scrape"
        creds.mkdir()
        (creds / "username").write_text("prometheus")
        script = container("edgesight")["livenessProbe"]["exec"]["command"][-1]
        script = script.replace("/etc/edgesight-scrape", str(creds)).replace(
            "127.0.0.1:8947", f"127.0.0.1:{port}")
        env = {"PATH": f"{pathlib.Path(busybox()).parent}:/usr/bin:/bin"}

        def probe(password):
            (creds / "password").write_text(password)
            return subprocess.run([busybox(), "sh", "-c", script], env=env,
                                  capture_output=True, timeout=10).returncode

        deadline = time.monotonic() + 60
        while probe(PASSWORD) != 0:
            self.assertIsNone(daemon.poll(), "the daemon exited")
            if time.monotonic() > deadline:
                self.fail("the probe never passed within 60 s")
            time.sleep(0.2)
        self.assertNotEqual(probe("wrong"), 0)
        self.assertEqual(probe(PASSWORD), 0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=pathlib.Path, default=BIN)
    args, rest = parser.parse_known_args()
    BIN = args.bin.resolve()
    unittest.main(argv=[sys.argv[0]] + rest)
