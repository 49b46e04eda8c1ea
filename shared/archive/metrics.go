package archive

import (
	"crypto/sha256"

	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
)

// Metrics of a run, on its summary log line ("archive: run done" or
// "archive: run failed") in CloudWatch embedded metric format: CloudWatch
// Logs turns the line into metrics, with no API call. Every metric is on
// every run, zeros included, so alarms see data rather than gaps. Alarm on
// ArchiveStoreUnavailable > 0 (S3 failing the archiver) and
// ArchiveRunFailed > 0 (runs failing for any reason).
const (
	MetricEvents           = "ArchivedEvents"
	MetricObjects          = "ArchiveObjects"
	MetricObjectBytes      = "ArchiveObjectBytes"
	MetricBodyBytes        = "ArchivedBodyBytes"
	MetricOrphansSwept     = "ArchiveOrphansSwept"
	MetricStoreUnavailable = "ArchiveStoreUnavailable"
	MetricRunFailed        = "ArchiveRunFailed"
)

// metricAttrs returns the EMF attributes of a run. No dimension: one
// archiver per deployment, and each dimension value is a billed metric.
func (a *Archiver) metricAttrs(res Result, runErr error) []any {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	return a.cfg.Metrics.Attrs(nil,
		metrics.C(MetricEvents, float64(res.Events)),
		metrics.C(MetricObjects, float64(res.Batches)),
		metrics.Metric{Name: MetricObjectBytes, Unit: metrics.Bytes, Value: float64(res.ObjectBytes)},
		metrics.Metric{Name: MetricBodyBytes, Unit: metrics.Bytes, Value: float64(res.BodyBytes)},
		metrics.C(MetricOrphansSwept, float64(res.Swept)),
		metrics.C(MetricStoreUnavailable, b2f(res.StoreUnavailable)),
		metrics.C(MetricRunFailed, b2f(runErr != nil)),
	)
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
