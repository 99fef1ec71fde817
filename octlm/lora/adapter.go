// Package lora owns LoRA adapters in PEFT's files: adapter_config.json and
// adapter_model.safetensors, whose tensors are named base_model.model.<module>.lora_A.weight
// [r, in] and …lora_B.weight [out, r]. It reads, validates against a model's Linear weights,
// writes and merges them (W + scale·B·A in float32, rounded once to the checkpoint's dtype).
//
// It applies exactly what PEFT's LoraLayer computes, y = x·Wᵀ + scale·(x·Aᵀ)·Bᵀ with scale
// alpha/r (alpha/√r with use_rslora), and refuses by name the adapters whose computation is
// something else (DoRA, modules_to_save, layers_to_transform, rank or alpha patterns, a bias,
// fan_in_fan_out, a target no Linear has), never applying part of one.
//
// It knows nothing of graphs or training: the training loop (package train) and the decoder
// (package octlm) use what it reads.
package lora

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
)

// File names of a PEFT adapter folder.
const (
	ConfigFile  = "adapter_config.json"
	WeightsFile = "adapter_model.safetensors"
)

// maxConfigBytes bounds adapter_config.json.
const maxConfigBytes = 1 << 20

// namePrefix starts every tensor name PEFT saves for a causal LM.
const namePrefix = "base_model.model."

// Config is adapter_config.json: the fields octlm reads and writes. PEFT writes more (revision,
// megatron_config, …); those that would change the computation are checked by Check.
type Config struct {
	PeftType        string   `json:"peft_type"`
	TaskType        string   `json:"task_type"`
	BaseModel       string   `json:"base_model_name_or_path"`
	R               int      `json:"r"`
	LoraAlpha       float64  `json:"lora_alpha"`
	LoraDropout     float64  `json:"lora_dropout"`
	TargetModules   []string `json:"target_modules"`
	Bias            string   `json:"bias"`
	FanInFanOut     bool     `json:"fan_in_fan_out"`
	UseRSLoRA       bool     `json:"use_rslora"`
	UseDoRA         bool     `json:"use_dora"`
	InitLoraWeights any      `json:"init_lora_weights"` // true, or PEFT's name of an init (read only)
	ModulesToSave   []string `json:"modules_to_save"`
	InferenceMode   bool     `json:"inference_mode"`

	// Read only: what PEFT can write that octlm cannot apply (refused by Check when set).
	rawTargets string          // target_modules given as a regular expression
	unapplied  map[string]bool // fields set to something octlm does not apply
}

// Scale is PEFT's scaling: lora_alpha / r, or lora_alpha / √r with use_rslora.
func (c Config) Scale() float64 {
	if c.UseRSLoRA {
		return c.LoraAlpha / math.Sqrt(float64(c.R))
	}
	return c.LoraAlpha / float64(c.R)
}

