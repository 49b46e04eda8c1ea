package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"text/template"
	"time"
)

// Report is every figure of a run; benchmarks.json is it as is and
// benchmarks.md its rendering.
type Report struct {
	Started      time.Time      `json:"started"`
	TotalSeconds float64        `json:"total_seconds"`
	Machine      Machine        `json:"machine"`
	Settings     Settings       `json:"settings"`
	Ingest       []IngestFigure `json:"ingest,omitempty"`
	Drain        *DrainFigure   `json:"drain,omitempty"`
	// DrainDurable is the drain on the durable cluster.
	DrainDurable *DrainFigure    `json:"drain_durable,omitempty"`
	Latency      []LatencyFigure `json:"latency,omitempty"`
	History      *HistoryFigure  `json:"history,omitempty"`
	Console      *ConsoleFigure  `json:"console,omitempty"`
	Archive      *ArchiveFigure  `json:"archive,omitempty"`
	Lambda       []LambdaFigure  `json:"lambda,omitempty"`
	Pause        *PauseFigure    `json:"pause,omitempty"`
	Stages       []StageTime     `json:"stages"`
	Noise        Noise           `json:"noise"`
	Notes        []string        `json:"notes,omitempty"`
	// ReceiverProfile and DrainProfile are the extra, profiled runs.
	ReceiverProfile *ReceiverProfile `json:"receiver_profile,omitempty"`
	DrainProfile    *DrainProfile    `json:"drain_profile,omitempty"`
}

// StageTime is how long a stage took and the machine's load around it.
type StageTime struct {
	Name          string  `json:"name"`
	Seconds       float64 `json:"seconds"`
	LoadAvgBefore float64 `json:"loadavg1_before"`
	LoadAvgAfter  float64 `json:"loadavg1_after"`
}

// Noise sums up how steady the machine was: the spread of the measured
// runs (max/min of each figure's events per second) and the CPU that other
// processes used during them.
type Noise struct {
	// SpreadMedian and SpreadMax are of max/min-1 over the figures, in
	// percent.
	SpreadMedianPct float64 `json:"spread_median_pct"`
	SpreadMaxPct    float64 `json:"spread_max_pct"`
	SpreadMaxFigure string  `json:"spread_max_figure"`
	// OtherCoresMax is the most CPU, in cores, that the rest of the
	// machine used during one measured run.
	OtherCoresMax    float64 `json:"other_cores_max"`
	OtherCoresMedian float64 `json:"other_cores_median"`
}

// finish computes the figures derived from the runs: the CPU ratios and
// the noise.
func (r *Report) finish() {
	for i := range r.Ingest {
		f := &r.Ingest[i]
		f.CPURatio = cpuRatio(f.Receiver, f.Pgbench)
	}
	for _, d := range r.drains() {
		d.CPURatioRiver = cpuRatio(d.Processor, d.River)
		d.CPURatioLimit = cpuRatio(d.Processor, d.Limit)
	}
	if h := r.History; h != nil {
		for _, figs := range [][]IngestFigure{h.Ingest, h.EmptyIngest} {
			for i := range figs {
				figs[i].CPURatio = cpuRatio(figs[i].Receiver, figs[i].Pgbench)
			}
		}
		h.Versus = r.historyVersus()
	}
	r.Noise = Noise{}
	var spreads, others []float64
	add := func(name string, m Measure) {
		if m.Min > 0 {
			s := (m.Max/m.Min - 1) * 100
			spreads = append(spreads, s)
			if s >= r.Noise.SpreadMaxPct {
				r.Noise.SpreadMaxPct, r.Noise.SpreadMaxFigure = s, name
			}
		}
		for _, run := range m.Runs {
			others = append(others, run.OtherCores)
		}
	}
	for _, f := range r.Ingest {
		add(fmt.Sprintf("ingest %s c=%d receiver", f.Workload, f.Concurrency), f.Receiver)
		add(fmt.Sprintf("ingest %s c=%d pgbench", f.Workload, f.Concurrency), f.Pgbench)
	}
	for _, d := range r.drains() {
		name := "drain"
		switch {
		case d == r.DrainDurable:
			name += " (fsync on)"
		case r.History != nil && d == r.History.Drain:
			name += " (history)"
		case r.History != nil && d == r.History.EmptyDrain:
			name += " (history stage, empty)"
		}
		add(name+" processor", d.Processor)
		add(name+" River", d.River)
		add(name+" limit", d.Limit)
	}
	if h := r.History; h != nil {
		for _, f := range h.Ingest {
			add(fmt.Sprintf("ingest %s c=%d receiver (history)", f.Workload, f.Concurrency), f.Receiver)
			add(fmt.Sprintf("ingest %s c=%d pgbench (history)", f.Workload, f.Concurrency), f.Pgbench)
		}
		for _, f := range h.EmptyIngest {
			add(fmt.Sprintf("ingest %s c=%d receiver (history stage, empty)", f.Workload, f.Concurrency), f.Receiver)
			add(fmt.Sprintf("ingest %s c=%d pgbench (history stage, empty)", f.Workload, f.Concurrency), f.Pgbench)
		}
	}
	if a := r.Archive; a != nil {
		add("archive", a.Measure)
	}
	r.Noise.SpreadMedianPct = median(spreads)
	r.Noise.OtherCoresMedian = median(others)
	for _, o := range others {
		r.Noise.OtherCoresMax = math.Max(r.Noise.OtherCoresMax, o)
	}
}

