// Decodes Sparkplug B payloads with `sparkplug-payload`, the decoder the specification's authors
// publish on npm: one base64 payload per line on stdin, one JSON object per line on stdout
// ({"error": "..."} for a payload that does not decode). Run by tests/sparkplug.rs with Debian's
// nodejs; the package is installed by scripts/setup into target/sparkplug-node.
'use strict';
const path = require('path');
const readline = require('readline');
const modules = process.env.SPARKPLUG_NODE_MODULES || path.join(__dirname, 'node_modules');
const sparkplug = require(path.join(modules, 'sparkplug-payload')).get('spBv1.0');

// Longs (timestamps, aliases, seq) as numbers: all fit in 2^53 here.
function plain(v) {
    if (v === null || v === undefined) return v;
    if (typeof v === 'object' && typeof v.toNumber === 'function') return v.toNumber();
    if (Buffer.isBuffer(v)) return v.toString('base64');
    if (Array.isArray(v)) return v.map(plain);
    if (typeof v === 'object') {
        const out = {};
        for (const [k, x] of Object.entries(v)) out[k] = plain(x);
        return out;
    }
    return v;
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
    try {
        const decoded = sparkplug.decodePayload(Buffer.from(line.trim(), 'base64'));
        process.stdout.write(JSON.stringify(plain(decoded)) + '\n');
    } catch (e) {
        process.stdout.write(JSON.stringify({ error: String(e) }) + '\n');
    }
});
