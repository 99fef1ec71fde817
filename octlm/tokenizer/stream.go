package tokenizer

// StreamDecoder turns generated token IDs into text as they arrive, holding back the bytes of a
// UTF-8 sequence that a later token may complete. The text of all calls to Add followed by Flush
// is exactly Decode of all the IDs. A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewStreamDecoder returns a StreamDecoder for t.
func NewStreamDecoder(t *Tokenizer) *StreamDecoder { return &StreamDecoder{t: t} }

// Add decodes one more token and returns the text that became complete, possibly empty. An ID
// with no token is an error wrapping ErrUnknownID and leaves the decoder as it was.
func (d *StreamDecoder) Add(id int) (string, error) {
	b, err := d.t.tokenBytes(id)
	if err != nil {
		return "", err
	}
	d.pending = append(d.pending, b...)
	var buf [64]byte                                // most tokens' text fits: no allocation but the string's
	out, rest := appendComplete(buf[:0], d.pending) // rest may still become a valid sequence
	d.pending = append(d.pending[:0], rest...)
	return string(out), nil
}

// Flush returns what is held back, an incomplete UTF-8 sequence, as U+FFFD (or "" when nothing
// is), and resets the decoder.
func (d *StreamDecoder) Flush() string {
	s := string(appendLossy(nil, d.pending))
	d.pending = d.pending[:0]
	return s
}