// Check refuses a configuration whose computation octlm does not apply exactly, naming the
// field.
func (c Config) Check() error {
	var bad []string
	if c.PeftType != "LORA" {
		bad = append(bad, fmt.Sprintf("peft_type %q (only LORA)", c.PeftType))
	}
	if c.TaskType != "" && c.TaskType != "CAUSAL_LM" {
		bad = append(bad, fmt.Sprintf("task_type %q (only CAUSAL_LM)", c.TaskType))
	}
	if c.R < 1 {
		bad = append(bad, fmt.Sprintf("r %d", c.R))
	}
	if c.UseDoRA {
		bad = append(bad, "use_dora (DoRA)")
	}
	if len(c.ModulesToSave) > 0 {
		bad = append(bad, fmt.Sprintf("modules_to_save %q", c.ModulesToSave))
	}
	if c.Bias != "" && c.Bias != "none" {
		bad = append(bad, fmt.Sprintf("bias %q (only none)", c.Bias))
	}
	if c.FanInFanOut {
		bad = append(bad, "fan_in_fan_out")
	}
	if c.rawTargets != "" {
		bad = append(bad, fmt.Sprintf("target_modules as the regular expression %q (give a list)", c.rawTargets))
	}
	if len(c.TargetModules) == 0 && c.rawTargets == "" {
		bad = append(bad, "no target_modules")
	}
	if c.LoraDropout < 0 || c.LoraDropout >= 1 {
		bad = append(bad, fmt.Sprintf("lora_dropout %v", c.LoraDropout))
	}
	keys := make([]string, 0, len(c.unapplied))
	for k := range c.unapplied {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bad = append(bad, keys...)
	if len(bad) > 0 {
		return fmt.Errorf("lora: %s: octlm cannot apply this adapter exactly: %s", ConfigFile, strings.Join(bad, ", "))
	}
	return nil
}

// unappliedFields are adapter_config.json fields that change what the adapter computes; any
// value but null, false, empty or the default refuses the adapter.
var unappliedFields = []string{
	"layers_to_transform", "layers_pattern", "rank_pattern", "alpha_pattern", "exclude_modules",
	"target_parameters", "lora_bias", "use_qalora", "trainable_token_indices", "alora_invocation_tokens",
	"layer_replication", "megatron_config",
}

// ParseConfig decodes adapter_config.json.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return c, fmt.Errorf("lora: %s: %w", ConfigFile, err)
	}
	targets := raw["target_modules"]
	delete(raw, "target_modules")
	rest, _ := json.Marshal(raw)
	if err := json.Unmarshal(rest, &c); err != nil {
		return c, fmt.Errorf("lora: %s: %w", ConfigFile, err)
	}
	if len(targets) > 0 && targets[0] == '"' {
		var s string
		if err := json.Unmarshal(targets, &s); err != nil {
			return c, fmt.Errorf("lora: %s: target_modules: %w", ConfigFile, err)
		}
		if s == "all-linear" {
			c.TargetModules = []string{"all-linear"}
		} else {
			c.rawTargets = s
		}
	} else if len(targets) > 0 && !bytes.Equal(targets, []byte("null")) {
		if err := json.Unmarshal(targets, &c.TargetModules); err != nil {
			return c, fmt.Errorf("lora: %s: target_modules: %w", ConfigFile, err)
		}
	}
	for _, k := range unappliedFields {
		v, ok := raw[k]
		if !ok {
			continue
		}
		switch strings.TrimSpace(string(v)) {
		case "null", "false", "{}", "[]", `""`:
			continue
		}
		if c.unapplied == nil {
			c.unapplied = map[string]bool{}
		}
		c.unapplied[k+" "+string(v)] = true
	}
	return c, nil
}

// Matrices are one module's A [Rank, In] and B [Out, Rank], float32 row-major, as the decoder
// applies them.
type Matrices = octlm.LoRAMatrices

// Adapter is a LoRA adapter: its configuration and its matrices keyed by PEFT's module path
// (model.layers.0.self_attn.q_proj).
type Adapter struct {
	Config  Config
	Modules map[string]Matrices
}

