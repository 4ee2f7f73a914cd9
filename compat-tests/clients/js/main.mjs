// main.mjs: node main.mjs <kafkajs|platformatic> BOOTSTRAP quick|full RESULT_JSON
// Loads the client's adapter, runs the scenario (scenario.mjs) and writes result.json. A client that fails to
// load (e.g. a Node.js older than it supports) is written as one result with install_error.
import { Scenario, writeResult, errText } from './scenario.mjs'

const [client, bootstrap, mode, out] = process.argv.slice(2)
const res = { client, version: 'unknown', language: `JavaScript (Node.js ${process.versions.node})`, install_error: null, steps: [] }
let adapter
try {
  const mod = await import(`./${client}.mjs`)
  adapter = await mod.create(bootstrap)
} catch (e) {
  res.install_error = `${client} did not load or connect: ${errText(e)}`
  writeResult(out, res)
  console.log(res.install_error)
  process.exit(0)
}
res.version = adapter.version
const sc = new Scenario(adapter, mode)
await sc.run()
res.steps = sc.steps
await adapter.close().catch(() => {})
writeResult(out, res)
process.exit(0)
