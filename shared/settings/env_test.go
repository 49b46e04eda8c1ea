package settings_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnvDefaultsWhenUnset(t *testing.T) {
	t.Parallel()
	e := settings.NewEnv(getenvOf(nil))
	if !field.Check(t, "an unset variable did not keep its default",
		field.Eq("String", e.String("S", "d"), "d"),
		field.Eq("Int", e.Int("I", 7), 7),
		field.Eq("IntIn", e.IntIn("N", 3, 1, 9, "events"), 3),
		field.Eq("Bytes", e.Bytes("B", 1<<20), 1<<20),
		field.Eq("Duration", e.Duration("D", time.Second), time.Second),
		field.Eq("DurationIn", e.DurationIn("DI", time.Second, 0, time.Minute), time.Second),
		field.Eq("Age", e.Age("A", 7*24*time.Hour), 7*24*time.Hour),
		field.Eq("Bool", e.Bool("T", true), true),
		field.Eq("OneOf", e.OneOf("O", "x", "x", "y"), "x"),
	) {
		t.FailNow()
	}
	if err := e.Err(); err != nil {
		t.Fatalf("unset optional variables are problems: %v", err)
	}
}

func TestEnvReadsValues(t *testing.T) {
	t.Parallel()
	e := settings.NewEnv(getenvOf(map[string]string{
		"S": "v", "I": "12", "N": "9", "B": "2048", "D": "1m30s", "A": "30d", "A2": "36h", "T": "false", "O": "y",
		"DI": "0", "DI2": "1m",
	}))
	if !field.Check(t, "a value was not read",
		field.Eq("S", e.String("S", "d"), "v"),
		field.Eq("I", e.Int("I", 1), 12),
		field.Eq("N", e.IntIn("N", 3, 1, 9, "events"), 9),
		field.Eq("B", e.Bytes("B", 1), 2048),
		field.Eq("D", e.Duration("D", 0), 90*time.Second),
		field.Eq("DI", e.DurationIn("DI", time.Second, 0, time.Minute), 0),
		field.Eq("DI2", e.DurationIn("DI2", 0, time.Second, time.Minute), time.Minute),
		field.Eq("A", e.Age("A", 0), 30*24*time.Hour),
		field.Eq("A2", e.Age("A2", 0), 36*time.Hour),
		field.Eq("T", e.Bool("T", true), false),
		field.Eq("O", e.OneOf("O", "x", "x", "y"), "y"),
	) {
		t.FailNow()
	}
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestEnvReportsEveryProblemAtOnce: every bad variable is named, with what
// it must be and what it was, and keeps its default.
func TestEnvReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	e := settings.NewEnv(getenvOf(map[string]string{
		"I": "many", "I0": "0", "N": "1000000", "B": "lots", "D": "-1s", "A": "a week", "T": "sometimes", "O": "z",
		"DI": "2m", "DI0": "0", "DIX": "soon",
	}))
	if !field.Check(t, "a bad value did not keep the default",
		field.Eq("I", e.Int("I", 5), 5),
		field.Eq("I0", e.Int("I0", 5), 5),
		field.Eq("N", e.IntIn("N", 3, 1, 100000, "events"), 3),
		field.Eq("B", e.Bytes("B", 8), 8),
		field.Eq("D", e.Duration("D", time.Second), time.Second),
		field.Eq("A", e.Age("A", time.Hour), time.Hour),
		field.Eq("T", e.Bool("T", true), true),
		field.Eq("O", e.OneOf("O", "x", "x", "y"), "x"),
		field.Eq("DI", e.DurationIn("DI", time.Second, 0, time.Minute), time.Second),
		field.Eq("DI0", e.DurationIn("DI0", time.Second, time.Millisecond, time.Minute), time.Second),
		field.Eq("DIX", e.DurationIn("DIX", time.Second, 0, time.Minute), time.Second),
	) {
		t.FailNow()
	}
	e.Required("R")
	e.Errorf("%s is odd", "CUSTOM")
	e.Add(nil)
	err := e.Err()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`I must be a positive whole number, got "many"`,
		`I0 must be a positive whole number, got "0"`,
		`N must be a number of events from 1 to 100000, got "1000000"`,
		`B must be a positive number of bytes, got "lots"`,
		`D must be a positive duration such as 30s or 5m, got "-1s"`,
		`DI must be a duration from 0s to 1m0s, got "2m"`,
		`DI0 must be a duration from 1ms to 1m0s, got "0"`,
		`DIX must be a duration from 0s to 1m0s, got "soon"`,
		`A must be a positive duration such as 168h or 7d, got "a week"`,
		`T must be true or false, got "sometimes"`,
		`O must be x or y, got "z"`,
		`R is not set`,
		`CUSTOM is odd`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

func TestLogLevel(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]slog.Level{"": slog.LevelInfo, "debug": slog.LevelDebug, "WARN": slog.LevelWarn, "error": slog.LevelError} {
		if got, err := settings.LogLevel(getenvOf(map[string]string{"LOG_LEVEL": v})); err != nil || got != want {
			t.Errorf("LOG_LEVEL=%q: %v, %v", v, got, err)
		}
	}
	if _, err := settings.LogLevel(getenvOf(map[string]string{"LOG_LEVEL": "loud"})); err == nil ||
		!strings.Contains(err.Error(), `LOG_LEVEL must be debug, info, warn or error, got "loud"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := settings.LoggerFromEnv(getenvOf(map[string]string{"LOG_LEVEL": "loud"})); err == nil || !strings.Contains(err.Error(), "LOG_LEVEL") {
		t.Fatalf("LoggerFromEnv err = %v", err)
	}
}

// TestLambdaLogLevel: the level Lambda sets from the function's
// ApplicationLogLevel (AWS_LAMBDA_LOG_LEVEL, upper case, TRACE to FATAL)
// wins over LOG_LEVEL, since Lambda drops whatever is below it anyway; a
// value Lambda would not set is refused, naming the variable. The JSON
// lines carry the "level" key Lambda filters on, with its names (slog's
// DEBUG, INFO, WARN, ERROR), and a line below the level is not written.
func TestLambdaLogLevel(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]slog.Level{
		"TRACE": slog.LevelDebug, "DEBUG": slog.LevelDebug, "INFO": slog.LevelInfo, "WARN": slog.LevelWarn,
		"ERROR": slog.LevelError, "FATAL": slog.LevelError + 4, "debug": slog.LevelDebug,
	} {
		got, err := settings.LogLevel(getenvOf(map[string]string{"AWS_LAMBDA_LOG_LEVEL": v, "LOG_LEVEL": "error"}))
		if err != nil || got != want {
			t.Errorf("AWS_LAMBDA_LOG_LEVEL=%q over LOG_LEVEL=error: %v, %v; want %v", v, got, err, want)
		}
	}
	if _, err := settings.LogLevel(getenvOf(map[string]string{"AWS_LAMBDA_LOG_LEVEL": "LOUD"})); err == nil ||
		!strings.Contains(err.Error(), `AWS_LAMBDA_LOG_LEVEL must be TRACE, DEBUG, INFO, WARN, ERROR or FATAL, got "LOUD"`) {
		t.Fatalf("err = %v", err)
	}

	lvl, err := settings.LogLevel(getenvOf(map[string]string{"AWS_LAMBDA_LOG_LEVEL": "INFO"}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := settings.JSONLogger(&buf, lvl)
	log.Debug("hidden")
	log.Info("shown")
	log.Warn("shown too")
	var levels []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		levels = append(levels, fmt.Sprint(rec["level"]))
	}
	if strings.Join(levels, " ") != "INFO WARN" {
		t.Errorf("levels written at INFO: %v, want INFO WARN (Lambda reads the \"level\" key)", levels)
	}
}

// JoinUnique says a problem two components share once, and keeps the
// others in order.
func TestJoinUnique(t *testing.T) {
	t.Parallel()
	a := errors.New("DATABASE_URL is not set\nARCHIVE_MIN_AGE is bad")
	b := errors.New("DATABASE_URL is not set\nOPERATOR_ACCESS is bad")
	got := settings.JoinUnique(a, nil, b).Error()
	if got != "DATABASE_URL is not set\nARCHIVE_MIN_AGE is bad\nOPERATOR_ACCESS is bad" {
		t.Fatalf("JoinUnique = %q", got)
	}
	if settings.JoinUnique(nil, nil) != nil {
		t.Fatal("no error joined is an error")
	}
}

// TestReadAllSaysEveryProblemOnce: every reader runs, whatever the others
// say; the values read land where Into bound them; a line two readers
// report (a variable they share) is said once.
func TestReadAllSaysEveryProblemOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SIZE": "7"}
	size := func(getenv func(string) string) (int, error) {
		return len(getenv("SIZE")), nil
	}
	bad := func(name string) func(func(string) string) (string, error) {
		return func(func(string) string) (string, error) {
			return name, errors.New(name + ": invalid\nSHARED: invalid")
		}
	}
	var (
		n    int
		a, b string
	)
	err := settings.ReadAll(func(k string) string { return env[k] },
		settings.Into(&n, size), settings.Into(&a, bad("A")), settings.Into(&b, bad("B")))
	if n != 1 || a != "A" || b != "B" {
		t.Errorf("values read: n=%d a=%q b=%q, want 1, A, B", n, a, b)
	}
	if err == nil {
		t.Fatal("no error")
	}
	for line, want := range map[string]int{"A: invalid": 1, "B: invalid": 1, "SHARED: invalid": 1} {
		if got := strings.Count(err.Error(), line); got != want {
			t.Errorf("%q said %d times, want %d:\n%v", line, got, want, err)
		}
	}
	if err := settings.ReadAll(func(string) string { return "" }, settings.Into(&n, size)); err != nil {
		t.Errorf("no problem: %v", err)
	}
	a = ""
	if err := settings.ReadAll(func(string) string { return "" }, settings.If(false, settings.Into(&a, bad("A")))); err != nil || a != "" {
		t.Errorf("a part If leaves out was read: %q, %v", a, err)
	}
}
