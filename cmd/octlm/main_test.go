package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/xla"
)

// envRunMain makes the test binary run octlm's main instead of the tests, so that tests can run
// the command as a process: exit codes, signals, real stdin/stdout.
const envRunMain = "OCTLM_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	code := m.Run()
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// octlmCommand is octlm with args as a process (the test binary re-run), on the pure-Go backend.
func octlmCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1", xla.EnvBackend+"=go")
	return cmd
}

// runOctlm runs octlm with args and stdin as a process and returns its output and exit status.
func runOctlm(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := octlmCommand(t, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running octlm %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// waitExit waits for cmd (bounded, so a hang fails the test) and returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	var err error
	select {
	case err = <-errc:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatal("the command did not end within a minute of the signal")
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatal(err)
	return -1
}

var (
	sharedOnce sync.Once
	sharedDir  string
	sharedErr  error
)

// tokenizerModel is a small random checkpoint with Qwen3's full vocabulary and its real
// tokenizer files and chat template (real tokens and template, random text), written once and
// shared by the tests that only read it.
func tokenizerModel(t *testing.T) string {
	t.Helper()
	sharedOnce.Do(func() {
		sharedDir, sharedErr = os.MkdirTemp("", "octlm-cmd-test-")
		if sharedErr != nil {
			return
		}
		cfg := synth.Tiny()
		cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenID = 151936, 151643, 151645
		cfg.HiddenSize, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.IntermediateSize = 32, 2, 1, 16, 48
		sharedErr = synth.Write(filepath.Join(sharedDir, "qwen3-tok"), cfg, 1, nil)
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return filepath.Join(sharedDir, "qwen3-tok")
}

// failingWriter fails every write, like stdout redirected to /dev/full.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

var _ io.Writer = failingWriter{}
