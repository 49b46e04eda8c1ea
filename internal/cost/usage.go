package cost

import "fmt"

// Usage is every assumption the estimate makes about how the stack is
// used, in one place: what a month is, and what one million webhooks a
// month cost in requests, runs, bytes and I/O. Each is printed with the
// estimate (Assumptions), so a reader sees what the figures rest on.
type Usage struct {
	// HoursPerMonth: the month every hourly price is multiplied by.
	HoursPerMonth float64
	// Webhooks is the "per million" of the per-million figures.
	Webhooks float64

	// Functions by logical id: the receiver (one invocation per
	// webhook), the processor (woken per webhook, or polling), the
	// archiver.
	Receiver, Processor, Archiver string
	// PerMillion: invocations of a function per million webhooks, and
	// how long each runs (the processor's are WokenProcessor's, or none
	// when it polls).
	PerMillion map[string]Invocations
	// WokenProcessor: the processor's runs per million webhooks when the
	// template wakes it per webhook (an invoke from the receiver, or an
	// S3 wake marker's event): at low rates at most one run per webhook,
	// draining and lingering a second. An upper bound: webhooks that
	// arrive during a run are drained by it.
	WokenProcessor Invocations
	// ScheduledRunSeconds: how long a scheduled run lasts with nothing to
	// do (connect, one query, metrics line), unless the function's
	// PROCESSOR_RUN_FOR says it polls for longer.
	ScheduledRunSeconds float64

	// BodyBytes and RowBytes: what a webhook keeps in the database, its
	// body until archived (ArchiveDays) and its row for ever.
	BodyBytes, RowBytes, ArchiveDays float64
	// ArchiveBatch: events per archive object (one PUT and one HEAD each).
	ArchiveBatch float64
	// AuroraIOPerWebhook: Aurora I/O requests per webhook (insert, claim,
	// result, archive).
	AuroraIOPerWebhook float64
	// IdleDatabaseGB: the storage of a database holding only the schema.
	IdleDatabaseGB float64
	// AwakeMinACU: the capacity of an Aurora Serverless v2 instance with a
	// minimum of 0 that cannot pause (not confirmed: the smallest capacity
	// other than paused).
	AwakeMinACU float64
	// SpreadEvenly: the webhooks arrive spread over the month, so an
	// instance that pauses when idle never does under this load.
	SpreadEvenly bool

	// LogBytesPerInvocation: what a run writes to CloudWatch Logs (the
	// platform's JSON records and the function's lines).
	LogBytesPerInvocation float64
	// AccessLogBytes: one API access-log record, when the HTTP API's stage
	// has access logging.
	AccessLogBytes float64
	// WakeInvokeBytes: the receiver's asynchronous invoke of the
	// processor through a Lambda interface endpoint, request and answer.
	WakeInvokeBytes float64
	// ScheduledWakeups: one-time EventBridge Scheduler schedules fired per
	// million webhooks (processor retries and archiver runs).
	ScheduledWakeups float64

	// IdleMetrics: EMF metrics a function publishes on each run with
	// nothing to do; LoadMetrics: those it publishes every hour under
	// load. Each metric is billed for each hour it is published in.
	IdleMetrics, LoadMetrics map[string]int
}

// Invocations is how often a function runs and how long each run lasts.
type Invocations struct {
	Count   float64
	Seconds float64
	Why     string
}

// DefaultUsage returns the assumptions docs/deploy.md's figures use.
func DefaultUsage() Usage {
	return Usage{
		HoursPerMonth: 730,
		Webhooks:      1e6,
		Receiver:      "ReceiverFunction",
		Processor:     "ProcessorFunction",
		Archiver:      "ArchiverFunction",
		PerMillion: map[string]Invocations{
			"ReceiverFunction": {Count: 1e6, Seconds: 0.025, Why: "one invocation per webhook: verify, insert, answer"},
			"ArchiverFunction": {Count: 730, Seconds: 1, Why: "about hourly while events wait, 1,000 events an object"},
		},
		WokenProcessor:        Invocations{Count: 1e6, Seconds: 1.1, Why: "at most one run per webhook: the drain and a 1 s linger (an upper bound at low rates)"},
		ScheduledRunSeconds:   0.2,
		BodyBytes:             1024,
		RowBytes:              300,
		ArchiveDays:           7,
		ArchiveBatch:          1000,
		AuroraIOPerWebhook:    10,
		IdleDatabaseGB:        1,
		AwakeMinACU:           0.5,
		SpreadEvenly:          true,
		LogBytesPerInvocation: 1024,
		AccessLogBytes:        300,
		WakeInvokeBytes:       2048,
		ScheduledWakeups:      1000,
		IdleMetrics:           map[string]int{"ProcessorFunction": 14, "ArchiverFunction": 9},
		LoadMetrics:           map[string]int{"ReceiverFunction": 4, "ProcessorFunction": 16, "ArchiverFunction": 9},
	}
}

