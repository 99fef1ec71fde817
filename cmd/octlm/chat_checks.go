package main

import (
	"fmt"
	"path/filepath"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/tokenizer"
)

// checkVocabHoldsTokenizer refuses a checkpoint whose embedding has fewer rows than the
// tokenizer has tokens: the chat template's special tokens (<|im_start|>, <|im_end|>, <think>)
// sit at the top of Qwen3's vocabulary, so every turn would be refused.
func checkVocabHoldsTokenizer(dir string, tok *tokenizer.Tokenizer) error {
	path := filepath.Join(dir, "config.json")
	shape, err := octlm.ReadShape(path)
	if err != nil {
		return err
	}
	if shape.Vocab < tok.VocabSize() {
		return usageError{fmt.Sprintf("%s: vocab_size %d cannot hold the tokenizer's %d tokens (the chat template's special tokens are ids %d and up): "+
			"chat needs a model whose vocabulary holds them ('octlm synth --like tiny --out DIR' writes a small one that does)",
			path, shape.Vocab, tok.VocabSize(), shape.Vocab)}
	}
	return nil
}

// pastContextMessage says that a turn does not fit the context and what to do about it.
func pastContextMessage(prompt, maxNew, limit int) string {
	msg := fmt.Sprintf("this turn is not sent: the conversation is %d tokens and a reply of up to %d (-n) would end past the context of %d. ",
		prompt, maxNew, limit)
	if prompt < limit {
		return msg + fmt.Sprintf("/clear starts again (the system prompt stays), or restart chat with a smaller -n (at most %d fits now)", limit-prompt)
	}
	return msg + "/clear starts again (the system prompt stays), or send a shorter message"
}

// replySpeed is the short line chat shows after a reply on a terminal.
func replySpeed(g octlm.Generation) string {
	n := len(g.GeneratedIDs)
	if n < 2 {
		return fmt.Sprintf("%d token", n)
	}
	return fmt.Sprintf("%d tokens, %.1f tokens/s", n, g.TokensPerSecond())
}
