"""The rendered Kubernetes manifests: valid against a pinned Kubernetes version, and
sized from the answers and the settings, never retyped. They are played with podman
in tests/test_container.py, on the image built there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from extensions.matrix import setting_specs
from tests.conftest import DEPLOY_ANSWER_SETS, rendered

KUBERNETES_VERSION = "1.33.0"
VALIDATE = str(Path(sys.executable).with_name("kubernetes-validate"))


def manifests(project: Path) -> dict[str, dict]:
    return {doc["kind"]: doc for path in sorted((project / "deploy/kubernetes").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text())}


# Pod Security Standards, "restricted" profile (kubernetes.io/docs/concepts/security/
# pod-security-standards), the controls that a pod template can break.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}


def restricted_violations(pod: dict) -> list[str]:
    found = []
    context = pod.get("securityContext", {})
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            found.append(key)
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']}: {kinds - RESTRICTED_VOLUMES}")
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        own = container.get("securityContext", {})
        name = container["name"]
        if own.get("privileged"):
            found.append(f"{name}: privileged")
        if own.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation is not false")
        capabilities = own.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            found.append(f"{name}: capabilities do not drop ALL")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: adds capabilities")
        if not own.get("runAsNonRoot", context.get("runAsNonRoot")):
            found.append(f"{name}: runAsNonRoot is not true")
        if own.get("runAsUser", context.get("runAsUser")) == 0:
            found.append(f"{name}: runs as uid 0")
        seccomp = own.get("seccompProfile", context.get("seccompProfile", {}))
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: no RuntimeDefault or Localhost seccomp profile")
        if any("hostPort" in port for port in container.get("ports", [])):
            found.append(f"{name}: hostPort")
    return found


@pytest.mark.parametrize("answer_set", DEPLOY_ANSWER_SETS)
def test_manifests_validate_and_follow_the_answers(copie, answer_set: str) -> None:
    answers, project = rendered(copie, DEPLOY_ANSWER_SETS[answer_set])
    files = sorted(str(p) for p in (project / "deploy/kubernetes").glob("*.yaml"))
    check = subprocess.run([VALIDATE, "-k", KUBERNETES_VERSION, "--strict", *files],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr

    docs = manifests(project)
    assert set(docs) == {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget",
                         "HorizontalPodAutoscaler", "Ingress"}
    config = docs["ConfigMap"]["data"]
    assert config["WEBSERVER_ENGINE"] == answers["default_engine"]
    assert config["WEBSERVER_LOOP"] == answers["loop_policy"]
    assert config["WEBSERVER_PORT"] == str(answers["port"])
    assert config["WEBSERVER_WORKERS"] == str(answers["workers"])
    assert set(config) <= set(setting_specs.BY_NAME[name].env for name in setting_specs.BY_NAME)

    pod = docs["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsUser"] == 10001 and pod["securityContext"]["runAsNonRoot"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert restricted_violations(pod) == []
    # The Ingress reaches the Service's port, with TLS, for a host the app allows.
    ingress = docs["Ingress"]["spec"]
    (rule,) = ingress["rules"]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == docs["Service"]["metadata"]["name"]
    assert backend["port"]["name"] in {port["name"] for port in docs["Service"]["spec"]["ports"]}
    assert ingress["tls"][0]["hosts"] == [rule["host"]] and ingress["tls"][0]["secretName"]
    allowed = config["WEBSERVER_ALLOWED_HOSTS"].split(",")
    service = docs["Service"]["metadata"]["name"]
    assert {rule["host"], service, f"{service}.default.svc.cluster.local"} <= set(allowed)
    assert pod["automountServiceAccountToken"] is False  # the app calls no Kubernetes API
    assert container["ports"][0]["containerPort"] == answers["port"]
    # Metrics on their own port, announced to Prometheus's pod discovery, not in the Service.
    metrics_port = setting_specs.BY_NAME["metrics_port"].default
    assert config["WEBSERVER_METRICS"] == "port"
    assert config["WEBSERVER_METRICS_PORT"] == str(metrics_port)
    assert container["ports"][1] == {"name": "metrics", "containerPort": metrics_port}
    assert docs["Deployment"]["spec"]["template"]["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true", "prometheus.io/port": str(metrics_port),
        "prometheus.io/path": "/metrics"}
    assert [port["targetPort"] for port in docs["Service"]["spec"]["ports"]] == ["http"]
    pause = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    grace = int(config["WEBSERVER_GRACEFUL_TIMEOUT"])
    assert pod["terminationGracePeriodSeconds"] > pause + grace
    workers = answers["workers"]
    assert container["resources"]["requests"]["cpu"] == f"{workers * 500}m"
    assert container["resources"]["limits"]["cpu"] == f"{workers * 1000}m"
    assert {container["livenessProbe"]["httpGet"]["path"],
            container["readinessProbe"]["httpGet"]["path"]} == {"/livez", "/readyz"}


def test_the_prometheus_operator_manifests_scrape_the_metrics_port(copie) -> None:
    """Apart from the directory `kubectl apply` takes, for clusters with the Operator:
    a headless Service on the pods' metrics port and a ServiceMonitor selecting it."""
    _, project = rendered(copie, {})
    operator = project / "deploy/kubernetes/prometheus-operator"
    docs = {doc["kind"]: doc for path in sorted(operator.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text())}
    assert set(docs) == {"Service", "ServiceMonitor"}
    check = subprocess.run([VALIDATE, "-k", KUBERNETES_VERSION, "--strict",
                            str(operator / "metrics-service.yaml")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    service, monitor = docs["Service"], docs["ServiceMonitor"]
    assert service["spec"]["clusterIP"] == "None"
    deployment = manifests(project)["Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in {p.get("name") for p in container["ports"]}
    assert port["port"] == setting_specs.BY_NAME["metrics_port"].default
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items())
    assert monitor["spec"]["endpoints"][0]["port"] == port["name"]
    # Not selected by the app's Service: the metrics stay off the public path.
    app_service = manifests(project)["Service"]
    assert "metrics" not in {p["name"] for p in app_service["spec"]["ports"]}


@pytest.mark.parametrize("database", ["postgresql", "sqlite"])
def test_a_database_reaches_the_pods_and_its_migrations_run_once(copie, database: str) -> None:
    """PostgreSQL: the URL from a Secret, the migrations a Job run before the rollout.
    SQLite: one pod on a volume, replaced rather than doubled, migrated by an init
    container. Both valid and within Pod Security "restricted"."""
    _, project = rendered(copie, {"database": database})
    slug = yaml.safe_load((project / "deploy/kubernetes/service.yaml").read_text())[
        "metadata"]["name"]
    files = sorted(str(p) for p in (project / "deploy/kubernetes").rglob("*.yaml")
                   if "prometheus-operator" not in p.parts)
    check = subprocess.run([VALIDATE, "-k", KUBERNETES_VERSION, "--strict", *files],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    docs = manifests(project)
    deployment = docs["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert restricted_violations(pod) == []
    if database == "postgresql":
        secret = {"secretKeyRef": {"name": f"{slug}-database", "key": "url"}}
        assert container["env"] == [{"name": "WEBSERVER_DATABASE_URL", "valueFrom": secret}]
        job = yaml.safe_load((project / "deploy/kubernetes/migrate/job.yaml").read_text())
        job_pod = job["spec"]["template"]["spec"]
        (migrate,) = job_pod["containers"]
        assert migrate["command"] == ["alembic", "upgrade", "head"]
        assert migrate["image"] == container["image"] and migrate["env"] == container["env"]
        assert [ref["configMapRef"]["name"] for ref in migrate["envFrom"]] == [
            ref["configMapRef"]["name"] for ref in container["envFrom"]]
        assert job_pod["restartPolicy"] == "Never" and restricted_violations(job_pod) == []
        assert {"HorizontalPodAutoscaler", "PodDisruptionBudget"} <= set(docs)
    else:
        assert deployment["spec"]["replicas"] == 1
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}
        assert not {"HorizontalPodAutoscaler", "PodDisruptionBudget"} & set(docs)
        claim = docs["PersistentVolumeClaim"]["metadata"]["name"]
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim
        (migrate,) = pod["initContainers"]
        assert migrate["command"] == ["alembic", "upgrade", "head"]
        assert migrate["image"] == container["image"]
        assert migrate["envFrom"] == container["envFrom"]  # the settings the app reads
        assert {"name": "tmp", "mountPath": "/tmp"} in migrate["volumeMounts"]
        # Where the default URL (data/app.db, from the image's /srv) puts the file.
        data = {"name": "data", "mountPath": "/srv/data"}
        assert data in migrate["volumeMounts"] and data in container["volumeMounts"]
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
        assert "env" not in container
    assert not (project / "deploy/kubernetes/migrate").exists() or database == "postgresql"