// JSON returns the report as indented JSON.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	return append(b, '\n'), nil
}

//go:embed benchmarks.md.tmpl
var pageTemplate string

//go:embed analysis.md.tmpl
var analysisTemplate string

// IngestAt returns the ingest figure of a workload at the highest
// concurrency, or nil.
func (r *Report) IngestAt(workload string) *IngestFigure {
	var best *IngestFigure
	for i := range r.Ingest {
		f := &r.Ingest[i]
		if f.Workload == workload && (best == nil || f.Concurrency > best.Concurrency) {
			best = f
		}
	}
	return best
}

// drains returns every drain figure of the run: the fast cluster's, the
// durable one's, the history's.
func (r *Report) drains() []*DrainFigure {
	var out []*DrainFigure
	for _, d := range []*DrainFigure{r.Drain, r.DrainDurable} {
		if d != nil {
			out = append(out, d)
		}
	}
	if h := r.History; h != nil {
		for _, d := range []*DrainFigure{h.EmptyDrain, h.Drain} {
			if d != nil {
				out = append(out, d)
			}
		}
	}
	return out
}

// MsPerEvent is the time each processor of a drain spent per event:
// processors / events per second, in milliseconds.
func (r *Report) MsPerEvent(d *DrainFigure) float64 {
	return ratio(float64(r.Settings.Processors)*1000, d.Processor.Median)
}

// LatencyEnd returns the latency figure of a cluster at its lowest offered
// rate, or at its highest when highest is set; nil when there is none.
func (r *Report) LatencyEnd(cluster string, highest bool) *LatencyFigure {
	var best *LatencyFigure
	for i := range r.Latency {
		l := &r.Latency[i]
		if l.Cluster != cluster {
			continue
		}
		if best == nil || (highest && l.OfferedPerSec > best.OfferedPerSec) || (!highest && l.OfferedPerSec < best.OfferedPerSec) {
			best = l
		}
	}
	return best
}

// LatencyAt returns the latency figure of a cluster at an offered rate,
// or nil.
func (r *Report) LatencyAt(cluster string, rate float64) *LatencyFigure {
	for i := range r.Latency {
		if l := &r.Latency[i]; l.Cluster == cluster && l.OfferedPerSec == rate {
			return l
		}
	}
	return nil
}

// LambdaInit returns the Lambda stage's figure of a function (its init
// under the emulator), or nil when the stage did not run.
func (r *Report) LambdaInit(function string) *LambdaFigure {
	for i := range r.Lambda {
		if r.Lambda[i].Function == function {
			return &r.Lambda[i]
		}
	}
	return nil
}

// VersusAt returns the history comparison of a system in a figure whose
// name starts with prefix (the last such: the highest concurrency of the
// ingest), or nil.
func (r *Report) VersusAt(prefix, system string) *HistoryVersus {
	if r.History == nil {
		return nil
	}
	var found *HistoryVersus
	for i, v := range r.History.Versus {
		if strings.HasPrefix(v.Figure, prefix) && v.System == system {
			found = &r.History.Versus[i]
		}
	}
	return found
}

// stageTimes lists the stages' durations ("ingest 94s, drain 310s").
func (r *Report) stageTimes() string {
	parts := make([]string, len(r.Stages))
	for i, s := range r.Stages {
		parts[i] = fmt.Sprintf("%s %.0fs", s.Name, s.Seconds)
	}
	return strings.Join(parts, ", ")
}

