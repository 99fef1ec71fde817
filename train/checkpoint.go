package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/lora"
)

// Checkpoints are folders DIR/checkpoint-K/ as Hugging Face's Trainer lays them out, K the
// optimizer steps done: the trainable weights (an adapter folder, or model.safetensors in
// float32 with the model's config and tokenizer files), the AdamW moments
// (optimizer.safetensors: NAME.exp_avg and NAME.exp_avg_sq), and trainer_state.json (global_step,
// log_history, and under "octlm" what a resumed run must agree on: the data order's seed and
// shuffle, the batch shape, the rows). The stream position is global_step·batch·accumulation;
// dropout is drawn from the seed and the step, so nothing else is needed to continue exactly.
// A checkpoint is written into a temporary folder beside its target and renamed into place, so
// a folder named checkpoint-K is always complete.

// Checkpoint file names.
const (
	StateFile     = "trainer_state.json"
	OptimizerFile = "optimizer.safetensors"
	checkpointPre = "checkpoint-"
)

// maxStateBytes bounds trainer_state.json.
const maxStateBytes = 64 << 20

// LogRow is one step as the log and trainer_state.json's log_history hold it.
type LogRow struct {
	Type            string  `json:"type"`
	Step            int     `json:"step"`
	Loss            float64 `json:"loss"`
	GradNorm        float64 `json:"grad_norm"`
	LR              float64 `json:"lr"`
	Tokens          int     `json:"tokens"`
	TokensPerSecond float64 `json:"tokens_per_second"`
}

// RowOf is res as a log row.
func RowOf(res StepResult, tokensPerSecond float64) LogRow {
	return LogRow{Type: "train_step", Step: res.Step, Loss: res.Loss, GradNorm: res.GradNorm, LR: res.LR, Tokens: res.Tokens, TokensPerSecond: tokensPerSecond}
}

// runIdentity is what a resumed run must share with the one that wrote the checkpoint.
type runIdentity struct {
	Rows        int       `json:"rows"`
	Batch       int       `json:"batch"`
	GradAccum   int       `json:"grad_accum"`
	Seed        uint64    `json:"seed"`
	Shuffle     bool      `json:"shuffle"`
	Full        bool      `json:"full"`
	Base        BaseDType `json:"base_dtype"`
	PadMultiple int       `json:"pad_multiple"`
	Trainable   int       `json:"trainable_tensors"`
}

type trainerState struct {
	GlobalStep int      `json:"global_step"`
	MaxSteps   int      `json:"max_steps"`
	BatchSize  int      `json:"train_batch_size"`
	LogHistory []LogRow `json:"log_history"`
	Octlm      struct {
		Run          runIdentity `json:"run"`
		DataPosition int64       `json:"data_position"`
		Schedule     Schedule    `json:"schedule"`
		LR           float64     `json:"learning_rate"`
	} `json:"octlm"`
}

func (t *Trainer) identity() runIdentity {
	s := t.Settings
	return runIdentity{Rows: len(t.rows), Batch: s.Batch, GradAccum: s.GradAccum, Seed: s.Seed, Shuffle: s.Shuffle,
		Full: s.Full, Base: s.baseDType(), PadMultiple: s.PadMultiple, Trainable: len(t.Trainable)}
}

// CheckpointName is the folder of the checkpoint after step.
func CheckpointName(step int) string { return checkpointPre + strconv.Itoa(step) }

// SaveCheckpoint writes t's state after its last step into outDir/checkpoint-K (replacing one
// already there), baseDir's config and tokenizer files with a full fine-tune's weights, log the
// rows so far; then it keeps only the newest keep checkpoints (0: all). It returns the folder.
func (t *Trainer) SaveCheckpoint(outDir, baseDir string, log []LogRow, keep int) (string, error) {
	final := filepath.Join(outDir, CheckpointName(t.Step))
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	tmp, err := fileio.MkdirTemp(final, "tmp")
	if err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	defer fileio.RemoveTemp(tmp) // gone once renamed
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	if err := t.writeWeights(tmp, baseDir, loader.F32, 0, false); err != nil {
		return "", err
	}
	if err := t.writeMoments(filepath.Join(tmp, OptimizerFile)); err != nil {
		return "", err
	}
	var st trainerState
	st.GlobalStep, st.MaxSteps, st.BatchSize = t.Step, t.Settings.Steps, t.Settings.Batch
	st.LogHistory = log
	st.Octlm.Run = t.identity()
	st.Octlm.DataPosition = int64(t.Step) * int64(t.Settings.Batch*t.Settings.GradAccum)
	st.Octlm.Schedule, st.Octlm.LR = t.Settings.Schedule, t.Settings.LR
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	if err := fileio.WriteFile(filepath.Join(tmp, StateFile), append(data, '\n')); err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	if err := replaceDir(tmp, final); err != nil {
		return "", err
	}
	return final, pruneCheckpoints(outDir, keep)
}

