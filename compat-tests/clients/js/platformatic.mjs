// platformatic.mjs: the scenario's client adapter on @platformatic/kafka (Producer, Consumer, Admin).
// Producer with idempotent: true, acks -1 and the client's own codecs (none, gzip, snappy, lz4; zstd where node:zlib
// has it, Node.js >= 22.15).
// Group members consume with mode 'committed' and fallbackMode 'earliest', autocommit off, and commit with the
// consumer's commit(). 6c is a stream in mode 'manual' at offset 1,000,000 (the client has no reset policy for a
// manual offset: the fetch error is what the user sees); 6d commits offset 1,000,000 for a fresh group
// (admin.alterConsumerGroupOffsets) and consumes with mode 'committed', fallbackMode 'earliest'.
import { Admin, Consumer, Producer } from '@platformatic/kafka'
import { createRequire } from 'node:module'
import zlib from 'node:zlib'
import { NotApplicable, sleep } from './scenario.mjs'

const require = createRequire(import.meta.url)

function decode (msg, member) {
  return {
    member,
    partition: msg.partition,
    offset: Number(msg.offset),
    key: msg.key ? msg.key.toString() : null,
    value: msg.value ? msg.value.toString() : null,
    headers: [...msg.headers].map(([k, v]) => [k.toString(), v.toString()])
  }
}

function toHeaders (pairs) {
  return new Map(pairs.map(([k, v]) => [Buffer.from(k), Buffer.from(v)]))
}

