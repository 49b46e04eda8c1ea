// Package metrics turns the JSON log lines the functions already write into
// CloudWatch Embedded Metric Format (EMF) records: a line carrying an "_aws"
// object that names its metrics and dimensions is turned into CloudWatch
// metrics by the Logs service itself, with no PutMetricData calls, no
// agent and no added latency. One line is both the log and the metric.
package metrics

import (
	"log/slog"
	"time"
)

// Unit is a CloudWatch metric unit.
type Unit string

// Units used by the functions.
const (
	Count        Unit = "Count"
	Bytes        Unit = "Bytes"
	Milliseconds Unit = "Milliseconds"
	Seconds      Unit = "Seconds"
	Percent      Unit = "Percent"
	None         Unit = "None"
)

// DefaultNamespace is the CloudWatch namespace of every metric.
const DefaultNamespace = "WebhookInbox"

// EnvNamespace is the environment variable each function's ConfigFromEnv
// reads into its Emitter's Namespace.
const EnvNamespace = "METRICS_NAMESPACE"

// Metric is one value to record.
type Metric struct {
	Name  string
	Unit  Unit
	Value float64
}

// C returns a Count metric.
func C(name string, n float64) Metric { return Metric{Name: name, Unit: Count, Value: n} }

// Emitter builds EMF attributes for slog lines.
type Emitter struct {
	// Namespace is the CloudWatch namespace; "" means DefaultNamespace.
	Namespace string
	// Now is the clock for the EMF timestamp; nil means time.Now.
	Now func() time.Time
	// Off makes Attrs return nothing, so that lines stay plain log lines:
	// the dev stack's log is read by a person, not by CloudWatch, and an
	// "_aws" block on every line buries what happened (webhookdev dev
	// --emf turns it back on). The Lambdas never set it.
	Off bool
}

// directive is one entry of _aws.CloudWatchMetrics.
type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

type definition struct {
	Name string `json:"Name"`
	Unit Unit   `json:"Unit,omitempty"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// Attrs returns the slog arguments that make a JSON log line an EMF record
// of ms, dimensioned by dims and also in total. The caller must put each dimension on the
// line itself as a string attribute (usually it is there already, such as
// "source"): EMF reads dimension values from the line's top level, and
// writing them here too would duplicate keys. Keep dimension values to a
// bounded set: every distinct value is a billed metric. Off, it returns nil.
func (e Emitter) Attrs(dims []string, ms ...Metric) []any {
	return e.attrs(dims, true, ms...)
}

// AttrsBy is Attrs without the total: ms are recorded dimensioned by dims
// only. It is for lines that break down, one per dimension value, what
// another line already records in total (the processor's per-source
// lines beside its run line), whose totals would otherwise count twice.
func (e Emitter) AttrsBy(dims []string, ms ...Metric) []any {
	return e.attrs(dims, len(dims) == 0, ms...)
}

func (e Emitter) attrs(dims []string, total bool, ms ...Metric) []any {
	if e.Off {
		return nil
	}
	ns := e.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	// Every metric is also recorded without dimensions (the empty set): the
	// total the alarms watch, which CloudWatch cannot sum across
	// dimension values by itself.
	d := directive{Namespace: ns, Dimensions: [][]string{{}}, Metrics: make([]definition, len(ms))}
	switch {
	case len(dims) > 0 && total:
		d.Dimensions = [][]string{dims, {}}
	case len(dims) > 0:
		d.Dimensions = [][]string{dims}
	}
	out := make([]any, 1, len(ms)+1)
	for i, m := range ms {
		d.Metrics[i] = definition{Name: m.Name, Unit: m.Unit}
		out = append(out, slog.Float64(m.Name, m.Value))
	}
	out[0] = slog.Any("_aws", metadata{Timestamp: now().UnixMilli(), CloudWatchMetrics: []directive{d}})
	return out
}
