#!/usr/bin/env python3
"""confluent_flow.py BOOTSTRAP NAME: the confluent-kafka (librdkafka) flow used to capture golden frames.

Same shape as kafka_python_flow.py: CreateTopics golden-NAME (2 partitions), two records to partition 0
per compression type (none, gzip, snappy, lz4, zstd; one flush each), consume them back in group
golden-NAME-group with an explicit synchronous commit, then ListOffsets through the admin client.
"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

bootstrap, name = sys.argv[1], sys.argv[2]
FILLER = " gregor golden frame" * 8  # compressible: librdkafka sends uncompressed when compressing does not help
topic, cid = f"golden-{name}", f"golden-{name}"

admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": cid})
for f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
    f.result()
time.sleep(1)

sent = 0
for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
    p = Producer({"bootstrap.servers": bootstrap, "client.id": cid, "compression.type": codec, "acks": "all",
                  "linger.ms": 50})
    for i in range(2):
        p.produce(topic, key=f"k{i}", value=f"{codec} value {i}" + FILLER, partition=0,
                  headers=[("h", b"x")] if i == 1 else None)
    p.flush(10)
    sent += 2

c = Consumer({"bootstrap.servers": bootstrap, "client.id": cid, "group.id": f"{cid}-group",
              "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 200})
c.subscribe([topic])
got = 0
deadline = time.time() + 30
while got < sent and time.time() < deadline:
    m = c.poll(0.5)
    if m is not None and not m.error():
        got += 1
c.commit(asynchronous=False)
print(f"{name}: consumed {got} of {sent}; committed {c.committed([TopicPartition(topic, 0)], timeout=10)}")
c.close()
res = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()})
for tp, f in res.items():
    print("latest", tp, f.result().offset)