// JSONGainPct bounds what parsing bodies once could gain: the receiver's
// encoding/json CPU (its share of the profile, load generator excluded)
// taken off the CPU the receiver's side spends per event (Go process and
// Postgres), as a percentage of events per second.
func (r *Report) JSONGainPct() float64 {
	p := r.ReceiverProfile
	if p == nil {
		return 0
	}
	var jsonShare, loadgen float64
	for _, a := range p.Profile.Areas {
		if strings.HasPrefix(a.Name, "encoding/json") {
			jsonShare += a.Percent / 100
		}
	}
	for _, s := range p.Profile.Sides {
		if s.Name == "loadgen" {
			loadgen = s.Percent / 100
		}
	}
	jsonCPU := p.Run.SelfCPUMsPerK * (1 - loadgen) * jsonShare
	total := p.Run.SelfCPUMsPerK + p.Run.PostgresCPUMsPerK
	if total-jsonCPU <= 0 {
		return 0
	}
	return 100 * jsonCPU / (total - jsonCPU)
}

// Markdown renders docs/benchmarks.md.
func (r *Report) Markdown() (string, error) {
	t, err := template.New("page").Funcs(template.FuncMap{
		"n":      func(v float64) string { return thousands(v) },
		"i":      func(v int) string { return thousands(float64(v)) },
		"add":    func(a, b float64) float64 { return a + b },
		"maxf":   func(a, b float64) float64 { return math.Max(a, b) },
		"f1":     func(v float64) string { return fmt.Sprintf("%.1f", v) },
		"f2":     func(v float64) string { return fmt.Sprintf("%.2f", v) },
		"f3":     func(v float64) string { return fmt.Sprintf("%.3f", v) },
		"pct":    func(v float64) string { return fmt.Sprintf("%.0f%%", v) },
		"mb":     func(v int64) string { return fmt.Sprintf("%.1f MB", float64(v)/1e6) },
		"mib":    func(v int64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) },
		"spread": func(m Measure) string { return thousands(m.Min) + "–" + thousands(m.Max) },
		"date":   func(t time.Time) string { return t.Format("2006-01-02 15:04 MST") },
		"ms":     func(v float64) string { return fmt.Sprintf("%.2f ms", v) },
		"lat":    atLeast,
		"secs":   func(ms float64) string { return fmt.Sprintf("%.2f s", ms/1000) },
		"pos":    func(v float64) bool { return v > 0 },
		"div":    func(a, b float64) float64 { return ratio(a, b) },
		"mul":    func(a, b float64) float64 { return a * b },
		"sub":    func(a, b float64) float64 { return a - b },
		"join":   strings.Join,
		"dict": func(kv ...any) map[string]any {
			m := make(map[string]any, len(kv)/2)
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		},
		"rel": func(h *HistoryFigure, name string) int64 {
			for _, s := range h.Relations {
				if s.Name == name {
					return s.Bytes
				}
			}
			return 0
		},
		"ints": func(xs []int) string {
			s := make([]string, len(xs))
			for i, x := range xs {
				s[i] = fmt.Sprint(x)
			}
			return strings.Join(s, " and ")
		},
		"ingest": func(workload string, conc int) *IngestFigure {
			for i := range r.Ingest {
				if r.Ingest[i].Workload == workload && r.Ingest[i].Concurrency == conc {
					return &r.Ingest[i]
				}
			}
			return nil
		},
		"area": func(p CPUProfile, prefix string) float64 {
			var t float64
			for _, s := range p.Areas {
				if strings.HasPrefix(s.Name, prefix) {
					t += s.Percent
				}
			}
			return t
		},
		"side": func(p CPUProfile, name string) float64 {
			for _, s := range p.Sides {
				if s.Name == name {
					return s.Percent
				}
			}
			return 0
		},
		"stmt": func(d *DrainProfile, prefix string) StatementTime {
			for _, s := range d.Statements {
				if strings.HasPrefix(s.Statement, prefix) {
					return s
				}
			}
			return StatementTime{}
		},
		"stmtTotal": func(d *DrainProfile) float64 {
			var t float64
			for _, s := range d.Statements {
				t += s.MsPerEvent
			}
			return t
		},
		"maxConc": func() int {
			m := 0
			for _, c := range r.Settings.Concurrency {
				m = max(m, c)
			}
			return m
		},
	}).Parse(pageTemplate)
	if err != nil {
		return "", fmt.Errorf("page template: %w", err)
	}
	if _, err := t.Parse(analysisTemplate); err != nil {
		return "", fmt.Errorf("analysis template: %w", err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, r); err != nil {
		return "", fmt.Errorf("render page: %w", err)
	}
	return buf.String(), nil
}

