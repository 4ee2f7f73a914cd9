"""py_clients.py: the Python part of compat-tests/sasl/clients.sh: confluent-kafka (librdkafka) writes 100 records and
reads them back with a group consumer, kafka-python 3 writes 50 and reads them back, over SASL_SSL with the
mechanism M as user alice (password alice-secret; OAUTHBEARER: an unsecured token each client makes itself, as
Kafka's unsecured validator on the listener takes). Environment: SS (host:port of the SASL_SSL listener), CA (the
PEM the broker's certificate chains to), M (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER), TOPIC (a prefix).
Prints `confluent-kafka ok` and `kafka-python ok` (or what it got instead)."""
import base64
import json
import os
import time

from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

ss, ca, m, topic = os.environ['SS'], os.environ['CA'], os.environ['M'], os.environ['TOPIC']


def confluent_auth():
    if m == 'OAUTHBEARER':
        return {'enable.sasl.oauthbearer.unsecure.jwt': True, 'sasl.oauthbearer.config': 'principal=alice'}
    return {'sasl.username': 'alice', 'sasl.password': 'alice-secret'}


def kafka_python_auth():
    if m != 'OAUTHBEARER':
        return {'sasl_plain_username': 'alice', 'sasl_plain_password': 'alice-secret'}
    from kafka.net.sasl.oauth import AbstractTokenProvider

    def b64(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b'=').decode()

    class Unsecured(AbstractTokenProvider):  # kafka-python 3 calls token(): an unsecured JWS, alg none, no signature
        def token(self):
            now = int(time.time())
            return b64({'alg': 'none'}) + '.' + b64({'sub': 'alice', 'iat': now, 'exp': now + 3600}) + '.'

        def extensions(self):
            return {}
    return {'sasl_oauth_token_provider': Unsecured()}


conf = dict({'bootstrap.servers': ss, 'security.protocol': 'SASL_SSL', 'ssl.ca.location': ca, 'sasl.mechanisms': m},
            **confluent_auth())
p = Producer(conf)
for i in range(100):
    p.produce(topic + '-ck', b'ck-%03d' % i)
assert p.flush(30) == 0, 'confluent-kafka: records not acknowledged'
c = Consumer(dict(conf, **{'group.id': topic, 'auto.offset.reset': 'earliest'}))
c.subscribe([topic + '-ck'])
got, end = [], time.time() + 30
while len(got) < 100 and time.time() < end:
    r = c.poll(0.5)
    if r is not None and not r.error():
        got.append(r.value())
c.close()
print('confluent-kafka', 'ok' if got == [b'ck-%03d' % i for i in range(100)] else 'got %d' % len(got))

kw = dict({'bootstrap_servers': ss, 'security_protocol': 'SASL_SSL', 'ssl_cafile': ca, 'sasl_mechanism': m},
          **kafka_python_auth())
kp = KafkaProducer(**kw)
for i in range(50):
    kp.send(topic + '-kp', b'kp-%02d' % i)
kp.flush(30)
kp.close()
kc = KafkaConsumer(topic + '-kp', auto_offset_reset='earliest', consumer_timeout_ms=8000, **kw)
got = [r.value for r in kc]
kc.close()
print('kafka-python', 'ok' if got == [b'kp-%02d' % i for i in range(50)] else 'got %d' % len(got))
