// probe_classes.js asks the reference tokenizer (npm tokenizers@0.23.2) how its pre-tokenizer
// regex classifies every code point: L (\p{L}), N (\p{N}), W (\s other than CR, LF and space),
// O (anything else) and S (surrogate, skipped). Development tool only; never run by tests.
//
//   cd /tmp/tok && npm install tokenizers@0.23.2
//   NODE_PATH=/tmp/tok/node_modules node probe_classes.js TOKENIZER_JSON > classes.txt
//
// The output is one character per code point U+0000..U+10FFFF.
const {Tokenizer} = require('tokenizers');
const pt = Tokenizer.fromFile(process.argv[2]).getPreTokenizer();
const out = [];
for (let cp = 0; cp <= 0x10ffff; cp++) {
  if (cp >= 0xd800 && cp < 0xe000) { out.push('S'); continue; }
  const c = String.fromCodePoint(cp);
  // Piece lengths (in code points) of "x"+c+"!":
  //   L: ["xc","!"]  O: ["x","c!"]  N and whitespace: ["x","c","!"].
  const p1 = pt.preTokenizeString('x' + c + '!').map(p => p[1][1] - p[1][0]);
  let k;
  if (p1.length == 2 && p1[0] == 2) k = 'L';
  else if (p1.length == 2 && p1[0] == 1) k = 'O';
  else if (p1.length == 3) k = pt.preTokenizeString(c + 'a').length == 1 ? 'W' : 'N';
  else throw new Error('unexpected split for U+' + cp.toString(16));
  // The probes cannot see that CR, LF and space are \s: "\r"+"a" splits as a digit would, and
  // " !" is one piece through the regex's literal " ?". The runs of the corpus check them.
  if (cp == 0x0a || cp == 0x0d || cp == 0x20) k = 'W';
  out.push(k);
}
process.stdout.write(out.join(''));
