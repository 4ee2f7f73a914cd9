// kafkajs.mjs: the scenario's client adapter on kafkajs (Kafka, producer, consumer, admin).
// Idempotent producer (idempotent: true, maxInFlightRequests 1), acks -1. kafkajs ships the gzip codec; snappy is
// the pure-JS kafkajs-snappy codec package; lz4 and zstd need native codec packages (node-gyp), so they are n/a. kafkajs has no
// auto.offset.reset=none (on OFFSET_OUT_OF_RANGE it always resets, fromBeginning picks where): 6c is n/a;
// 6d commits offset 1,000,000 for a fresh group (admin.setOffsets) and checks the consumer with
// fromBeginning: true resets to offset 0.
import { createRequire } from 'node:module'
import { NotApplicable, sleep } from './scenario.mjs'

const require = createRequire(import.meta.url)
const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs')
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy') // kafkajs's documented snappy codec (pure JS)

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy }

function decode (topic, partition, message, member) {
  return {
    member,
    partition,
    offset: Number(message.offset),
    key: message.key ? message.key.toString() : null,
    value: message.value ? message.value.toString() : null,
    headers: Object.entries(message.headers || {}).map(([k, v]) => [k, Buffer.isBuffer(v) ? v.toString() : String(v)])
  }
}

export async function create (bootstrap) {
  const kafka = new Kafka({ clientId: 'gregor-matrix-kafkajs', brokers: [bootstrap], logLevel: logLevel.NOTHING, retry: { retries: 5 } })
  const admin = kafka.admin()
  await admin.connect()
  const version = require('kafkajs/package.json').version

  async function withProducer (fn) {
    const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false, retry: { retries: 3 } })
    await p.connect()
    try { return await fn(p) } finally { await p.disconnect() }
  }

  return {
    name: 'kafkajs',
    version,
    codecs: ['none', 'gzip', 'snappy'],
    codecNote: 'kafkajs ships gzip; snappy comes from kafkajs-snappy (installed); lz4 and zstd need native codec packages (kafkajs-lz4 -> lz4 0.6, @kafkajs/zstd -> cppzst, node-gyp builds), not installed',
    idempotence: () => 'idempotent: true',

    async createTopic (topic, partitions, configs) {
      const ok = await admin.createTopics({
        waitForLeaders: true,
        topics: [{ topic, numPartitions: partitions, replicationFactor: 1, configEntries: Object.entries(configs).map(([name, value]) => ({ name, value })) }]
      })
      if (!ok) throw new Error(`createTopics answered false for ${topic}`)
    },

    async produce (topic, codec, recs) {
      await withProducer(async p => {
        for (let i = 0; i < recs.length; i += 500) {
          const batch = recs.slice(i, i + 500)
          await p.send({
            topic,
            acks: -1,
            compression: CODECS[codec],
            messages: batch.map(r => ({ key: r.key, value: r.value, headers: Object.fromEntries(r.headers) }))
          })
        }
      })
    },

    async produceOne (topic, key, value) {
      await withProducer(p => p.send({ topic, acks: -1, messages: [{ key, value }] }))
    },

    async newMember (id, group, topic, onRecord, gate) {
      const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 500, allowAutoTopicCreation: false, retry: { retries: 5 } })
      const high = new Map() // partition -> next offset to commit
      let gateOpen = false
      consumer.on(consumer.events.GROUP_JOIN, () => {
        if (!gateOpen) consumer.pause([{ topic }]) // fetching starts only when the scenario opens the gate
      })
      gate.then(() => { gateOpen = true; try { consumer.resume([{ topic }]) } catch {} })
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ topic: t, partition, message }) => {
          high.set(partition, Number(message.offset) + 1)
          onRecord(decode(t, partition, message, id))
        }
      })
      return {
        async commit () {
          const offsets = [...high].map(([partition, offset]) => ({ topic, partition, offset: String(offset) }))
          if (offsets.length) await consumer.commitOffsets(offsets)
        },
        async close () { await consumer.disconnect() }
      }
    },

    async describeGroup (group, topic) {
      const { groups } = await admin.describeGroups([group])
      if (groups.length !== 1) throw new Error(`describeGroups answered ${groups.length} groups`)
      const g = groups[0]
      if (g.errorCode) throw new Error(`describeGroups error code ${g.errorCode}`)
      const ends = await admin.fetchTopicOffsets(topic)
      const committed = await admin.fetchOffsets({ groupId: group, topics: [topic] })
      const commits = new Map()
      let lag = 0
      const endOf = new Map(ends.map(e => [e.partition, Number(e.high)]))
      for (const t of committed) {
        for (const p of t.partitions) {
          const off = Number(p.offset)
          if (off >= 0) { commits.set(p.partition, off); lag += endOf.get(p.partition) - off } else lag += endOf.get(p.partition)
        }
      }
      return { state: g.state, members: g.members.length, lag, commits }
    },

    async listOffsets (topic, which) {
      const m = new Map()
      if (which === -2 || which === -1) {
        for (const o of await admin.fetchTopicOffsets(topic)) m.set(o.partition, Number(which === -2 ? o.low : o.high))
      } else {
        for (const o of await admin.fetchTopicOffsetsByTimestamp(topic, which)) m.set(o.partition, Number(o.offset))
      }
      return m
    },

    async outOfRangeNone () {
      throw new NotApplicable('kafkajs has no auto.offset.reset=none: on OFFSET_OUT_OF_RANGE it always resets to earliest or latest (fromBeginning)')
    },

    async outOfRangeEarliest (topic, offset) {
      const group = `matrix-kafkajs-oor-${Date.now() % 1e9}`
      await admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: String(offset) }] })
      const back = await admin.fetchOffsets({ groupId: group, topics: [topic] })
      const p0 = back[0].partitions.find(p => p.partition === 0)
      if (!p0 || Number(p0.offset) !== offset) throw new Error(`committing offset ${offset} for ${group} did not take: ${JSON.stringify(p0)}`)
      const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200 })
      let first = null
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      await consumer.run({ eachMessage: async ({ partition, message }) => { if (partition === 0 && first === null) first = Number(message.offset) } })
      try {
        for (let i = 0; i < 300 && first === null; i++) await sleep(100)
      } finally { await consumer.disconnect() }
      if (first === null) throw new Error('no record from partition 0 after the reset')
      return first
    },

    async readBack (topic, n) {
      const consumer = kafka.consumer({ groupId: `matrix-kafkajs-read-${topic}`, maxWaitTimeInMs: 200 })
      const got = []
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      await consumer.run({ eachMessage: async ({ topic: t, partition, message }) => { got.push(decode(t, partition, message, 'reader')) } })
      try {
        for (let i = 0; i < 600 && got.length < n; i++) await sleep(100)
      } finally { await consumer.disconnect() }
      return got
    },

    // step 7: producer({ transactionalId }) and producer.transaction() (send, sendOffsets, commit, abort);
    // consumers read committed by default (readUncommitted: false)
    async txnProduce (topic, tid, batches) {
      const p = kafka.producer({ transactionalId: tid, idempotent: true, maxInFlightRequests: 1 })
      await p.connect()
      try {
        for (const b of batches) {
          const txn = await p.transaction()
          await txn.send({ topic, acks: -1, messages: b.recs })
          if (b.commit) await txn.commit(); else await txn.abort()
        }
      } finally { await p.disconnect() }
      return 'producer({ transactionalId }).transaction() send/commit/abort'
    },

    async readValues (topic, readCommitted, want) {
      const consumer = kafka.consumer({ groupId: `matrix-kafkajs-rv-${Date.now() % 1e9}-${Math.random()}`, maxWaitTimeInMs: 200, readUncommitted: !readCommitted })
      const got = []
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      await consumer.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()) } })
      try {
        let quiet = 0
        for (let i = 0; i < 200 && (quiet === 0 || Date.now() < quiet); i++) {
          await sleep(100)
          if (got.length >= want && quiet === 0) quiet = Date.now() + 1500
        }
      } finally { await consumer.disconnect() }
      return got
    },

    async ctp (src, dst, group, tid, want) {
      const p = kafka.producer({ transactionalId: tid, idempotent: true, maxInFlightRequests: 1 })
      const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200 })
      let n = 0
      let err = null
      await p.connect()
      await consumer.connect()
      await consumer.subscribe({ topic: src, fromBeginning: true })
      await consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          if (!batch.messages.length) return
          const txn = await p.transaction()
          try {
            await txn.send({ topic: dst, acks: -1, messages: batch.messages.map(m => ({ key: m.key, value: 'out-' + m.value.toString() })) })
            const next = String(Number(batch.messages[batch.messages.length - 1].offset) + 1)
            await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic: src, partitions: [{ partition: batch.partition, offset: next }] }] })
            await txn.commit()
            n += batch.messages.length
          } catch (e) { err = e; await txn.abort().catch(() => {}) }
        }
      })
      try {
        for (let i = 0; i < 300 && n < want && !err; i++) await sleep(100)
      } finally { await consumer.disconnect(); await p.disconnect() }
      if (err) throw err
      return n
    },

    async close () { await admin.disconnect() }
  }
}
