// Package tokenizer is a pure-Go byte-level BPE tokenizer for Hugging Face tokenizer.json files
// of the Qwen2/Qwen3 family (and the Llama 3 variant of their regex) that gives exactly the token
// IDs of the reference Rust tokenizer (tokenizers 0.23): added and special tokens matched first
// as its AddedVocabulary does, NFC with the reference's own (Unicode 9.0) tables, the Split
// pre-tokenizer regex reproduced by a hand-written scanner with the reference's Unicode 16.0
// character classes, byte-level mapping, merges by rank with a word cache, and the ByteLevel
// decoder. StreamDecoder turns generated IDs into text as they arrive.
//
// It owns text <-> token IDs and nothing else: it knows no chat template, no model and no
// generation settings, and it refuses tokenizer.json files whose pipeline it cannot reproduce
// exactly rather than approximating them.
package tokenizer

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokenizer encodes text to token IDs and back. It is safe for concurrent use.
type Tokenizer struct {
	path string

	tokens []string       // raw bytes of each ID; empty where no token has the ID
	ids    map[string]int // model vocabulary: raw bytes -> ID
	added  []*addedToken
	byID   map[int]*addedToken
	vocab  int // highest ID + 1

	rawAdded  matcher // added tokens matched in the text as given
	normAdded matcher // added tokens matched in the normalized text

	merges       pairTable  // pairKey -> rank<<32 | merged ID
	byteIDs      [256]int32 // ID of the one-byte token of each byte
	normalize    bool       // NFC
	maxDigits    int        // 1 (\p{N}) or 3 (\p{N}{1,3})
	ignoreMerges bool       // a word that is in the vocabulary is one token

	cache   wordCache
	noCache bool // for benchmarks

	special map[string]string // tokenizer_config.json's bos_token, eos_token, pad_token, unk_token
}

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	id         int
	content    string // as written in tokenizer.json
	match      string // what is matched in the text: content, normalized if the token is
	singleWord bool
	lstrip     bool
	rstrip     bool
	normalized bool
	special    bool
}

// Encode returns the token IDs of text. No special tokens are added; the strings of added and
// special tokens in the text (e.g. "<|im_end|>") become their IDs. Invalid UTF-8 is first
// replaced by U+FFFD, one for each maximal invalid subpart, as Rust's from_utf8_lossy does.
func (t *Tokenizer) Encode(text string) []int {
	text = lossy(text)
	out := make([]int, 0, len(text)/3+1)
	t.rawAdded.split(text, func(piece string, tok *addedToken) {
		if tok != nil {
			out = append(out, tok.id)
			return
		}
		if t.normalize {
			piece = nfc(piece)
		}
		t.normAdded.split(piece, func(piece string, tok *addedToken) {
			if tok != nil {
				out = append(out, tok.id)
				return
			}
			splitWords(piece, t.maxDigits, func(start, end int) {
				out = t.encodeWord(piece[start:end], out)
			})
		})
	})
	return out
}

// Decode returns the text of ids, special tokens included. Byte sequences that are not valid
// UTF-8 become U+FFFD, one for each maximal invalid subpart, as in the reference decoder.
func (t *Tokenizer) Decode(ids []int) (string, error) {
	buf := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		b, err := t.tokenBytes(id)
		if err != nil {
			return "", err
		}
		buf = append(buf, b...)
	}
	if utf8.Valid(buf) {
		return string(buf), nil
	}
	return string(appendLossy(make([]byte, 0, len(buf)+8), buf)), nil
}

// DecodeToken returns the raw bytes of one token, which may be part of a UTF-8 sequence.
func (t *Tokenizer) DecodeToken(id int) ([]byte, error) {
	b, err := t.tokenBytes(id)
	if err != nil {
		return nil, err
	}
	return []byte(b), nil
}

// ErrUnknownID is wrapped by the errors of Decode, DecodeToken and StreamDecoder.Add for an ID
// with no token.
var ErrUnknownID = errors.New("no token has this ID")

func (t *Tokenizer) tokenBytes(id int) (string, error) {
	if id < 0 || id >= len(t.tokens) || t.tokens[id] == "" {
		return "", fmt.Errorf("tokenizer: token ID %d (vocabulary size %d): %w", id, t.vocab, ErrUnknownID)
	}
	return t.tokens[id], nil
}

