package processor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

// The crash test runs processors as child processes, this test binary
// re-executed with childEnv set, so that it can SIGKILL them: no deferred
// function, no rollback, no release runs, exactly as with a Lambda killed
// at its timeout or an OOM kill.
const (
	childEnv       = "PROCESSOR_TEST_CHILD"
	childURLEnv    = "PROCESSOR_TEST_DATABASE_URL"
	childOffsetEnv = "PROCESSOR_TEST_CLOCK_OFFSET"
)

// Child processors use a short lease, and each generation of children runs
// on a clock crashStep ahead of the previous one: the leases the killed
// children left are past for the next ones, and nothing sleeps for them.
const (
	childLease = 10 * time.Second
	crashStep  = childLease + time.Second
)

// runChild is the child's main: drain until nothing is due, with a handler
// that writes the ledger and then works a little inside the transaction,
// so that kills land before, inside and after transactions.
func runChild(mode string) int {
	if mode != "drain" && mode != "poison" {
		fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
		return 2
	}
	offset, err := time.ParseDuration(os.Getenv(childOffsetEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv(childURLEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for k, v := range processor.SessionParams(2 * time.Second) {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	reg := processor.NewRegistry()
	reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if err := writeLedger(ctx, tx, ev); err != nil {
			return err
		}
		if ev.Type == "poison" {
			// The poison kills its processor, as an OOM kill would.
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		time.Sleep(rand.N(2 * time.Millisecond)) // the handler's "work", with the transaction open
		return nil
	})
	p, err := processor.New(processor.Config{
		Lease: childLease, HandlerTimeout: 2 * time.Second, SafetyMargin: 4 * time.Second,
		// Random kills charge an attempt to an event they interrupt while it
		// runs alone; with two dozen kills, no event may run out of attempts
		// in the drain test. The poison test wants its poison dead soon.
		MaxAttempts: map[string]int{"drain": 1000, "poison": 3}[mode],
	}, processor.Deps{
		Pool: pool, Registry: reg, Clock: offsetClock(offset),
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	st, err := p.Drain(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drain:", err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(st)
	return 0
}

type child struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

func startChild(t *testing.T, url string, offset time.Duration) *child {
	t.Helper()
	return startChildMode(t, "drain", url, offset)
}

func startChildMode(t *testing.T, mode, url string, offset time.Duration) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: exec.Command(exe)}
	c.cmd.Env = append(os.Environ(), childEnv+"="+mode, childURLEnv+"="+url, childOffsetEnv+"="+offset.String())
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// wait reports whether the child died of SIGKILL; any other end but a
// clean exit is an error.
func (c *child) wait() (killed bool, err error) {
	err = c.cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, nil
		}
	}
	if err != nil {
		return false, fmt.Errorf("child processor: %w\nstderr:\n%s", err, c.stderr.String())
	}
	return false, nil
}

// TestSIGKILLedProcessorsApplyEachEventOnce is the crash acceptance: two
// processor processes drain at once, running batches of 64 events in one
// transaction each, and are SIGKILLed at random points, round after
// round, and restarted; a last generation finishes the drain. Every
// effect exists exactly once, every attempt a kill interrupted is in its
// event's history, and no claim is left holding events.
func TestSIGKILLedProcessorsApplyEachEventOnce(t *testing.T) {
	tier.Heavy(t, "kills processor processes")
	t.Parallel()
	url := pgtest.URL(t)
	f := setupOn(t, newPool(t, url))
	const events, rounds, perRound = 3000, 16, 2
	f.insert("ledger", "ledger.write", "evt_", events)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	t.Logf("kill timing seed %d", seed)

	kills := 0
	for round := 1; round <= rounds; round++ {
		before, _ := f.ledger()
		children := make([]*child, perRound)
		for i := range children {
			children[i] = startChild(t, url, time.Duration(round)*crashStep)
		}
		// Let the drain start (the ledger grows), then kill each child at
		// its own random point a few milliseconds into it.
		exited := make(chan struct{})
		var wg sync.WaitGroup
		killedN := make([]bool, perRound)
		errs := make([]error, perRound)
		for i, c := range children {
			wg.Go(func() { killedN[i], errs[i] = c.wait() })
		}
		go func() { wg.Wait(); close(exited) }()
		poll.Until(t, 30*time.Second, func() (bool, string) {
			select {
			case <-exited:
				return true, ""
			default:
			}
			rows, _ := f.ledger()
			return rows > before, "child processors made no progress"
		})
		for _, c := range children {
			delay := time.Duration(rng.Int64N(int64(40 * time.Millisecond)))
			go func() {
				time.Sleep(delay) // a random kill point, not a wait for time to pass
				_ = c.cmd.Process.Signal(syscall.SIGKILL)
			}()
		}
		<-exited
		for i, k := range killedN {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if k {
				kills++
			}
		}
	}
	if kills < 24 {
		t.Fatalf("only %d children were killed mid-drain, want at least 24; the test did not test much", kills)
	}

	// The last generation, on a clock past every lease, finishes the drain.
	final := []*child{startChild(t, url, (rounds+1)*crashStep), startChild(t, url, (rounds+1)*crashStep)}
	for _, c := range final {
		if killed, err := c.wait(); err != nil || killed {
			t.Fatalf("final child: killed %v, %v", killed, err)
		}
	}

	if rows, distinct := f.ledger(); rows != events || distinct != events {
		t.Fatalf("ledger rows = %d for %d events, want %d, once each", rows, distinct, events)
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE processed_at IS NULL OR dead_at IS NOT NULL`); n != 0 {
		t.Fatalf("%d events not processed", n)
	}
	// Nothing is stuck past its lease: the last generation recovered
	// every claim the killed ones left.
	f.noOpenClaims()
	// Every event has exactly one handled attempt, and every other attempt
	// of it is an interruption its history records.
	if n := f.count(`SELECT count(*) FROM webhook_events e WHERE (SELECT count(*) FROM webhook_attempts a WHERE a.event_pk = e.id AND a.outcome = 'handled') <> 1`); n != 0 {
		t.Fatalf("%d events without exactly one handled attempt", n)
	}
	interrupted := f.count(`SELECT count(*) FROM webhook_attempts WHERE outcome = 'interrupted'`)
	extra := f.count(`SELECT coalesce(sum(attempts - 1), 0) FROM webhook_events`)
	if interrupted != extra || f.count(`SELECT count(*) FROM webhook_attempts WHERE outcome NOT IN ('handled', 'interrupted')`) != 0 {
		t.Fatalf("%d interrupted attempts for %d attempts beyond the first", interrupted, extra)
	}
	// No foreign key holds the history to its events (00015): the
	// statements that write it do, even when processes die mid-write.
	if n := f.count(`SELECT count(*) FROM webhook_attempts a WHERE NOT EXISTS (SELECT 1 FROM webhook_events e WHERE e.id = a.event_pk)`); n != 0 {
		t.Fatalf("%d attempts of no event", n)
	}
	inBatch := f.count(`SELECT count(*) FROM webhook_attempts WHERE outcome = 'interrupted' AND batch_size > 1`)
	t.Logf("%d kills mid-drain; %d attempts interrupted, %d of them in a batch", kills, interrupted, inBatch)
}

// TestPoisonThatKillsItsProcessorInABatch: one event of a batch kills its
// processor every time it runs. The batch is interrupted once; each of its
// neighbours then runs alone, once, and is processed exactly once; the
// poison, alone, kills a processor per attempt until its attempts are
// spent, and then moves to the dead letters without running again.
func TestPoisonThatKillsItsProcessorInABatch(t *testing.T) {
	tier.Heavy(t, "kills processor processes")
	t.Parallel()
	url := pgtest.URL(t)
	f := setupOn(t, newPool(t, url))
	f.insert("ledger", "ledger.write", "evt_a_", 20)
	poison := f.insert("ledger", "poison", "evt_p_", 1)[0]
	f.insert("ledger", "ledger.write", "evt_b_", 20)

	// Each generation runs on a clock past the previous one's lease: it
	// recovers the claim the poison left, and goes on until the poison
	// kills it again or nothing is left.
	killed := 0
	for gen := 1; ; gen++ {
		if gen > 10 {
			t.Fatalf("still killing processors after %d generations", gen-1)
		}
		k, err := startChildMode(t, "poison", url, time.Duration(gen)*crashStep).wait()
		if err != nil {
			t.Fatal(err)
		}
		if !k {
			break
		}
		killed++
	}
	// One kill in the batch, then one per attempt it makes alone.
	if killed != 1+3 {
		t.Fatalf("the poison killed %d processors, want 4 (its batch's, then 3 attempts alone)", killed)
	}
	if rows, distinct := f.ledger(); rows != 40 || distinct != 40 {
		t.Fatalf("ledger = %d rows for %d events, want the 40 neighbours once each", rows, distinct)
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE dead_at IS NOT NULL AND id <> $1`, poison); n != 0 {
		t.Fatalf("%d neighbours dragged to the dead letters", n)
	}
	r, h := f.row(poison), f.history(poison)
	check(t, "poison", r, map[string]any{"DeadAt": set})
	attempts(t, h, 4)
	check(t, "poison's attempt 1", h[0], map[string]any{"BatchSize": 41})
	check(t, "poison's attempt 4", h[3], map[string]any{"BatchSize": 1, "Dead": true})
	if n := f.count(`SELECT count(*) FROM webhook_attempts WHERE event_pk <> $1 AND outcome = 'interrupted'`, poison); n != 40 {
		t.Fatalf("%d neighbours' interrupted attempts, want 40 (the batch's)", n)
	}
	f.noOpenClaims()
}

// offsetClock is the wall clock moved by a fixed offset: a child's time
// as the parent test has moved it, so that its leases pass at once.
type offsetClock time.Duration

func (c offsetClock) Now() time.Time                       { return time.Now().Add(time.Duration(c)) }
func (offsetClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
