// scenario.mjs: the client-matrix scenario of issue #9 for the JavaScript clients (kafkajs, @platformatic/kafka),
// run against one broker and written as result.json (steps 1..6d, ok true/false/null; the contract is
// compat-tests/clients/README.md). The same rules as the Go rows (../go/scenario.go, records.go): records carry
// key k0..k49 (round robin), value "v-<key>-<seq>-" padded with 'x' to 100 bytes, headers h-seq and h-src; the
// consumed-records check proves count, no duplicates, per-key order along the offsets, content and headers.
// A client is an adapter (kafkajs.mjs, platformatic.mjs) with the methods used below.
// Usage: node main.mjs <kafkajs|platformatic> BOOTSTRAP quick|full RESULT_JSON
import { writeFileSync } from 'node:fs'

export const NUM_KEYS = 50

export class NotApplicable extends Error {}

export function recValue (key, seq) {
  const v = `v-${key}-${seq}-`
  return v.length < 100 ? v + 'x'.repeat(100 - v.length) : v
}

export function newRec (key, seq, client) {
  return { key, seq, value: recValue(key, seq), headers: [['h-seq', String(seq)], ['h-src', client]] }
}

// parseRec: key and value as strings, headers as [[k, v], ...] strings; returns { seq } or throws.
export function parseRec (key, value, headers, client) {
  const prefix = `v-${key}-`
  if (typeof value !== 'string' || !value.startsWith(prefix)) throw new Error(`key ${key}: value ${String(value).slice(0, 80)} is not what was produced`)
  const num = value.slice(prefix.length).split('-')[0]
  const seq = Number(num)
  if (!/^[0-9]+$/.test(num) || value !== recValue(key, seq)) throw new Error(`key ${key}: value ${value.slice(0, 80)} is not what was produced`)
  const h = Object.fromEntries(headers)
  if (headers.length !== 2 || h['h-seq'] !== num || h['h-src'] !== client) {
    throw new Error(`key ${key} seq ${seq}: headers ${JSON.stringify(headers)}, want [h-seq=${seq} h-src=${client}]`)
  }
  return seq
}