// Read reads the adapter folder dir: its configuration (checked) and every tensor, whose names
// must be PEFT's and whose shapes must agree with r. Validate then checks it against a model.
func Read(dir string) (*Adapter, error) {
	data, err := fileio.ReadFile(filepath.Join(dir, ConfigFile), maxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	path := filepath.Join(dir, WeightsFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if _, binErr := os.Stat(filepath.Join(dir, "adapter_model.bin")); binErr == nil {
			return nil, fmt.Errorf("lora: %s holds adapter_model.bin, a pickle octlm does not read: save the adapter with safe_serialization (adapter_model.safetensors)", dir)
		}
	}
	f, err := loader.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	defer f.Close()
	a := &Adapter{Config: cfg, Modules: map[string]Matrices{}}
	parts := map[string][2]*loader.TensorInfo{}
	for _, t := range f.Tensors() {
		module, which, ok := splitName(t.Name)
		if !ok {
			return nil, fmt.Errorf("lora: %s: tensor %q is not a LoRA matrix named as PEFT names them (%s<module>.lora_A.weight / .lora_B.weight)", path, t.Name, namePrefix)
		}
		p := parts[module]
		p[which] = &t
		parts[module] = p
	}
	for module, p := range parts {
		if p[0] == nil || p[1] == nil {
			return nil, fmt.Errorf("lora: %s: module %q has only one of lora_A and lora_B", path, module)
		}
		ta, tb := *p[0], *p[1]
		if len(ta.Shape) != 2 || len(tb.Shape) != 2 || ta.Shape[0] != cfg.R || tb.Shape[1] != cfg.R {
			return nil, fmt.Errorf("lora: %s: module %q: lora_A %v and lora_B %v are not [r, in] and [out, r] with r %d", path, module, ta.Shape, tb.Shape, cfg.R)
		}
		m := Matrices{Rank: cfg.R, In: ta.Shape[1], Out: tb.Shape[0]}
		m.A = make([]float32, m.Rank*m.In)
		m.B = make([]float32, m.Out*m.Rank)
		if err := f.ReadFloat32(ta, m.A); err != nil {
			return nil, fmt.Errorf("lora: %w", err)
		}
		if err := f.ReadFloat32(tb, m.B); err != nil {
			return nil, fmt.Errorf("lora: %w", err)
		}
		a.Modules[module] = m
	}
	if len(a.Modules) == 0 {
		return nil, fmt.Errorf("lora: %s: no LoRA matrices", path)
	}
	return a, nil
}

// splitName splits base_model.model.<module>.lora_{A,B}.weight; which is 0 for A, 1 for B.
func splitName(name string) (module string, which int, ok bool) {
	rest, found := strings.CutPrefix(name, namePrefix)
	if !found {
		return "", 0, false
	}
	if m, found := strings.CutSuffix(rest, ".lora_A.weight"); found && m != "" {
		return m, 0, true
	}
	if m, found := strings.CutSuffix(rest, ".lora_B.weight"); found && m != "" {
		return m, 1, true
	}
	return "", 0, false
}

// TensorNames are PEFT's names of a module's A and B.
func TensorNames(module string) (a, b string) {
	return namePrefix + module + ".lora_A.weight", namePrefix + module + ".lora_B.weight"
}

// Linears are the Linear weights of a decoder's weight table.
func Linears(ws []octlm.WeightInfo) []Linear {
	var out []Linear
	for _, w := range ws {
		if w.Linear && len(w.Shape) == 2 {
			out = append(out, Linear{Name: w.Name, Module: w.Module, Out: w.Shape[0], In: w.Shape[1]})
		}
	}
	return out
}

// ToLoRA is a as the decoder applies it at inference (octlm.LoadOptions.Adapter): its matrices
// keyed by the Linear weight's checkpoint name, after Validate.
func (a *Adapter) ToLoRA(linears []Linear) (*octlm.LoRA, error) {
	if err := a.Validate(linears); err != nil {
		return nil, err
	}
	l := &octlm.LoRA{Scale: a.Config.Scale(), Modules: map[string]octlm.LoRAMatrices{}}
	for _, lin := range linears {
		if m, ok := a.Modules[lin.Module]; ok {
			l.Modules[lin.Name] = m
		}
	}
	return l, nil
}

// FromLoRA is the adapter of cfg holding l's matrices (keyed by checkpoint name) under PEFT's
// module paths. cfg's scale must be l's.
func FromLoRA(cfg Config, l *octlm.LoRA, linears []Linear) (*Adapter, error) {
	if math.Abs(cfg.Scale()-l.Scale) > 1e-12*math.Abs(l.Scale) {
		return nil, fmt.Errorf("lora: the configuration's scale %v is not the adapter's %v", cfg.Scale(), l.Scale)
	}
	module := map[string]string{}
	for _, lin := range linears {
		module[lin.Name] = lin.Module
	}
	a := &Adapter{Config: cfg, Modules: map[string]Matrices{}}
	for name, m := range l.Modules {
		mod, ok := module[name]
		if !ok {
			return nil, fmt.Errorf("lora: %q is not a Linear weight of the model", name)
		}
		a.Modules[mod] = m
	}
	return a, a.Validate(linears)
}

// Linear is one of a model's nn.Linear weights: its checkpoint name
// (model.layers.0.self_attn.q_proj.weight), PEFT's module path (model.layers.0.self_attn.q_proj)
// and its shape [Out, In].
type Linear struct {
	Name, Module string
	Out, In      int
}

// AllLinear is PEFT's target_modules shorthand for every Linear but the output head.
const AllLinear = "all-linear"

// Targeted returns the Linears that target_modules selects, as PEFT matches them: a module is
// targeted when its path equals a target or ends in "." + target; all-linear takes every Linear
// but lm_head. A target that selects no Linear is an error naming it.
func Targeted(linears []Linear, targets []string) ([]Linear, error) {
	var out []Linear
	used := map[string]bool{}
	for _, l := range linears {
		for _, t := range targets {
			if (t == AllLinear && l.Module != "lm_head" && !strings.HasSuffix(l.Module, ".lm_head")) ||
				l.Module == t || strings.HasSuffix(l.Module, "."+t) {
				out = append(out, l)
				used[t] = true
				break
			}
		}
	}
	for _, t := range targets {
		if !used[t] {
			return nil, fmt.Errorf("lora: target module %q matches none of the model's Linear layers (%s)", t, strings.Join(ModuleNames(linears), ", "))
		}
	}
	return out, nil
}

// ModuleNames are the distinct last components of the Linears' module paths, in order (q_proj,
// …): what PEFT writes as target_modules for them.
func ModuleNames(linears []Linear) []string {
	var kinds []string
	for _, l := range linears {
		k := l.Module[strings.LastIndexByte(l.Module, '.')+1:]
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// Validate checks that a holds exactly the matrices its target_modules select on a model with
// these Linears, each of the Linear's shape.
func (a *Adapter) Validate(linears []Linear) error {
	targeted, err := Targeted(linears, a.Config.TargetModules)
	if err != nil {
		return err
	}
	want := map[string]Linear{}
	for _, l := range targeted {
		want[l.Module] = l
	}
	var errs []error
	for module, m := range a.Modules {
		l, ok := want[module]
		if !ok {
			errs = append(errs, fmt.Errorf("module %q: not a Linear of the model that target_modules %q selects", module, a.Config.TargetModules))
			continue
		}
		if m.In != l.In || m.Out != l.Out {
			errs = append(errs, fmt.Errorf("module %q: lora_A [%d, %d] and lora_B [%d, %d] for the model's weight [%d, %d]", module, m.Rank, m.In, m.Out, m.Rank, l.Out, l.In))
		}
	}
	for _, l := range targeted {
		if _, ok := a.Modules[l.Module]; !ok {
			errs = append(errs, fmt.Errorf("module %q: targeted but has no lora_A/lora_B", l.Module))
		}
	}
	if len(errs) > 0 {
		sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
		return fmt.Errorf("lora: the adapter does not fit the model: %w", errors.Join(errs...))
	}
	return nil
}

// Write writes a into dir (created if needed): adapter_config.json and
// adapter_model.safetensors (float32, metadata format pt), each written to a temporary file
// and renamed into place.
func (a *Adapter) Write(dir string) error {
	modules := make([]string, 0, len(a.Modules))
	for m := range a.Modules {
		modules = append(modules, m)
	}
	sort.Strings(modules)
	var tensors []loader.WriteTensor
	for _, module := range modules {
		m := a.Modules[module]
		na, nb := TensorNames(module)
		tensors = append(tensors,
			loader.WriteTensor{Name: na, DType: loader.F32, Shape: []int{m.Rank, m.In}, Data: Float32Bytes(m.A)},
			loader.WriteTensor{Name: nb, DType: loader.F32, Shape: []int{m.Out, m.Rank}, Data: Float32Bytes(m.B)})
	}
	cfg, err := json.MarshalIndent(a.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	if err := fileio.CheckWritableDir(dir); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	if err := loader.WriteFile(filepath.Join(dir, WeightsFile), tensors, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	if err := fileio.WriteFile(filepath.Join(dir, ConfigFile), append(cfg, '\n')); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	return nil
}
