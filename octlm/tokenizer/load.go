package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// tokenizerJSON is the part of tokenizer.json that Load reads. truncation, padding and
// post_processor are not read: Encode never truncates, pads or adds special tokens.
type tokenizerJSON struct {
	AddedTokens []struct {
		ID         *int   `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        *struct {
		Type                    string          `json:"type"`
		Dropout                 *float64        `json:"dropout"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		FuseUnk                 bool            `json:"fuse_unk"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Vocab                   json.RawMessage `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
	} `json:"model"`
}

// Load reads a Hugging Face tokenizer.json. It accepts exactly the pipeline it reproduces:
// an optional NFC normalizer; a Sequence of Split (the Qwen2/Qwen3 or Llama 3 regex, Isolated)
// and ByteLevel without its own regex; a BPE model over the byte-level alphabet; and a ByteLevel
// decoder. Anything else is an error that
// names the file and the field.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	t.path = path
	return t, nil
}

// LoadDir loads dir/tokenizer.json and, when present, the special tokens named in
// dir/tokenizer_config.json (see SpecialToken).
func LoadDir(dir string) (*Tokenizer, error) {
	t, err := Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(cfgPath)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", cfgPath, err)
	}
	t.special = map[string]string{}
	for _, name := range []string{"bos_token", "eos_token", "pad_token", "unk_token"} {
		raw, ok := cfg[name]
		if !ok || string(raw) == "null" {
			continue
		}
		// Either a string or an AddedToken object with a "content" field.
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			var obj struct {
				Content *string `json:"content"`
			}
			if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
				return nil, fmt.Errorf("tokenizer: %s: field %s: want a string or an object with \"content\", got %s", cfgPath, name, raw)
			}
			s = *obj.Content
		}
		if _, ok := t.TokenID(s); !ok {
			return nil, fmt.Errorf("tokenizer: %s: field %s: %q is not a token of %s", cfgPath, name, s, t.path)
		}
		t.special[name] = s
	}
	return t, nil
}

