package octlm

// The architectures' registry: config.json's model_type → the architecture that reads it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/octlm/octlm/internal/fileio"
)

// newArchitecture turns a config.json into an architecture, by its model_type.
type newArchitecture func(configJSON []byte) (architecture, error)

var (
	archMu        sync.Mutex
	architectures = map[string]newArchitecture{}
)

// registerArchitecture makes Load accept checkpoints whose config.json has this model_type. It is
// called from an architecture file's init.
func registerArchitecture(modelType string, fn newArchitecture) {
	archMu.Lock()
	defer archMu.Unlock()
	if _, dup := architectures[modelType]; dup {
		panic("octlm: architecture " + modelType + " registered twice")
	}
	architectures[modelType] = fn
}

// architectureFor reads config.json's model_type and builds that architecture.
func architectureFor(configJSON []byte) (architecture, error) {
	var head struct {
		ModelType *string `json:"model_type"`
	}
	if err := json.NewDecoder(bytes.NewReader(configJSON)).Decode(&head); err != nil {
		return nil, fmt.Errorf("octlm: config: not a JSON object: %w", err)
	}
	archMu.Lock()
	defer archMu.Unlock()
	if head.ModelType == nil {
		return nil, fmt.Errorf("octlm: config: model_type missing (want one of %s)", knownTypes())
	}
	fn, ok := architectures[*head.ModelType]
	if !ok {
		return nil, fmt.Errorf("octlm: config: unsupported model_type %q (want one of %s)", *head.ModelType, knownTypes())
	}
	return fn(configJSON)
}

// knownTypes lists the registered model types; archMu is held.
func knownTypes() string {
	var names []string
	for k := range architectures {
		names = append(names, fmt.Sprintf("%q", k))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// readArchitecture reads a config.json file (a regular file of at most MaxConfigBytes) and
// builds its architecture.
func readArchitecture(path string) (architecture, error) {
	data, err := fileio.ReadFile(path, MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("octlm: %w", err)
	}
	arch, err := architectureFor(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return arch, nil
}

// ReadShape reads the config.json of any architecture Load accepts and returns the shape the
// shared machinery reads, the Shape of the Model that Load would build.
func ReadShape(path string) (Shape, error) {
	arch, err := readArchitecture(path)
	if err != nil {
		return Shape{}, err
	}
	return arch.shape(), nil
}

// Parameters is the number of parameters in the model's weight table (a tied head, stored as a
// copy of the embedding, counted once).
func (m *Model) Parameters() int64 { return parameterCount(m.specs) }

// Parameters is the number of parameters the decoder reads (a tied head counted once).
func (d *Decoder) Parameters() int64 { return parameterCount(d.specs) }

// parameterCount is the one count of parameters: the sizes of a weight table's tensors.
func parameterCount(specs []weightSpec) int64 {
	var n int64
	for _, s := range specs {
		p := int64(1)
		for _, d := range s.Shape {
			p *= int64(d)
		}
		n += p
	}
	return n
}
