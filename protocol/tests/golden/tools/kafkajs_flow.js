// kafkajs_flow.js BOOTSTRAP NAME: the kafkajs flow used to capture golden frames. Same shape as
// kafka_python_flow.py: CreateTopics golden-NAME (2 partitions), two records to partition 0 uncompressed
// and two gzip-compressed (kafkajs ships only gzip; snappy/lz4/zstd need plugins), consume in group
// golden-NAME-group, commit, then ListOffsets (fetchTopicOffsets) and OffsetFetch (fetchOffsets).
// Needs kafkajs installed in NODE_PATH (capture.sh does `npm install kafkajs` in a temp dir).
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');
const [bootstrap, name] = process.argv.slice(2);
const FILLER = ' gregor golden frame'.repeat(8); // compressible values
const topic = `golden-${name}`, cid = `golden-${name}`;
const kafka = new Kafka({ clientId: cid, brokers: [bootstrap], logLevel: logLevel.WARN });

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }], waitForLeaders: true });
  const producer = kafka.producer();
  await producer.connect();
  for (const [cname, ct] of [['none', CompressionTypes.None], ['gzip', CompressionTypes.GZIP]]) {
    await producer.send({
      topic, acks: -1, compression: ct,
      messages: [{ key: 'k0', value: `${cname} value 0${FILLER}`, partition: 0 },
                 { key: 'k1', value: `${cname} value 1${FILLER}`, partition: 0, headers: { h: 'x' } }],
    });
  }
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `${cid}-group`, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let got = 0;
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 30000);
    consumer.run({ autoCommit: true, eachMessage: async () => { if (++got >= 4) { clearTimeout(timer); resolve(); } } });
  });
  await consumer.commitOffsets([{ topic, partition: 0, offset: String(got) }]).catch(() => {});
  await consumer.disconnect();
  console.log(`${name}: consumed ${got}`);
  console.log('offsets', JSON.stringify(await admin.fetchTopicOffsets(topic)));
  console.log('committed', JSON.stringify(await admin.fetchOffsets({ groupId: `${cid}-group`, topics: [topic] })));
  await admin.disconnect();
}
main().catch((e) => { console.error(e); process.exit(1); });