// Summary is the table printed at the end of a run.
func (r *Report) Summary() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-42s %12s %12s %7s %9s\n", "figure", "events/s", "yardstick", "ratio", "CPU ratio")
	for _, f := range r.Ingest {
		fmt.Fprintf(&sb, "%-42s %12s %12s %7.2f %9.2f\n", fmt.Sprintf("ingest %s c=%d (receiver/pgbench)", f.Workload, f.Concurrency),
			thousands(f.Receiver.Median), thousands(f.Pgbench.Median), f.Ratio, f.CPURatio)
	}
	for _, d := range []*DrainFigure{r.Drain, r.DrainDurable} {
		if d == nil {
			continue
		}
		fsync := "off"
		if d.Cluster == clusterDurable {
			fsync = "on"
		}
		fmt.Fprintf(&sb, "%-42s %12s %12s %7.2f %9.2f\n", "drain fsync "+fsync+" (processor/River)", thousands(d.Processor.Median), thousands(d.River.Median), d.RatioRiver, d.CPURatioRiver)
		fmt.Fprintf(&sb, "%-42s %12s %12s %7.2f %9.2f\n", "drain fsync "+fsync+" (processor/limit)", thousands(d.Processor.Median), thousands(d.Limit.Median), d.RatioLimit, d.CPURatioLimit)
	}
	for _, l := range r.Latency {
		fmt.Fprintf(&sb, "%-42s %9s p50 %9s p99 %9s max (%d of %d processed; %d invocations, at most %d at once)\n",
			fmt.Sprintf("latency %s %.0f/s (sent %.0f/s)", l.Cluster, l.OfferedPerSec, l.AchievedPerSec),
			atLeast(l.P50Ms, l.P50AtLeast), atLeast(l.P99Ms, l.P99AtLeast), atLeast(l.MaxMs, l.MaxAtLeast), l.Processed, l.Stored,
			l.Invocations, l.PeakConcurrency)
	}
	if h := r.History; h != nil {
		for _, v := range h.Versus {
			fmt.Fprintf(&sb, "%-42s %12s %12s %7.2f %9.2f\n", "history "+v.System+" "+v.Figure, thousands(v.History), thousands(v.Empty), v.Ratio, v.CPURatio)
		}
	}
	if c := r.Console; c != nil {
		for _, p := range c.Pages {
			fmt.Fprintf(&sb, "%-42s %9.2f ms p50 %9.2f ms p99 (bound %.0f ms)\n", "console "+p.Name, p.P50Ms, p.P99Ms, c.BoundMs)
		}
	}
	if a := r.Archive; a != nil {
		fmt.Fprintf(&sb, "%-42s %12s %7.1f MB/s %5.1f PUT/1000\n", "archive", thousands(a.Measure.Median), a.MBPerSec, a.PutsPer1000)
	}
	for _, l := range r.Lambda {
		fmt.Fprintf(&sb, "%-42s %9.1f MB %8.1f ms init\n", "lambda "+l.Function+" (arm64)", float64(l.Arm64Bytes)/1e6, l.InitMsMedian)
	}
	if p := r.Pause; p != nil {
		fmt.Fprintf(&sb, "%-42s %12s %12s %7.2f\n", fmt.Sprintf("drain beside %d held events", p.Held), thousands(p.With.Median), thousands(p.Without.Median), p.Ratio)
	}
	fmt.Fprintf(&sb, "stages: %s; total %.0fs\n", r.stageTimes(), r.TotalSeconds)
	fmt.Fprintf(&sb, "noise: runs spread median %.0f%%, max %.0f%% (%s); other processes used up to %.2f cores\n",
		r.Noise.SpreadMedianPct, r.Noise.SpreadMaxPct, r.Noise.SpreadMaxFigure, r.Noise.OtherCoresMax)
	return sb.String()
}

// atLeast formats a latency in milliseconds, "≥" before a lower bound.
func atLeast(ms float64, lower bool) string {
	s := thousands(ms) + " ms"
	if ms < 10 {
		s = fmt.Sprintf("%.1f ms", ms)
	}
	if lower {
		s = "≥ " + s
	}
	return s
}

// thousands formats v rounded, with thin spaces between thousands.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	out = append([]string{s}, out...)
	res := strings.Join(out, " ")
	if neg {
		res = "-" + res
	}
	return res
}
