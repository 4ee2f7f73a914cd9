#!/usr/bin/python3
"""check-compose.py: checks docker/ compose files without a Docker engine (`make docker-test` runs it).

    docker/check-compose.py [--base DIR] [FILE ...]
        FILE default: docker/compose.yml docker/compose-cluster.yml; relative paths in a file (build
        contexts) are taken from DIR, by default the file's own directory (as compose does)

Each file is validated against the Compose Specification's JSON schema, vendored as
docker/compose-spec.json: schema/compose-spec.json of github.com/compose-spec/compose-go (the schema
`docker compose` itself validates with), commit e70e961c3a3acebf0800b882f1afb3dbf1fb74a2 (2026-07-21; the
file last changed in faa67b21), Apache License 2.0, unmodified. Then the references the schema cannot see
are checked, as `docker compose config` would refuse them: every depends_on target is a service, a
`service_healthy` target has a healthcheck (its own or its Dockerfile's HEALTHCHECK), every named volume
a service mounts is declared, no host port is published twice. For Gregor broker services (those setting
GREGOR_CFG_NODE_ID): node ids differ; each advertised listener is one of its `listeners`; an EXTERNAL
listener's port is published on the host under the same number and advertised as localhost; an INTERNAL
one is advertised under the service's hostname; the etcd endpoints name a service of the file.

Prints one line per problem and `check-compose: N files, N problems`; exits 1 on any problem.
Uses Debian's python3-yaml and python3-jsonschema (hence /usr/bin/python3).
Read next: docker/compose-cluster.yml, docker/smoke-test.sh.
"""
import json
import os
import re
import sys

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "compose-spec.json")
DEFAULT_FILES = [os.path.join(HERE, "compose.yml"), os.path.join(HERE, "compose-cluster.yml")]


def env_of(svc):
    """The service's environment as a dict (compose allows a mapping or a list of KEY=VALUE)."""
    env = svc.get("environment") or {}
    if isinstance(env, list):
        return dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def listener_map(spec):
    """'NAME://host:port,...' -> {NAME: (host, port)}; raises ValueError on a malformed entry."""
    out = {}
    for entry in filter(None, (s.strip() for s in spec.split(","))):
        m = re.fullmatch(r"([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):([0-9]+)", entry)
        if not m:
            raise ValueError(f"malformed listener '{entry}'")
        out[m.group(1)] = (m.group(2), int(m.group(3)))
    return out


def published(svc):
    """[(host_port, container_port)] of the service's `ports` (short 'H:C' or 'IP:H:C' and long form)."""
    out = []
    for p in svc.get("ports") or []:
        if isinstance(p, dict):
            if p.get("published") is not None:
                out.append((int(p["published"]), int(p["target"])))
            continue
        parts = str(p).split("/")[0].split(":")
        if len(parts) >= 2:
            out.append((int(parts[-2]), int(parts[-1])))
    return out


def has_healthcheck(base, svc):
    """True when the service defines a healthcheck or is built from a Dockerfile that has one."""
    hc = svc.get("healthcheck")
    if hc is not None:
        return not hc.get("disable", False)
    build = svc.get("build")
    if isinstance(build, dict):
        df = os.path.join(base, build.get("context", "."), build.get("dockerfile", "Dockerfile"))
        try:
            with open(df, encoding="utf-8") as f:
                return re.search(r"^\s*HEALTHCHECK\s+(?!NONE)", f.read(), re.M) is not None
        except OSError:
            return False
    return False


def check_brokers(services, problems):
    node_ids = {}
    for name, svc in services.items():
        env = env_of(svc)
        if "GREGOR_CFG_NODE_ID" not in env:
            continue
        nid = env["GREGOR_CFG_NODE_ID"]
        if nid in node_ids:
            problems.append(f"{name}: node.id {nid} is also {node_ids[nid]}'s")
        node_ids[nid] = name
        try:
            lis = listener_map(env.get("GREGOR_CFG_LISTENERS", "PLAINTEXT://0.0.0.0:9092"))
            adv = listener_map(env.get("GREGOR_CFG_ADVERTISED_LISTENERS", ""))
        except ValueError as e:
            problems.append(f"{name}: {e}")
            continue
        ports = dict(published(svc))  # host port -> container port
        for lname, (host, port) in adv.items():
            if lname not in lis:
                problems.append(f"{name}: advertised listener {lname} is not in listeners")
                continue
            if lname == "EXTERNAL":
                if host != "localhost":
                    problems.append(f"{name}: EXTERNAL is advertised as {host}, not localhost")
                if ports.get(port) != lis[lname][1]:
                    problems.append(
                        f"{name}: EXTERNAL is advertised on port {port}, but host port {port} is not published "
                        f"to its listener's port {lis[lname][1]}")
            elif lname == "INTERNAL" and host != svc.get("hostname", name):
                problems.append(f"{name}: INTERNAL is advertised as {host}, not the service's hostname")
        for url in filter(None, env.get("GREGOR_CFG_GREGOR_METADATA_ETCD_ENDPOINTS", "").split(",")):
            m = re.fullmatch(r"http://([^:/]+):([0-9]+)/?", url.strip())
            if not m or m.group(1) not in services:
                problems.append(f"{name}: etcd endpoint '{url}' does not name a service of this file")


def check_file(path, validator, base=None):
    problems = []
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        return [f"cannot read: {e}"]
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(top)"
        problems.append(f"schema: {where}: {err.message}")
    if problems or not isinstance(doc, dict):
        return problems or ["not a mapping"]
    services = doc.get("services") or {}
    declared = set((doc.get("volumes") or {}).keys())
    host_ports = {}
    for name, svc in services.items():
        deps = svc.get("depends_on") or {}
        for dep, cond in (deps.items() if isinstance(deps, dict) else ((d, {}) for d in deps)):
            if dep not in services:
                problems.append(f"{name}: depends_on names no service '{dep}'")
            elif (cond or {}).get("condition") == "service_healthy" and not has_healthcheck(base or os.path.dirname(path), services[dep]):
                problems.append(f"{name}: waits for {dep} to be healthy, but {dep} has no healthcheck")
        for v in svc.get("volumes") or []:
            src = v.get("source") if isinstance(v, dict) else (str(v).split(":")[0] if ":" in str(v) else None)
            if src and not src.startswith((".", "/", "~", "$")) and src not in declared:
                problems.append(f"{name}: volume '{src}' is not declared under volumes")
        for hp, _ in published(svc):
            if hp in host_ports:
                problems.append(f"{name}: host port {hp} is also published by {host_ports[hp]}")
            host_ports[hp] = name
    check_brokers(services, problems)
    return problems


def shown(path):
    """PATH as printed: relative to the working directory when it lies below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def main(argv):
    base = None
    if len(argv) >= 3 and argv[1] == "--base":
        base, argv = argv[2], argv[:1] + argv[3:]
    files = argv[1:] or DEFAULT_FILES
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)
    total = 0
    for path in files:
        problems = check_file(path, validator, base)
        for p in problems:
            print(f"{shown(path)}: {p}")
        print(f"check-compose: {shown(path)}: {'ok' if not problems else f'{len(problems)} problems'}")
        total += len(problems)
    print(f"check-compose: {len(files)} files, {total} problems")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
