package destination

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// The services' documented size limits. SQS's counts the body and every
// attribute's name, type and value; EventBridge's an entry's Source,
// DetailType and Detail (Time and Resources are not set here). Both
// refuse a larger message whatever is tried, so it is Permanent before it
// is sent: the event cannot go to such a target as it is.
const (
	maxSQSMessageBytes   = 1 << 20 // SendMessage: "1 MiB or 1,048,576 bytes"
	maxEventEntryBytes   = 1 << 20 // PutEvents: "the total entry size must be less than 1MB"
	maxEventDetailType   = 128
	bodyEncodingBase64   = "base64"
	attrBodyEncoding     = "body_encoding"
	wrappedBodyJSON      = "body"
	wrappedBodyBase64    = "body_base64"
	detailInboxKey       = "webhook_inbox"
	untypedEventDetail   = "webhook"
	eventsFailedNoReason = "rejected without an error code"
)

// sendSQS sends d as one SQS message: the body as the message body when
// SQS accepts its characters, else base64 with attribute body_encoding
// "base64"; attributes source, event_type, event_id and message_id. A FIFO
// queue deduplicates on MessageID, so a retry after a lost answer, or a
// replay within SQS's five-minute window, enqueues once.
func (s *Sender) sendSQS(ctx context.Context, q *SQS, d Delivery) Result {
	where := "sqs " + q.QueueURL
	if s.deps.SQS == nil {
		return Result{Outcome: Retry, Message: where + ": no SQS client is configured"}
	}
	id := MessageID(d.Source, d.EventID)
	body := string(d.Body)
	attrs := map[string]sqstypes.MessageAttributeValue{}
	addAttr := func(name, value string) {
		// SQS refuses an empty attribute value.
		if value != "" && sqsText(value) {
			attrs[name] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(value)}
		}
	}
	if !sqsText(body) {
		body = base64.StdEncoding.EncodeToString(d.Body)
		addAttr(attrBodyEncoding, bodyEncodingBase64)
	}
	if body == "" {
		return Result{Outcome: Permanent, Message: where + ": the body is empty, and SQS refuses an empty message"}
	}
	addAttr("source", d.Source)
	addAttr("event_type", d.Type)
	addAttr("event_id", d.EventID)
	addAttr("message_id", id)
	size := len(body)
	for name, v := range attrs {
		size += len(name) + len(*v.DataType) + len(*v.StringValue)
	}
	if size > maxSQSMessageBytes {
		return Result{Outcome: Permanent, Message: fmt.Sprintf("%s: the message is %d bytes with its attributes; SQS takes at most %d", where, size, maxSQSMessageBytes)}
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.QueueURL), MessageBody: aws.String(body), MessageAttributes: attrs}
	if q.fifo() {
		in.MessageDeduplicationId = aws.String(id)
		// One group per source keeps a source's events in order and lets
		// sources go in parallel; ordering keys may refine the group later.
		in.MessageGroupId = aws.String(d.Source)
	}
	if _, err := s.deps.SQS.SendMessage(ctx, in); err != nil {
		return awsFailure(ctx, where, err)
	}
	return Result{Outcome: Delivered}
}

// sqsText reports whether s is text SQS accepts in a message: valid UTF-8
// of #x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD and #x10000-#x10FFFF.
func sqsText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

// putEvent puts d on an event bus as one entry: Source the target's,
// DetailType the event's type, Detail the body when it is a JSON object
// (with a "webhook_inbox" member added: message_id, source, event_id and
// received_at), else an object holding that member and the body ("body"
// when it is other JSON, "body_base64" when it is not JSON).
func (s *Sender) putEvent(ctx context.Context, e *EventBridge, d Delivery) Result {
	where := "eventbridge " + e.Bus
	if s.deps.EventBridge == nil {
		return Result{Outcome: Retry, Message: where + ": no EventBridge client is configured"}
	}
	detailType := d.Type
	if detailType == "" {
		detailType = untypedEventDetail
	}
	if len(detailType) > maxEventDetailType {
		return Result{Outcome: Permanent, Message: fmt.Sprintf("%s: the event type is %d bytes; a detail-type holds at most %d", where, len(detailType), maxEventDetailType)}
	}
	detail, err := eventDetail(d)
	if err != nil {
		return Result{Outcome: Permanent, Message: fmt.Sprintf("%s: %v", where, err)}
	}
	source := e.eventSource(d.Source)
	if size := len(source) + len(detailType) + len(detail); size > maxEventEntryBytes {
		return Result{Outcome: Permanent, Message: fmt.Sprintf("%s: the entry is %d bytes; PutEvents takes at most %d", where, size, maxEventEntryBytes)}
	}
	out, err := s.deps.EventBridge.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(e.Bus),
		Source:       aws.String(source),
		DetailType:   aws.String(detailType),
		Detail:       aws.String(detail),
	}}})
	if err != nil {
		return awsFailure(ctx, where, err)
	}
	if out.FailedEntryCount == 0 {
		return Result{Outcome: Delivered}
	}
	// One entry was sent, so a failure is that entry's.
	var code, msg string
	if len(out.Entries) > 0 {
		code, msg = aws.ToString(out.Entries[0].ErrorCode), aws.ToString(out.Entries[0].ErrorMessage)
	}
	if code == "" {
		code, msg = "", eventsFailedNoReason
	}
	r := Result{Outcome: Permanent, Code: code, Message: fmt.Sprintf("%s: entry failed: %s %s", where, code, msg)}
	switch code {
	case "ThrottlingException", "InternalException", "InternalFailure", "":
		r.Outcome = Retry
	}
	return r
}

