package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// Share is a part of a profile's CPU time.
type Share struct {
	Name    string  `json:"name"`
	Percent float64 `json:"percent"`
}

// CPUProfile sums up a CPU profile of this process.
type CPUProfile struct {
	File       string  `json:"file"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// Sides splits the samples by the "side" label: the load generator
	// (loadgen), the receiver's handler (receiver), and the rest (net/http
	// serving outside the handler, the garbage collector, the scheduler).
	Sides []Share `json:"sides,omitempty"`
	// Areas splits the samples that are not the load generator's by what
	// they do, all of them, largest first: each sample goes to the
	// innermost frame that is not a runtime or low-level library function
	// (so an allocation or a memmove counts for the code that asked for it).
	Areas []Share `json:"areas"`
	// Top lists the functions with the most samples of their own.
	Top []Share `json:"top"`
}

// cpuProfile runs fn under the CPU profiler, writes the profile to the
// profiles folder as NAME.pprof and sums it up.
func (b *bench) cpuProfile(name string, fn func() error) (CPUProfile, error) {
	path := filepath.Join(b.profiles, name+".pprof")
	f, err := os.Create(path)
	if err != nil {
		return CPUProfile{}, fmt.Errorf("create profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return CPUProfile{}, fmt.Errorf("start CPU profile: %w", err)
	}
	start := time.Now()
	runErr := fn()
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		return CPUProfile{}, fmt.Errorf("write profile: %w", err)
	}
	if runErr != nil {
		return CPUProfile{}, runErr
	}
	p, err := summarizeProfile(path)
	if err != nil {
		return CPUProfile{}, err
	}
	p.Seconds = time.Since(start).Seconds()
	return p, nil
}

// summarizeProfile reads a CPU profile and splits its time.
func summarizeProfile(path string) (CPUProfile, error) {
	out := CPUProfile{File: filepath.Base(path)}
	f, err := os.Open(path)
	if err != nil {
		return out, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return out, fmt.Errorf("parse profile %s: %w", path, err)
	}
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			vi = i
		}
	}
	if vi < 0 {
		return out, fmt.Errorf("profile %s has no cpu samples", path)
	}
	sides := map[string]int64{}
	areas := map[string]int64{}
	flat := map[string]int64{}
	var total, counted int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		side := "(unlabelled: net/http outside the handler, GC, scheduler)"
		if l := s.Label["side"]; len(l) > 0 {
			side = l[0]
		}
		sides[side] += v
		if side == "loadgen" {
			continue
		}
		counted += v
		frames := stack(s)
		if len(frames) > 0 {
			flat[frames[0]] += v
		}
		areas[area(frames)] += v
	}
	if total == 0 {
		// A run too short for a single sample (the smoke test's toy
		// sizes): nothing to split, which the page shows as such.
		return out, nil
	}
	out.CPUSeconds = float64(total) / 1e9
	if len(sides) > 1 {
		out.Sides = shares(sides, total, 0)
	}
	out.Areas = shares(areas, counted, 0)
	// Areas under 1% are summed as "other" (their names are noise).
	for i, a := range out.Areas {
		if a.Percent < 1 {
			var rest float64
			for _, b := range out.Areas[i:] {
				rest += b.Percent
			}
			out.Areas = append(out.Areas[:i], Share{Name: "other", Percent: rest})
			break
		}
	}
	out.Top = shares(flat, counted, 12)
	return out, nil
}

// stack returns a sample's function names, innermost first (inlined calls
// included).
func stack(s *profile.Sample) []string {
	var names []string
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil {
				names = append(names, line.Function.Name)
			}
		}
	}
	return names
}

// lowLevel lists the packages whose time counts for their caller.
var lowLevel = []string{
	"runtime", "internal/", "sync", "unicode", "bytes", "strings", "strconv", "math",
	"sort", "slices", "maps", "reflect", "errors", "io", "bufio", "context", "time", "unique",
	"path", "golang.org/x/sync",
}

// area names what a stack was doing: the first frame, from the innermost,
// outside the low-level packages; a stack of runtime frames only is the
// runtime's own work (garbage collection, scheduling, idle network polling).
func area(frames []string) string {
	for _, fn := range frames {
		pkg := packageOf(fn)
		if isLowLevel(pkg) {
			continue
		}
		switch {
		case strings.HasPrefix(pkg, "crypto/") || pkg == "encoding/hex":
			return "signature and hashes (HMAC-SHA256, SHA-256, hex)"
		case pkg == "encoding/json":
			return "encoding/json (verify: id and type; insert: json.Valid)"
		case strings.HasPrefix(pkg, "log/slog") || strings.HasSuffix(pkg, "/shared/metrics"):
			return "log/slog and EMF metrics (log lines)"
		case strings.HasPrefix(pkg, "github.com/jackc/"):
			return "pgx (encode, send, receive, decode)"
		case strings.HasPrefix(pkg, "net/http") || pkg == "net/textproto" || pkg == "net/url" || pkg == "mime" ||
			strings.HasPrefix(pkg, "vendor/golang.org/x/net/http"):
			return "net/http (parse and write HTTP)"
		case pkg == "syscall" || pkg == "net" || pkg == "os":
			for _, outer := range frames {
				if strings.HasPrefix(outer, "github.com/jackc/") {
					return "socket system calls to Postgres (pgx)"
				}
			}
			return "socket system calls (HTTP)"
		case pkg == "main":
			return "bench harness (the timing wrappers: store timer, statement tracer)"
		case strings.HasPrefix(pkg, "github.com/riverqueue/"):
			return "River"
		case strings.HasPrefix(pkg, "github.com/webhook-inbox/webhook-inbox/"):
			return "webhook-inbox's own code (" + strings.TrimPrefix(pkg, "github.com/webhook-inbox/webhook-inbox/") + ")"
		default:
			return pkg
		}
	}
	if len(frames) > 0 && strings.Contains(strings.Join(frames, " "), "gcBgMarkWorker") {
		return "runtime: garbage collection (background)"
	}
	return "runtime: scheduler, network poller, GC assists"
}

func isLowLevel(pkg string) bool {
	for _, p := range lowLevel {
		if pkg == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p)) || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// packageOf returns the import path of a function's package, from its
// symbol name ("net/http.(*conn).serve" gives "net/http").
func packageOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		// A symbol with no package: the runtime's assembly (aeshashbody,
		// memeqbody, gcWriteBarrier).
		return "runtime"
	}
	return fn[:slash+1+dot]
}

// shares turns sample counts into percentages of total, largest first,
// keeping the first n (0 for all) and adding the rest as "other".
func shares(m map[string]int64, total int64, n int) []Share {
	out := make([]Share, 0, len(m))
	for k, v := range m {
		out = append(out, Share{Name: k, Percent: 100 * float64(v) / float64(total)})
	}
	slices.SortFunc(out, func(a, b Share) int {
		if c := cmp.Compare(b.Percent, a.Percent); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if n > 0 && len(out) > n {
		var rest float64
		for _, s := range out[n:] {
			rest += s.Percent
		}
		out = append(out[:n], Share{Name: "other", Percent: rest})
	}
	return out
}
