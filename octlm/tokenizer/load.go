package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/octlm/octlm/internal/fileio"
)

// addedTokenJSON is one entry of tokenizer.json's added_tokens.
type addedTokenJSON struct {
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// modelJSON is tokenizer.json's model, but for its vocab and merges, which scanFile reads itself.
type modelJSON struct {
	Type                    string   `json:"type"`
	Dropout                 *float64 `json:"dropout"`
	UnkToken                *string  `json:"unk_token"`
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	FuseUnk                 bool     `json:"fuse_unk"`
	ByteFallback            bool     `json:"byte_fallback"`
	IgnoreMerges            bool     `json:"ignore_merges"`
}

// Size limits of the files Load and LoadDir read (Qwen3's tokenizer.json is 11 MB, its
// tokenizer_config.json 10 KB); larger files, FIFOs and devices are refused.
const (
	MaxTokenizerBytes       = 256 << 20
	MaxTokenizerConfigBytes = 16 << 20
)

// Load reads a Hugging Face tokenizer.json. It accepts exactly the pipeline it reproduces:
// an optional NFC normalizer; a Sequence of Split (the Qwen2/Qwen3 or Llama 3 regex, Isolated)
// and ByteLevel without its own regex; a BPE model over the byte-level alphabet; and a ByteLevel
// decoder. Anything else is an error that names the file and the field.
func Load(path string) (*Tokenizer, error) {
	data, err := fileio.ReadFile(path, MaxTokenizerBytes)
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
	data, err := fileio.ReadFile(cfgPath, MaxTokenizerConfigBytes)
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

// parse reads tokenizer.json. truncation, padding and post_processor are not read: Encode
// never truncates, pads or adds special tokens.
func parse(data []byte) (*Tokenizer, error) {
	f, err := scanFile(data)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{byID: map[int]*addedToken{}}
	if err := t.parseNormalizer(f.fields["normalizer"]); err != nil {
		return nil, fmt.Errorf("field normalizer: %w", err)
	}
	if err := t.parsePreTokenizer(f.fields["pre_tokenizer"]); err != nil {
		return nil, fmt.Errorf("field pre_tokenizer: %w", err)
	}
	if err := parseDecoder(f.fields["decoder"]); err != nil {
		return nil, fmt.Errorf("field decoder: %w", err)
	}
	var added []addedTokenJSON
	if raw, ok := f.fields["added_tokens"]; ok {
		if err := json.Unmarshal(raw, &added); err != nil {
			return nil, fmt.Errorf("field added_tokens: %w", err)
		}
	}
	if err := t.parseModel(f); err != nil {
		return nil, err
	}
	vocabTokens, err := t.setVocab(f.vocab)
	if err != nil {
		return nil, fmt.Errorf("field model.vocab: %w", err)
	}
	maxAdded := t.assignAddedIDs(added, len(f.vocab))
	t.vocab = max(len(vocabTokens)-1, maxAdded) + 1
	t.indexTokens(vocabTokens)
	if err := t.resolveMerges(f.merges, vocabTokens); err != nil {
		return nil, fmt.Errorf("field model.merges: %w", err)
	}
	return t, nil
}

// tokenizerFile is tokenizer.json as scanFile reads it: the raw JSON of each top-level field and
// of each field of model, but for model.vocab and model.merges, which it decodes itself (they hold
// nearly all of the file).
type tokenizerFile struct {
	fields      map[string][]byte
	modelFields map[string][]byte
	vocab       []vocabEntry
	merges      *rawMerges // nil when model.merges is missing
	sawModel    bool
	sawVocab    bool
}

// scanFile reads data, one JSON object, into a tokenizerFile.
func scanFile(data []byte) (*tokenizerFile, error) {
	f := &tokenizerFile{fields: map[string][]byte{}, modelFields: map[string][]byte{}}
	r := &jsonReader{data: data}
	err := r.object(func(key []byte) error {
		if string(key) != "model" {
			raw, err := r.skip()
			f.fields[string(key)] = raw
			return err
		}
		f.sawModel = true
		return r.object(func(key []byte) error {
			var err error
			switch string(key) {
			case "vocab":
				f.sawVocab = true
				f.vocab, err = readVocab(r)
				if err != nil {
					err = fmt.Errorf("field model.vocab: %w", err)
				}
			case "merges":
				f.merges, err = readMerges(r)
				if err != nil {
					err = fmt.Errorf("field model.merges: %w", err)
				}
			default:
				var raw []byte
				raw, err = r.skip()
				f.modelFields[string(key)] = raw
			}
			return err
		})
	})
	if err == nil {
		err = r.end()
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// parseModel checks that f's model is a plain BPE with a vocabulary and merges, and takes its
// ignore_merges.
func (t *Tokenizer) parseModel(f *tokenizerFile) error {
	if !f.sawModel {
		return errors.New("field model: missing")
	}
	var m modelJSON
	for k, raw := range f.modelFields {
		obj, _ := json.Marshal(map[string]json.RawMessage{k: raw})
		if err := json.Unmarshal(obj, &m); err != nil {
			return fmt.Errorf("field model.%s: %w", k, err)
		}
	}
	switch {
	case m.Type != "BPE":
		return fmt.Errorf("field model.type: %q, only BPE is supported", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return fmt.Errorf("field model.dropout: %v, only none is supported", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return fmt.Errorf("field model.continuing_subword_prefix: %q, only none is supported", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return fmt.Errorf("field model.end_of_word_suffix: %q, only none is supported", *m.EndOfWordSuffix)
	case !f.sawVocab:
		return errors.New("field model.vocab: missing")
	case f.merges == nil:
		return errors.New("field model.merges: missing")
	}
	t.ignoreMerges = m.IgnoreMerges
	// unk_token, fuse_unk and byte_fallback never act: every byte is in the vocabulary (checked
	// by setVocab).
	return nil
}

// setVocab fills t.ids and t.byteIDs from the model vocabulary and returns its tokens' raw bytes
// by ID ("" for an ID no token has), after checking that IDs are unique and dense enough to index
// tables, tokens unique, and every byte a token.
func (t *Tokenizer) setVocab(vocab []vocabEntry) ([]string, error) {
	maxID := -1
	for _, e := range vocab {
		maxID = max(maxID, e.id)
	}
	// IDs index tables: a sparse vocabulary (none seen in practice) would only waste memory.
	if maxID >= 2*len(vocab)+1024 {
		return nil, fmt.Errorf("token ID %d is too large for a vocabulary of %d tokens", maxID, len(vocab))
	}
	t.ids = make(map[string]int, len(vocab))
	vocabTokens := make([]string, maxID+1)
	for _, e := range vocab {
		if vocabTokens[e.id] != "" {
			return nil, fmt.Errorf("ID %d is given to two tokens", e.id)
		}
		if _, dup := t.ids[e.token]; dup {
			return nil, fmt.Errorf("token %q appears twice", byteLevel([]byte(e.token)))
		}
		vocabTokens[e.id] = e.token
		t.ids[e.token] = e.id
	}
	for b := 0; b < 256; b++ {
		id, ok := t.ids[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("no token for byte 0x%02X (%q)", b, string(byteRune[b]))
		}
		t.byteIDs[b] = int32(id)
	}
	return vocabTokens, nil
}

// assignAddedIDs appends the added tokens to t.added, one per distinct content, and returns the
// highest ID among them (-1 when there are none). They get their IDs as Hugging Face assigns them
// when it loads the file, whatever their "id" fields say (it only warns): the ID of an earlier
// added token with the same content, else that of the vocabulary token written the same way, else
// the next ID after the vocabulary (of vocabSize entries) and the added tokens so far.
func (t *Tokenizer) assignAddedIDs(added []addedTokenJSON, vocabSize int) int {
	byContent := map[string]*addedToken{}
	maxAdded := -1
	for _, a := range added {
		if a.Content == "" {
			continue // ignored by Hugging Face too
		}
		tok, seen := byContent[a.Content]
		if !seen {
			id := -1
			if b, ok := unByteLevel(a.Content); ok {
				if vid, ok := t.ids[string(b)]; ok {
					id = vid
				}
			}
			if id < 0 {
				id = vocabSize
				if maxAdded >= vocabSize || (maxAdded >= 0 && vocabSize == 0) {
					id = maxAdded + 1
				}
			}
			tok = &addedToken{id: id, content: a.Content}
			byContent[a.Content] = tok
			t.added = append(t.added, tok)
			maxAdded = max(maxAdded, id)
		}
		// A repeated token takes the flags of its last entry and stays special once special.
		tok.singleWord, tok.lstrip, tok.rstrip, tok.normalized = a.SingleWord, a.LStrip, a.RStrip, a.Normalized
		tok.special = tok.special || a.Special
	}
	return maxAdded
}

// indexTokens fills t.tokens (the bytes each ID decodes to) from the vocabulary and the added
// tokens, t.byID, and the matchers that find added tokens in the text. t.vocab must be set.
func (t *Tokenizer) indexTokens(vocabTokens []string) {
	t.tokens = make([]string, t.vocab)
	copy(t.tokens, vocabTokens)
	for _, tok := range t.added {
		t.byID[tok.id] = tok
		// The ByteLevel decoder maps a token's code points back to bytes when all of them are in
		// the byte-level alphabet, and otherwise keeps the token's UTF-8 as it is.
		if b, ok := unByteLevel(tok.content); ok {
			t.tokens[tok.id] = string(b)
		} else {
			t.tokens[tok.id] = tok.content
		}
		// Normalized tokens are matched, normalized, in the normalized text; the others in the
		// text as given.
		if tok.normalized {
			tok.match = tok.content
			if t.normalize {
				tok.match = nfc(lossy(tok.content))
			}
			if tok.match != "" {
				t.normAdded.add(tok)
			}
		} else {
			tok.match = tok.content
			t.rawAdded.add(tok)
		}
	}
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
		return fmt.Errorf("split regex %q is not supported (only %q or %q)", *split.Pattern.Regex, qwenPattern, llama3Pattern)
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

// vocabEntry is one token of model.vocab, in raw bytes.
type vocabEntry struct {
	token string
	id    int
}

// readVocab reads model.vocab, an object from byte-level token to ID.
func readVocab(r *jsonReader) ([]vocabEntry, error) {
	var out []vocabEntry
	var raw []byte
	err := r.object(func(key []byte) error {
		var ok bool
		raw, ok = appendUnByteLevel(raw[:0], key)
		if !ok {
			return fmt.Errorf("token %q is not in the byte-level alphabet", key)
		}
		id, err := r.integer()
		if err != nil {
			return err
		}
		if id < 0 {
			return fmt.Errorf("token %q has negative ID %d", key, id)
		}
		if len(raw) == 0 {
			return fmt.Errorf("empty token with ID %d", id)
		}
		out = append(out, vocabEntry{string(raw), id})
		return nil
	})
	return out, err
}

// rawMerges holds model.merges in order: merge i joins arena[ends[2i-1]:ends[2i]] and
// arena[ends[2i]:ends[2i+1]] (with ends[-1] = 0), in raw bytes.
type rawMerges struct {
	arena []byte
	ends  []int32
}

func (m *rawMerges) count() int { return len(m.ends) / 2 }

// pair returns the two sides of merge i and their concatenation.
func (m *rawMerges) pair(i int) (left, right, both []byte) {
	start := int32(0)
	if i > 0 {
		start = m.ends[2*i-1]
	}
	mid, end := m.ends[2*i], m.ends[2*i+1]
	return m.arena[start:mid], m.arena[mid:end], m.arena[start:end]
}

// readMerges reads model.merges, either ["a b", ...] or [["a", "b"], ...].
func readMerges(r *jsonReader) (*rawMerges, error) {
	m := &rawMerges{}
	var s, s2 []byte
	add := func(i int, tok []byte) error {
		var ok bool
		if m.arena, ok = appendUnByteLevel(m.arena, tok); !ok {
			return fmt.Errorf("merge %d: %q is not in the byte-level alphabet", i, tok)
		}
		if len(m.arena) >= 1<<31 {
			return errors.New("too large")
		}
		m.ends = append(m.ends, int32(len(m.arena)))
		return nil
	}
	i := 0
	err := r.array(func() error {
		var left, right []byte
		var err error
		if r.peek() == '"' {
			if s, err = r.str(s[:0]); err != nil {
				return err
			}
			sp := bytes.IndexByte(s, ' ')
			if sp < 0 || bytes.IndexByte(s[sp+1:], ' ') >= 0 {
				return fmt.Errorf("merge %d %q is not two tokens separated by a space", i, s)
			}
			left, right = s[:sp], s[sp+1:]
		} else {
			n := 0
			err = r.array(func() error {
				var err error
				switch n {
				case 0:
					s, err = r.str(s[:0])
				case 1:
					s2, err = r.str(s2[:0])
				default:
					return fmt.Errorf("merge %d has more than two tokens", i)
				}
				n++
				return err
			})
			if err != nil {
				return err
			}
			if n != 2 {
				return fmt.Errorf("merge %d has %d tokens, want 2", i, n)
			}
			left, right = s, s2
		}
		if err := add(i, left); err != nil {
			return err
		}
		if err := add(i, right); err != nil {
			return err
		}
		i++
		return nil
	})
	return m, err
}

// resolveMerges looks the merges' tokens up in the vocabulary, in parallel, and fills the merges
// table.
// vocabTokens are the raw bytes of the vocabulary's tokens by ID, added tokens aside.
func (t *Tokenizer) resolveMerges(m *rawMerges, vocabTokens []string) error {
	n := m.count()
	keys := make([]uint64, n) // pairKey
	vals := make([]uint64, n) // rank<<32 | merged ID
	workers := min(runtime.GOMAXPROCS(0), max(1, n/16384))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lookup := func(i int, b []byte) (int, error) {
				id, ok := t.ids[string(b)]
				if !ok {
					return 0, fmt.Errorf("merge %d: %q is not in the vocabulary", i, byteLevel(b))
				}
				return id, nil
			}
			guess := -1 // vocabularies usually list merged tokens in merge order
			for i := w * n / workers; i < (w+1)*n/workers; i++ {
				left, right, both := m.pair(i)
				a, err := lookup(i, left)
				if err == nil {
					var b int
					if b, err = lookup(i, right); err == nil {
						ab := guess + 1
						if ab <= 0 || ab >= len(vocabTokens) || vocabTokens[ab] != string(both) {
							ab, err = lookup(i, both)
						}
						guess = ab
						if err == nil {
							keys[i] = pairKey(int32(a), int32(b))
							vals[i] = uint64(i)<<32 | uint64(uint32(ab))
							continue
						}
					}
				}
				errs[w] = err
				return
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first failing merge: workers cover increasing ranges
		}
	}
	t.merges = newPairTable(n)
	for i := range n {
		// A repeated pair takes its last rank, as in Hugging Face's merge map.
		t.merges.put(keys[i], vals[i])
	}
	return nil
}
