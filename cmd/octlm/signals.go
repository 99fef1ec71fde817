package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"

	"github.com/octlm/octlm/internal/fileio"
)

// Signals: every command ends on SIGINT (Ctrl-C), SIGTERM (kill's default, a service manager
// stopping it) and SIGHUP (its terminal closed) the same way: the temporaries it was writing
// are removed (fileio.RemoveLive), the targets are left as they were, and it exits with
// 128 + the signal's number (130, 143, 129). Code that stops gracefully on a signal claims it
// while it can (interruptContext: generate prints the tokens so far, synth cleans up and says
// so; chat's reply loop: Ctrl-C stops the reply in progress): a claim made once takes the
// first such signal, and the next one ends the process as above; a claim made always takes
// every one. A signal ignored when octlm started (nohup, a background job of a
// non-interactive shell) stays ignored.

// interruptSignals are the signals that end a command.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// signalClaim is code that handles a signal itself.
type signalClaim struct {
	always bool // every signal, not only the first
	used   bool // the first has been taken
}

var claims struct {
	sync.Mutex
	m map[os.Signal][]*signalClaim
}

// claimSignals makes sigs the caller's to handle (it must also be notified of them): only the
// first of them while once, every one while always, until release is called.
func claimSignals(always bool, sigs ...os.Signal) (release func()) {
	c := &signalClaim{always: always}
	claims.Lock()
	if claims.m == nil {
		claims.m = map[os.Signal][]*signalClaim{}
	}
	for _, s := range sigs {
		claims.m[s] = append(claims.m[s], c)
	}
	claims.Unlock()
	return func() {
		claims.Lock()
		defer claims.Unlock()
		for _, s := range sigs {
			claims.m[s] = slices.DeleteFunc(claims.m[s], func(x *signalClaim) bool { return x == c })
		}
	}
}

// takenByClaim reports whether a claim takes this delivery of s, using up a claim made once.
func takenByClaim(s os.Signal) bool {
	claims.Lock()
	defer claims.Unlock()
	taken := false
	for _, c := range claims.m[s] {
		if c.always || !c.used {
			c.used = true
			taken = true
		}
	}
	return taken
}

// exitOnSignals makes the signals end the command name as described above until stop is
// called.
func exitOnSignals(name string) (stop func()) {
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
		for {
			select {
			case <-done:
				return
			case s := <-ch:
				if !takenByClaim(s) {
					exitInterrupted(name, s)
				}
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// critical is held while a step must not be cut in two (synth swapping the old checkpoint
// for the new); a signal that ends the process waits for it.
var critical sync.Mutex

// uninterruptible runs fn with the signals that end the process held back until it returns.
func uninterruptible(fn func() error) error {
	critical.Lock()
	defer critical.Unlock()
	return fn()
}

// exitInterrupted removes this process's temporaries and ends it with 128 + the signal's
// number.
func exitInterrupted(name string, s os.Signal) {
	critical.Lock() // never released: the process ends
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
// cause, so that a command can stop and print what it has; it claims that first signal, and
// the next one ends the process (exitOnSignals).
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
	release := claimSignals(false, sigs...)
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
	return ctx, func() { release(); cancel(context.Canceled) }
}

// interruptedBy is the error of a command that ctx's signal stopped: the interruption when a
// signal cancelled ctx, else errInterrupted.
func interruptedBy(ctx context.Context) error {
	if i, ok := context.Cause(ctx).(interruption); ok {
		return i
	}
	return errInterrupted
}