// replaceDir renames the finished folder tmp to final, moving an older final aside first.
func replaceDir(tmp, final string) error {
	if _, err := os.Stat(final); err == nil {
		old, err := fileio.MkdirTemp(final, "tmp")
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		defer fileio.RemoveTemp(old)
		if err := os.Rename(final, filepath.Join(old, "old")); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	fileio.Release(tmp)
	return nil
}

// Checkpoints are the steps of the checkpoint folders in outDir, ascending.
func Checkpoints(outDir string) ([]int, error) {
	entries, err := os.ReadDir(outDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	var steps []int
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), checkpointPre)
		if !ok || !e.IsDir() {
			continue
		}
		if k, err := strconv.Atoi(rest); err == nil && k > 0 && strconv.Itoa(k) == rest {
			steps = append(steps, k)
		}
	}
	sort.Ints(steps)
	return steps, nil
}

// pruneCheckpoints removes all but the newest keep checkpoints (keep 0: none removed).
func pruneCheckpoints(outDir string, keep int) error {
	if keep <= 0 {
		return nil
	}
	steps, err := Checkpoints(outDir)
	if err != nil {
		return err
	}
	for _, k := range steps[:max(0, len(steps)-keep)] {
		if err := os.RemoveAll(filepath.Join(outDir, CheckpointName(k))); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	return nil
}

// Resume restores t from the checkpoint folder dir and returns its log rows. The checkpoint
// must come from the same run: the same rows, batch shape, seed and order, and the same
// trainable tensors.
func (t *Trainer) Resume(dir string) ([]LogRow, error) {
	data, err := fileio.ReadFile(filepath.Join(dir, StateFile), maxStateBytes)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	var st trainerState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("train: %s: %w", filepath.Join(dir, StateFile), err)
	}
	if st.Octlm.Run != t.identity() {
		return nil, fmt.Errorf("train: %s was written by another run (%+v; this run is %+v): resume with the same data, --batch, --grad-accum, --seed, --shuffle and training mode, or choose another --out", dir, st.Octlm.Run, t.identity())
	}
	if st.GlobalStep < 1 || st.GlobalStep > t.Settings.Steps {
		return nil, fmt.Errorf("train: %s: global_step %d outside this run's %d steps", dir, st.GlobalStep, t.Settings.Steps)
	}
	values, err := t.readWeights(dir)
	if err != nil {
		return nil, err
	}
	moments, err := t.readMoments(filepath.Join(dir, OptimizerFile))
	if err != nil {
		return nil, err
	}
	for i := range t.Trainable {
		t.Trainable[i].Data = values[i]
	}
	t.Moments = moments
	t.Step = st.GlobalStep
	return st.LogHistory, nil
}

// writeWeights writes the trainable tensors into dir: an adapter folder, or a checkpoint
// folder with baseDir's other files and the weights in dtype. With others, the base
// checkpoint's tensors the model does not train (a vision tower, multi-token-prediction heads)
// are copied byte for byte, so that the folder is the whole checkpoint; a stored copy of a tied
// head (lm_head.weight) is not, the embedding being the head.
func (t *Trainer) writeWeights(dir, baseDir string, dtype loader.DType, maxShardBytes int64, others bool) error {
	if a := t.Adapter(); a != nil {
		return a.Write(dir)
	}
	specs := make([]loader.TensorSpec, len(t.Trainable))
	for i, tr := range t.Trainable {
		specs[i] = loader.TensorSpec{Name: tr.Name, DType: dtype, Shape: tr.Shape}
	}
	var copied []loader.Entry
	if others {
		ck, err := loader.OpenCheckpoint(baseDir)
		if err != nil {
			return err
		}
		defer ck.Close()
		trained := map[string]bool{"lm_head.weight": true}
		for _, tr := range t.Trainable {
			trained[tr.Name] = true
		}
		for e, err := range ck.Tensors() {
			if err != nil {
				return err
			}
			if !trained[e.Info.Name] {
				specs = append(specs, loader.TensorSpec{Name: e.Info.Name, DType: e.Info.DType, Shape: e.Info.Shape})
				copied = append(copied, e)
			}
		}
	}
	return lora.WriteModel(dir, baseDir, specs, func(i int, w io.Writer) error {
		if i < len(t.Trainable) {
			return lora.EncodeFloat32(w, t.Trainable[i].Data, dtype)
		}
		e := copied[i-len(t.Trainable)]
		raw := make([]byte, e.Info.NumElements()*e.Info.DType.Size())
		if err := e.File.ReadRaw(e.Info, raw); err != nil {
			return err
		}
		_, err := w.Write(raw)
		return err
	}, maxShardBytes)
}

