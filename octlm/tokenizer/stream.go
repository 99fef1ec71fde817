package tokenizer

import "unicode/utf8"

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
	var out []byte
	p := d.pending
	for len(p) > 0 {
		if p[0] < utf8.RuneSelf {
			out = append(out, p[0])
			p = p[1:]
			continue
		}
		if r, n := utf8.DecodeRune(p); r != utf8.RuneError || n > 1 {
			out = append(out, p[:n]...)
			p = p[n:]
			continue
		}
		n, incomplete := invalidPrefix(p)
		if incomplete && n == len(p) {
			break // may still become a valid sequence
		}
		out = append(out, "\uFFFD"...)
		p = p[n:]
	}
	d.pending = append(d.pending[:0], p...)
	return string(out), nil
}

// Flush returns what is held back, an incomplete UTF-8 sequence, as U+FFFD (or "" when nothing
// is), and resets the decoder.
func (d *StreamDecoder) Flush() string {
	s := string(appendLossy(nil, d.pending))
	d.pending = d.pending[:0]
	return s
}