// Assumption is one line of the assumptions table.
type Assumption struct{ Name, Value string }

// Assumptions lists u as docs/deploy.md prints it.
func (u Usage) Assumptions() []Assumption {
	out := []Assumption{
		{"month", fmt.Sprintf("%s hours", num(u.HoursPerMonth))},
		{"per-million figures", fmt.Sprintf("%s webhooks a month, bodies of %s bytes; rows of %s bytes kept, bodies until archived after %s days", num(u.Webhooks), num(u.BodyBytes), num(u.RowBytes), num(u.ArchiveDays))},
		{"API Gateway", "one request per webhook"},
	}
	for _, id := range sortedKeys(u.PerMillion) {
		inv := u.PerMillion[id]
		out = append(out, Assumption{id, fmt.Sprintf("%s runs of %s s per million webhooks: %s", num(inv.Count), num(inv.Seconds), inv.Why)})
	}
	out = append(out,
		Assumption{u.Processor + " (woken)", fmt.Sprintf("%s runs of %s s per million webhooks when woken per webhook (invoke, or an S3 wake marker: then one S3 PUT and one EventBridge event per webhook too): %s; when it polls, its work is inside the runs idle already pays", num(u.WokenProcessor.Count), num(u.WokenProcessor.Seconds), u.WokenProcessor.Why)},
		Assumption{"scheduled run at idle", fmt.Sprintf("%s s, or the function's PROCESSOR_RUN_FOR when it polls for longer", num(u.ScheduledRunSeconds))},
		Assumption{"archive", fmt.Sprintf("%s events an object: one PUT and one HEAD each; objects stay in S3 Standard (the 90-day move to Glacier Instant Retrieval is not counted)", num(u.ArchiveBatch))},
		Assumption{"Aurora", fmt.Sprintf("%s I/O requests per webhook; %s GB for a near-empty database; a minimum of 0 that cannot pause holds %s ACU (not confirmed); with webhooks spread over the month a pausing instance never pauses", num(u.AuroraIOPerWebhook), num(u.IdleDatabaseGB), num(u.AwakeMinACU))},
		Assumption{"RDS instance", "its allocated storage holds the month's growth; backups within the free 100% of it; CPU within the burstable baseline (no surplus credits)"},
		Assumption{"logs", fmt.Sprintf("%s bytes per invocation; %s bytes per API access-log record when the stage logs", num(u.LogBytesPerInvocation), num(u.AccessLogBytes))},
		Assumption{"Lambda endpoint data", fmt.Sprintf("%s bytes per wake invoke (create mode has no Secrets Manager endpoint)", num(u.WakeInvokeBytes))},
		Assumption{"billed nothing", "gateway VPC endpoints (S3; third party: basavytix.com, awsnegotiations.com), and the types internal/cost lists as free: the VPC and its subnets, route tables and security groups, IAM, Lambda permissions, URLs and invoke settings, subnet groups, bucket and topic policies, custom resources"},
		Assumption{"EventBridge rules", "a rule on AWS management events bills nothing (AWS's EventBridge pricing page); a scheduled rule bills nothing itself (not confirmed), its target's runs are priced"},
		Assumption{"EventBridge Scheduler", fmt.Sprintf("%s one-time schedules fired per million webhooks (retries, archiver runs), when the stack has a schedule group", num(u.ScheduledWakeups))},
	)
	for _, id := range sortedKeys(u.LoadMetrics) {
		out = append(out, Assumption{"EMF metrics, " + id, fmt.Sprintf("%d on a run with nothing to do, %d every hour under load", u.IdleMetrics[id], u.LoadMetrics[id])})
	}
	out = append(out, Assumption{"not counted", "operator and migration runs, Secrets Manager API calls, SNS notifications (alarms rarely change state), database logs exported to CloudWatch, data transfer out, log storage, snapshots kept after deletion"})
	return out
}
