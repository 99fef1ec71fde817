"""Writes small tokenizer.json files that exercise what Qwen3's file does not: added-token flags
(single_word, lstrip, rstrip, normalized), overlapping added tokens, added tokens outside the
byte-level alphabet, the Llama 3 digit rule and ignore_merges. cases.jsonl holds the strings;
make_expected.js (npm tokenizers@0.23.2) writes the reference IDs and decodes.

    python3 make_small.py && NODE_PATH=/tmp/tok/node_modules node make_expected.js
"""
import json

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}

B = bytes_to_unicode()
def bl(s):
    return "".join(B[b] for b in s.encode("utf-8"))

vocab = {B[b]: b for b in range(256)}
merges = []
def merge(a, b):
    a, b = (bl(x) if isinstance(x, str) else "".join(B[c] for c in x) for x in (a, b))
    merges.append([a, b])
    if a + b not in vocab:
        vocab[a + b] = len(vocab)
for a, b in [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (" ", "w"), (" w", "o"), ("r", "l"),
             (" wo", "rl"), (" worl", "d"), ("1", "2"), ("12", "3"), ("a", "a"), ("aa", "aa"), (b"\xc3", b"\xa9"), ("é", "t"),
             ("\n", "\n"), (" ", " "), ("  ", "  "), ("'", "s")]:
    merge(a, b)
# A token that only ignore_merges reaches: "xyz" is in the vocabulary but no merge builds it.
vocab[bl("xyz")] = len(vocab)

def added(content, **kw):
    d = {"id": None, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False}
    d.update(kw)
    return d

added_tokens = [
    added("<s>", special=True),
    added("[SW]", single_word=True),
    added("[L]", lstrip=True),
    added("[R]", rstrip=True),
    added("[LR]", lstrip=True, rstrip=True, special=True),
    added("<a>"),
    added("<a><b>"),
    added("ab"),
    added("abc"),
    added("hello world"),
    added("Ġx"),
    added("é", normalized=True),
    added("Å"),
    added("ﬁ", normalized=True),
]
for i, a in enumerate(added_tokens):
    a["id"] = len(vocab) + i

pre_split = lambda pattern: {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
QWEN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

def tokenizer(pattern, ignore_merges, flat_merges):
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added_tokens,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": pre_split(pattern),
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": vocab,
                  "merges": [a + " " + b for a, b in merges] if flat_merges else merges},
    }

with open("small.json", "w") as f:
    json.dump(tokenizer(QWEN, False, False), f, ensure_ascii=False, indent=1)
with open("small-llama3.json", "w") as f:
    json.dump(tokenizer(LLAMA3, True, True), f, ensure_ascii=False, indent=1)

cases = [
    "hello world", "hello world!", "hello worldhello world", " hello world ",
    "<s>hello<s>", "<s><s>", "<s", "s>",
    "[SW]", "a [SW] b", "a[SW]b", "a[SW] b", "a [SW]b", "1[SW]2", "_[SW]_", "é[SW]", "[SW][SW]", "²[SW]", "\u0301[SW]", "x\u200d[SW]", "\u0663[SW]", "\u216b[SW]", "\u203f[SW]",
    "[SW]\u0345", "[SW]\u00b2", "[SW]\u0f20", "\u2028[SW]\u0085", " [SW] ",
    "a [L] b", "a   [L]b", "[L]", "\t\n [L]", "[R]x", "a [R]   b", "a [R]\n\n b", "x [LR]  y", "[R] [L]", "[LR] [LR]  [LR]",
    "a\u3000[L]\u3000b", "a\u00a0[R]\u00a0b",
    "<a><b>", "<a><b", "<a>", "<a><a><b>", "abc", "ab", "abcab", "xabcx",
    "hello world", "hello  world", "Ġx", "Ġxx", " x",
    "é", "e\u0301", "ée\u0301", "Å", "A\u030a", "\u212b", "ﬁ", "fi", "aé [SW]",
    "12345678", "1234567 89", "aaaaaaaaa", "xyz", "xyzxyz", " xyz", "it's", "IT'S", "\n\n\n", "       x",
    "'s's", "hello\r\nworld", "",
]
with open("cases.jsonl", "w") as f:
    for c in cases:
        f.write(json.dumps(c) + "\n")
