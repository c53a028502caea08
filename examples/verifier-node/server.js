#!/usr/bin/env node
// A grpo.v1.Verifier written in Node.js (docs/add-a-verifier.md, "Any language over gRPC").
//
// Reward 1.0 when the last integer in the response equals the task's gold answer, else 0.0;
// a response without an integer is NO_ANSWER (reward 0, a verdict). A task without a gold
// answer, or of a task type this verifier does not declare, is refused with INVALID_ARGUMENT
// (the whole ScoreBatch then fails and the caller retries its items one by one).
//
//   npm ci                       # once, in this folder (or: make node-verifier)
//   node server.js --port 50070  # --host, --task-types arith,exact, --proto ../../proto
//
// The protos are loaded at run time from the repository's proto/ folder: its include root
// (protoc's `-I proto`) is passed as includeDirs, so `import "grpo/v1/common.proto"` resolves.
// Each RPC writes one JSON line to stdout ({"rpc": ..., "items": ...}).
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  if (at > 0 && at + 1 < process.argv.length) return process.argv[at + 1];
  const env = process.env[`VERIFIER_${name.toUpperCase().replace(/-/g, '_')}`];
  return env !== undefined ? env : fallback;
}

const PROTO_ROOT = path.resolve(option('proto', path.join(__dirname, '..', '..', 'proto')));
const HOST = option('host', '127.0.0.1');
const PORT = option('port', '50070');
const TASK_TYPES = option('task-types', 'arith,exact').split(',').map((s) => s.trim()).filter(Boolean);
const NAME = 'node-last-integer';
const VERSION = '1.0.0';

const definition = protoLoader.loadSync('grpo/v1/verifier.proto', {
  includeDirs: [PROTO_ROOT],
  keepCase: true, // field names as in the .proto: gold_answer, task_types
  enums: String,
  defaults: true,
});
const v1 = grpc.loadPackageDefinition(definition).grpo.v1;

class Refused extends Error {}

function integer(text) {
  return /^[+-]?\d+$/.test(text) ? BigInt(text) : null;
}

function score(item) {
  const started = process.hrtime.bigint();
  const task = item.task || {};
  if (task.type && !TASK_TYPES.includes(task.type)) {
    throw new Refused(`task.type '${task.type}' is not one of ${TASK_TYPES.join(', ')}`);
  }
  const gold = (task.gold_answer || '').trim();
  if (!gold) throw new Refused(`task.gold_answer is required (task id '${task.id}')`);
  const found = (item.response || '').match(/-?\d+/g);
  let result;
  if (!found) {
    result = { status: 'SCORE_STATUS_NO_ANSWER', reward: 0, detail: 'no integer in the response' };
  } else {
    const last = found[found.length - 1];
    const want = integer(gold);
    const same = want !== null ? BigInt(last) === want : last === gold;
    result = { status: 'SCORE_STATUS_OK', reward: same ? 1 : 0, extracted_answer: last };
  }
  const latency = Number(process.hrtime.bigint() - started) / 1e9;
  return { ...result, latency_s: latency, verifier: NAME };
}

function answer(rpc, items, callback, produce) {
  console.log(JSON.stringify({ rpc, items }));
  try {
    callback(null, produce());
  } catch (err) {
    const code = err instanceof Refused ? grpc.status.INVALID_ARGUMENT : grpc.status.INTERNAL;
    callback({ code, details: err.message });
  }
}

const server = new grpc.Server();
server.addService(v1.Verifier.service, {
  Describe(call, callback) {
    answer('Describe', 0, callback, () => ({
      name: NAME,
      version: VERSION,
      task_types: TASK_TYPES,
      kind: 'VERIFIER_KIND_OUTCOME',
      config: { task_types: TASK_TYPES.join(',') },
    }));
  },
  Score(call, callback) {
    answer('Score', 1, callback, () => ({ score: score(call.request) }));
  },
  ScoreBatch(call, callback) {
    const items = call.request.items || [];
    answer('ScoreBatch', items.length, callback, () => ({ scores: items.map(score) }));
  },
});

server.bindAsync(`${HOST}:${PORT}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    console.error(`cannot listen on ${HOST}:${PORT}: ${err.message}`);
    process.exit(1);
  }
  console.log(JSON.stringify({ listening: `${HOST}:${port}`, task_types: TASK_TYPES }));
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.tryShutdown(() => process.exit(0)));
}
