package lambdalocal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/devtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// StackOptions configures StartStack.
type StackOptions struct {
	// Template is the SAM template; its functions are built and run.
	Template *samtemplate.Template
	// RepoRoot is where the Makefile is.
	RepoRoot string
	// Dir receives the binaries and the emulators' logs.
	Dir string
	// Env overrides each function's template environment ("K=V" by
	// function logical id; "*" applies to every function). Template
	// variables naming Secrets Manager secrets (*_SECRET_ARN) are dropped:
	// locally, the values come from these overrides instead.
	Env map[string][]string
	// Logger reports invocation failures of the front; nil discards.
	Logger *slog.Logger
}

// Stack is every function of a template running under the emulator, with
// the API front serving the template's routes.
type Stack struct {
	Functions map[string]*Emulator
	Front     http.Handler
	tpl       *samtemplate.Template
}

// StartStack builds every function of the template with its Makefile
// target and starts each under the Runtime Interface Emulator.
func StartStack(ctx context.Context, o StackOptions) (*Stack, error) {
	rie, err := devtools.Tool(ctx, "aws-lambda-rie", "AWS_LAMBDA_RIE")
	if err != nil {
		return nil, err
	}
	ids := o.Template.FunctionIDs()
	bins, err := Build(ctx, o.RepoRoot, o.Dir, ids)
	if err != nil {
		return nil, err
	}
	s := &Stack{Functions: map[string]*Emulator{}, tpl: o.Template}
	var routes []Route
	for _, id := range ids {
		fn := o.Template.Functions[id]
		env := localEnv(fn.Environment, append(append([]string(nil), o.Env["*"]...), o.Env[id]...))
		em, err := StartEmulator(ctx, EmulatorOptions{
			Name: id, RIE: rie, Bootstrap: bins[id], Env: env,
			Timeout: fn.Timeout, MemoryMB: fn.MemorySize, LogPath: filepath.Join(o.Dir, id+".log"),
		})
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Functions[id] = em
		for _, r := range fn.Routes {
			routes = append(routes, Route{Method: r.Method, Path: r.Path, Function: em})
		}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s.Front = NewFront(routes, log)
	return s, nil
}

// localEnv is the template's environment without secret references, then
// the overrides.
func localEnv(tmpl map[string]string, overrides []string) []string {
	keys := make([]string, 0, len(tmpl))
	for k := range tmpl {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var env []string
	for _, k := range keys {
		if strings.HasSuffix(k, "_SECRET_ARN") {
			continue
		}
		env = append(env, k+"="+tmpl[k])
	}
	// Drop the keys being overridden rather than relying on which of two
	// duplicate entries a program's getenv returns.
	over := map[string]bool{}
	for _, kv := range overrides {
		k, _, _ := strings.Cut(kv, "=")
		over[k] = true
	}
	out := env[:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !over[k] {
			out = append(out, kv)
		}
	}
	return append(out, overrides...)
}

// Schedules returns, per function, the rules of its Schedule events.
func (s *Stack) Schedules() map[string][]samtemplate.Schedule {
	out := map[string][]samtemplate.Schedule{}
	for id, fn := range s.tpl.Functions {
		for _, sc := range fn.Schedules {
			if sc.Enabled {
				out[id] = append(out[id], sc)
			}
		}
	}
	return out
}

// Fire invokes every schedule of function id once.
func (s *Stack) Fire(ctx context.Context, id string) ([]byte, error) {
	em, ok := s.Functions[id]
	if !ok {
		return nil, fmt.Errorf("no function %s", id)
	}
	var last []byte
	for _, sc := range s.Schedules()[id] {
		out, err := InvokeSchedule(ctx, em, sc.Event)
		if err != nil {
			return out, err
		}
		last = out
	}
	return last, nil
}

// RunSchedules fires each schedule at its template rate, or every
// `every` when that is shorter and not zero, until ctx ends.
func (s *Stack) RunSchedules(ctx context.Context, every time.Duration, log *slog.Logger) error {
	var wg sync.WaitGroup
	var errs []error
	var mu sync.Mutex
	for id, scs := range s.Schedules() {
		for _, sc := range scs {
			period, err := samtemplate.ParseRate(sc.Expression)
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", id, err))
				mu.Unlock()
				continue
			}
			if every > 0 && every < period {
				period = every
			}
			em, rule := s.Functions[id], sc.Event
			wg.Go(func() {
				t := time.NewTicker(period)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
					}
					if out, err := InvokeSchedule(ctx, em, rule); err != nil && ctx.Err() == nil {
						log.Error("local schedule: invocation failed", "function", em.Name, "rule", rule, "err", err)
					} else if ctx.Err() == nil {
						log.Info("local schedule fired", "function", em.Name, "rule", rule, "result", string(out))
					}
				}
			})
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	wg.Wait()
	return nil
}

// InitDurations returns each function's init duration as reported by the
// emulator (known once the function has been invoked).
func (s *Stack) InitDurations() map[string]time.Duration {
	out := map[string]time.Duration{}
	for id, em := range s.Functions {
		if d, ok := em.InitDuration(); ok {
			out[id] = d
		}
	}
	return out
}

// Serve serves the front on ln until ctx ends.
func (s *Stack) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Front, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops every emulator.
func (s *Stack) Close() {
	for _, em := range s.Functions {
		_ = em.Close()
	}
}
