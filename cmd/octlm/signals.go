package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/octlm/octlm/internal/fileio"
)

// Signals: every command ends on SIGINT (Ctrl-C), SIGTERM (kill's default, a service manager
// stopping it) and SIGHUP (its terminal closed) the same way: the temporaries it was writing
// are removed (fileio.EndProcess), the targets are left as they were, and it exits with
// 128 + the signal's number (130, 143, 129). Code that stops gracefully on a signal claims it
// while it can (interruptContext: generate prints the tokens so far, synth cleans up and says
// so; chat's reply loop: Ctrl-C stops the reply in progress): a claim made once takes the
// first such signal, and the next one ends the process as above; a claim made always takes
// every one. A claimed signal must be handled within signalGrace (the command returns, the
// reply stops): code busy past it (a long prefill, which reads no context) is ended as above
// all the same. A signal ignored when octlm started (nohup, a background job of a
// non-interactive shell) stays ignored.

// interruptSignals are the signals that end a command.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// signalGrace is how long code that claimed a signal has to handle it before the process ends
// anyway (exitInterrupted).
const signalGrace = 2 * time.Second

// signalHandler is what a claim does with a delivery it takes. It returns a channel closed
// once the delivery is handled (the command returned, the reply stopped), or nil when it
// already is.
type signalHandler func(os.Signal) (handled <-chan struct{})

// signalClaim is code that handles a signal itself.
type signalClaim struct {
	always bool // every signal, not only the first
	used   bool // the first has been taken
	handle signalHandler
}

var claims struct {
	sync.Mutex
	m map[os.Signal][]*signalClaim
}

// claimSignals makes sigs the caller's to handle: exitOnSignals calls handle on the first of
// them while once, on every one while always, until release is called.
func claimSignals(always bool, handle signalHandler, sigs ...os.Signal) (release func()) {
	c := &signalClaim{always: always, handle: handle}
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

// takenByClaim reports whether a claim takes this delivery of s, using up a claim made once,
// and the handlers of the claims that take it.
func takenByClaim(s os.Signal) (handlers []signalHandler, taken bool) {
	claims.Lock()
	defer claims.Unlock()
	for _, c := range claims.m[s] {
		if c.always || !c.used {
			c.used = true
			taken = true
			if c.handle != nil {
				handlers = append(handlers, c.handle)
			}
		}
	}
	return handlers, taken
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
				handlers, taken := takenByClaim(s)
				if !taken {
					exitInterrupted(name, s, "")
				}
				for _, h := range handlers {
					if handled := h(s); handled != nil {
						go exitUnlessHandled(name, s, handled, done)
					}
				}
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// exitUnlessHandled ends the process unless the claimed delivery of s is handled within
// signalGrace or the command has returned (stopped).
func exitUnlessHandled(name string, s os.Signal, handled, stopped <-chan struct{}) {
	timer := time.NewTimer(signalGrace)
	defer timer.Stop()
	select {
	case <-handled:
	case <-stopped:
	case <-timer.C:
		exitInterrupted(name, s, fmt.Sprintf("still busy %v after it", signalGrace))
	}
}

// exitInterrupted removes this process's temporaries and ends it with 128 + the signal's
// number; why, when given, says why a claimed signal ended it.
func exitInterrupted(name string, s os.Signal, why string) {
	removed := fileio.EndProcess() // after any fileio.Uninterruptible step (synth's renames)
	msg := fmt.Sprintf("octlm %s: interrupted (%s)", name, signalName(s))
	if why != "" {
		msg = fmt.Sprintf("octlm %s: interrupted (%s, %s)", name, signalName(s), why)
	}
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
// the next one ends the process (exitOnSignals), as does the first where the command has not
// returned (called the returned function) within signalGrace of it.
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
	// The command has signalGrace from the signal to return (stop); exitOnSignals then ends it.
	stopped := make(chan struct{})
	release := claimSignals(false, func(s os.Signal) <-chan struct{} {
		cancel(interruption{s})
		return stopped
	}, sigs...)
	// Cancelled here too, where no exitOnSignals runs (a command called in a test).
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
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			release()
			cancel(context.Canceled)
			close(stopped)
		})
	}
}

// interruptible runs a command's body with an interruptContext: an error the body returns
// because that context's signal cancelled it (a Hub download, a run that stopped) becomes the
// interruption, so the command exits with 128 + the signal's number.
func interruptible(run func(ctx context.Context) error) error {
	ctx, stop := interruptContext()
	defer stop()
	err := run(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return interruptedBy(ctx)
	}
	return err
}

// interruptedBy is the error of a command that ctx's signal stopped: the interruption when a
// signal cancelled ctx, else errInterrupted.
func interruptedBy(ctx context.Context) error {
	if i, ok := context.Cause(ctx).(interruption); ok {
		return i
	}
	return errInterrupted
}
