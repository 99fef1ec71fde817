// Writes small.expected.jsonl and small-llama3.expected.jsonl: for each line of cases.jsonl, the
// reference IDs (npm tokenizers@0.23.2, no special tokens added) and the decode of those IDs.
//   NODE_PATH=/tmp/tok/node_modules node make_expected.js
const {Tokenizer} = require('tokenizers');
const fs = require('fs');
const cases = fs.readFileSync('cases.jsonl', 'utf8').split('\n').filter(l => l.length).map(l => JSON.parse(l));
(async () => {
  for (const name of ['small', 'small-llama3']) {
    const t = Tokenizer.fromFile(name + '.json');
    const out = [];
    for (const c of cases) {
      const ids = (await t.encode(c, null, {addSpecialTokens: false})).getIds();
      out.push(JSON.stringify({ids, decoded: await t.decode(ids, false)}));
    }
    fs.writeFileSync(name + '.expected.jsonl', out.join('\n') + '\n');
  }
})();
