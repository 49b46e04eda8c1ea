package memlimit_test

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/shared/memlimit"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLimit(t *testing.T) {
	t.Parallel()
	for mb, want := range map[int64]int64{
		128:   104 << 20,                  // the floor: 24 MiB kept
		256:   (256 << 20) - (256<<20)/10, // a tenth kept: 230.4 MiB
		512:   (512 << 20) - (512<<20)/10,
		10240: (10240 << 20) - (10240<<20)/10,
	} {
		if got := memlimit.Limit(mb); got != want {
			t.Errorf("Limit(%d) = %d, want %d", mb, got, want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env     map[string]string
		want    int64
		ok      bool
		wantErr string
	}{
		"lambda":             {map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256"}, memlimit.Limit(256), true, ""},
		"GOMEMLIMIT wins":    {map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256", "GOMEMLIMIT": "100MiB"}, 0, false, ""},
		"not in lambda":      {map[string]string{}, 0, false, ""},
		"not a number":       {map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256MB"}, 0, false, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"},
		"smaller than spare": {map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "16"}, 0, false, "not a memory size"},
		"negative":           {map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "-512"}, 0, false, "not a memory size"},
	} {
		got, ok, err := memlimit.FromEnv(env(tc.env))
		if got != tc.want || ok != tc.ok || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: FromEnv = %d, %v, %v; want %d, %v, an error mentioning %q", name, got, ok, err, tc.want, tc.ok, tc.wantErr)
		}
	}
}

// TestApply sets the process's limit, so it runs alone (no t.Parallel)
// and puts the limit back.
func TestApply(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	limit, err := memlimit.Apply(env(map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}))
	if err != nil || limit != memlimit.Limit(512) || debug.SetMemoryLimit(-1) != limit {
		t.Fatalf("Apply = %d, %v; runtime limit %d", limit, err, debug.SetMemoryLimit(-1))
	}
	// Without Lambda's variable, or with GOMEMLIMIT set, nothing changes.
	debug.SetMemoryLimit(math.MaxInt64)
	for _, m := range []map[string]string{{}, {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOMEMLIMIT": "1GiB"}} {
		if limit, err := memlimit.Apply(env(m)); limit != 0 || err != nil || debug.SetMemoryLimit(-1) != math.MaxInt64 {
			t.Fatalf("Apply(%v) = %d, %v; runtime limit %d", m, limit, err, debug.SetMemoryLimit(-1))
		}
	}
	if _, err := memlimit.Apply(env(map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"})); err == nil || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("a bad size: %v, runtime limit %d", err, debug.SetMemoryLimit(-1))
	}
}