export async function create (bootstrap) {
  const base = { clientId: 'gregor-matrix-platformatic', bootstrapBrokers: [bootstrap] }
  const admin = new Admin(base)
  let version = 'unknown'
  try {
    const { readFileSync } = await import('node:fs')
    const main = require.resolve('@platformatic/kafka')
    version = JSON.parse(readFileSync(main.replace(/dist\/index\.js$/, 'package.json'))).version
  } catch {}
  let pidNote = 'idempotent: true'

  async function withProducer (codec, fn) {
    const p = new Producer({ ...base, idempotent: true, acks: -1, compression: codec, autocreateTopics: false, retries: 3 })
    try { return await fn(p) } finally { await p.close() }
  }

  async function stream (group, topic, opts) {
    const consumer = new Consumer({ ...base, groupId: group, maxWaitTime: 500, autocommit: false })
    const s = await consumer.consume({ topics: [topic], autocommit: false, ...opts })
    return { consumer, s }
  }

  return {
    name: 'platformatic',
    version,
    // zstd is node:zlib's (Node.js >= 22.15 / 23.8); on an older Node the client refuses it itself
    codecs: typeof zlib.zstdCompressSync === 'function' ? ['none', 'gzip', 'snappy', 'lz4', 'zstd'] : ['none', 'gzip', 'snappy', 'lz4'],
    codecNote: `the client's zstd uses node:zlib's zstd, which Node.js ${process.versions.node} does not have (needs >= 22.15)`,
    // A fetch that was in flight while the group rebalanced (maxWaitTime 500 ms) still hands its records to the
    // stream for partitions the member just lost, so records produced right after the group is Stable reach two
    // members (seen on Kafka 4.1.1 as on Gregor with a 20 ms wait; on Gregor none with 500 ms or more).
    settleMs: 1500,
    settleNote: 'a fetch in flight during the rebalance still delivers revoked partitions (same on Kafka 4.1.1)',
    idempotence: () => pidNote,

    async createTopic (topic, partitions, configs) {
      await admin.createTopics({ topics: [topic], partitions, replicas: 1, configs: Object.entries(configs).map(([name, value]) => ({ name, value })) })
    },

    async produce (topic, codec, recs) {
      await withProducer(codec, async p => {
        for (let i = 0; i < recs.length; i += 500) {
          await p.send({ messages: recs.slice(i, i + 500).map(r => ({ topic, key: Buffer.from(r.key), value: Buffer.from(r.value), headers: toHeaders(r.headers) })) })
        }
        if (p.producerId !== undefined) pidNote = `idempotent: true (producer id ${p.producerId})`
      })
    },

    async produceOne (topic, key, value) {
      await withProducer('none', p => p.send({ messages: [{ topic, key: Buffer.from(key), value: Buffer.from(value) }] }))
    },

    async newMember (id, group, topic, onRecord, gate) {
      const { consumer, s } = await stream(group, topic, { mode: 'committed', fallbackMode: 'earliest' })
      const last = new Map()
      s.on('error', e => console.log(`    ${id} stream error: ${e.message}`))
      gate.then(() => s.on('data', msg => {
        last.set(msg.partition, msg)
        onRecord(decode(msg, id))
      }))
      return {
        async commit () {
          const offsets = [...last.values()].map(m => ({ topic, partition: m.partition, offset: m.offset + 1n, leaderEpoch: -1 }))
          if (offsets.length) await consumer.commit({ offsets })
        },
        async close () { await s.close(); await consumer.close() }
      }
    },

    async describeGroup (group, topic) {
      const groups = await admin.describeGroups({ groups: [group] })
      const g = groups.get(group)
      if (!g) throw new Error(`describeGroups has no ${group}`)
      const ends = await this.listOffsets(topic, -1)
      const answer = await admin.listConsumerGroupOffsets({ groups: [{ groupId: group, topics: [{ name: topic, partitionIndexes: [...ends.keys()] }] }] })
      const commits = new Map()
      let lag = 0
      for (const t of answer[0].topics) {
        for (const p of t.partitions) {
          const off = Number(p.committedOffset)
          if (off >= 0) { commits.set(p.partitionIndex, off); lag += ends.get(p.partitionIndex) - off } else lag += ends.get(p.partitionIndex)
        }
      }
      return { state: g.state, members: g.members.size, lag, commits }
    },

    async listOffsets (topic, which) {
      const meta = await admin.metadata({ topics: [topic] })
      const t = meta.topics.get(topic)
      if (!t) throw new Error(`no metadata for ${topic}`)
      const partitions = []
      for (let p = 0; p < t.partitionsCount; p++) partitions.push({ partitionIndex: p, timestamp: BigInt(which) })
      const res = await admin.listOffsets({ topics: [{ name: topic, partitions }] })
      const m = new Map()
      for (const p of res[0].partitions) m.set(p.partitionIndex, Number(p.offset))
      return m
    },

    async outOfRangeNone (topic, offset) {
      const { consumer, s } = await stream(`matrix-platformatic-none-${Date.now() % 1e9}`, topic,
        { mode: 'manual', offsets: [{ topic, partition: 0, offset: BigInt(offset) }] })
      try {
        return await new Promise(resolve => {
          s.on('error', e => resolve(e))
          s.on('data', () => resolve(null))
          setTimeout(() => resolve(null), 10000)
        })
      } finally { await s.close().catch(() => {}); await consumer.close(true).catch(() => {}) }
    },

    async outOfRangeEarliest (topic, offset) {
      const group = `matrix-platformatic-oor-${Date.now() % 1e9}`
      await admin.alterConsumerGroupOffsets({ groupId: group, topics: [{ name: topic, partitionOffsets: [{ partition: 0, offset: BigInt(offset) }] }] })
      const { consumer, s } = await stream(group, topic, { mode: 'committed', fallbackMode: 'earliest' })
      try {
        return await new Promise((resolve, reject) => {
          s.on('error', e => {
            if (/not within the range|OFFSET_OUT_OF_RANGE/.test(JSON.stringify(e.errors?.map(x => x.message)) + e.message)) {
              reject(new NotApplicable('@platformatic/kafka has no reset on OFFSET_OUT_OF_RANGE (fallbackMode only covers a missing committed offset): ' +
                'a committed offset past the end makes the stream fail with OFFSET_OUT_OF_RANGE, on Kafka 4.1.1 as on Gregor'))
            } else reject(e)
          })
          s.on('data', msg => { if (msg.partition === 0) resolve(Number(msg.offset)) })
          setTimeout(() => reject(new Error('no record from partition 0 after the reset')), 20000)
        })
      } finally { await s.close().catch(() => {}); await consumer.close(true).catch(() => {}) }
    },

    async readBack (topic, n) {
      const { consumer, s } = await stream(`matrix-platformatic-read-${topic}`, topic, { mode: 'earliest' })
      const got = []
      s.on('data', msg => got.push(decode(msg, 'reader')))
      try {
        for (let i = 0; i < 600 && got.length < n; i++) await sleep(100)
      } finally { await s.close().catch(() => {}); await consumer.close(true).catch(() => {}) }
      return got
    },

    // step 7: Producer({ transactionalId }).beginTransaction() (send, commit, abort; addConsumer and addOffset put
    // a group consumer's offsets in the transaction); consume({ isolationLevel }) picks read_committed (1) or not (0)
    async txnProduce (topic, tid, batches) {
      const p = new Producer({ ...base, idempotent: true, transactionalId: tid, acks: -1, autocreateTopics: false, retries: 3 })
      try {
        for (const b of batches) {
          const txn = await p.beginTransaction()
          await txn.send({ messages: b.recs.map(r => ({ topic, key: Buffer.from(r.key), value: Buffer.from(r.value) })) })
          if (b.commit) await txn.commit(); else await txn.abort()
        }
      } finally { await p.close() }
      return 'Producer({ transactionalId }).beginTransaction() send/commit/abort'
    },

    async readValues (topic, readCommitted, want) {
      const { consumer, s } = await stream(`matrix-platformatic-rv-${Date.now() % 1e9}-${Math.random()}`, topic, { mode: 'earliest', isolationLevel: readCommitted ? 1 : 0 })
      const got = []
      s.on('data', msg => got.push(msg.value.toString()))
      try {
        let quiet = 0
        for (let i = 0; i < 200 && (quiet === 0 || Date.now() < quiet); i++) {
          await sleep(100)
          if (got.length >= want && quiet === 0) quiet = Date.now() + 1500
        }
      } finally { await s.close().catch(() => {}); await consumer.close(true).catch(() => {}) }
      return got
    },

    async ctp (src, dst, group, tid, want) {
      const p = new Producer({ ...base, idempotent: true, transactionalId: tid, acks: -1, autocreateTopics: false, retries: 3 })
      const { consumer, s } = await stream(group, src, { mode: 'committed', fallbackMode: 'earliest', isolationLevel: 1 })
      const pending = []
      let n = 0
      s.on('data', msg => pending.push(msg))
      try {
        for (let i = 0; i < 300 && n < want; i++) {
          await sleep(100)
          if (!pending.length) continue
          const batch = pending.splice(0)
          const txn = await p.beginTransaction()
          await txn.addConsumer(consumer)
          await txn.send({ messages: batch.map(m => ({ topic: dst, key: m.key, value: Buffer.from('out-' + m.value.toString()) })) })
          for (const m of batch) await txn.addOffset(m)
          await txn.commit()
          n += batch.length
        }
      } finally { await s.close().catch(() => {}); await consumer.close(true).catch(() => {}); await p.close() }
      return n
    },

    async close () { await admin.close() }
  }
}
