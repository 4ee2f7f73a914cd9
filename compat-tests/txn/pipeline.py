#!/usr/bin/env python3
"""txn/pipeline.py BROKER IN OUT PARTITIONS GROUP TXN_ID PER_TXN DELAY_MS: the read-process-write process of
the exactly-once fault runs (eos.py starts it, kill -9s it and starts it again).

A confluent-kafka (librdkafka) consumer reads topic IN with isolation.level=read_committed in group GROUP (its
partitions assigned by hand, so a restarted process starts at once from the group's committed offsets, fetched
with require_stable); each record becomes KEY -> VALUE + ":out" on the same partition of OUT, written by a
transactional producer (transactional.id TXN_ID, transaction.timeout.ms 10000) whose transaction also carries
the consumed offsets (send_offsets_to_transaction); a transaction is committed every PER_TXN records, or when
the input is idle. DELAY_MS is slept after each record, so a run lasts long enough to be hit mid-transaction.
Any error from the transaction API ends the process (status 3): eos.py starts it again, and the new producer's
init_transactions fences and aborts what the old one left open, as an application restarted after a crash.
Read next: compat-tests/txn/eos.py.
"""
import faulthandler
import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def main():
    broker, src, dst, parts, group, txn_id, per_txn, delay_ms = sys.argv[1:9]
    parts, per_txn, delay = int(parts), int(per_txn), int(delay_ms) / 1000.0
    faulthandler.register(signal.SIGUSR1)  # eos.py asks for the stack of a pipeline that stopped committing
    # metadata.recovery.strategy=none: librdkafka 2.10+ re-bootstraps when every broker is down (the one
    # broker restarting) and decommissions the broker it knew; send_offsets_to_transaction then waits forever
    # on the decommissioned group coordinator (confluentinc/librdkafka#5511, open; seen here as a pipeline
    # stuck in it while the broker serves). Off, the client reconnects to the same broker as before 2.10.
    cconf = {'bootstrap.servers': broker, 'group.id': group, 'isolation.level': 'read_committed',
             'enable.auto.commit': False, 'auto.offset.reset': 'earliest', 'metadata.recovery.strategy': 'none'}
    if os.environ.get('PIPELINE_CONSUMER_DEBUG'):  # the same for the consumer, e.g. "cgrp,fetch,topic"
        cconf['debug'] = os.environ['PIPELINE_CONSUMER_DEBUG']
    consumer = Consumer(cconf)
    pconf = {'bootstrap.servers': broker, 'transactional.id': txn_id, 'transaction.timeout.ms': 10000,
             'linger.ms': 5, 'metadata.recovery.strategy': 'none'}
    if os.environ.get('PIPELINE_DEBUG'):  # librdkafka's debug contexts for the producer, e.g. "eos,protocol"
        pconf['debug'] = os.environ['PIPELINE_DEBUG']
    producer = Producer(pconf)
    try:
        producer.init_transactions(60)
        consumer.assign([TopicPartition(src, p) for p in range(parts)])  # from the committed offsets
        producer.begin_transaction()
        pending, n, commits = {}, 0, 0
        while True:
            m = consumer.poll(0.1)
            if m is not None and not m.error():
                producer.produce(dst, key=m.key(), value=m.value() + b':out', partition=m.partition())
                pending[m.partition()] = m.offset() + 1
                n += 1
                if delay:
                    time.sleep(delay)
            if n and (n >= per_txn or m is None):
                offs = [TopicPartition(src, p, o) for p, o in sorted(pending.items())]
                producer.send_offsets_to_transaction(offs, consumer.consumer_group_metadata(), 30)
                producer.commit_transaction(30)
                commits += 1
                print('pipeline: commit %d: %d records, offsets %s' % (commits, n, sorted(pending.items())),
                      flush=True)
                producer.begin_transaction()
                pending, n = {}, 0
    except KafkaException as e:
        print('pipeline: ending on %s' % e, flush=True)
        sys.exit(3)


if __name__ == '__main__':
    main()
