"""admin/configs_golden.py: the Python half of the configuration golden check (admin/configs_golden.sh).

  configs_golden.py create TOPIC...   creates each topic (2 partitions, no configs) with confluent-kafka and
                                      waits until Metadata lists it; exits non-zero on an error
  configs_golden.py dump TOPIC...     prints every config DescribeConfigs v4 answers (synonyms and
                                      documentation included) for broker 1, the cluster-wide broker default
                                      (resource name "") and each topic, one line per config: name, value,
                                      read_only, source, sensitive, type, synonyms, documentation

The dump is what kafka-configs.sh does not print (read-only flags, config types, documentation); the shell
half normalises the temporary directory and compares it with golden/describe-configs.txt. The order of
the lines is the broker's answer order: a change in it is a change on the wire.
Read next: compat-tests/admin/configs_golden.sh, server/handlers/describe_configs.c.
"""
import os
import sys
import time

from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.metadata import MetadataRequest

BOOT = os.environ['BROKER']
TOPIC, BROKER_RES = 2, 4


def create(topics):
    adm = AdminClient({'bootstrap.servers': BOOT})
    futs = adm.create_topics([NewTopic(t, 2, 1) for t in topics])
    for t, f in futs.items():
        f.result(timeout=30)
    deadline = time.time() + 10
    while time.time() < deadline:
        md = adm.list_topics(timeout=10)
        if all(t in md.topics for t in topics):
            return
        time.sleep(0.1)
    sys.exit(f'topics not in Metadata after 10 s: {topics}')


def dump(topics):
    raw = KafkaAdminClient(bootstrap_servers=BOOT, client_id='gregor-configs-golden', request_timeout_ms=20000)
    node = raw._manager.cluster.brokers()[0].node_id

    def send(req):
        async def go():
            return await raw._manager.send(req, node_id=node)
        return raw._manager.run(go).to_dict()

    resources = [(BROKER_RES, str(node)), (BROKER_RES, '')] + [(TOPIC, t) for t in topics]
    for rtype, name in resources:
        req = DescribeConfigsRequest(min_version=4, max_version=4, resources=[(rtype, name, None)],
                                     include_synonyms=True, include_documentation=True)
        res = send(req)['results'][0]
        print(f'resource type={rtype} name={name!r} error={res["error_code"]} message={res["error_message"]!r}')
        for c in res['configs']:
            syn = ', '.join(f'{s["source"]}:{s["name"]}={s["value"]}' for s in c['synonyms'])
            print(f'  {c["name"]}={c["value"]} read_only={c["read_only"]} source={c["config_source"]} '
                  f'sensitive={c["is_sensitive"]} type={c["config_type"]} synonyms={{{syn}}} '
                  f'doc={c["documentation"]!r}')
    raw.close()


if __name__ == '__main__':
    {'create': create, 'dump': dump}[sys.argv[1]](sys.argv[2:])
