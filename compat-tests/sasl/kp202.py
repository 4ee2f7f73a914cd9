"""kp202.py: kafka-python 2.0.2 (Debian's python3-kafka, run with /usr/lib/python3/dist-packages first on the
path by compat-tests/sasl/run.sh) over SASL_PLAINTEXT with PLAIN: it authenticates with SaslHandshake v0 and
raw size-prefixed tokens (the pre-KIP-152 framing, server/sasl.c's S_AUTH_RAW), then produces and consumes;
a wrong password fails its connection. SP: the SASL_PLAINTEXT address."""
import os

import kafka
import testkit as t
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

SP = os.environ['SP']


def round_trip():
    t.eq('kafka-python is Debian\'s 2.0.2 (SaslHandshake v0, raw tokens)', '2.0.2', kafka.__version__)
    kw = {'bootstrap_servers': SP, 'security_protocol': 'SASL_PLAINTEXT', 'sasl_mechanism': 'PLAIN',
          'sasl_plain_username': 'alice', 'sasl_plain_password': 'alice-secret', 'api_version': (2, 5, 0)}
    p = KafkaProducer(**kw)
    for i in range(10):
        p.send('sasl-kp202', b'v0-%d' % i)
    p.flush(30)
    p.close()
    c = KafkaConsumer('sasl-kp202', auto_offset_reset='earliest', consumer_timeout_ms=8000, **kw)
    got = [m.value for m in c]
    c.close()
    t.eq('kafka-python 2.0.2: produce + consume round trip over SASL_PLAINTEXT (v0 framing)',
         [b'v0-%d' % i for i in range(10)], got)
    try:
        bad = KafkaProducer(**dict(kw, sasl_plain_password='wrong', max_block_ms=3000))
        try:
            bad.send('sasl-kp202', b'x').get(timeout=5)
        finally:
            bad.close(0)
        t.fail('kafka-python 2.0.2 with a wrong password: refused', 'the record was acknowledged')
    except KafkaError as e:
        t.ok(f'kafka-python 2.0.2 with a wrong password: refused ({type(e).__name__})')


t.section('kafka-python 2.0.2', round_trip)
t.finish()
