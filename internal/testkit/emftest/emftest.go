// Package emftest checks, in tests, that a log line is valid CloudWatch
// Embedded Metric Format: what CloudWatch would turn into metrics, rather
// than what the emitter happens to write.
package emftest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// validUnits are the units CloudWatch accepts.
var validUnits = map[string]bool{
	"Seconds": true, "Microseconds": true, "Milliseconds": true, "Bytes": true, "Kilobytes": true,
	"Megabytes": true, "Gigabytes": true, "Terabytes": true, "Bits": true, "Kilobits": true,
	"Megabits": true, "Gigabits": true, "Terabits": true, "Percent": true, "Count": true,
	"Bytes/Second": true, "Kilobytes/Second": true, "Megabytes/Second": true, "Gigabytes/Second": true,
	"Terabytes/Second": true, "Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true,
	"Gigabits/Second": true, "Terabits/Second": true, "Count/Second": true, "None": true,
}

// Validate checks one log line against the EMF specification: an "_aws"
// object with an integer millisecond Timestamp and at least one
// CloudWatchMetrics directive with a Namespace, at most 30 dimensions per
// set, each a top-level string member, and metrics that are top-level
// numbers with a valid unit. Tests use it on the lines the functions write
// (shared/metrics.Emitter.Attrs).
func Validate(line []byte) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(line, &doc); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	raw, ok := doc["_aws"]
	if !ok {
		return errors.New(`no "_aws" member`)
	}
	var meta struct {
		Timestamp         json.Number `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("_aws: %w", err)
	}
	if ts, err := meta.Timestamp.Int64(); err != nil || ts <= 0 {
		return errors.New("_aws.Timestamp must be a positive integer (milliseconds)")
	}
	if len(meta.CloudWatchMetrics) == 0 {
		return errors.New("_aws.CloudWatchMetrics is empty")
	}
	for _, d := range meta.CloudWatchMetrics {
		if d.Namespace == "" {
			return errors.New("a directive has no Namespace")
		}
		if len(d.Metrics) == 0 || len(d.Metrics) > 100 {
			return fmt.Errorf("directive %s: 1 to 100 metrics required", d.Namespace)
		}
		for _, set := range d.Dimensions {
			if len(set) > 30 {
				return errors.New("more than 30 dimensions in a set")
			}
			for _, name := range set {
				var s string
				if err := json.Unmarshal(doc[name], &s); err != nil {
					return fmt.Errorf("dimension %q is not a top-level string", name)
				}
			}
		}
		for _, m := range d.Metrics {
			if m.Name == "" {
				return errors.New("a metric has no Name")
			}
			if m.Unit != "" && !validUnits[m.Unit] {
				return fmt.Errorf("metric %s: unknown unit %q", m.Name, m.Unit)
			}
			var v float64
			if err := json.Unmarshal(doc[m.Name], &v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("metric %q is not a top-level number", m.Name)
			}
		}
	}
	return nil
}
