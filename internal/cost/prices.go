package cost

import "fmt"

// The unit prices are a Go table rather than a data file under docs/: the
// rules name a price by its key, so a missing or misspelt one fails the
// tests (TestEveryRuleHasItsPrice) instead of reading as free, there is no
// second format to parse, and the table docs/deploy.md shows is generated
// from this one, so there is a single copy to keep current.

// Kind says where a price was read.
type Kind string

const (
	// FromAWS: the figure is on an AWS page (aws.amazon.com or
	// docs.aws.amazon.com), read directly or in a verbatim mirror of it.
	FromAWS Kind = "AWS"
	// FromThirdParty: the figure is a third party's (a pricing blog, a cost
	// tool); AWS's own page, where it was found, rendered no figure.
	FromThirdParty Kind = "third party"
	// NotConfirmed: no source read gives this figure for this item; the
	// table says what was assumed instead.
	NotConfirmed Kind = "not confirmed"
)

// Price is one unit price in us-east-1, on demand.
type Price struct {
	Key   string  // what the rules name it by
	Item  string  // what is billed
	Value float64 // US dollars per Unit
	Unit  string  // "hour", "GB-month", "million requests", ...
	// Free is the always-free tier, in Units a month (0: none). Only
	// tiers that do not expire after an account's first year count.
	Free     float64
	FreeText string // Free in words ("1 million requests")
	Source   string // where the figure was read: URLs and names
	Kind     Kind
	Read     string // the date it was read (YYYY-MM-DD)
}

