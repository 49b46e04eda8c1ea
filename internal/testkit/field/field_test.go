package field

import (
	"fmt"
	"testing"
	"time"
)

// recorder stands in for a test so that a failure can be read back.
type recorder struct {
	testing.TB
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func TestCheckNamesOnlyWhatFailed(t *testing.T) {
	s := "x"
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var r recorder
	ok := Check(&r, "config",
		Eq("Bucket", "a", "b"),
		Eq("Count", 2, 2),
		Eq("Key", &s, nil),
		Eq[*time.Time]("Cleared", nil, &at),
		Is("At", at, at.Equal(at.Add(time.Second)), "a second later"),
		Is("Size", 3, 3 > 5, "over 5"),
	)
	want := `config: Bucket = "a", want "b"; Key = &"x", want nil; Cleared = nil, want &2026-01-02 03:04:05 +0000 UTC; ` +
		`At = 2026-01-02 03:04:05 +0000 UTC, want a second later; Size = 3, want over 5`
	if ok || len(r.msgs) != 1 || r.msgs[0] != want {
		t.Fatalf("Check = %v, %q\nwant false, %q", ok, r.msgs, want)
	}
}

func TestCheckPassesSilently(t *testing.T) {
	var r recorder
	if ok := Check(&r, "config", Eq("Bucket", "b", "b"), Is("Size", 9, 9 > 5, "over 5")); !ok || len(r.msgs) != 0 {
		t.Fatalf("Check = %v, %q; want true and no message", ok, r.msgs)
	}
}

func TestPrintedComparesAsPrinted(t *testing.T) {
	t.Parallel()
	var r recorder
	if !Check(&r, "printed alike", Printed("n", int64(2), 2)) || len(r.msgs) != 0 {
		t.Errorf("int64(2) against 2: %q, want no failure", r.msgs)
	}
	if Check(&r, "x", Printed("n", int64(2), 3)) || len(r.msgs) != 1 || r.msgs[0] != "x: n = 2, want 3" {
		t.Errorf("2 against 3: %q, want one failure naming n", r.msgs)
	}
}
