// Baseline for tests/bench/bench_crypto.py: the same operations, with the same inputs, through
// nostr-tools (the library the CodeDeck phone app uses), measured the same way (each case in
// rounds of at least min_time seconds, rounds interleaved round-robin, median round in ops/s).
//
// Usage: node crypto_bench.cjs <node_prefix_dir> <inputs.json>   (prints one JSON object)
'use strict'

const path = require('node:path')
const fs = require('node:fs')
const { createRequire } = require('node:module')

const [prefix, inputsPath] = process.argv.slice(2)
const nodeRequire = createRequire(path.join(path.resolve(prefix), 'package.json'))
const { finalizeEvent, verifyEvent, nip44 } = nodeRequire('nostr-tools')
const ntVersion = JSON.parse(
  fs.readFileSync(path.join(path.resolve(prefix), 'node_modules', 'nostr-tools', 'package.json'), 'utf8'),
).version

const input = JSON.parse(fs.readFileSync(inputsPath, 'utf8'))
const hexToBytes = (hex) => new Uint8Array(Buffer.from(hex, 'hex'))
const bridgeSecret = hexToBytes(input.bridge_secret)
const phoneHex = input.phone_pubkey
// Precomputed once, as the Python side caches it per peer.
const conversationKey = nip44.v2.utils.getConversationKey(bridgeSecret, phoneHex)

const fail = (message) => {
  throw new Error(message)
}

function signCase() {
  const t = input.sign
  return () => finalizeEvent({ kind: t.kind, created_at: t.created_at, tags: t.tags, content: t.content }, bridgeSecret)
}

function verifyCase() {
  const e = JSON.parse(input.verify_event)
  // A fresh object each call: verifyEvent caches its verdict on the object it is given.
  return () => {
    verifyEvent({ id: e.id, pubkey: e.pubkey, created_at: e.created_at, kind: e.kind, tags: e.tags, content: e.content, sig: e.sig }) ||
      fail('verify failed')
  }
}

function outboundCase(size) {
  const message = input.messages[size]
  const o = input.outbound
  return () => {
    const plaintext = JSON.stringify(message)
    const content = nip44.v2.encrypt(plaintext, conversationKey)
    const event = finalizeEvent({ kind: o.kind, created_at: o.created_at, tags: o.tags, content }, bridgeSecret)
    return JSON.stringify(['EVENT', event])
  }
}

function inboundCase(size) {
  const eventJson = input.inbound_events[size]
  return () => {
    const event = JSON.parse(eventJson)
    if (!verifyEvent(event)) fail('inbound verify failed')
    return JSON.parse(nip44.v2.decrypt(event.content, conversationKey))
  }
}

const cases = {
  sign: signCase(),
  verify: verifyCase(),
}
for (const size of Object.keys(input.plaintexts)) {
  const plaintext = input.plaintexts[size]
  const payload = input.payloads[size]
  cases[`nip44_encrypt_${size}`] = () => nip44.v2.encrypt(plaintext, conversationKey)
  cases[`nip44_decrypt_${size}`] = () => {
    nip44.v2.decrypt(payload, conversationKey).length === plaintext.length || fail('decrypt mismatch')
  }
}
for (const size of Object.keys(input.messages)) {
  cases[`outbound_${size}`] = outboundCase(size)
  cases[`inbound_${size}`] = inboundCase(size)
}

// Samples for the Python side to check that both sides did the same work.
const samples = {}
for (const size of Object.keys(input.messages)) samples[`outbound_${size}`] = JSON.parse(cases[`outbound_${size}`]())[1]
for (const size of Object.keys(input.messages)) {
  const decoded = cases[`inbound_${size}`]()
  JSON.stringify(decoded) === JSON.stringify(input.messages[size]) || fail(`inbound ${size} decoded wrongly`)
}

function calibrate(fn, minTime) {
  let number = 1
  for (;;) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < number; i++) fn()
    const elapsed = Number(process.hrtime.bigint() - start) / 1e9
    if (elapsed >= minTime) return number
    number = elapsed > 0 ? Math.max(number * 2, Math.floor((number * 1.2 * minTime) / elapsed) + 1) : number * 10
  }
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

const only = input.only && input.only.length ? input.only : Object.keys(cases)
const numbers = {}
for (const name of only) numbers[name] = calibrate(cases[name], input.min_time)
const samplesPerCase = Object.fromEntries(only.map((name) => [name, []]))
for (let round = 0; round < input.rounds; round++) {
  for (const name of only) {
    const fn = cases[name]
    const number = numbers[name]
    const start = process.hrtime.bigint()
    for (let i = 0; i < number; i++) fn()
    samplesPerCase[name].push(number / (Number(process.hrtime.bigint() - start) / 1e9))
  }
}

process.stdout.write(
  JSON.stringify({
    versions: { node: process.version, nostr_tools: ntVersion },
    ops: Object.fromEntries(only.map((name) => [name, median(samplesPerCase[name])])),
    samples,
  }),
)