// TokenID returns the ID of a token written as tokenizer.json writes it: the content of an added
// token (e.g. "<|im_end|>") or a vocabulary entry in byte-level form (e.g. "Ġthe").
func (t *Tokenizer) TokenID(s string) (int, bool) {
	for _, a := range t.added {
		if a.content == s {
			return a.id, true
		}
	}
	b, ok := unByteLevel(s)
	if !ok {
		return 0, false
	}
	id, ok := t.ids[string(b)]
	return id, ok
}

// VocabSize returns the highest token ID plus one, added tokens included (151,669 for Qwen3;
// the model's embedding table may have more rows, which no text decodes to).
func (t *Tokenizer) VocabSize() int { return t.vocab }

// IsSpecial reports whether id is an added token marked special (e.g. "<|im_end|>").
func (t *Tokenizer) IsSpecial(id int) bool {
	a, ok := t.byID[id]
	return ok && a.special
}

// SpecialToken returns the ID of a token named in tokenizer_config.json by LoadDir: name is
// "bos_token", "eos_token", "pad_token" or "unk_token". ok is false when the file was not read,
// does not name that token, or names one that is not in the vocabulary.
func (t *Tokenizer) SpecialToken(name string) (id int, ok bool) {
	s, found := t.special[name]
	if !found {
		return 0, false
	}
	return t.TokenID(s)
}

// matcher finds added tokens in text as Hugging Face's AddedVocabulary does: non-overlapping,
// leftmost first and longest first at the same position, then honouring each token's
// single_word, lstrip and rstrip flags.
type matcher struct {
	byFirst [256][]*addedToken // by first byte, longest first
	firsts  []byte             // the first bytes in use
}

func (m *matcher) add(a *addedToken) {
	c := a.match[0]
	l := m.byFirst[c]
	if len(l) == 0 {
		m.firsts = append(m.firsts, c)
	}
	i := len(l)
	for i > 0 && len(l[i-1].match) < len(a.match) {
		i--
	}
	l = append(l, nil)
	copy(l[i+1:], l[i:])
	l[i] = a
	m.byFirst[c] = l
}

// split calls fn with the pieces of s in order: added tokens with their token, the text between
// them with nil. Text made only of an empty string gives no call.
func (m *matcher) split(s string, fn func(piece string, tok *addedToken)) {
	done := 0 // end of what fn has seen
	for i := 0; i < len(s); {
		if len(m.firsts) == 1 { // skip ahead to the only possible first byte
			j := strings.IndexByte(s[i:], m.firsts[0])
			if j < 0 {
				break
			}
			i += j
		}
		var tok *addedToken
		for _, a := range m.byFirst[s[i]] {
			if len(s)-i >= len(a.match) && s[i:i+len(a.match)] == a.match {
				tok = a
				break
			}
		}
		if tok == nil {
			i++
			continue
		}
		start, stop := i, i+len(tok.match)
		i = stop
		if tok.singleWord {
			if (start > 0 && endsWithWord(s[:start])) || (stop < len(s) && startsWithWord(s[stop:])) {
				continue
			}
		}
		if tok.lstrip {
			start = max(spaceLeftmostAtEnd(s[:start]), done)
		}
		if tok.rstrip {
			stop += spaceRightmostAtStart(s[stop:])
			i = stop
		}
		if done < start {
			fn(s[done:start], nil)
		}
		fn(s[start:stop], tok)
		done = stop
	}
	if done < len(s) {
		fn(s[done:], nil)
	}
}

// isWordChar is \w of Rust's regex crate, which Hugging Face uses for single_word:
// Alphabetic, marks, decimal digits, connector punctuation and the join controls.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.In(r, unicode.Nl, unicode.Other_Alphabetic, unicode.Pc, unicode.Join_Control)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWordChar(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordChar(r)
}

// spaceLeftmostAtEnd returns where the whitespace at the end of s starts.
func spaceLeftmostAtEnd(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.Is(unicode.White_Space, r) {
			break
		}
		i -= n
	}
	return i
}

// spaceRightmostAtStart returns the length of the whitespace at the start of s.
func spaceRightmostAtStart(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.Is(unicode.White_Space, r) {
			break
		}
		i += n
	}
	return i
}
