package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/xla"
)

// EnvBenchShape names the synth shape (synth.LikeNames: tiny, qwen3-0.6b, …) of the random
// checkpoint BenchmarkLoglikelihoodBatch writes; unset, Qwen3-0.6B's.
const EnvBenchShape = "OCTLM_EVAL_BENCH_SHAPE"

// EnvBenchDir names a folder BenchmarkLoglikelihoodBatch keeps between runs: the checkpoint is
// written to DIR/model once (reused while DIR/model/config.json exists), and DIR/requests.jsonl
// gets every request batch 1 answered (context_ids, continuation_ids, max_length, loglikelihood,
// is_greedy), for parity/llamacpp/llscore to score the same tokens. Unset, a temporary folder.
const EnvBenchDir = "OCTLM_EVAL_BENCH_DIR"

// benchMaxLength is the benchmark's max_length.
const benchMaxLength = 2048

// benchDocs is the documents of the benchmark's task: two batches of 16.
const benchDocs = 32

// BenchmarkLoglikelihoodBatch scores a loglikelihood task of 32 documents (contexts of 40 to
// 160 words of random text, a one-word continuation) on a random checkpoint of Qwen3-0.6B's
// shape (or $OCTLM_EVAL_BENCH_SHAPE's; the backend is $GOMLX_BACKEND's, else the automatic
// choice) at batch 1, 4 and 16, and reports requests/s and tokens/s (the context and
// continuation tokens run), the step graphs compiled and the seconds spent compiling them
// (graphs, compile-s: included in the rates), and for batch 4 and 16 their ratio to batch 1
// (x-batch1).
func BenchmarkLoglikelihoodBatch(b *testing.B) {
	shape := os.Getenv(EnvBenchShape)
	if shape == "" {
		shape = "qwen3-0.6b"
	}
	cfg, err := synth.Like(shape)
	if err != nil {
		b.Fatalf("$%s: %v", EnvBenchShape, err)
	}
	dir, keep := os.Getenv(EnvBenchDir), true
	if dir == "" {
		dir, keep = b.TempDir(), false
	}
	modelDir := filepath.Join(dir, "model")
	if _, err := os.Stat(filepath.Join(modelDir, "config.json")); !keep || err != nil {
		if err := synth.Write(modelDir, cfg, 1, nil); err != nil {
			b.Fatal(err)
		}
	}
	backend, info, err := xla.Open("")
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Finalize()
	m, err := octlm.Load(modelDir, octlm.LoadOptions{Backend: backend, DType: octlm.Float32})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.LoadDir(modelDir)
	if err != nil {
		b.Fatal(err)
	}
	task, err := LoadTask(writeBenchTask(b, dir))
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s on %s", shape, info)
	base := 0.0
	for _, batch := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			r, err := NewRunner(m, tok, benchMaxLength, nil)
			if err != nil {
				b.Fatal(err)
			}
			r.Batch = batch
			requests, tokens := 0, 0
			var in *Instances
			before := m.CompileStats()
			for b.Loop() {
				if in, err = task.Build(BuildOptions{}); err != nil {
					b.Fatal(err)
				}
				if err := r.Run(context.Background(), in, nil); err != nil {
					b.Fatal(err)
				}
				for _, d := range in.Docs {
					for _, q := range d.Requests {
						requests++
						tokens += len(q.ContextIDs) + len(q.ContinuationIDs)
					}
				}
			}
			if keep && batch == 1 {
				writeBenchRequests(b, filepath.Join(dir, "requests.jsonl"), in)
			}
			secs := b.Elapsed().Seconds()
			rate := float64(requests) / secs
			after := m.CompileStats()
			b.ReportMetric(rate, "requests/s")
			b.ReportMetric(float64(tokens)/secs, "tokens/s")
			b.ReportMetric(float64(after.Graphs-before.Graphs), "graphs")
			b.ReportMetric((after.Time - before.Time).Seconds(), "compile-s")
			b.ReportMetric(0, "ns/op") // one op is a whole task: requests/s says more
			if batch == 1 {
				base = rate
			} else if base > 0 {
				b.ReportMetric(rate/base, "x-batch1")
			}
		})
	}
}

// writeBenchRequests writes in's requests, answered, as JSON Lines to path (temp + rename).
func writeBenchRequests(b *testing.B, path string, in *Instances) {
	var out strings.Builder
	for _, d := range in.Docs {
		for _, q := range d.Requests {
			line, err := json.Marshal(map[string]any{"doc_id": d.ID, "context_ids": q.ContextIDs,
				"continuation_ids": q.ContinuationIDs, "max_length": benchMaxLength,
				"loglikelihood": q.LogLikelihood, "is_greedy": q.IsGreedy})
			if err != nil {
				b.Fatal(err)
			}
			out.Write(append(line, '\n'))
		}
	}
	if err := os.WriteFile(path+".tmp", []byte(out.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		b.Fatal(err)
	}
}

// writeBenchTask writes the benchmark's task (a loglikelihood task on JSON Lines of random
// words) into dir and returns its YAML's path.
func writeBenchTask(b *testing.B, dir string) string {
	words := strings.Fields("the a of and to in is was for on that with as by at from it his an were " +
		"are which this be or has had not first one their its new after who they have her she two been " +
		"other when there all during into school time may years more most only over city some world " +
		"would where later up such used many can state about national out known university united then")
	rng := rand.New(rand.NewPCG(1, 2))
	var data strings.Builder
	for range benchDocs {
		n := 40 + rng.IntN(121)
		text := make([]string, n)
		for i := range text {
			text[i] = words[rng.IntN(len(words))]
		}
		line, _ := json.Marshal(map[string]string{"text": strings.Join(text[:n-1], " "), "last": " " + text[n-1]})
		data.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.jsonl"), []byte(data.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	yaml := "task: bench\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: bench.jsonl\n" +
		"test_split: test\noutput_type: loglikelihood\ndoc_to_text: text\ndoc_to_target: last\n" +
		"metric_list:\n  - metric: perplexity\n"
	path := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}