// Prices is the dated unit-price table, in the order docs/deploy.md shows it.
var Prices = []Price{
	{Key: "rds.instance.db.t4g.micro", Item: "RDS for PostgreSQL db.t4g.micro, single-AZ", Value: 0.016, Unit: "instance-hour",
		Source: `infratally.com "AWS RDS pricing explained (2026)" (us-east-1 table: $0.016/h, $11.68 a month); consistent with AWS's own agent-toolkit-for-aws guidance (~$12 a month); [aws.amazon.com/rds/postgresql/pricing](https://aws.amazon.com/rds/postgresql/pricing/) renders no figure in the stored copies. Multi-AZ bills two instances ([On-Demand DB instances](https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/USER_OnDemandDBInstances.html))`,
		Kind:   FromThirdParty, Read: "2026-12-03"},
	{Key: "rds.storage.gp3", Item: "RDS General Purpose (gp3) storage, single-AZ", Value: 0.115, Unit: "GB-month",
		Source: `usage.ai "RDS pricing calculator" (June 2026, citing AWS's page; 3,000 IOPS and 125 MB/s included); RDS's own rate, not EBS's`,
		Kind:   FromThirdParty, Read: "2026-12-03"},
	{Key: "aurora.acu", Item: "Aurora Serverless v2 capacity (Aurora Standard)", Value: 0.12, Unit: "ACU-hour",
		Source: `c3x.dev "Aurora Serverless v2 cost", factualminds.com "Amazon Aurora Pricing" (June 2026); [aws.amazon.com/rds/aurora/pricing](https://aws.amazon.com/rds/aurora/pricing/) shows no figure in the stored copy. A paused instance bills no capacity ([auto-pause](https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/aurora-serverless-v2-auto-pause.html))`,
		Kind:   FromThirdParty, Read: "2026-12-02"},
	{Key: "aurora.storage", Item: "Aurora storage (Aurora Standard)", Value: 0.10, Unit: "GB-month",
		Source: `cloudexmachina.io "AWS Aurora pricing", awsnegotiations.com (May 2026)`,
		Kind:   FromThirdParty, Read: "2026-12-02"},
	{Key: "aurora.io", Item: "Aurora I/O (Aurora Standard)", Value: 0.20, Unit: "million I/O requests",
		Source: `jusdb.com "RDS vs Aurora vs Serverless"`,
		Kind:   FromThirdParty, Read: "2026-12-02"},
	{Key: "rds.proxy", Item: "RDS Proxy", Value: 0.015, Unit: "ACU-hour or vCPU-hour of its target",
		Source: `several third-party pages agree on the rate and on a minimum of 8 ACUs for an Aurora Serverless v2 target; AWS's page was not found in the stored copies; the minimum for a provisioned target is not confirmed (the target's vCPUs are billed here)`,
		Kind:   FromThirdParty, Read: "2026-12-02"},
	{Key: "vpce.interface.hour", Item: "Interface VPC endpoint (PrivateLink), any service", Value: 0.01, Unit: "AZ-hour",
		Source: `[aws.amazon.com/privatelink/pricing](https://aws.amazon.com/privatelink/pricing/): billed per hour in each Availability Zone it is in; the figure from awsnegotiations.com (May 2026)`,
		Kind:   FromThirdParty, Read: "2026-12-02"},
	{Key: "vpce.interface.gb", Item: "Interface VPC endpoint data processed (first PB)", Value: 0.01, Unit: "GB",
		Source: `[aws.amazon.com/privatelink/pricing](https://aws.amazon.com/privatelink/pricing/) (a mirror of the page shows the figure)`,
		Kind:   FromAWS, Read: "2026-12-02"},
	{Key: "secretsmanager.secret", Item: "Secrets Manager secret (RDS-managed ones too)", Value: 0.40, Unit: "secret-month",
		Source: `hivebook.wiki; RDS bills the master secret it manages like any other ([Password management with Secrets Manager](https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/rds-secrets-manager.html): "your AWS account incurs charges")`,
		Kind:   FromThirdParty, Read: "2026-12-02"},
	{Key: "apigw.http", Item: "API Gateway HTTP API requests (first 300 million)", Value: 1.00, Unit: "million requests",
		Source: `[Best practices for API Gateway private APIs, Cost optimization](https://docs.aws.amazon.com/whitepapers/latest/best-practices-api-gateway-private-apis-integration/cost-optimization.html)`,
		Kind:   FromAWS, Read: "2026-12-02"},
	{Key: "lambda.requests", Item: "Lambda requests", Value: 0.20, Unit: "million requests", Free: 1, FreeText: "1 million requests",
		Source: `free tier: [aws.amazon.com/lambda/pricing](https://aws.amazon.com/lambda/pricing/); the rate from the artillery package's prices.js (which cites that page) and cloudchipr.com "AWS Lambda Pricing" (2024)`,
		Kind:   FromThirdParty, Read: "2026-12-02"},
	{Key: "lambda.gbs.arm64", Item: "Lambda duration, arm64 (first 7.5 billion GB-s)", Value: 0.0000133334, Unit: "GB-second", Free: 400000, FreeText: "400,000 GB-seconds",
		Source: `free tier: [aws.amazon.com/lambda/pricing](https://aws.amazon.com/lambda/pricing/); the rate as for Lambda requests`,
		Kind:   FromThirdParty, Read: "2026-12-02"},
	{Key: "scheduler.invocations", Item: "EventBridge Scheduler invocations", Value: 1.00, Unit: "million invocations", Free: 14, FreeText: "14 million invocations",
		Source: `cloudburn.io "Amazon EventBridge Pricing" (March 2026): $1.00 per million, 14 million a month free; the free tier also in AWS's price list offer file AWSEvents ("$0 for the first 14 million scheduled invocations", effective 2025-01-01, in a public mirror of the Price List API)`,
		Kind:   FromThirdParty, Read: "2026-12-03"},
	{Key: "events.s3", Item: "EventBridge event from S3 (an \"AWS opt-in data event\")", Value: 1.00, Unit: "million events",
		Source: `[aws.amazon.com/eventbridge/pricing](https://aws.amazon.com/eventbridge/pricing/) makes only AWS management events free and names S3's data events "AWS opt-in data events" without a figure in the stored copy; assumed billed as custom events, $1.00 per million (cloudburn.io, wring.co)`,
		Kind:   NotConfirmed, Read: "2026-12-03"},
	{Key: "s3.storage", Item: "S3 Standard storage (first 50 TB)", Value: 0.023, Unit: "GB-month",
		Source: `cloudburn.io "Amazon S3 Pricing Explained" (March 2026)`,
		Kind:   FromThirdParty, Read: "2026-12-03"},
	{Key: "s3.put", Item: "S3 Standard PUT, COPY, POST, LIST requests", Value: 0.005, Unit: "1,000 requests",
		Source: `c3x.dev "S3 request fees explained"`,
		Kind:   FromThirdParty, Read: "2026-12-03"},
	{Key: "s3.get", Item: "S3 Standard GET, HEAD, SELECT requests", Value: 0.0004, Unit: "1,000 requests",
		Source: `c3x.dev "S3 request fees explained"`,
		Kind:   FromThirdParty, Read: "2026-12-03"},
	{Key: "logs.ingest", Item: "CloudWatch Logs ingestion (standard)", Value: 0.50, Unit: "GB", Free: 5, FreeText: "5 GB",
		Source: `factualminds.com (2026-06-13); free tier: [aws.amazon.com/cloudwatch/pricing](https://aws.amazon.com/cloudwatch/pricing/)`,
		Kind:   FromThirdParty, Read: "2026-12-02"},
	{Key: "cw.metric", Item: "CloudWatch custom metric (the functions' EMF metrics), prorated by the hour it is published", Value: 0.30, Unit: "metric-month", Free: 10, FreeText: "10 metrics",
		Source: `signoz.io (Feb 2026), first 10,000 metrics; the free 10 metrics are the usual always-free tier, not confirmed on AWS's page`,
		Kind:   FromThirdParty, Read: "2026-12-02"},
	{Key: "cw.alarm", Item: "CloudWatch alarm, standard resolution, per metric", Value: 0.10, Unit: "alarm-month", Free: 10, FreeText: "10 alarm metrics",
		Source: `c3x.dev "aws_cloudwatch_metric_alarm cost estimation"; free tier of 10 alarms: [aws.amazon.com/cloudwatch/pricing](https://aws.amazon.com/cloudwatch/pricing/)`,
		Kind:   FromThirdParty, Read: "2026-12-03"},
	{Key: "cw.dashboard", Item: "CloudWatch dashboard", Value: 3.00, Unit: "dashboard-month", Free: 3, FreeText: "3 dashboards",
		Source: `factualminds.com "Amazon CloudWatch Pricing" (2026-06-13); free tier of 3 dashboards: [aws.amazon.com/cloudwatch/pricing](https://aws.amazon.com/cloudwatch/pricing/)`,
		Kind:   FromThirdParty, Read: "2026-12-03"},
	{Key: "sns.publish", Item: "SNS standard topic publishes", Value: 0.50, Unit: "million publishes", Free: 1, FreeText: "1 million publishes",
		Source: `factualminds.com "Amazon SNS Pricing" (2026-06-13); free tier not confirmed on AWS's page`,
		Kind:   FromThirdParty, Read: "2026-12-03"},
	{Key: "sns.email", Item: "SNS e-mail notifications", Value: 2.00, Unit: "100,000 e-mails", Free: 0.01, FreeText: "1,000 e-mails",
		Source: `factualminds.com "Amazon SNS Pricing" (2026-06-13); the free 1,000 e-mails a month not confirmed on AWS's page`,
		Kind:   FromThirdParty, Read: "2026-12-03"},
}

// lookup returns the price named key. The keys are this package's own
// constants, so a missing one is a bug the tests catch.
func lookup(key string) Price {
	for _, p := range Prices {
		if p.Key == key {
			return p
		}
	}
	panic(fmt.Sprintf("cost: no price %q in the table", key))
}

// hasPrice reports whether the table prices key (an instance class the
// rules build a key for, for example).
func hasPrice(key string) bool {
	for _, p := range Prices {
		if p.Key == key {
			return true
		}
	}
	return false
}
