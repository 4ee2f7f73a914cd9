#!/usr/bin/env python3
"""kafka_python_flow.py BOOTSTRAP NAME: the kafka-python client flow used to capture golden frames.

Creates topic golden-NAME (2 partitions) with the admin client, produces two records (compressible values) to partition 0 with
each compression type the installed kafka-python supports (one flush per codec, so one batch each),
consumes them back in consumer group golden-NAME-group (FindCoordinator, JoinGroup, SyncGroup, Fetch,
OffsetCommit, OffsetFetch, Heartbeat, LeaveGroup), and looks up offsets (ListOffsets).
client_id is golden-NAME everywhere. Run through capture.sh, which puts capture_proxy.py in between.
"""
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

bootstrap, name = sys.argv[1], sys.argv[2]
# Values must compress well, or clients send the batch uncompressed (librdkafka and kafka-python keep the
# uncompressed form when compressing does not shrink it).
FILLER = " gregor golden frame" * 8
topic, cid = f"golden-{name}", f"golden-{name}"

admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=cid)
admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
admin.close()
time.sleep(1)

sent = 0
for codec in (None, "gzip", "snappy", "lz4", "zstd"):
    p = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid, compression_type=codec, acks=-1, linger_ms=50)
    for i in range(2):
        p.send(topic, key=f"k{i}".encode(), value=(f"{codec or 'none'} value {i}" + FILLER).encode(), partition=0,
               headers=[("h", b"x")] if i == 1 else None)
    p.flush()
    p.close()
    sent += 2

c = KafkaConsumer(topic, bootstrap_servers=bootstrap, client_id=cid, group_id=f"{cid}-group",
                  auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=200)
got = 0
deadline = time.time() + 30
while got < sent and time.time() < deadline:
    for recs in c.poll(timeout_ms=500).values():
        got += len(recs)
c.commit()
print(f"{name}: consumed {got} of {sent}; committed {c.committed(TopicPartition(topic, 0))}")
tp = TopicPartition(topic, 0)
print("end offsets", c.end_offsets([tp]), "beginning", c.beginning_offsets([tp]))
c.close()
