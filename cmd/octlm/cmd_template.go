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

	"github.com/octlm/octlm/octlm/chat"
)

func init() {
	register("template", "render conversations (JSONL on stdin) with Qwen3's chat template", func(args []string) error {
		return runTemplate(args, os.Stdin, os.Stdout, os.Stderr)
	})
}

// runTemplate reads one conversation a line ({"messages": [...], "tools": [...],
// "add_generation_prompt": bool, "enable_thinking": bool}) and writes each rendered prompt as
// one JSON string a line. The model folder's chat template must be Qwen3's, the one
// chat.Render implements.
func runTemplate(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("template", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model `DIR` with tokenizer_config.json (or chat_template.jinja) holding Qwen3's chat template")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm template --model DIR < conversations.jsonl\n\n"+
			"Reads one conversation a line (messages, optional tools, add_generation_prompt,\n"+
			"optional enable_thinking) and writes each rendered prompt as one JSON string a line.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" {
		return usageError{"--model DIR is required"}
	}
	if err := chat.CheckModelDir(*model); err != nil {
		return err
	}

	in := bufio.NewReader(stdin)
	out := bufio.NewWriter(stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for lineNo := 1; ; lineNo++ {
		line, readErr := in.ReadBytes('\n')
		if readErr != nil && readErr != io.EOF {
			return fmt.Errorf("stdin: %w", readErr)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			c, err := decodeConversation(line)
			if err != nil {
				return fmt.Errorf("stdin line %d: %w", lineNo, err)
			}
			prompt, err := chat.Render(c)
			if err != nil {
				return fmt.Errorf("stdin line %d: %w", lineNo, err)
			}
			if err := enc.Encode(prompt); err != nil {
				return err
			}
			if err := out.Flush(); err != nil {
				return fmt.Errorf("stdout: %w", err)
			}
		}
		if readErr == io.EOF {
			return nil
		}
	}
}

// decodeConversation decodes one line strictly: one JSON object with only the fields of a
// conversation, so that a misspelt "enable_thinking" is an error rather than ignored.
func decodeConversation(line []byte) (chat.Conversation, error) {
	var c chat.Conversation
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("conversation: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return c, errors.New("conversation: trailing data after the JSON object")
	}
	return c, nil
}