func parse(data []byte) (*Tokenizer, error) {
	var f tokenizerJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	t := &Tokenizer{byID: map[int]*addedToken{}}

	if err := t.parseNormalizer(f.Normalizer); err != nil {
		return nil, fmt.Errorf("field normalizer: %w", err)
	}
	if err := t.parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("field pre_tokenizer: %w", err)
	}
	if err := parseDecoder(f.Decoder); err != nil {
		return nil, fmt.Errorf("field decoder: %w", err)
	}

	m := f.Model
	if m == nil {
		return nil, errors.New("field model: missing")
	}
	switch {
	case m.Type != "BPE":
		return nil, fmt.Errorf("field model.type: %q, only BPE is supported", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("field model.dropout: %v, only none is supported", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("field model.continuing_subword_prefix: %q, only none is supported", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("field model.end_of_word_suffix: %q, only none is supported", *m.EndOfWordSuffix)
	}
	t.ignoreMerges = m.IgnoreMerges
	// unk_token, fuse_unk and byte_fallback never act: every byte is in the vocabulary (checked below).

	vocab, err := parseVocab(m.Vocab)
	if err != nil {
		return nil, fmt.Errorf("field model.vocab: %w", err)
	}
	maxID := -1
	for _, e := range vocab {
		maxID = max(maxID, e.id)
	}
	for _, a := range f.AddedTokens {
		if a.ID == nil {
			return nil, fmt.Errorf("field added_tokens: token %q has no id", a.Content)
		}
		maxID = max(maxID, *a.ID)
	}
	if maxID >= 1<<24 {
		return nil, fmt.Errorf("field model.vocab: token ID %d is implausibly large", maxID)
	}
	t.vocab = maxID + 1
	t.tokens = make([][]byte, t.vocab)
	t.ids = make(map[string]int, len(vocab))
	for _, e := range vocab {
		b, ok := unByteLevel(e.token)
		if !ok {
			return nil, fmt.Errorf("field model.vocab: token %q (ID %d) is not in the byte-level alphabet", e.token, e.id)
		}
		if e.id < 0 {
			return nil, fmt.Errorf("field model.vocab: token %q has negative ID %d", e.token, e.id)
		}
		if t.tokens[e.id] != nil {
			return nil, fmt.Errorf("field model.vocab: ID %d is given to two tokens", e.id)
		}
		if _, dup := t.ids[string(b)]; dup {
			return nil, fmt.Errorf("field model.vocab: token %q appears twice", e.token)
		}
		t.tokens[e.id] = b
		t.ids[string(b)] = e.id
	}
	for b := 0; b < 256; b++ {
		id, ok := t.ids[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("field model.vocab: no token for byte 0x%02X (%q)", b, string(byteRune[b]))
		}
		t.byteIDs[b] = int32(id)
	}

	for _, a := range f.AddedTokens {
		if a.Content == "" {
			return nil, fmt.Errorf("field added_tokens: token ID %d has empty content", *a.ID)
		}
		if *a.ID < 0 {
			return nil, fmt.Errorf("field added_tokens: token %q has negative ID %d", a.Content, *a.ID)
		}
		tok := &addedToken{id: *a.ID, content: a.Content, singleWord: a.SingleWord, lstrip: a.LStrip,
			rstrip: a.RStrip, normalized: a.Normalized, special: a.Special}
		if prev, dup := t.byID[tok.id]; dup {
			return nil, fmt.Errorf("field added_tokens: ID %d is given to %q and %q", tok.id, prev.content, tok.content)
		}
		t.added = append(t.added, tok)
		t.byID[tok.id] = tok
		// The ByteLevel decoder maps a token's code points back to bytes when all of them are in
		// the byte-level alphabet, and otherwise keeps the token's UTF-8 as it is.
		if b, ok := unByteLevel(a.Content); ok {
			t.tokens[tok.id] = b
		} else {
			t.tokens[tok.id] = []byte(a.Content)
		}
		if tok.normalized && t.normalize {
			tok.content = nfc(lossy(tok.content))
			t.normAdded.add(tok)
		} else {
			t.rawAdded.add(tok)
		}
	}

	if err := t.parseMerges(m.Merges); err != nil {
		return nil, fmt.Errorf("field model.merges: %w", err)
	}
	return t, nil
}

type typed struct {
	Type string `json:"type"`
}

func (t *Tokenizer) parseNormalizer(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n struct {
		typed
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return err
	}
	switch {
	case n.Type == "NFC":
		t.normalize = true
		return nil
	case n.Type == "Sequence" && len(n.Normalizers) == 0:
		return nil
	case n.Type == "Sequence" && len(n.Normalizers) == 1:
		return t.parseNormalizer(n.Normalizers[0])
	}
	return fmt.Errorf("%s is not supported (only NFC or none)", raw)
}

// byteLevelJSON is a ByteLevel pre-tokenizer or decoder.
type byteLevelJSON struct {
	typed
	AddPrefixSpace bool  `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
}

func (t *Tokenizer) parsePreTokenizer(raw json.RawMessage) error {
	var seq struct {
		typed
		PreTokenizers []json.RawMessage `json:"pretokenizers"`
	}
	if len(raw) == 0 || string(raw) == "null" {
		return errors.New("missing; a byte-level BPE needs a ByteLevel pre-tokenizer")
	}
	if err := json.Unmarshal(raw, &seq); err != nil {
		return err
	}
	unsupported := fmt.Errorf("%s is not supported (only Split with the Qwen2/Qwen3 or Llama 3 regex, then ByteLevel)", raw)
	if seq.Type != "Sequence" || len(seq.PreTokenizers) != 2 {
		return unsupported
	}
	var split struct {
		typed
		Pattern struct {
			Regex *string `json:"Regex"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	if err := json.Unmarshal(seq.PreTokenizers[0], &split); err != nil {
		return err
	}
	if split.Type != "Split" || split.Pattern.Regex == nil || split.Behavior != "Isolated" || split.Invert {
		return unsupported
	}
	switch *split.Pattern.Regex {
	case qwenPattern:
		t.maxDigits = 1
	case llama3Pattern:
		t.maxDigits = 3
	default:
		return fmt.Errorf("Split regex %q is not supported (only %q or %q)", *split.Pattern.Regex, qwenPattern, llama3Pattern)
	}
	var bl byteLevelJSON
	if err := json.Unmarshal(seq.PreTokenizers[1], &bl); err != nil {
		return err
	}
	if bl.Type != "ByteLevel" || bl.AddPrefixSpace || bl.UseRegex == nil || *bl.UseRegex {
		return fmt.Errorf("%s: only ByteLevel with add_prefix_space and use_regex false is supported after Split", seq.PreTokenizers[1])
	}
	return nil
}

func parseDecoder(raw json.RawMessage) error {
	var d byteLevelJSON
	if len(raw) == 0 || string(raw) == "null" {
		return errors.New("missing; a byte-level BPE needs the ByteLevel decoder")
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	if d.Type != "ByteLevel" {
		return fmt.Errorf("%s is not supported (only ByteLevel)", raw)
	}
	return nil
}

type vocabEntry struct {
	token string
	id    int
}

func parseVocab(raw json.RawMessage) ([]vocabEntry, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("missing")
	}
	var m map[string]int
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := make([]vocabEntry, 0, len(m))
	for k, v := range m {
		out = append(out, vocabEntry{k, v})
	}
	return out, nil
}

// parseMerges reads the merges, either ["a b", ...] or [["a", "b"], ...], into the merges map.
func (t *Tokenizer) parseMerges(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return errors.New("missing")
	}
	var pairs [][2]string
	if r := bytes.TrimLeft(bytes.TrimPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("[")), " \t\r\n"); len(r) > 0 && r[0] == '"' {
		var flat []string
		if err := json.Unmarshal(raw, &flat); err != nil {
			return err
		}
		pairs = make([][2]string, len(flat))
		for i, s := range flat {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return fmt.Errorf("merge %d %q is not two tokens separated by a space", i, s)
			}
			pairs[i] = [2]string{a, b}
		}
	} else if err := json.Unmarshal(raw, &pairs); err != nil {
		return err
	}
	t.merges = make(map[uint64]uint64, len(pairs))
	lookup := func(i int, s string) (int32, error) {
		b, ok := unByteLevel(s)
		if !ok {
			return 0, fmt.Errorf("merge %d: %q is not in the byte-level alphabet", i, s)
		}
		id, ok := t.ids[string(b)]
		if !ok {
			return 0, fmt.Errorf("merge %d: %q is not in the vocabulary", i, s)
		}
		return int32(id), nil
	}
	for i, p := range pairs {
		a, err := lookup(i, p[0])
		if err != nil {
			return err
		}
		b, err := lookup(i, p[1])
		if err != nil {
			return err
		}
		merged, err := lookup(i, p[0]+p[1])
		if err != nil {
			return err
		}
		// A repeated pair takes its last rank, as in Hugging Face's merge map.
		t.merges[pairKey(a, b)] = uint64(i)<<32 | uint64(uint32(merged))
	}
	return nil
}
