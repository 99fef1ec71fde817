package octlm

import (
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/support/exceptions"
)

// A step graph runs on its arguments' buffers directly (graph.Graph.RunWithBuffers), not through
// GoMLX's Exec.Call: for each of a Qwen3-0.6B step's 367 arguments (the weights, the cache's
// blocks) Exec.Call converts the value under its own recover, then matches every shape against
// its graphs' cache, which compileFor has already looked the step up in by its key. That took
// 0.5 ms of every decode step on a 2-core AMD EPYC, more than 1% of a bfloat16 step
// (BenchmarkStepCall is the reproduction).

// call runs s's graph on args, the buffers of those at the indices give handed to it (those
// tensors are not valid after), and returns its outputs.
func (s *stepExec) call(backend compute.Backend, args []*tensors.Tensor, give []int) ([]*tensors.Tensor, error) {
	if n := s.graph.NumParameters(); n != len(args) {
		return nil, fmt.Errorf("octlm: %d step arguments for a graph of %d parameters", len(args), n)
	}
	buffers := make([]compute.Buffer, len(args))
	donate := make([]bool, len(args))
	for _, i := range give {
		donate[i] = true
	}
	for i, t := range args {
		var err error
		if donate[i] {
			buffers[i], err = t.DonateBuffer(backend, 0)
		} else {
			buffers[i], err = t.Buffer(backend, 0)
		}
		if err != nil {
			for j := range i {
				if donate[j] {
					_ = buffers[j].Finalize() // given to a run that will not happen
				}
			}
			return nil, fmt.Errorf("octlm: step argument %d (%s): %w", i, t.Shape(), err)
		}
	}
	var outputs []*tensors.Tensor
	if err := exceptions.TryCatch[error](func() { outputs = s.graph.RunWithBuffers(buffers, donate, 0) }); err != nil {
		return nil, err
	}
	return outputs, nil
}