// checkConsumed: got = [{member, partition, offset, key, value, headers}], exp = Map key -> [from, to).
// Returns a detail line; throws on the first problem.
export function checkConsumed (got, exp, client) {
  let want = 0
  for (const [from, to] of exp.values()) want += to - from
  const atOffset = new Map()
  let redelivered = 0
  for (const c of got) {
    c.seq = parseRec(c.key, c.value, c.headers, client)
    const pos = `${c.partition}/${c.offset}`
    const prev = atOffset.get(pos)
    if (prev) {
      if (prev.key !== c.key || prev.seq !== c.seq) throw new Error(`partition ${c.partition} offset ${c.offset} delivered twice with different records`)
      redelivered++
      if (process.env.MATRIX_DEBUG) console.log(`    redelivered p${c.partition} o${c.offset} to ${c.member} (first to ${prev.member})`)
      continue
    }
    atOffset.set(pos, c)
  }
  const where = new Map()
  const keyPart = new Map()
  for (const c of atOffset.values()) {
    const r = exp.get(c.key)
    if (!r || c.seq < r[0] || c.seq >= r[1]) throw new Error(`unexpected record key ${c.key} seq ${c.seq} at partition ${c.partition} offset ${c.offset}`)
    const id = `${c.key}/${c.seq}`
    const other = where.get(id)
    if (other) throw new Error(`key ${c.key} seq ${c.seq} is in the log twice: partition ${other.partition} offset ${other.offset} and partition ${c.partition} offset ${c.offset}`)
    where.set(id, c)
    if (keyPart.has(c.key) && keyPart.get(c.key) !== c.partition) throw new Error(`key ${c.key} is on partitions ${keyPart.get(c.key)} and ${c.partition}`)
    keyPart.set(c.key, c.partition)
  }
  if (where.size !== want) {
    const missing = []
    for (const [key, [from, to]] of exp) {
      for (let s = from; s < to && missing.length < 5; s++) if (!where.has(`${key}/${s}`)) missing.push(`${key}/${s}`)
    }
    throw new Error(`${where.size} of ${want} records consumed (${got.length} deliveries); missing e.g. ${missing.join(' ')}`)
  }
  const byKey = new Map()
  for (const c of atOffset.values()) {
    if (!byKey.has(c.key)) byKey.set(c.key, [])
    byKey.get(c.key).push(c)
  }
  for (const [key, cs] of byKey) {
    cs.sort((a, b) => a.offset - b.offset)
    for (let i = 1; i < cs.length; i++) {
      if (cs[i].seq !== cs[i - 1].seq + 1) throw new Error(`key ${key} out of order: seq ${cs[i].seq} at offset ${cs[i].offset} follows seq ${cs[i - 1].seq} at offset ${cs[i - 1].offset}`)
    }
  }
  if (redelivered > 0) throw new Error(`${redelivered} records were delivered more than once`)
  return `${want} records, ${byKey.size} keys in order, content and headers ok`
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function withTimeout (promise, ms, what) {
  let t
  return Promise.race([promise, new Promise((resolve, reject) => { t = setTimeout(() => reject(new Error(`${what}: step deadline ${ms / 1000}s passed`)), ms) })])
    .finally(() => clearTimeout(t))
}

function errText (e) {
  if (!e) return String(e)
  let s = `${e.name && e.name !== 'Error' ? e.name + ': ' : ''}${e.message}`
  if (e.type) s += ` [${e.type}]`
  if (e.code && typeof e.code === 'string') s += ` [${e.code}]`
  if (e.apiId) s += ` [${e.apiId}]`
  if (Array.isArray(e.errors) && e.errors.length) s += ' <- ' + e.errors.slice(0, 2).map(errText).join('; ')
  else if (e.cause) s += ' <- ' + errText(e.cause)
  return s.replace(/\s+/g, ' ')
}

export class Scenario {
  constructor (client, mode) {
    this.c = client
    this.mode = mode
    this.steps = []
    this.ok = {}
    const stamp = Date.now() % 1e9
    this.topic = `matrix-${client.name}-${stamp}`
    this.group = `matrix-${client.name}-group-${stamp}`
    this.next = new Map()
    this.total = 0
    this.members = []
    this.got = []
  }

  get n () { return this.mode === 'full' ? 10000 : 300 }
  get more () { return this.mode === 'full' ? 1000 : 100 }
  get timeoutMs () { return this.mode === 'full' ? 180000 : 40000 }
  get codec () { return this.mode === 'full' ? 'lz4' : (process.env.CODEC || 'lz4') }

  async step (id, name, fn) {
    const start = Date.now()
    const r = { id, name, ok: true, error: null, detail: '' }
    try {
      r.detail = (await withTimeout(fn(), this.timeoutMs, `${id} ${name}`)) || ''
    } catch (e) {
      if (e instanceof NotApplicable) {
        r.ok = null
        r.error = e.message
      } else {
        r.ok = false
        r.error = errText(e)
      }
    }
    r.seconds = (Date.now() - start) / 1000
    this.steps.push(r)
    this.ok[id] = r.ok === true
    const status = r.ok === null ? 'n/a' : r.ok ? 'ok' : 'FAIL'
    console.log(`  ${status.padEnd(4)} ${id} ${name} (${r.seconds.toFixed(1)}s): ${r.error ? r.error + ' | ' : ''}${r.detail}`)
    return r.ok
  }

  makeRecords (n) {
    const recs = []
    for (let i = 0; i < n; i++) {
      const key = `k${this.total % NUM_KEYS}`
      this.total++
      const seq = this.next.get(key) || 0
      this.next.set(key, seq + 1)
      recs.push(newRec(key, seq, this.c.name))
    }
    return recs
  }

  expected (before) {
    const exp = new Map()
    for (const [k, n] of this.next) {
      const from = before.get(k) || 0
      if (from < n) exp.set(k, [from, n])
    }
    return exp
  }

  // collect waits until every expected (key, seq) arrived in this.got (from index `from`), then 500 ms more
  async collect (from, exp) {
    let want = 0
    for (const [a, b] of exp.values()) want += b - a
    const deadline = Date.now() + this.timeoutMs - 2000
    for (;;) {
      const seen = new Set()
      for (let i = from; i < this.got.length; i++) {
        const c = this.got[i]
        const r = exp.get(c.key)
        const seq = Number(String(c.value).split('-')[2])
        if (r && seq >= r[0] && seq < r[1]) seen.add(`${c.key}/${seq}`)
      }
      if (seen.size >= want) break
      if (Date.now() > deadline) break
      await sleep(100)
    }
    await sleep(500)
    return this.got.slice(from)
  }

  async waitStable () {
    const deadline = Date.now() + this.timeoutMs - 2000
    let gi, err
    for (;;) {
      try {
        gi = await this.c.describeGroup(this.group, this.topic)
        err = null
        if (gi.members === 2 && String(gi.state).toLowerCase() === 'stable') return gi
      } catch (e) { err = e }
      if (Date.now() > deadline) {
        throw err || new Error(`group state ${gi && gi.state} with ${gi && gi.members} members, want Stable with 2`)
      }
      await sleep(100)
    }
  }

  async waitCommitted () {
    const deadline = Date.now() + this.timeoutMs - 2000
    let gi, err
    for (;;) {
      try {
        gi = await this.c.describeGroup(this.group, this.topic)
        err = null
        if (gi.lag === 0 && gi.commits.size === 6) return gi
      } catch (e) { err = e }
      if (Date.now() > deadline) throw err || new Error(`committed offsets ${JSON.stringify([...gi.commits])}, lag ${gi.lag} after commit, want lag 0 on 6 partitions`)
      await sleep(200)
    }
  }

  async startMember (id, gate) {
    const m = await this.c.newMember(id, this.group, this.topic, c => this.got.push(c), gate)
    this.members.push(m)
  }

  async commitAll () {
    for (const [i, m] of this.members.entries()) {
      try { await m.commit() } catch (e) { throw new Error(`commit of member ${i + 1}: ${errText(e)}`) }
    }
  }

  async run () {
    await this.step('1', 'create-topic', async () => {
      await this.c.createTopic(this.topic, 6, {})
      try {
        await this.c.createTopic(this.topic + '-6b', 1, { 'max.message.bytes': '65536' })
      } catch (e) { throw new Error(`create the 6b topic with max.message.bytes=65536: ${errText(e)}`) }
      const ends = await this.c.listOffsets(this.topic, -1)
      if (ends.size !== 6) throw new Error(`topic has ${ends.size} partitions, want 6`)
      return '6 partitions, replication factor 1, via the admin API'
    })

    await this.step('2', 'produce', async () => {
      if (!this.ok['1']) throw new Error('skipped: step 1 failed')
      let codec = this.codec
      let note = ''
      if (!this.c.codecs.includes(codec)) {
        note = ` (${this.c.name} cannot produce ${codec}: ${this.c.codecNote}; used gzip)`
        codec = 'gzip'
      }
      const recs = this.makeRecords(this.n)
      await this.c.produce(this.topic, codec, recs)
      return `${recs.length} records, ${NUM_KEYS} keys, codec ${codec}${note}, acks=all, ${this.c.idempotence()}`
    })

    if (this.mode === 'full') {
      for (const codec of ['none', 'gzip', 'snappy', 'lz4', 'zstd']) {
        await this.step(`2-${codec}`, `produce-${codec}`, async () => {
          if (!this.c.codecs.includes(codec)) throw new NotApplicable(`${this.c.name} cannot produce ${codec}: ${this.c.codecNote}`)
          const topic = `${this.topic}-${codec}`
          await this.c.createTopic(topic, 1, {})
          const recs = []
          for (let i = 0; i < 1000; i++) recs.push(newRec(`k${i % NUM_KEYS}`, Math.floor(i / NUM_KEYS), this.c.name))
          await this.c.produce(topic, codec, recs)
          const got = await this.c.readBack(topic, recs.length)
          const exp = new Map()
          for (let k = 0; k < NUM_KEYS; k++) exp.set(`k${k}`, [0, 1000 / NUM_KEYS])
          return `1000 records with ${codec} to ${topic}, read back: ${checkConsumed(got, exp, this.c.name)}`
        })
      }
    }

    await this.step('3', 'group-consume', async () => {
      if (!this.ok['1'] || this.total === 0) throw new Error('skipped: nothing was produced')
      let open
      const gate = new Promise(resolve => { open = resolve })
      await this.startMember('m1', gate)
      await this.startMember('m2', gate)
      await this.waitStable()
      open()
      const exp = this.expected(new Map())
      const got = await this.collect(0, exp)
      const detail = checkConsumed(got, exp, this.c.name)
      const per = {}
      for (const c of got) per[c.member] = (per[c.member] || 0) + 1
      if (Object.keys(per).length < 2) throw new Error(`only ${Object.keys(per).length} member(s) delivered records: ${JSON.stringify(per)}`)
      await this.commitAll()
      await this.waitCommitted()
      this.endsAt3 = await this.c.listOffsets(this.topic, -1)
      return `${detail}; per member ${JSON.stringify(per)}; committed = end offsets`
    })

    await this.step('4', 'restart-resume', async () => {
      if (!this.ok['3']) throw new Error('skipped: step 3 failed')
      await this.members.shift().close()
      const before = new Map(this.next)
      let open
      const gate = new Promise(resolve => { open = resolve })
      await this.startMember('m1b', gate)
      try { await this.waitStable() } catch (e) { throw new Error(`after the restart: ${errText(e)}`) }
      open()
      await sleep(this.c.settleMs || 20)
      this.tsBefore = Date.now()
      await sleep(20)
      const from = this.got.length
      const recs = this.makeRecords(this.more)
      const codec = this.c.codecs.includes(this.codec) ? this.codec : 'gzip'
      await this.c.produce(this.topic, codec, recs)
      const exp = this.expected(before)
      const got = await this.collect(from, exp)
      let old = 0
      for (const c of got) if (Number(String(c.value).split('-')[2]) < (before.get(c.key) || 0)) old++
      if (old > 0) throw new Error(`${old} records from before the committed offsets were delivered again`)
      const detail = checkConsumed(got, exp, this.c.name)
      await this.commitAll()
      await this.waitCommitted()
      const settle = this.c.settleMs ? ` (waited ${this.c.settleMs} ms after Stable: ${this.c.settleNote})` : ''
      return `member m1 closed, m1 rejoined${settle}, ${recs.length} produced: ${detail}`
    })

    await this.step('5', 'describe-lag-list-offsets', async () => {
      if (!this.ok['4']) throw new Error('skipped: step 4 failed')
      const gi = await this.waitStable()
      if (gi.lag !== 0) throw new Error(`lag ${gi.lag} after everything was committed`)
      const earliest = await this.c.listOffsets(this.topic, -2)
      const latest = await this.c.listOffsets(this.topic, -1)
      const byTime = await this.c.listOffsets(this.topic, this.tsBefore)
      const future = await this.c.listOffsets(this.topic, Date.now() + 3600000)
      let sum = 0
      for (let p = 0; p < 6; p++) {
        if (earliest.get(p) !== 0) throw new Error(`earliest offset of partition ${p} is ${earliest.get(p)}, want 0`)
        sum += latest.get(p)
        if (latest.get(p) !== gi.commits.get(p)) throw new Error(`partition ${p}: latest ${latest.get(p)} but committed ${gi.commits.get(p)}`)
        const want = this.endsAt3.get(p)
        const got = byTime.get(p)
        if (latest.get(p) === want) {
          if (got !== -1 && got !== want) throw new Error(`partition ${p}: offset by timestamp ${got}, want -1 or end ${want}`)
        } else if (got !== want) throw new Error(`partition ${p}: offset by timestamp ${got}, want ${want} (first record of step 4)`)
        const f = future.get(p)
        if (f !== -1 && f !== latest.get(p)) throw new Error(`partition ${p}: offset for a future timestamp ${f}, want -1 (or the end ${latest.get(p)})`)
      }
      if (sum !== this.total) throw new Error(`latest offsets add up to ${sum}, ${this.total} records were produced`)
      return `group ${gi.state}, ${gi.members} members, lag 0; earliest all 0, latest sum ${sum}, by-timestamp = step-4 start offsets, future timestamp none`
    })
    for (const m of this.members) await m.close().catch(() => {})
    this.members = []

    await this.step('6a', 'produce-missing-topic-noautocreate', async () => {
      const missing = this.topic + '-missing'
      let err = null
      try { await this.c.produceOne(missing, 'k', 'v') } catch (e) { err = e }
      if (!err) throw new Error(`produce to missing topic ${missing} succeeded (auto-creation is off)`)
      const ends = await this.c.listOffsets(missing, -1).catch(() => null)
      if (ends && ends.size > 0) throw new Error(`the topic exists after the produce: ${JSON.stringify([...ends])}`)
      const t = errText(err).toLowerCase()
      if (!/unknown_topic|unknown topic|does not host this topic|does not exist|not present in metadata/.test(t)) throw new Error(`produce failed, but not with UNKNOWN_TOPIC_OR_PARTITION: ${errText(err)}`)
      return 'client error: ' + errText(err)
    })

    await this.step('6b', 'record-too-large', async () => {
      if (!this.ok['1']) throw new Error('skipped: step 1 failed')
      const big = Buffer.alloc(100 * 1024)
      for (let i = 0; i < big.length; i++) big[i] = (Math.imul(i, 2654435761) >>> 24) & 0xff // incompressible
      let err = null
      try { await this.c.produceOne(this.topic + '-6b', 'big', big) } catch (e) { err = e }
      if (!err) throw new Error('a 100 KB record was accepted by a topic with max.message.bytes=65536')
      const t = errText(err).toLowerCase()
      if (!/too large|too_large|larger than/.test(t)) throw new Error(`produce failed, but not with MESSAGE_TOO_LARGE: ${errText(err)}`)
      await this.c.produceOne(this.topic + '-6b', 'ok', big.subarray(0, 1000))
      return 'client error: ' + errText(err)
    })

    await this.step('6c', 'out-of-range-none', async () => {
      const err = await this.c.outOfRangeNone(this.topic, 1000000)
      if (!err) throw new Error('no error for offset 1000000 past the end with no reset policy')
      const t = errText(err).toLowerCase()
      if (!/out of range|out_of_range|outside the range|not within the range/.test(t)) throw new Error(`error, but not OFFSET_OUT_OF_RANGE: ${errText(err)}`)
      return 'client error: ' + errText(err)
    })

    await this.step('6d', 'out-of-range-earliest', async () => {
      if (this.total === 0) throw new Error('skipped: step 2 produced nothing to reset to')
      const off = await this.c.outOfRangeEarliest(this.topic, 1000000)
      if (off !== 0) throw new Error(`after the reset to earliest the first record had offset ${off}, want 0`)
      return 'offset 1000000 reset to earliest, first record at offset 0'
    })

    if (process.env.TXN === '1') await this.step('7', 'transactions', () => this.transactions())
  }

  // Step 7 (README "7 transactions"): commit 20, abort 20, commit 20 in one transactional producer; a
  // read_committed reader sees exactly the 40 committed, a read_uncommitted one all 60; a
  // consume-transform-produce pass with the offsets in each transaction copies them to a second topic and
  // leaves the group's offsets at the end (the commit marker's offset, or past it).
  async transactions () {
    if (!this.c.txnProduce) throw new NotApplicable(`${this.c.name} has no transactional producer here`)
    const t = `${this.topic}-txn`; const t2 = `${t}-out`; const g = `${t}-group`
    await this.c.createTopic(t, 3, {})
    await this.c.createTopic(t2, 3, {})
    const batches = []; const want = []
    for (const [tag, commit] of [['c1', true], ['a', false], ['c2', true]]) {
      const recs = []
      for (let i = 0; i < 20; i++) recs.push({ key: `k${i % 10}`, value: `tx-${tag}-${i}` })
      batches.push({ recs, commit })
      if (commit) want.push(...recs.map(r => r.value))
    }
    const how = await this.c.txnProduce(t, `${t}-tx`, batches)
    const same = (a, b) => a.length === b.length && [...a].sort().every((v, i) => v === [...b].sort()[i])
    const rc = await this.c.readValues(t, true, want.length)
    if (!same(rc, want)) throw new Error(`read_committed saw ${rc.length} records, want the ${want.length} committed (${rc.filter(v => v.startsWith('tx-a-')).length} aborted among them)`)
    const ru = await this.c.readValues(t, false, 60)
    if (ru.length !== 60) throw new Error(`read_uncommitted saw ${ru.length} records, want 60 (aborted included)`)
    const n = await this.c.ctp(t, t2, g, `${t}-ctp`, want.length)
    const out = await this.c.readValues(t2, true, want.length)
    if (!same(out, want.map(v => 'out-' + v))) throw new Error(`consume-transform-produce: read_committed saw ${out.length} records in ${t2}, want ${want.length}`)
    const ends = await this.c.listOffsets(t, -1)
    const gi = await this.c.describeGroup(g, t)
    for (const [p, end] of ends) {
      const c = gi.commits.get(p)
      if (end > 0 && c !== end - 1 && c !== end) throw new Error(`group ${g} committed ${c} for partition ${p}, want ${end - 1} (or ${end}, past the marker)`)
    }
    return `${how}: committed 20, aborted 20, committed 20; read_committed saw exactly the ${want.length} committed, read_uncommitted 60; consume-transform-produce copied ${n} with the offsets in the transaction, group offsets at the end`
  }
}

export function writeResult (path, res) {
  writeFileSync(path, JSON.stringify(res, null, 2) + '\n')
}

export { sleep, errText }
