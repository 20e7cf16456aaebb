// Compiles every tool's inputSchema and outputSchema under Ajv's strict mode,
// as MCP clients do (the TypeScript SDK validates with Ajv 8; strict mode
// refuses, among others, a top-level oneOf without a type and unknown
// keywords). Run by tests/gateway/tools_test.cpp with NODE_PATH naming the
// node_modules that scripts/bootstrap fills (.cache/npm).
//   node ajv_strict_check.cjs TOOLS.json
// TOOLS.json: [{"name", "inputSchema", "outputSchema"}]. Prints one line per
// schema that does not compile and exits 1; exits 0 when all compile.
'use strict';
const fs = require('fs');
const Ajv = require('ajv').default;
const Ajv2020 = require('ajv/dist/2020').default;

const tools = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
let failures = 0;
for (const [label, make] of [
  ['draft-07', () => new Ajv({strict: true, allErrors: true})],
  ['2020-12', () => new Ajv2020({strict: true, allErrors: true})],
]) {
  for (const tool of tools) {
    for (const key of ['inputSchema', 'outputSchema']) {
      if (tool[key] === undefined) continue;
      try {
        make().compile(tool[key]);
      } catch (e) {
        failures++;
        console.log(`${tool.name} ${key} (${label}): ${e.message}`);
      }
    }
  }
}
console.log(`${tools.length} tools checked, ${failures} schemas refused`);
process.exit(failures === 0 ? 0 : 1);
