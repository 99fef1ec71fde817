package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/octlm/octlm/octlm/tokenizer"
)

func init() {
	register("tokenize", "encode JSON strings (or plain lines, --text) to token IDs, or decode ID arrays (--decode), one a line", runTokenize)
}

func runTokenize(args []string) error {
	return runTokenizeIO(args, os.Stdin, os.Stdout, os.Stderr)
}

func runTokenizeIO(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model directory holding tokenizer.json, or the path of a tokenizer.json")
	decode := fs.Bool("decode", false, "read JSON arrays of token IDs and write JSON strings")
	text := fs.Bool("text", false, "read plain text, one input a line (without its newline), instead of JSON strings")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: octlm tokenize --model DIR [--text | --decode] < in.jsonl > out.jsonl\n\n"+
			"Reads one JSON string a line and writes its token IDs as one JSON array a line (no special\n"+
			"tokens added; special-token strings such as <|im_end|> in the text are recognised).\n"+
			"Blank lines are skipped. With --text, each line is the text itself (echo 'Hello world' |\n"+
			"octlm tokenize --model DIR --text), and a blank line gives []. With --decode, reads JSON\n"+
			"arrays of IDs and writes JSON strings.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" {
		return usageError{"--model is required"}
	}
	if *text && *decode {
		return usageError{"--text is for encoding; --decode writes JSON strings (a decoded text may hold newlines)"}
	}
	tok, err := loadTokenizer(*model)
	if err != nil {
		return err
	}
	if *text {
		return tokenizeText(tok, stdin, stdout)
	}
	return tokenizeStream(tok, *decode, stdin, stdout)
}

// tokenizeText encodes each line of in (less its newline: "\n" or "\r\n") to a JSON array of
// token IDs on out, one a line, flushing whenever no more input is waiting.
func tokenizeText(tok *tokenizer.Tokenizer, in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(w)
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			break
		}
		if err != nil && err != io.EOF {
			return errors.Join(fmt.Errorf("stdin line %d: %w", lineNo, err), w.Flush())
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		ids := tok.Encode(line)
		if ids == nil {
			ids = []int{}
		}
		if err := enc.Encode(ids); err != nil {
			return err
		}
		if err == io.EOF {
			break
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
	return w.Flush()
}

// loadTokenizer loads path/tokenizer.json (and tokenizer_config.json) or the file path itself.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return tokenizer.LoadDir(path)
	}
	return tokenizer.Load(path)
}

// tokenizeStream encodes (or decodes) in line by line to out. Output is flushed whenever no more
// input is waiting, so that the command also works interactively.
func tokenizeStream(tok *tokenizer.Tokenizer, decode bool, in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if err := tokenizeLine(tok, decode, line, enc); err != nil {
				// The lines before it were good: write them out.
				return errors.Join(fmt.Errorf("stdin line %d: %w", lineNo, err), w.Flush())
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return errors.Join(fmt.Errorf("stdin line %d: %w", lineNo, err), w.Flush())
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
	return w.Flush()
}

func tokenizeLine(tok *tokenizer.Tokenizer, decode bool, line []byte, enc *json.Encoder) error {
	if decode {
		var ids []int
		if err := json.Unmarshal(line, &ids); err != nil {
			return fmt.Errorf("want a JSON array of token IDs: %w", err)
		}
		text, err := tok.Decode(ids)
		if err != nil {
			return err
		}
		return enc.Encode(text)
	}
	var text string
	if err := json.Unmarshal(line, &text); err != nil {
		return fmt.Errorf("want a JSON string: %w", err)
	}
	ids := tok.Encode(text)
	if ids == nil {
		ids = []int{}
	}
	return enc.Encode(ids)
}
