package migrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
)

// PayloadVersion is the version of the front's payload and of the apply
// mode's result. A front and an apply function of different builds (one
// deploy updated one and not yet the other) refuse each other's documents
// rather than misread them.
const PayloadVersion = 1

// MaxPayloadBytes bounds the front's payload. It holds at most six
// secrets, each at most 64 KiB in Secrets Manager (the SecretString
// quota), so the bound leaves room for all of them; lambda:Invoke takes up
// to 6 MB synchronously
// (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
// A larger document is refused on both sides.
const MaxPayloadBytes = 512 << 10

// ApplyRequest is the front's payload to the apply mode: what Create or
// Update needs, secrets included, so that the apply mode reads none itself.
// It is never logged; LogValue and String show everything but the
// secrets' values.
type ApplyRequest struct {
	// ApplyVersion is PayloadVersion; its presence tells the payload from
	// a CloudFormation request.
	ApplyVersion      int    `json:"ApplyVersion"`
	RequestType       string `json:"RequestType"`
	RequestID         string `json:"RequestId"`
	StackID           string `json:"StackId"`
	LogicalResourceID string `json:"LogicalResourceId"`
	// Properties are the resource's properties, as CloudFormation sent them.
	Properties map[string]any `json:"ResourceProperties"`
	// DatabaseSecretARN names the admin secret the front read (its own
	// DATABASE_SECRET_ARN); empty when it has none.
	DatabaseSecretARN string `json:"DatabaseSecretArn,omitempty"`
	// Secrets are the values the front read, by ARN: the admin secret's
	// and, in password mode, each role's.
	Secrets map[string]string `json:"Secrets,omitempty"`
}

// LogValue shows the request without the secrets' values.
func (r ApplyRequest) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("apply_version", r.ApplyVersion), slog.String("request_type", r.RequestType),
		slog.String("request_id", r.RequestID), slog.String("stack_id", r.StackID),
		slog.String("database_secret_arn", r.DatabaseSecretARN), slog.Any("secrets", slices.Sorted(maps.Keys(r.Secrets))))
}

// String shows the request without the secrets' values, so that no %v
// prints them.
func (r ApplyRequest) String() string {
	return fmt.Sprintf("ApplyRequest{%d %s %s secrets:%v}", r.ApplyVersion, r.RequestType, r.RequestID, slices.Sorted(maps.Keys(r.Secrets)))
}

// GoString is String, for %#v.
func (r ApplyRequest) GoString() string { return r.String() }

// secretValues returns every value the request carries that must stay out
// of answers and logs: each secret as a whole, and the password inside it.
func (r ApplyRequest) secretValues() []string {
	var out []string
	for _, v := range r.Secrets {
		out = append(out, v)
		if s, err := secrets.ParseDatabaseSecret(v); err == nil && s.Password != "" {
			out = append(out, s.Password)
		}
	}
	return out
}

// ApplyResult is the apply mode's answer to the front: the answer's
// status, reason and data, exactly what the direct mode would answer.
type ApplyResult struct {
	ApplyVersion int               `json:"ApplyVersion"`
	Status       string            `json:"Status"`
	Reason       string            `json:"Reason"`
	Data         map[string]string `json:"Data,omitempty"`
}

// failed is a FAILED result.
func failed(reason string) ApplyResult {
	return ApplyResult{ApplyVersion: PayloadVersion, Status: StatusFailed, Reason: reason}
}

// shape is what an event is.
type shape int

const (
	shapeUnknown shape = iota
	shapeCloudFormation
	shapeApply
)

// shapeOf tells a CloudFormation request (RequestType and ResponseURL)
// from the front's payload (ApplyVersion).
func shapeOf(raw json.RawMessage) shape {
	var p struct {
		RequestType  string          `json:"RequestType"`
		ResponseURL  string          `json:"ResponseURL"`
		ApplyVersion json.RawMessage `json:"ApplyVersion"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return shapeUnknown
	}
	switch {
	case p.ApplyVersion != nil:
		return shapeApply
	case p.RequestType != "" && p.ResponseURL != "":
		return shapeCloudFormation
	}
	return shapeUnknown
}

// payloadSecrets serves the secrets the front sent as a secrets.Getter,
// so that the apply mode runs the direct mode's code unchanged.
type payloadSecrets map[string]string

func (p payloadSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	arn := aws.ToString(in.SecretId)
	v, ok := p[arn]
	if !ok {
		return nil, errors.New("the front did not send it (it sends the admin secret named by its own " +
			secrets.EnvDatabaseSecretARN + " and, in password mode, each role's secret named in the properties)")
	}
	return &secretsmanager.GetSecretValueOutput{ARN: aws.String(arn), SecretString: aws.String(v)}, nil
}
