package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/octlm/octlm/internal/fileio"
)

// Signals: every command ends on SIGINT (Ctrl-C), SIGTERM (kill's default, a service manager
// stopping it) and SIGHUP (its terminal closed) the same way: the temporaries it was writing
// are removed (fileio.RemoveLive), the targets are left as they were, and it exits with
// 128 + the signal's number (130, 143, 129). A command that stops gracefully on a signal
// (generate prints the tokens so far, synth cleans up and says so, chat stops the reply in
// progress) says so in ownSignals: the first such signal is the command's to handle, and a
// second one ends the process as above. A signal ignored when octlm started (nohup, a
// background job of a non-interactive shell) stays ignored.

// interruptSignals are the signals that end a command.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// signalPolicy says which signals a command handles itself.
type signalPolicy struct {
	own []os.Signal // the first of these goes to the command alone
	// always: every one of own goes to the command, never ending the process (chat: Ctrl-C
	// stops the reply in progress, /bye or Ctrl-D quits).
	always bool
}

// ownSignals are the commands that stop gracefully on a signal; the others end at once.
var ownSignals = map[string]signalPolicy{
	"generate": {own: []os.Signal{os.Interrupt, syscall.SIGTERM}},
	"synth":    {own: []os.Signal{os.Interrupt, syscall.SIGTERM}},
	"bench":    {own: []os.Signal{os.Interrupt}},
	"chat":     {own: []os.Signal{os.Interrupt}, always: true},
}

// exitOnSignals makes the signals end the command name as described above until stop is
// called.
func exitOnSignals(name string) (stop func()) {
	policy := ownSignals[name]
	var watched []os.Signal
	for _, s := range interruptSignals {
		if !signal.Ignored(s) {
			watched = append(watched, s)
		}
	}
	if len(watched) == 0 {
		return func() {}
	}
	ch := make(chan os.Signal, 4)
	done := make(chan struct{})
	signal.Notify(ch, watched...)
	go func() {
		graceful := false // the command has had its one signal
		for {
			select {
			case <-done:
				return
			case s := <-ch:
				if slices.Contains(policy.own, s) && (policy.always || !graceful) {
					graceful = true
					continue
				}
				exitInterrupted(name, s)
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// exitInterrupted removes this process's temporaries and ends it with 128 + the signal's
// number.
func exitInterrupted(name string, s os.Signal) {
	removed := fileio.RemoveLive()
	msg := fmt.Sprintf("octlm %s: interrupted (%s)", name, signalName(s))
	if len(removed) > 0 {
		msg += fmt.Sprintf("; %d unfinished output(s) removed, targets left as they were", len(removed))
	}
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(signalExitCode(s))
}

// signalExitCode is the shell's exit status for a process ended by s: 128 + its number.
func signalExitCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 130
}

func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

// interruption is the cause of a context cancelled by a signal; it matches errInterrupted and
// ends the command with 128 + the signal's number.
type interruption struct{ sig os.Signal }

func (i interruption) Error() string        { return "interrupted (" + signalName(i.sig) + ")" }
func (i interruption) Is(target error) bool { return target == errInterrupted }

// interruptContext is cancelled by the first SIGINT or SIGTERM, with an interruption as its
// cause, so that a command can stop and print what it has; the next signal ends the process
// (exitOnSignals).
func interruptContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	var sigs []os.Signal
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return ctx, func() { cancel(context.Canceled) }
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case s := <-ch:
			cancel(interruption{s})
		case <-ctx.Done():
		}
		signal.Stop(ch)
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// interruptedBy is the error of a command that ctx's signal stopped: the interruption when a
// signal cancelled ctx, else errInterrupted.
func interruptedBy(ctx context.Context) error {
	if i, ok := context.Cause(ctx).(interruption); ok {
		return i
	}
	return errInterrupted
}