// eventDetail is the entry's Detail for d.
func eventDetail(d Delivery) (string, error) {
	members := map[string]string{
		"message_id": MessageID(d.Source, d.EventID),
		"source":     d.Source,
		"event_id":   d.EventID,
	}
	if !d.ReceivedAt.IsZero() {
		members["received_at"] = d.ReceivedAt.UTC().Format(time.RFC3339Nano)
	}
	inbox, err := json.Marshal(members)
	if err != nil {
		return "", fmt.Errorf("encode the detail: %w", err)
	}
	if own, ok := jsonObject(d.Body); ok {
		if _, taken := own[detailInboxKey]; !taken {
			// The body's own members stay at the top, where rules match
			// them; the inbox's member is spliced in ahead of them, so the
			// body's bytes are otherwise as sent.
			rest := bytesTrimLeft(d.Body)[1:]
			sep := ","
			if len(own) == 0 {
				sep = ""
			}
			return `{"` + detailInboxKey + `":` + string(inbox) + sep + string(rest), nil
		}
	}
	wrapped := map[string]json.RawMessage{detailInboxKey: inbox}
	if json.Valid(d.Body) && len(bytesTrimLeft(d.Body)) > 0 {
		wrapped[wrappedBodyJSON] = d.Body
	} else {
		b, _ := json.Marshal(d.Body) // a []byte encodes as base64
		wrapped[wrappedBodyBase64] = b
	}
	b, err := json.Marshal(wrapped)
	if err != nil {
		return "", fmt.Errorf("encode the detail: %w", err)
	}
	return string(b), nil
}

// jsonObject decodes b's top-level members when b is one JSON object.
func jsonObject(b []byte) (map[string]json.RawMessage, bool) {
	t := bytesTrimLeft(b)
	if len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

func bytesTrimLeft(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// permanentCodes are the AWS errors about the message itself, which no
// retry mends. Every other failure is Retry, access denied and a missing
// queue or bus among them: those are the deployment's (a grant, a queue
// not yet created, a key disabled), an operator mends them, and the events
// then go through on their next attempts instead of waiting in the dead
// letters for a requeue; the caller's attempt limit still ends a fault
// nobody mends.
var permanentCodes = map[string]bool{
	"InvalidMessageContents":                      true,
	"InvalidParameterValue":                       true,
	"InvalidParameterCombination":                 true,
	"InvalidAttributeName":                        true,
	"InvalidAttributeValue":                       true,
	"MissingParameter":                            true,
	"UnsupportedOperation":                        true,
	"ValidationException":                         true,
	"InvalidEventPatternException":                true,
	"AWS.SimpleQueueService.UnsupportedOperation": true,
}

// awsFailure classifies a failed SDK call.
func awsFailure(ctx context.Context, where string, err error) Result {
	r := Result{Outcome: Retry}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		r.Status = status.HTTPStatusCode()
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		r.Code = api.ErrorCode()
		if permanentCodes[r.Code] {
			r.Outcome = Permanent
		}
		r.Message = fmt.Sprintf("%s: %s: %s", where, r.Code, api.ErrorMessage())
		if r.Status != 0 {
			r.Message += " (status " + strconv.Itoa(r.Status) + ")"
		}
		return r
	}
	if ctx.Err() != nil {
		r.Message = fmt.Sprintf("%s: canceled before an answer: %v", where, ctx.Err())
		return r
	}
	r.Message = fmt.Sprintf("%s: %v", where, err)
	return r
}