// WriteResult writes the run's result into dir: the adapter folder (its base_model_name_or_path
// baseName), or the whole checkpoint with the trained weights in dtype (F32 or BF16), sharded
// above maxShardBytes (0: the Hub's 4 GB).
func (t *Trainer) WriteResult(dir, baseDir, baseName string, dtype loader.DType, maxShardBytes int64) error {
	if a := t.Adapter(); a != nil {
		a.Config.BaseModel = baseName
		return a.Write(dir)
	}
	return t.writeWeights(dir, baseDir, dtype, maxShardBytes, true)
}

// readWeights reads the trainable tensors back from a checkpoint folder, by name.
func (t *Trainer) readWeights(dir string) ([][]float32, error) {
	if !t.Settings.Full {
		a, err := lora.Read(dir)
		if err != nil {
			return nil, err
		}
		out := make([][]float32, len(t.Trainable))
		for _, m := range t.modules {
			got, ok := a.Modules[m.module]
			if !ok || len(got.A) != len(t.Trainable[m.a].Data) || len(got.B) != len(t.Trainable[m.b].Data) {
				return nil, fmt.Errorf("train: %s: module %q missing or of another shape", dir, m.module)
			}
			out[m.a], out[m.b] = got.A, got.B
		}
		return out, nil
	}
	ck, err := loader.OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	out := make([][]float32, len(t.Trainable))
	for i, tr := range t.Trainable {
		e, ok := ck.Lookup(tr.Name)
		if !ok || !slices.Equal(e.Info.Shape, tr.Shape) {
			return nil, fmt.Errorf("train: %s: tensor %q missing or not %v", dir, tr.Name, tr.Shape)
		}
		out[i] = make([]float32, len(tr.Data))
		if err := e.File.ReadFloat32(e.Info, out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t *Trainer) writeMoments(path string) error {
	var ts []loader.WriteTensor
	for i, tr := range t.Trainable {
		ts = append(ts,
			loader.WriteTensor{Name: tr.Name + ".exp_avg", DType: loader.F32, Shape: tr.Shape, Data: lora.Float32Bytes(t.Moments[i].ExpAvg)},
			loader.WriteTensor{Name: tr.Name + ".exp_avg_sq", DType: loader.F32, Shape: tr.Shape, Data: lora.Float32Bytes(t.Moments[i].ExpAvgSq)})
	}
	return loader.WriteFile(path, ts, map[string]string{"format": "pt"})
}

func (t *Trainer) readMoments(path string) ([]Moments, error) {
	f, err := loader.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([]Moments, len(t.Trainable))
	for i, tr := range t.Trainable {
		out[i] = NewMoments(len(tr.Data))
		for _, part := range []struct {
			suffix string
			dst    []float32
		}{{".exp_avg", out[i].ExpAvg}, {".exp_avg_sq", out[i].ExpAvgSq}} {
			info, ok := f.Lookup(tr.Name + part.suffix)
			if !ok || !slices.Equal(info.Shape, tr.Shape) {
				return nil, fmt.Errorf("train: %s: tensor %q missing or not %v", path, tr.Name+part.suffix, tr.Shape)
			}
			if err := f.ReadFloat32(info, part.dst); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// SaveGradients writes grads (by Trainable index) under the trainable tensors' names.
func (t *Trainer) SaveGradients(path string, grads [][]float32) error {
	var ts []loader.WriteTensor
	for i, tr := range t.Trainable {
		ts = append(ts, loader.WriteTensor{Name: tr.Name, DType: loader.F32, Shape: tr.Shape, Data: lora.Float32Bytes(grads[i])})
	}
	return loader.WriteFile(path, ts, map[string]string{"format": "pt"})
}
