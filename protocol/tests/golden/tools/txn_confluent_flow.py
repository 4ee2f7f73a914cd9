#!/usr/bin/env python3
"""txn_confluent_flow.py BOOTSTRAP NAME: the transactional flow used to capture the transaction APIs' golden
frames with confluent-kafka (librdkafka): creates topic golden-NAME (2 partitions), then with
transactional.id golden-NAME one committed transaction (a record to each partition: FindCoordinator key
type 1, InitProducerId, AddPartitionsToTxn, Produce, EndTxn commit) and one aborted transaction that also
sends offsets for group golden-NAME-group (AddOffsetsToTxn, TxnOffsetCommit, EndTxn abort)."""
import sys

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

b, name = sys.argv[1], sys.argv[2]
topic, tid, group = "golden-" + name, "golden-" + name, "golden-" + name + "-group"
client = {"bootstrap.servers": b, "client.id": "golden-" + name}
admin = AdminClient(client)
for f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
    f.result(30)
p = Producer(dict(client, **{"transactional.id": tid, "linger.ms": 5}))
p.init_transactions(30)
p.begin_transaction()
p.produce(topic, key=b"k0", value=b"committed 0", partition=0)
p.produce(topic, key=b"k1", value=b"committed 1", partition=1)
p.commit_transaction(30)
p.begin_transaction()
p.produce(topic, key=b"k2", value=b"aborted 2", partition=0)
p.flush(30)
c = Consumer(dict(client, **{"group.id": group, "enable.auto.commit": False}))
p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], c.consumer_group_metadata(), 30)
p.abort_transaction(30)
c.close()
print("txn confluent flow done")
