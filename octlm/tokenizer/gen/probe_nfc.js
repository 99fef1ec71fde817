// probe_nfc.js normalizes each line (a JSON string) of its input with the reference tokenizer's
// NFC normalizer (npm tokenizers@0.23.2) and writes one JSON string a line. Development tool only.
//
//   NODE_PATH=/tmp/tok/node_modules node probe_nfc.js TOKENIZER_JSON nfc_in.txt > nfc_out.txt
const {Tokenizer} = require('tokenizers');
const fs = require('fs');
const nm = Tokenizer.fromFile(process.argv[2]).getNormalizer();
const lines = fs.readFileSync(process.argv[3], 'utf8').split('\n');
lines.pop();
process.stdout.write(lines.map(l => JSON.stringify(nm.normalizeString(JSON.parse(l)))).join('\n') + '\n');
