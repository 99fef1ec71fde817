package loader

import (
	"errors"
	"fmt"
	"strings"
)

// ErrFormat is matched (errors.Is) by every *FormatError: the input broke a format rule.
var ErrFormat = errors.New("malformed checkpoint")

// Rule names a format rule a checkpoint file can break. Tests and callers compare against
// these constants; the text is what users read.
type Rule string

// Rules of the safetensors header.
const (
	RuleTruncated        Rule = "file truncated"
	RuleHeaderLength     Rule = "header length out of range"
	RuleUTF8             Rule = "header is not valid UTF-8"
	RuleJSON             Rule = "header is not valid JSON"
	RuleNotObject        Rule = "header is not a JSON object"
	RuleDuplicateKey     Rule = "duplicate JSON key"
	RuleMetadata         Rule = "__metadata__ must be an object of strings"
	RuleEntry            Rule = "tensor entry must be {dtype, shape, data_offsets}"
	RuleName             Rule = "empty tensor name"
	RuleDType            Rule = "unknown dtype"
	RuleShape            Rule = "shape must be a list of non-negative integers"
	RuleOffsets          Rule = "data_offsets must be two non-negative integers"
	RuleReversedOffsets  Rule = "data_offsets end before they start"
	RuleByteCount        Rule = "byte count does not match shape and dtype"
	RuleOverlap          Rule = "tensors overlap"
	RuleGap              Rule = "gap between tensors"
	RuleTrailingBytes    Rule = "trailing bytes after the last tensor"
	RulePayloadTruncated Rule = "tensor data runs past the end of the file"
)

// Rules of sharded checkpoints (model.safetensors.index.json) and checkpoint folders.
const (
	RuleIndex          Rule = "index must be {metadata, weight_map}"
	RuleShardName      Rule = "shard must be a plain file name inside the checkpoint folder"
	RuleShardEscape    Rule = "shard resolves outside the checkpoint folder"
	RuleShardLacks     Rule = "shard lacks a tensor the index names"
	RuleUnindexed      Rule = "shard holds a tensor the index does not assign to it"
	RuleTwoShards      Rule = "tensor stored in two shards"
	RuleTotalSize      Rule = "index total_size does not match the shards"
	RuleNoCheckpoint   Rule = "folder has neither model.safetensors nor model.safetensors.index.json"
	RuleNotRegularFile Rule = "not a regular file"
)

// Rules of snapshot manifests.
const (
	RuleManifest       Rule = "manifest malformed"
	RuleManifestSize   Rule = "file size differs from the manifest"
	RuleManifestHash   Rule = "file SHA-256 differs from the manifest"
	RuleManifestMissed Rule = "file listed in the manifest is missing"
)

// FormatError reports a broken rule: which file, which tensor (may be empty) and what rule.
type FormatError struct {
	Path   string // file the rule was checked on; empty for ReadHeader on a bare reader
	Tensor string // tensor or key concerned; empty when the rule is about the whole file
	Rule   Rule
	Detail string // specifics (values seen), may be empty
}

func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString("loader: ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Tensor != "" {
		fmt.Fprintf(&b, "tensor %q: ", e.Tensor)
	}
	b.WriteString(string(e.Rule))
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrFormat) true for every FormatError.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

func formatErr(tensor string, rule Rule, format string, args ...any) *FormatError {
	return &FormatError{Tensor: tensor, Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// withPath fills in the path of a FormatError (if err is one) and returns err.
func withPath(err error, path string) error {
	var fe *FormatError
	if errors.As(err, &fe) && fe.Path == "" {
		fe.Path = path
	}
	return err
}
