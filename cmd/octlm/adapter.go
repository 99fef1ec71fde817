package main

import (
	"flag"
	"fmt"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/lora"
)

// registerAdapter adds --adapter: a PEFT LoRA folder applied unmerged (see readAdapter).
func (f *modelFlags) registerAdapter(fs *flag.FlagSet) {
	fs.StringVar(&f.adapter, "adapter", "", "apply this PEFT LoRA adapter `DIR` (adapter_config.json, adapter_model.safetensors) unmerged")
}

// readAdapter reads the PEFT adapter folder adapterDir and checks it against the weights of the
// checkpoint in modelDir (targets, shapes; lora refuses what octlm cannot apply exactly, by
// name). It returns nil when adapterDir is "".
func readAdapter(modelDir, adapterDir string) (*octlm.LoRA, error) {
	if adapterDir == "" {
		return nil, nil
	}
	a, err := lora.Read(adapterDir)
	if err != nil {
		return nil, fmt.Errorf("--adapter: %w", err)
	}
	dec, err := octlm.ReadDecoder(modelDir)
	if err != nil {
		return nil, err
	}
	l, err := a.ToLoRA(lora.Linears(dec.Weights()))
	if err != nil {
		return nil, fmt.Errorf("--adapter %s: %w", adapterDir, err)
	}
	return l, nil
}
